-- Release N+1 (SQLite): a device may have several deployables, as in Cyborg 17 (its
-- Intel NIC driver reports each SR-IOV virtual function as a deployable of its own,
-- with its own attributes and Placement provider). A deployable was unique by
-- (hostname, control_path_id), one per device; it is now unique by (hostname,
-- control_path_id, name). Release N names every deployable `<host>_<control path>`,
-- so two of its reports racing to add the same device still collide on the new key.
--
-- SQLite cannot drop a table constraint: the table is rebuilt, by SQLite's procedure.
-- It needs foreign keys off (dropping a table that attach_handles and attributes
-- reference ON DELETE CASCADE would delete their rows): `Db::migrate` turns them off
-- before sqlx's transaction begins and checks every reference after. The old table is
-- renamed with `legacy_alter_table` on, so the other tables' references and triggers
-- keep naming `deployables`, that is the new table.
PRAGMA legacy_alter_table = ON;
ALTER TABLE deployables RENAME TO deployables_before_0010;
CREATE TABLE deployables (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    device_id INTEGER NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
    hostname TEXT NOT NULL,
    control_path_id TEXT NOT NULL,
    num_accelerators INTEGER NOT NULL,
    driver_name TEXT,
    attributes TEXT NOT NULL DEFAULT '{}',
    enabled INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (hostname, control_path_id, name)
);
INSERT INTO deployables (id, uuid, name, device_id, hostname, control_path_id,
        num_accelerators, driver_name, attributes, enabled, created_at, updated_at)
    SELECT id, uuid, name, device_id, hostname, control_path_id, num_accelerators,
        driver_name, attributes, enabled, created_at, updated_at
    FROM deployables_before_0010;
-- Ids keep growing from where the old table's left off (AUTOINCREMENT's counter).
DELETE FROM sqlite_sequence WHERE name = 'deployables';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'deployables', seq FROM sqlite_sequence WHERE name = 'deployables_before_0010';
DROP TABLE deployables_before_0010;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX deployables_device ON deployables (device_id);

-- The triggers of migrations 4 and 8 went with the old table.
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

CREATE TRIGGER deployables_placement_insert AFTER INSERT ON deployables
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        VALUES (NEW.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER deployables_placement_delete AFTER DELETE ON deployables
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        VALUES (OLD.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER deployables_placement_update
    AFTER UPDATE OF name, device_id, hostname, num_accelerators, enabled, attributes ON deployables
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        VALUES (OLD.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
    INSERT INTO placement_changes (hostname, seq)
        VALUES (NEW.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;
