-- Release N+1 (SQLite): Cyborg 17's control path rows and the columns of Cyborg's
-- deployables and attach handles that accel lacked, a step of taking Cyborg's schema as
-- accel's own (docs/cyborg-compatibility.md, "Cyborg 17's schema against accel's"):
-- `controlpath_ids` (one row per device, `cpid_type` 'PCI', `cpid_info` the device's PCI
-- address as the JSON text Cyborg's drivers write: keys sorted, Python's separators),
-- `attach_handles.cpid_id` (the handle's control path, Cyborg's `AttachHandle.cpid_id`),
-- and `deployables.rp_uuid` (its Placement provider, written once Placement has it, as
-- Cyborg's conductor does), `parent_id`, `root_id`, `bitstream_id` (null in every Cyborg
-- 17 database: no driver of 17.0.0 sets them).
--
-- Expand-only: release N never reads these, and the triggers keep them right whoever
-- writes (release N's conductor in the downgrade window included): a deployable
-- inserted for a device without a control path gives the device one, from the
-- deployable's `control_path_id` when it is a PCI address; a handle inserted without a
-- `cpid_id` gets its device's. A Cyborg import writes Cyborg's own rows first (their
-- UUIDs and text kept), so the triggers find them and add nothing.
CREATE TABLE controlpath_ids (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    device_id INTEGER NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
    cpid_type TEXT NOT NULL,
    cpid_info TEXT NOT NULL,
    created_at TEXT,
    updated_at TEXT
);
CREATE INDEX controlpath_ids_device_id_idx ON controlpath_ids (device_id);

ALTER TABLE attach_handles ADD COLUMN cpid_id INTEGER
    REFERENCES controlpath_ids (id) ON DELETE CASCADE;
CREATE INDEX attach_handles_cpid_id_idx ON attach_handles (cpid_id);

ALTER TABLE deployables ADD COLUMN rp_uuid TEXT;
ALTER TABLE deployables ADD COLUMN parent_id INTEGER REFERENCES deployables (id);
ALTER TABLE deployables ADD COLUMN root_id INTEGER REFERENCES deployables (id);
ALTER TABLE deployables ADD COLUMN bitstream_id TEXT;

-- The rows already there: a control path per device whose deployables have a PCI
-- address (a random version 4 UUID, as Cyborg's), and every handle's.
INSERT INTO controlpath_ids (uuid, device_id, cpid_type, cpid_info, created_at, updated_at)
    SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4'
               || substr(hex(randomblob(2)), 2) || '-'
               || substr('89ab', 1 + (abs(random()) % 4), 1)
               || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
           device_id, 'PCI',
           '{"bus": "' || substr(address, 6, 2) || '", "device": "' || substr(address, 9, 2)
               || '", "domain": "' || substr(address, 1, 4) || '", "function": "'
               || substr(address, 12, 1) || '"}',
           created_at, created_at
    FROM (SELECT device_id, MIN(control_path_id) AS address, MIN(created_at) AS created_at
          FROM deployables GROUP BY device_id)
    WHERE address GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f].[0-7]';
UPDATE attach_handles SET cpid_id = (
    SELECT MIN(c.id) FROM controlpath_ids c JOIN deployables d ON d.device_id = c.device_id
    WHERE d.id = attach_handles.deployable_id);

CREATE TRIGGER deployables_control_path AFTER INSERT ON deployables
WHEN NEW.control_path_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f].[0-7]'
    AND NOT EXISTS (SELECT 1 FROM controlpath_ids WHERE device_id = NEW.device_id)
BEGIN
    INSERT INTO controlpath_ids (uuid, device_id, cpid_type, cpid_info, created_at, updated_at)
    VALUES (lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4'
                || substr(hex(randomblob(2)), 2) || '-'
                || substr('89ab', 1 + (abs(random()) % 4), 1)
                || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
            NEW.device_id, 'PCI',
            '{"bus": "' || substr(NEW.control_path_id, 6, 2) || '", "device": "'
                || substr(NEW.control_path_id, 9, 2) || '", "domain": "'
                || substr(NEW.control_path_id, 1, 4) || '", "function": "'
                || substr(NEW.control_path_id, 12, 1) || '"}',
            NEW.created_at, NEW.created_at);
END;

-- SQLite's triggers cannot set NEW: the row is updated right after its insert.
CREATE TRIGGER attach_handles_control_path AFTER INSERT ON attach_handles
WHEN NEW.cpid_id IS NULL
BEGIN
    UPDATE attach_handles SET cpid_id = (
        SELECT MIN(c.id) FROM controlpath_ids c JOIN deployables d ON d.device_id = c.device_id
        WHERE d.id = NEW.deployable_id)
    WHERE id = NEW.id;
END;
