-- Release N+1 (MySQL): which hosts' Placement-relevant rows changed since the
-- reconciler last brought them up to date (accel_conductor::db::ChangeMarks). The
-- triggers mark a host on every change of a column the providers are made of, by any
-- writer. MySQL has no transaction id to keep one mark per (host, transaction) as
-- PostgreSQL does, and one row per host would be updated by every writer of that host
-- and held locked to its commit (a report and a device disable could deadlock on it).
-- So a mark is a row of its own per row changed, only ever inserted: writers never wait
-- on each other here, and the reconciler deletes exactly the rows it read, so a mark
-- committed after its read survives for the next pass. A cascade fires no trigger: a
-- device's or deployable's deletion is marked by that parent's own trigger.
CREATE TABLE placement_changes (
    seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    hostname VARCHAR(255) NOT NULL,
    KEY placement_changes_hostname (hostname)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TRIGGER devices_placement_insert AFTER INSERT ON devices FOR EACH ROW
    INSERT INTO placement_changes (hostname) VALUES (NEW.hostname);
CREATE TRIGGER devices_placement_delete AFTER DELETE ON devices FOR EACH ROW
    INSERT INTO placement_changes (hostname) VALUES (OLD.hostname);
CREATE TRIGGER devices_placement_update AFTER UPDATE ON devices FOR EACH ROW
BEGIN
    IF NOT (OLD.type <=> NEW.type AND OLD.vendor <=> NEW.vendor AND OLD.model <=> NEW.model
            AND OLD.status <=> NEW.status AND OLD.maintaining <=> NEW.maintaining
            AND OLD.hostname <=> NEW.hostname) THEN
        INSERT INTO placement_changes (hostname) VALUES (NEW.hostname);
        IF NOT (OLD.hostname <=> NEW.hostname) THEN
            INSERT INTO placement_changes (hostname) VALUES (OLD.hostname);
        END IF;
    END IF;
END;

CREATE TRIGGER deployables_placement_insert AFTER INSERT ON deployables FOR EACH ROW
    INSERT INTO placement_changes (hostname) VALUES (NEW.hostname);
CREATE TRIGGER deployables_placement_delete AFTER DELETE ON deployables FOR EACH ROW
    INSERT INTO placement_changes (hostname) VALUES (OLD.hostname);
CREATE TRIGGER deployables_placement_update AFTER UPDATE ON deployables FOR EACH ROW
BEGIN
    IF NOT (OLD.name <=> NEW.name AND OLD.device_id <=> NEW.device_id
            AND OLD.hostname <=> NEW.hostname AND OLD.num_accelerators <=> NEW.num_accelerators
            AND OLD.enabled <=> NEW.enabled AND OLD.attributes <=> NEW.attributes) THEN
        INSERT INTO placement_changes (hostname) VALUES (NEW.hostname);
        IF NOT (OLD.hostname <=> NEW.hostname) THEN
            INSERT INTO placement_changes (hostname) VALUES (OLD.hostname);
        END IF;
    END IF;
END;

-- An attribute's host is its deployable's.
CREATE TRIGGER attributes_placement_insert AFTER INSERT ON attributes FOR EACH ROW
    INSERT INTO placement_changes (hostname)
        SELECT hostname FROM deployables WHERE id = NEW.deployable_id;
CREATE TRIGGER attributes_placement_delete AFTER DELETE ON attributes FOR EACH ROW
    INSERT INTO placement_changes (hostname)
        SELECT hostname FROM deployables WHERE id = OLD.deployable_id;
CREATE TRIGGER attributes_placement_update AFTER UPDATE ON attributes FOR EACH ROW
BEGIN
    IF NOT (OLD.deployable_id <=> NEW.deployable_id AND OLD."key" <=> NEW."key"
            AND OLD.value <=> NEW.value) THEN
        INSERT INTO placement_changes (hostname)
            SELECT DISTINCT hostname FROM deployables
            WHERE id IN (OLD.deployable_id, NEW.deployable_id);
    END IF;
END;
