-- Release N+1 (PostgreSQL): which hosts' Placement-relevant rows changed since the
-- reconciler last brought them up to date, so a pass reads and computes only those
-- hosts instead of the whole inventory (a periodic full pass stays as the safety net).
-- The triggers mark a host on every write of a column the providers are made of
-- (accel_conductor::placement::providers), by any writer: reports, device disable and
-- enable, the attributes API, release N's conductor in the downgrade window, an import.
-- A mark is one row per (host, transaction): rows are only ever inserted, never
-- updated, so concurrent writers to one host never wait on each other here (an upsert
-- of one row per host would hold that row's lock to each writer's commit and could
-- deadlock a report against a device disable). The reconciler deletes exactly the rows
-- it read, so a mark committed after its read survives for the next pass, whatever
-- its seq. Expand-only: release N never reads the table.
CREATE TABLE placement_changes (
    seq BIGSERIAL PRIMARY KEY,
    hostname TEXT NOT NULL,
    xact BIGINT NOT NULL DEFAULT txid_current(),
    UNIQUE (hostname, xact)
);

CREATE FUNCTION accel_placement_host_changed() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO placement_changes (hostname) VALUES (OLD.hostname) ON CONFLICT DO NOTHING;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO placement_changes (hostname) VALUES (NEW.hostname) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

-- An attribute's host is its deployable's. (When a deployable is deleted, its
-- attributes go by cascade and find no deployable: the deployable's own trigger marks.)
CREATE FUNCTION accel_placement_attribute_changed() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO placement_changes (hostname)
            SELECT hostname FROM deployables WHERE id = OLD.deployable_id
            ON CONFLICT DO NOTHING;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO placement_changes (hostname)
            SELECT hostname FROM deployables WHERE id = NEW.deployable_id
            ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER devices_placement
    AFTER INSERT OR DELETE OR UPDATE OF type, vendor, model, status, maintaining, hostname
    ON devices FOR EACH ROW EXECUTE FUNCTION accel_placement_host_changed();
CREATE TRIGGER deployables_placement
    AFTER INSERT OR DELETE OR UPDATE OF name, device_id, hostname, num_accelerators, enabled, attributes
    ON deployables FOR EACH ROW EXECUTE FUNCTION accel_placement_host_changed();
CREATE TRIGGER attributes_placement
    AFTER INSERT OR DELETE OR UPDATE OF deployable_id, key, value
    ON attributes FOR EACH ROW EXECUTE FUNCTION accel_placement_attribute_changed();
