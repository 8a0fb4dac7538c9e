-- Release N+1 (SQLite): the digest of each host's last applied inventory report
-- (accel_objects::rpc::report_digest), so an agent whose inventory did not change names
-- it by its digest (conductor API 1.2, report_unchanged) and no conductor diffs it again.
-- A digest says "the host's rows are what this report made them": the triggers below
-- forget it on every write of a column the report's diff compares, by any writer
-- (release N's conductor during the downgrade window included), so it can never vouch
-- for rows that changed since. Expand-only: a new table and triggers; release N never
-- reads the table, and its writes only delete from it.
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
    AFTER UPDATE OF type, vendor, model, std_board_info, status, hostname ON devices
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
    AFTER UPDATE OF device_id, hostname, control_path_id, driver_name, num_accelerators ON deployables
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
