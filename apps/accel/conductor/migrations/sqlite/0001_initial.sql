-- accel's schema, release N (SQLite). Booleans are 0/1 integers and times ISO 8601 text,
-- so the same queries run on SQLite and PostgreSQL.
CREATE TABLE devices (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    vendor TEXT NOT NULL,
    model TEXT NOT NULL,
    std_board_info TEXT,
    hostname TEXT NOT NULL,
    vendor_board_info TEXT,
    status TEXT NOT NULL DEFAULT 'available',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX devices_hostname ON devices (hostname);

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
    UNIQUE (hostname, control_path_id)
);

CREATE TABLE attach_handles (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    deployable_id INTEGER NOT NULL REFERENCES deployables (id) ON DELETE CASCADE,
    in_use INTEGER NOT NULL DEFAULT 0,
    attach_type TEXT NOT NULL,
    attach_info TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (deployable_id, attach_info)
);

CREATE TABLE device_profiles (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    groups TEXT NOT NULL,
    description TEXT,
    created_at TEXT NOT NULL
);

CREATE TABLE accelerator_requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL,
    device_profile_name TEXT NOT NULL,
    device_profile_group_id INTEGER NOT NULL,
    hostname TEXT,
    device_rp_uuid TEXT,
    instance_uuid TEXT,
    project_id TEXT,
    attach_handle_id INTEGER REFERENCES attach_handles (id),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX accelerator_requests_instance ON accelerator_requests (instance_uuid);

-- Component versions (verso-upgrade): one record per component, the JSON the
-- VersionStore persists (apparent version, finalization marker).
CREATE TABLE component_versions (
    component TEXT PRIMARY KEY,
    record TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
