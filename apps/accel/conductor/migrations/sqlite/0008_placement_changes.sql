-- Release N+1 (SQLite): which hosts' Placement-relevant rows changed since the
-- reconciler last brought them up to date, so a pass reads and computes only those
-- hosts instead of the whole inventory (a periodic full pass stays as the safety net).
-- The triggers mark a host on every write of a column the providers are made of
-- (accel_conductor::placement::providers), by any writer: reports, device disable and
-- enable, the attributes API, release N's conductor in the downgrade window, an import.
-- One row per host; each mark gives it a larger seq than it had, and the reconciler
-- deletes only the (host, seq) it read, so a mark made while a host is being synced
-- survives for the next pass. Expand-only: release N never reads the table.
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
    AFTER UPDATE OF type, vendor, model, status, maintaining, hostname ON devices
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        VALUES (OLD.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
    INSERT INTO placement_changes (hostname, seq)
        VALUES (NEW.hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes))
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
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

-- An attribute's host is its deployable's. (When a deployable is deleted, its
-- attributes go by cascade and find no deployable: the deployable's own trigger marks.)
CREATE TRIGGER attributes_placement_insert AFTER INSERT ON attributes
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        SELECT hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes)
        FROM deployables WHERE id = NEW.deployable_id
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER attributes_placement_delete AFTER DELETE ON attributes
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        SELECT hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes)
        FROM deployables WHERE id = OLD.deployable_id
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;
CREATE TRIGGER attributes_placement_update
    AFTER UPDATE OF deployable_id, key, value ON attributes
BEGIN
    INSERT INTO placement_changes (hostname, seq)
        SELECT hostname, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes)
        FROM deployables WHERE id IN (OLD.deployable_id, NEW.deployable_id)
        ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq;
END;
