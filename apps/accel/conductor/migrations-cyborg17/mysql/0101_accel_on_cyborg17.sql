-- accel release N+1 on OpenStack Cyborg 17's schema (MySQL/MariaDB): what accel adds to
-- Cyborg's tables, and accel's own tables. Applied by `Db::sync_on_cyborg17` after
-- Cyborg's schema (accel_cyborg17::schema, alembic b47c8f2d1e3a), whether accel made it
-- in an empty database or Cyborg 17's `cyborg-dbsync upgrade` did. Additive only: every
-- column added to a Cyborg table has a default or may be null, so Cyborg 17's own
-- services (and accel's release N, which is Cyborg 17 in Rust) keep writing these
-- tables as they always have, and triggers fill what accel needs from what they write.
-- accel's own tables take the database's character set, as Cyborg's do, so comparing
-- their host names with Cyborg's needs no conversion. accel's added text columns are
-- VARCHARs, which sqlx's Any driver reads as text (it hands MySQL's TEXT over as bytes).
-- docs/cyborg-compatibility.md, "accel's schema on Cyborg 17's", explains each column.

-- devices: accel's inventory state beside Cyborg's `status` and `device_state`.
ALTER TABLE devices ADD COLUMN inventory_status VARCHAR(16) NOT NULL DEFAULT 'available',
    ADD KEY devices_hostname_idx (hostname);

-- deployables: the host and PCI address a report names it by, the keys of the last
-- applied report's attributes, and whether Placement may allocate it.
ALTER TABLE deployables ADD COLUMN hostname VARCHAR(255),
    ADD COLUMN control_path_id VARCHAR(255),
    ADD COLUMN attributes VARCHAR(8192) NOT NULL DEFAULT '{}',
    ADD COLUMN enabled BIGINT NOT NULL DEFAULT 1;

