-- Release N+1 (PostgreSQL): the digest of each host's last applied inventory report
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
    devices BIGINT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE FUNCTION accel_forget_report_of_host() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM host_reports WHERE hostname = OLD.hostname;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        DELETE FROM host_reports WHERE hostname = NEW.hostname;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE FUNCTION accel_forget_report_of_handle() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM host_reports WHERE hostname IN
            (SELECT hostname FROM deployables WHERE id = OLD.deployable_id);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        DELETE FROM host_reports WHERE hostname IN
            (SELECT hostname FROM deployables WHERE id = NEW.deployable_id);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER devices_forget_report
    AFTER INSERT OR DELETE OR UPDATE OF type, vendor, model, std_board_info, status, hostname
    ON devices FOR EACH ROW EXECUTE FUNCTION accel_forget_report_of_host();
CREATE TRIGGER deployables_forget_report
    AFTER INSERT OR DELETE OR UPDATE OF device_id, hostname, control_path_id, driver_name, num_accelerators
    ON deployables FOR EACH ROW EXECUTE FUNCTION accel_forget_report_of_host();
CREATE TRIGGER attach_handles_forget_report
    AFTER INSERT OR DELETE OR UPDATE OF deployable_id, attach_type, attach_info
    ON attach_handles FOR EACH ROW EXECUTE FUNCTION accel_forget_report_of_handle();
