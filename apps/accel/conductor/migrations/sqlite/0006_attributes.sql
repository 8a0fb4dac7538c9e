-- Release N+1 (SQLite): Cyborg's attributes, one row per key of a deployable (Cyborg 17's
-- `attributes` table: uuid, deployable_id, key, value, times), served at /v2/attributes.
-- A report owns the keys it reports: deployables.attributes (until now always '{}',
-- no writer stored anything else) holds the keys of the last applied report, so the
-- next one deletes only the reported keys it no longer has; keys an operator created
-- through the API and no report names are kept. The triggers forget the host's report
-- digest on every write, so a report restores a reported key an operator deleted or
-- changed. Expand-only: release N never reads the table, and deleting a deployable
-- deletes its attributes.
CREATE TABLE attributes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    deployable_id INTEGER NOT NULL REFERENCES deployables (id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (deployable_id, key)
);

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
