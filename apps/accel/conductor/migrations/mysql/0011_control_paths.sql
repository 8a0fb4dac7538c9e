-- Release N+1 (MySQL): Cyborg 17's control path rows and the columns of Cyborg's
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
-- writes: a deployable inserted for a device without a control path gives the device
-- one, from the deployable's `control_path_id` when it is a PCI address; a handle
-- inserted without a `cpid_id` gets its device's. A Cyborg import writes Cyborg's own
-- rows first (their UUIDs and text kept), so the triggers find them and add nothing.
CREATE TABLE controlpath_ids (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    device_id BIGINT NOT NULL,
    cpid_type VARCHAR(3) NOT NULL,
    cpid_info VARCHAR(255) NOT NULL,
    created_at VARCHAR(64),
    updated_at VARCHAR(64),
    UNIQUE KEY controlpath_ids_uuid_key (uuid),
    KEY controlpath_ids_device_id_idx (device_id),
    CONSTRAINT controlpath_ids_device_id_fkey FOREIGN KEY (device_id)
        REFERENCES devices (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

ALTER TABLE attach_handles ADD COLUMN cpid_id BIGINT,
    ADD KEY attach_handles_cpid_id_idx (cpid_id),
    ADD CONSTRAINT attach_handles_cpid_id_fkey FOREIGN KEY (cpid_id)
        REFERENCES controlpath_ids (id) ON DELETE CASCADE;

ALTER TABLE deployables ADD COLUMN rp_uuid VARCHAR(36),
    ADD COLUMN parent_id BIGINT,
    ADD COLUMN root_id BIGINT,
    ADD COLUMN bitstream_id VARCHAR(36),
    ADD CONSTRAINT deployables_parent_id_fkey FOREIGN KEY (parent_id) REFERENCES deployables (id),
    ADD CONSTRAINT deployables_root_id_fkey FOREIGN KEY (root_id) REFERENCES deployables (id);

-- Cyborg's `cpid_info` of a PCI address `DDDD:BB:DD.F`; NULL for any other text.
CREATE FUNCTION accel_cpid_info(address VARCHAR(255)) RETURNS VARCHAR(255)
    DETERMINISTIC
    RETURN CASE WHEN address REGEXP '^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}[.][0-7]$' THEN
        CONCAT('{"bus": "', SUBSTRING(address, 6, 2), '", "device": "', SUBSTRING(address, 9, 2),
               '", "domain": "', SUBSTRING(address, 1, 4), '", "function": "',
               SUBSTRING(address, 12, 1), '"}')
    END;

-- The rows already there: a control path per device whose deployables have a PCI
-- address, and every handle's.
INSERT INTO controlpath_ids (uuid, device_id, cpid_type, cpid_info, created_at, updated_at)
    SELECT UUID(), device_id, 'PCI', accel_cpid_info(address), created_at, created_at
    FROM (SELECT device_id, MIN(control_path_id) AS address, MIN(created_at) AS created_at
          FROM deployables GROUP BY device_id) AS d
    WHERE accel_cpid_info(address) IS NOT NULL
    ORDER BY device_id;
UPDATE attach_handles SET cpid_id = (
    SELECT MIN(c.id) FROM controlpath_ids c JOIN deployables d ON d.device_id = c.device_id
    WHERE d.id = attach_handles.deployable_id);

CREATE TRIGGER deployables_control_path AFTER INSERT ON deployables FOR EACH ROW
    INSERT INTO controlpath_ids (uuid, device_id, cpid_type, cpid_info, created_at, updated_at)
        SELECT UUID(), NEW.device_id, 'PCI', accel_cpid_info(NEW.control_path_id),
               NEW.created_at, NEW.created_at
        FROM DUAL
        WHERE accel_cpid_info(NEW.control_path_id) IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM controlpath_ids WHERE device_id = NEW.device_id);

CREATE TRIGGER attach_handles_control_path BEFORE INSERT ON attach_handles FOR EACH ROW
    SET NEW.cpid_id = COALESCE(NEW.cpid_id,
        (SELECT MIN(c.id) FROM controlpath_ids c JOIN deployables d ON d.device_id = c.device_id
         WHERE d.id = NEW.deployable_id));
