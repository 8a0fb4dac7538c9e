-- accel release N+1 on OpenStack Cyborg 17's schema (PostgreSQL): what accel adds to
-- Cyborg's tables, and accel's own tables. Applied by `Db::sync_on_cyborg17` after
-- Cyborg's schema (accel_cyborg17::schema, alembic b47c8f2d1e3a). Additive only: every
-- column added to a Cyborg table has a default or may be null, so Cyborg 17's own
-- services (and accel's release N, which is Cyborg 17 in Rust) keep writing these
-- tables as they always have, and triggers fill what accel needs from what they write.
-- docs/cyborg-compatibility.md, "accel's schema on Cyborg 17's", explains each column.

-- devices: accel's inventory state beside Cyborg's `status` and `device_state`.
ALTER TABLE devices ADD COLUMN inventory_status VARCHAR(16) NOT NULL DEFAULT 'available';
CREATE INDEX devices_hostname_idx ON devices (hostname);

-- deployables: the host and PCI address a report names it by, the keys of the last
-- applied report's attributes, and whether Placement may allocate it.
ALTER TABLE deployables
    ADD COLUMN hostname VARCHAR(255),
    ADD COLUMN control_path_id VARCHAR(255),
    ADD COLUMN attributes TEXT NOT NULL DEFAULT '{}',
    ADD COLUMN enabled BIGINT NOT NULL DEFAULT 1;

-- A control path's PCI address (`0000:5e:00.0`) from Cyborg's `cpid_info` JSON; null
-- when the text is not that JSON (never an error: Cyborg's insert must not fail here).
CREATE FUNCTION accel_pci_address(info TEXT) RETURNS TEXT AS $$
BEGIN
    RETURN (info::json ->> 'domain') || ':' || (info::json ->> 'bus') || ':'
        || (info::json ->> 'device') || '.' || (info::json ->> 'function');
EXCEPTION WHEN others THEN
    RETURN NULL;
END;
$$ LANGUAGE plpgsql IMMUTABLE;

UPDATE deployables SET
    hostname = (SELECT hostname FROM devices WHERE id = deployables.device_id),
    control_path_id = (SELECT accel_pci_address(c.cpid_info) FROM controlpath_ids c
                       WHERE c.device_id = deployables.device_id ORDER BY c.id LIMIT 1);
-- The attributes already there are what Cyborg's reports made: the report's.
UPDATE deployables SET attributes = COALESCE(
    (SELECT CAST(json_object_agg(a."key", a.value) AS TEXT) FROM attributes a
     WHERE a.deployable_id = deployables.id), '{}');
CREATE UNIQUE INDEX deployables_host_path_name ON deployables (hostname, control_path_id, name);

-- A writer that leaves them unset (Cyborg 17's conductor, in Rust or Python) gets them
-- from the device and its first control path.
CREATE FUNCTION accel_deployable_host_and_path() RETURNS trigger AS $$
BEGIN
    IF NEW.hostname IS NULL THEN
        NEW.hostname := (SELECT hostname FROM devices WHERE id = NEW.device_id);
    END IF;
    IF NEW.control_path_id IS NULL THEN
        NEW.control_path_id := (SELECT accel_pci_address(c.cpid_info) FROM controlpath_ids c
                                WHERE c.device_id = NEW.device_id ORDER BY c.id LIMIT 1);
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER deployables_host_and_path BEFORE INSERT ON deployables
    FOR EACH ROW EXECUTE FUNCTION accel_deployable_host_and_path();

-- attach_handles: the revision of compare-and-swap updates (PCI managed mode), and the
-- NVMe cleanup's state and failure reason. A handle is one per address of a deployable.
ALTER TABLE attach_handles
    ADD COLUMN revision BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN cleanup_state VARCHAR(16),
    ADD COLUMN cleanup_reason TEXT;
CREATE UNIQUE INDEX attach_handles_deployable_info ON attach_handles (deployable_id, attach_info);

-- attributes: a key once per deployable (the API's create refuses a second).
CREATE UNIQUE INDEX attributes_deployable_key ON attributes (deployable_id, "key");

-- Requests: room for accel's `UnbindFailed` (12 characters; Cyborg 17 declares the state
-- in `constants.ARQ_UNBIND_FAILED` but its column is one short).
ALTER TABLE extended_accelerator_requests ALTER COLUMN state TYPE VARCHAR(12);

-- accel's own tables (verso-upgrade's records, the reconciler's bookkeeping).
CREATE TABLE component_versions (
    component TEXT PRIMARY KEY,
    record TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE fleet_members (
    component TEXT NOT NULL,
    member_id TEXT NOT NULL,
    host TEXT NOT NULL,
    software BIGINT NOT NULL,
    apparent BIGINT NOT NULL,
    heard_by TEXT NOT NULL,
    heartbeats BIGINT NOT NULL DEFAULT 1,
    last_seen_ms BIGINT NOT NULL,
    run_started_ms BIGINT,
    run_seq BIGINT,
    PRIMARY KEY (component, member_id)
);

CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);

-- The digest of each host's last applied report; forgotten on every write of a column
-- the report's diff compares, by any writer, so it never vouches for rows that changed.
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

CREATE FUNCTION accel_forget_report_of_deployable() RETURNS trigger AS $$
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
    AFTER INSERT OR DELETE OR UPDATE OF type, vendor, model, std_board_info, inventory_status, hostname
    ON devices FOR EACH ROW EXECUTE FUNCTION accel_forget_report_of_host();
CREATE TRIGGER deployables_forget_report
    AFTER INSERT OR DELETE OR UPDATE OF device_id, hostname, control_path_id, driver_name, num_accelerators
    ON deployables FOR EACH ROW EXECUTE FUNCTION accel_forget_report_of_host();
CREATE TRIGGER attach_handles_forget_report
    AFTER INSERT OR DELETE OR UPDATE OF deployable_id, attach_type, attach_info
    ON attach_handles FOR EACH ROW EXECUTE FUNCTION accel_forget_report_of_deployable();
CREATE TRIGGER attributes_forget_report
    AFTER INSERT OR DELETE OR UPDATE OF deployable_id, key, value
    ON attributes FOR EACH ROW EXECUTE FUNCTION accel_forget_report_of_deployable();

-- Which hosts' Placement-relevant rows changed since the reconciler last brought them up
-- to date: one row per (host, transaction), only ever inserted, so concurrent writers to
-- one host never wait on each other here; the reconciler deletes exactly the rows it read.
CREATE TABLE placement_changes (
    seq BIGSERIAL PRIMARY KEY,
    hostname TEXT NOT NULL,
    xact BIGINT NOT NULL DEFAULT txid_current(),
    UNIQUE (hostname, xact)
);

CREATE FUNCTION accel_placement_host_changed() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.hostname IS NOT NULL THEN
        INSERT INTO placement_changes (hostname) VALUES (OLD.hostname) ON CONFLICT DO NOTHING;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.hostname IS NOT NULL THEN
        INSERT INTO placement_changes (hostname) VALUES (NEW.hostname) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

-- An attribute's host is its deployable's.
CREATE FUNCTION accel_placement_attribute_changed() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO placement_changes (hostname)
            SELECT hostname FROM deployables
            WHERE id = OLD.deployable_id AND hostname IS NOT NULL
            ON CONFLICT DO NOTHING;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO placement_changes (hostname)
            SELECT hostname FROM deployables
            WHERE id = NEW.deployable_id AND hostname IS NOT NULL
            ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER devices_placement
    AFTER INSERT OR DELETE OR UPDATE OF type, vendor, model, status, inventory_status, hostname
    ON devices FOR EACH ROW EXECUTE FUNCTION accel_placement_host_changed();
CREATE TRIGGER deployables_placement
    AFTER INSERT OR DELETE OR UPDATE OF name, device_id, hostname, num_accelerators, enabled, attributes
    ON deployables FOR EACH ROW EXECUTE FUNCTION accel_placement_host_changed();
CREATE TRIGGER attributes_placement
    AFTER INSERT OR DELETE OR UPDATE OF deployable_id, key, value
    ON attributes FOR EACH ROW EXECUTE FUNCTION accel_placement_attribute_changed();
