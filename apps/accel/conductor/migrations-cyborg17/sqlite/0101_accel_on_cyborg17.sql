-- accel release N+1 on OpenStack Cyborg 17's schema (SQLite): what accel adds to
-- Cyborg's tables, and accel's own tables. Applied by `Db::sync_on_cyborg17` after
-- Cyborg's schema (accel_cyborg17::schema, alembic b47c8f2d1e3a), whether accel made it
-- in an empty database or a Cyborg 17 deployment did. Additive only: every column added
-- to a Cyborg table has a default or may be null, so Cyborg 17's own services (and
-- accel's release N, which is Cyborg 17 in Rust) keep writing these tables as they
-- always have, and triggers fill what accel needs from what they write.
-- docs/cyborg-compatibility.md, "accel's schema on Cyborg 17's", explains each column.

-- devices: accel's inventory state (a device its agent stopped reporting is `missing`,
-- then `lost`), beside Cyborg's `status` (`enabled`/`maintaining`, an operator's
-- disable) and `device_state` (the cleaning lifecycle).
ALTER TABLE devices ADD COLUMN inventory_status VARCHAR(16) NOT NULL DEFAULT 'available';
CREATE INDEX devices_hostname_idx ON devices (hostname);

-- deployables: the host and PCI address a report names it by (Cyborg reads both through
-- the device and its control path), the keys of the last applied report's attributes,
-- and whether Placement may allocate it.
ALTER TABLE deployables ADD COLUMN hostname VARCHAR(255);
ALTER TABLE deployables ADD COLUMN control_path_id VARCHAR(255);
ALTER TABLE deployables ADD COLUMN attributes TEXT NOT NULL DEFAULT '{}';
ALTER TABLE deployables ADD COLUMN enabled INTEGER NOT NULL DEFAULT 1;
UPDATE deployables SET
    hostname = (SELECT hostname FROM devices WHERE id = deployables.device_id),
    control_path_id = (
        SELECT json_extract(c.cpid_info, '$.domain') || ':' || json_extract(c.cpid_info, '$.bus')
            || ':' || json_extract(c.cpid_info, '$.device') || '.'
            || json_extract(c.cpid_info, '$.function')
        FROM controlpath_ids c
        WHERE c.device_id = deployables.device_id AND json_valid(c.cpid_info)
        ORDER BY c.id LIMIT 1);
-- The attributes already there are what Cyborg's reports made: the report's.
UPDATE deployables SET attributes = COALESCE(
    (SELECT json_group_object(a."key", a.value) FROM attributes a
     WHERE a.deployable_id = deployables.id), '{}');
CREATE UNIQUE INDEX deployables_host_path_name ON deployables (hostname, control_path_id, name);

