-- Release N+1 (MySQL): the digest of each host's last applied inventory report
-- (accel_objects::rpc::report_digest), so an agent whose inventory did not change names
-- it by its digest (conductor API 1.2, report_unchanged) and no conductor diffs it again.
-- The triggers forget it on every change of a column the report's diff compares, by
-- any writer. MySQL has one trigger per event and no `UPDATE OF` column list, so an
-- update trigger compares the columns itself (`<=>`, equal with NULLs); and a cascade
-- fires no trigger, so the deletions a device's or deployable's deletion cascades to
-- are covered by that parent's own trigger (every row of a device has its host).
CREATE TABLE host_reports (
    hostname VARCHAR(255) NOT NULL PRIMARY KEY,
    digest VARCHAR(255) NOT NULL,
    devices BIGINT NOT NULL,
    updated_at VARCHAR(64) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- MySQL's named locks belong to the session, not the transaction: a report locks its
-- host's row here instead, as its first statement, until it commits or rolls back
-- (PostgreSQL: pg_advisory_xact_lock; accel_conductor::db::Db::report).
CREATE TABLE report_locks (
    hostname VARCHAR(255) NOT NULL PRIMARY KEY
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TRIGGER devices_forget_report_insert AFTER INSERT ON devices FOR EACH ROW
    DELETE FROM host_reports WHERE hostname = NEW.hostname;
CREATE TRIGGER devices_forget_report_delete AFTER DELETE ON devices FOR EACH ROW
    DELETE FROM host_reports WHERE hostname = OLD.hostname;
CREATE TRIGGER devices_forget_report_update AFTER UPDATE ON devices FOR EACH ROW
BEGIN
    IF NOT (OLD.type <=> NEW.type AND OLD.vendor <=> NEW.vendor AND OLD.model <=> NEW.model
            AND OLD.std_board_info <=> NEW.std_board_info AND OLD.status <=> NEW.status
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

-- A handle's (and an attribute's, migration 6) host is its deployable's: read first, then
-- its digest deleted by the key. A DELETE whose condition is a subquery scans
-- host_reports and locks every row it reads, so two reports of different hosts would wait
-- on each other's rows (and deadlock); a DELETE by the key locks only its row.
CREATE PROCEDURE accel_forget_report_of_deployable(deployable BIGINT)
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