-- A control path's PCI address (`0000:5e:00.0`) from Cyborg's `cpid_info` JSON; null
-- when the text is not that JSON (never an error: Cyborg's insert must not fail here).
CREATE FUNCTION accel_pci_address(info VARCHAR(255)) RETURNS VARCHAR(255)
    DETERMINISTIC
    RETURN CASE WHEN JSON_VALID(info) THEN
        CONCAT(JSON_UNQUOTE(JSON_EXTRACT(info, '$.domain')), ':',
               JSON_UNQUOTE(JSON_EXTRACT(info, '$.bus')), ':',
               JSON_UNQUOTE(JSON_EXTRACT(info, '$.device')), '.',
               JSON_UNQUOTE(JSON_EXTRACT(info, '$.function')))
    END;

UPDATE deployables SET
    hostname = (SELECT hostname FROM devices WHERE id = deployables.device_id),
    control_path_id = (SELECT accel_pci_address(c.cpid_info) FROM controlpath_ids c
                       WHERE c.device_id = deployables.device_id ORDER BY c.id LIMIT 1);
-- The attributes already there are what Cyborg's reports made: the report's.
UPDATE deployables SET attributes = COALESCE(
    (SELECT JSON_OBJECTAGG(a.`key`, a.value) FROM attributes a
     WHERE a.deployable_id = deployables.id), '{}');
ALTER TABLE deployables ADD UNIQUE KEY deployables_host_path_name (hostname, control_path_id, name);

-- A writer that leaves them unset (Cyborg 17's conductor, in Rust or Python) gets them
-- from the device and its first control path.
CREATE TRIGGER deployables_host_and_path BEFORE INSERT ON deployables FOR EACH ROW
BEGIN
    IF NEW.hostname IS NULL THEN
        SET NEW.hostname = (SELECT hostname FROM devices WHERE id = NEW.device_id);
    END IF;
    IF NEW.control_path_id IS NULL THEN
        SET NEW.control_path_id = (SELECT accel_pci_address(c.cpid_info) FROM controlpath_ids c
                                   WHERE c.device_id = NEW.device_id ORDER BY c.id LIMIT 1);
    END IF;
END;

-- attach_handles: the revision of compare-and-swap updates (PCI managed mode), and the
-- NVMe cleanup's state and failure reason. A handle is one per address of a deployable.
ALTER TABLE attach_handles ADD COLUMN revision BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN cleanup_state VARCHAR(16),
    ADD COLUMN cleanup_reason VARCHAR(4096),
    ADD UNIQUE KEY attach_handles_deployable_info (deployable_id, attach_info);

-- attributes: a key once per deployable (the API's create refuses a second). Cyborg's
-- `key` is TEXT, which MySQL indexes by a prefix: 191 characters of utf8mb4 fit
-- InnoDB's key length.
ALTER TABLE attributes ADD UNIQUE KEY attributes_deployable_key (deployable_id, `key`(191));

-- Requests: accel's `UnbindFailed`, which Cyborg 17 declares (`constants.ARQ_UNBIND_FAILED`)
-- but its column's ENUM lacks. Widening an ENUM at its end keeps every stored value.
ALTER TABLE extended_accelerator_requests MODIFY state
    ENUM('Initial','BindStarted','Bound','Unbound','BindFailed','Deleting','UnbindFailed')
    NOT NULL;

-- accel's own tables (verso-upgrade's records, the reconciler's bookkeeping).
CREATE TABLE component_versions (
    component VARCHAR(255) NOT NULL PRIMARY KEY,
    record VARCHAR(8192) NOT NULL,
    updated_at VARCHAR(64) NOT NULL
) ENGINE = InnoDB;

CREATE TABLE fleet_members (
    component VARCHAR(255) NOT NULL,
    member_id VARCHAR(255) NOT NULL,
    host VARCHAR(255) NOT NULL,
    software BIGINT NOT NULL,
    apparent BIGINT NOT NULL,
    heard_by VARCHAR(255) NOT NULL,
    heartbeats BIGINT NOT NULL DEFAULT 1,
    last_seen_ms BIGINT NOT NULL,
    run_started_ms BIGINT,
    run_seq BIGINT,
    PRIMARY KEY (component, member_id)
) ENGINE = InnoDB;

CREATE TABLE leases (
    name VARCHAR(255) NOT NULL PRIMARY KEY,
    holder VARCHAR(255) NOT NULL,
    expires_ms BIGINT NOT NULL
) ENGINE = InnoDB;

-- The digest of each host's last applied report; forgotten on every write of a column
-- the report's diff compares, by any writer, so it never vouches for rows that changed.
-- report_locks: one row per host, locked by a report while it applies.
CREATE TABLE host_reports (
    hostname VARCHAR(255) NOT NULL PRIMARY KEY,
    digest VARCHAR(255) NOT NULL,
    devices BIGINT NOT NULL,
    updated_at VARCHAR(64) NOT NULL
) ENGINE = InnoDB;

CREATE TABLE report_locks (
    hostname VARCHAR(255) NOT NULL PRIMARY KEY
) ENGINE = InnoDB;

CREATE TRIGGER devices_forget_report_insert AFTER INSERT ON devices FOR EACH ROW
    DELETE FROM host_reports WHERE hostname = NEW.hostname;
CREATE TRIGGER devices_forget_report_delete AFTER DELETE ON devices FOR EACH ROW
    DELETE FROM host_reports WHERE hostname = OLD.hostname;
CREATE TRIGGER devices_forget_report_update AFTER UPDATE ON devices FOR EACH ROW
BEGIN
    IF NOT (OLD.type <=> NEW.type AND OLD.vendor <=> NEW.vendor AND OLD.model <=> NEW.model
            AND OLD.std_board_info <=> NEW.std_board_info
            AND OLD.inventory_status <=> NEW.inventory_status
            AND OLD.hostname <=> NEW.hostname) THEN
        DELETE FROM host_reports WHERE hostname IN (OLD.hostname, NEW.hostname);
    END IF;
END;

CREATE TRIGGER deployables_forget_report_insert AFTER INSERT ON deployables FOR EACH ROW
    DELETE FROM host_reports WHERE hostname = NEW.hostname;
CREATE TRIGGER deployables_forget_report_delete AFTER DELETE ON deployables FOR EACH ROW
    DELETE FROM host_reports WHERE hostname = OLD.hostname;
CREATE TRIGGER deployables_forget_report_update AFTER UPDATE ON deployables FOR EACH ROW
BEGIN
    IF NOT (OLD.device_id <=> NEW.device_id AND OLD.hostname <=> NEW.hostname
            AND OLD.control_path_id <=> NEW.control_path_id
            AND OLD.driver_name <=> NEW.driver_name
            AND OLD.num_accelerators <=> NEW.num_accelerators) THEN
        DELETE FROM host_reports WHERE hostname IN (OLD.hostname, NEW.hostname);
    END IF;
END;

-- The host read first, then its digest deleted by the key: a DELETE through a subquery
-- locks every host's row and deadlocked concurrent reports of other hosts.
CREATE PROCEDURE accel_forget_report_of_deployable(deployable INT)
BEGIN
    DECLARE host VARCHAR(255);
    SELECT hostname INTO host FROM deployables WHERE id = deployable;
    DELETE FROM host_reports WHERE hostname = host;
END;

CREATE TRIGGER attach_handles_forget_report_insert AFTER INSERT ON attach_handles FOR EACH ROW
    CALL accel_forget_report_of_deployable(NEW.deployable_id);
CREATE TRIGGER attach_handles_forget_report_delete AFTER DELETE ON attach_handles FOR EACH ROW
    CALL accel_forget_report_of_deployable(OLD.deployable_id);
CREATE TRIGGER attach_handles_forget_report_update AFTER UPDATE ON attach_handles FOR EACH ROW
BEGIN
    IF NOT (OLD.deployable_id <=> NEW.deployable_id AND OLD.attach_type <=> NEW.attach_type
            AND OLD.attach_info <=> NEW.attach_info) THEN
        CALL accel_forget_report_of_deployable(OLD.deployable_id);
        CALL accel_forget_report_of_deployable(NEW.deployable_id);
    END IF;
END;

CREATE TRIGGER attributes_forget_report_insert AFTER INSERT ON attributes FOR EACH ROW
    CALL accel_forget_report_of_deployable(NEW.deployable_id);
CREATE TRIGGER attributes_forget_report_delete AFTER DELETE ON attributes FOR EACH ROW
    CALL accel_forget_report_of_deployable(OLD.deployable_id);
CREATE TRIGGER attributes_forget_report_update AFTER UPDATE ON attributes FOR EACH ROW
BEGIN
    IF NOT (OLD.deployable_id <=> NEW.deployable_id AND OLD.`key` <=> NEW.`key`
            AND OLD.value <=> NEW.value) THEN
        CALL accel_forget_report_of_deployable(OLD.deployable_id);
        CALL accel_forget_report_of_deployable(NEW.deployable_id);
    END IF;
END;

-- Which hosts' Placement-relevant rows changed since the reconciler last brought them up
-- to date: a row of its own per row changed, only ever inserted, so writers never wait on
-- each other here; the reconciler deletes exactly the rows it read.
CREATE TABLE placement_changes (
    seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    hostname VARCHAR(255) NOT NULL,
    KEY placement_changes_hostname (hostname)
) ENGINE = InnoDB;

CREATE TRIGGER devices_placement_insert AFTER INSERT ON devices FOR EACH ROW
    INSERT INTO placement_changes (hostname) VALUES (NEW.hostname);
CREATE TRIGGER devices_placement_delete AFTER DELETE ON devices FOR EACH ROW
    INSERT INTO placement_changes (hostname) VALUES (OLD.hostname);
CREATE TRIGGER devices_placement_update AFTER UPDATE ON devices FOR EACH ROW
BEGIN
    IF NOT (OLD.type <=> NEW.type AND OLD.vendor <=> NEW.vendor AND OLD.model <=> NEW.model
            AND OLD.status <=> NEW.status AND OLD.inventory_status <=> NEW.inventory_status
            AND OLD.hostname <=> NEW.hostname) THEN
        INSERT INTO placement_changes (hostname) VALUES (NEW.hostname);
        IF NOT (OLD.hostname <=> NEW.hostname) THEN
            INSERT INTO placement_changes (hostname) VALUES (OLD.hostname);
        END IF;
    END IF;
END;

CREATE TRIGGER deployables_placement_insert AFTER INSERT ON deployables FOR EACH ROW
    INSERT INTO placement_changes (hostname) SELECT NEW.hostname FROM DUAL
        WHERE NEW.hostname IS NOT NULL;
CREATE TRIGGER deployables_placement_delete AFTER DELETE ON deployables FOR EACH ROW
    INSERT INTO placement_changes (hostname) SELECT OLD.hostname FROM DUAL
        WHERE OLD.hostname IS NOT NULL;
CREATE TRIGGER deployables_placement_update AFTER UPDATE ON deployables FOR EACH ROW
BEGIN
    IF NOT (OLD.name <=> NEW.name AND OLD.device_id <=> NEW.device_id
            AND OLD.hostname <=> NEW.hostname AND OLD.num_accelerators <=> NEW.num_accelerators
            AND OLD.enabled <=> NEW.enabled AND OLD.attributes <=> NEW.attributes) THEN
        INSERT INTO placement_changes (hostname) SELECT NEW.hostname FROM DUAL
            WHERE NEW.hostname IS NOT NULL;
        IF NOT (OLD.hostname <=> NEW.hostname) THEN
            INSERT INTO placement_changes (hostname) SELECT OLD.hostname FROM DUAL
                WHERE OLD.hostname IS NOT NULL;
        END IF;
    END IF;
END;

-- An attribute's host is its deployable's.
CREATE TRIGGER attributes_placement_insert AFTER INSERT ON attributes FOR EACH ROW
    INSERT INTO placement_changes (hostname)
        SELECT hostname FROM deployables WHERE id = NEW.deployable_id AND hostname IS NOT NULL;
CREATE TRIGGER attributes_placement_delete AFTER DELETE ON attributes FOR EACH ROW
    INSERT INTO placement_changes (hostname)
        SELECT hostname FROM deployables WHERE id = OLD.deployable_id AND hostname IS NOT NULL;
CREATE TRIGGER attributes_placement_update AFTER UPDATE ON attributes FOR EACH ROW
BEGIN
    IF NOT (OLD.deployable_id <=> NEW.deployable_id AND OLD.`key` <=> NEW.`key`
            AND OLD.value <=> NEW.value) THEN
        INSERT INTO placement_changes (hostname)
            SELECT DISTINCT hostname FROM deployables
            WHERE id IN (OLD.deployable_id, NEW.deployable_id) AND hostname IS NOT NULL;
    END IF;
END;