-- A writer that leaves them unset (Cyborg 17's conductor, in Rust or Python) gets them
-- from the device and its first control path. SQLite's triggers cannot set NEW: the row
-- is updated right after its insert.
CREATE TRIGGER deployables_host_and_path AFTER INSERT ON deployables
WHEN NEW.hostname IS NULL OR NEW.control_path_id IS NULL
BEGIN
    UPDATE deployables SET
        hostname = COALESCE(NEW.hostname,
            (SELECT hostname FROM devices WHERE id = NEW.device_id)),
        control_path_id = COALESCE(NEW.control_path_id, (
            SELECT json_extract(c.cpid_info, '$.domain') || ':'
                || json_extract(c.cpid_info, '$.bus') || ':'
                || json_extract(c.cpid_info, '$.device') || '.'
                || json_extract(c.cpid_info, '$.function')
            FROM controlpath_ids c
            WHERE c.device_id = NEW.device_id AND json_valid(c.cpid_info)
            ORDER BY c.id LIMIT 1))
    WHERE id = NEW.id;
END;

-- attach_handles: the revision of compare-and-swap updates (PCI managed mode), and the
-- NVMe cleanup's state and failure reason. A handle is one per address of a deployable.
ALTER TABLE attach_handles ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attach_handles ADD COLUMN cleanup_state VARCHAR(16);
ALTER TABLE attach_handles ADD COLUMN cleanup_reason TEXT;
CREATE UNIQUE INDEX attach_handles_deployable_info ON attach_handles (deployable_id, attach_info);

-- attributes: a key once per deployable (the API's create refuses a second).
CREATE UNIQUE INDEX attributes_deployable_key ON attributes (deployable_id, "key");

-- accel's own tables (verso-upgrade's records, the reconciler's bookkeeping).
CREATE TABLE component_versions (
    component TEXT PRIMARY KEY,
    record TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE fleet_members (
    component TEXT NOT NULL,
    member_id TEXT NOT NULL,
    host TEXT NOT NULL,
    software INTEGER NOT NULL,
    apparent INTEGER NOT NULL,
    heard_by TEXT NOT NULL,
    heartbeats INTEGER NOT NULL DEFAULT 1,
    last_seen_ms INTEGER NOT NULL,
    run_started_ms INTEGER,
    run_seq INTEGER,
    PRIMARY KEY (component, member_id)
);

CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);

-- The digest of each host's last applied report; forgotten on every write of a column
-- the report's diff compares, by any writer, so it never vouches for rows that changed.
CREATE TABLE host_reports (
    hostname TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    devices INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TRIGGER devices_forget_report_insert AFTER INSERT ON devices
BEGIN
    DELETE FROM host_reports WHERE hostname = NEW.hostname;
END;
CREATE TRIGGER devices_forget_report_delete AFTER DELETE ON devices
BEGIN
    DELETE FROM host_reports WHERE hostname = OLD.hostname;
END;
CREATE TRIGGER devices_forget_report_update
    AFTER UPDATE OF type, vendor, model, std_board_info, inventory_status, hostname ON devices
BEGIN
    DELETE FROM host_reports WHERE hostname IN (OLD.hostname, NEW.hostname);
END;

CREATE TRIGGER deployables_forget_report_insert AFTER INSERT ON deployables
BEGIN
    DELETE FROM host_reports WHERE hostname = NEW.hostname;
END;
CREATE TRIGGER deployables_forget_report_delete AFTER DELETE ON deployables
BEGIN
    DELETE FROM host_reports WHERE hostname = OLD.hostname;
END;
CREATE TRIGGER deployables_forget_report_update
    AFTER UPDATE OF device_id, hostname, control_path_id, driver_name, num_accelerators
    ON deployables
BEGIN
    DELETE FROM host_reports WHERE hostname IN (OLD.hostname, NEW.hostname);
END;

CREATE TRIGGER attach_handles_forget_report_insert AFTER INSERT ON attach_handles
BEGIN
    DELETE FROM host_reports WHERE hostname IN
        (SELECT hostname FROM deployables WHERE id = NEW.deployable_id);
END;
CREATE TRIGGER attach_handles_forget_report_delete AFTER DELETE ON attach_handles
BEGIN
    DELETE FROM host_reports WHERE hostname IN
        (SELECT hostname FROM deployables WHERE id = OLD.deployable_id);
END;
CREATE TRIGGER attach_handles_forget_report_update
    AFTER UPDATE OF deployable_id, attach_type, attach_info ON attach_handles
BEGIN
    DELETE FROM host_reports WHERE hostname IN
        (SELECT hostname FROM deployables WHERE id IN (OLD.deployable_id, NEW.deployable_id));
END;

CREATE TRIGGER attributes_forget_report_insert AFTER INSERT ON attributes
BEGIN
    DELETE FROM host_reports WHERE hostname IN
        (SELECT hostname FROM deployables WHERE id = NEW.deployable_id);
END;
CREATE TRIGGER attributes_forget_report_delete AFTER DELETE ON attributes
BEGIN
    DELETE FROM host_reports WHERE hostname IN
        (SELECT hostname FROM deployables WHERE id = OLD.deployable_id);
END;
CREATE TRIGGER attributes_forget_report_update
    AFTER UPDATE OF deployable_id, key, value ON attributes
BEGIN
    DELETE FROM host_reports WHERE hostname IN
        (SELECT hostname FROM deployables WHERE id IN (OLD.deployable_id, NEW.deployable_id));
END;

-- Which hosts' Placement-relevant rows changed since the reconciler last brought them up
-- to date: marked on every write of a column the providers are made of, by any writer
-- (Cyborg's `status` is the operator's disable, which reserves the inventory).
CREATE TABLE placement_changes (
    hostname TEXT PRIMARY KEY,
    seq INTEGER NOT NULL
);

CREATE TRIGGER devices_placement_insert AFTER INSERT ON devices
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        VALUES (NEW.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER devices_placement_delete AFTER DELETE ON devices
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        VALUES (OLD.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER devices_placement_update
    AFTER UPDATE OF type, vendor, model, status, inventory_status, hostname ON devices
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        VALUES (OLD.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
    INSERT INTO placement_changes (hostname, seq)
        VALUES (NEW.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;

CREATE TRIGGER deployables_placement_insert AFTER INSERT ON deployables
WHEN NEW.hostname IS NOT NULL
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        VALUES (NEW.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER deployables_placement_delete AFTER DELETE ON deployables
WHEN OLD.hostname IS NOT NULL
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        VALUES (OLD.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER deployables_placement_update
    AFTER UPDATE OF name, device_id, hostname, num_accelerators, enabled, attributes
    ON deployables
WHEN NEW.hostname IS NOT NULL
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        SELECT OLD.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes)
        WHERE OLD.hostname IS NOT NULL
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
    INSERT INTO placement_changes (hostname, seq)
        VALUES (NEW.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;

-- An attribute's host is its deployable's.
CREATE TRIGGER attributes_placement_insert AFTER INSERT ON attributes
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        SELECT hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes)
        FROM deployables WHERE id = NEW.deployable_id AND hostname IS NOT NULL
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER attributes_placement_delete AFTER DELETE ON attributes
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        SELECT hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes)
        FROM deployables WHERE id = OLD.deployable_id AND hostname IS NOT NULL
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER attributes_placement_update
    AFTER UPDATE OF deployable_id, key, value ON attributes
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        SELECT hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes)
        FROM deployables
        WHERE id IN (OLD.deployable_id, NEW.deployable_id) AND hostname IS NOT NULL
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;

-- Requests: SQLite does not hold a VARCHAR to its length, so accel's `UnbindFailed`
-- (one longer than Cyborg's `state` VARCHAR(11)) needs no change here.
