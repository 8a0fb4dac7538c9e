-- accel's schema, release N, on MySQL/MariaDB (MariaDB 10.5+: the queries use INSERT
-- ... RETURNING). The same tables and columns as the SQLite and PostgreSQL migrations,
-- so one set of queries runs on all three; what differs is only what MySQL needs:
-- - text is VARCHAR, whose sizes are the limits: sqlx's Any driver reads MySQL's TEXT
--   as bytes, so a column read as text is VARCHAR (only JSON read through
--   `JsonText`, device_profiles.groups, is TEXT); the sizes keep a row under InnoDB's
--   65,535 bytes and a key under 3,072 bytes (utf8mb4: 4 bytes a character);
-- - utf8mb4_bin: names compare as PostgreSQL and SQLite compare them, byte for byte
--   (MySQL's default collations ignore case);
-- - flags and counts are BIGINT or INT (the Any driver reads no TINYINT);
-- - the conductor's connections run with ANSI_QUOTES, so "key" is a name here too.
CREATE TABLE devices (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    type VARCHAR(255) NOT NULL,
    vendor VARCHAR(255) NOT NULL,
    model VARCHAR(255) NOT NULL,
    std_board_info VARCHAR(4096),
    hostname VARCHAR(255) NOT NULL,
    vendor_board_info VARCHAR(4096),
    status VARCHAR(255) NOT NULL DEFAULT 'available',
    created_at VARCHAR(64) NOT NULL,
    updated_at VARCHAR(64) NOT NULL,
    UNIQUE KEY devices_uuid_key (uuid),
    KEY devices_hostname (hostname)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE deployables (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    name VARCHAR(255) NOT NULL,
    device_id BIGINT NOT NULL,
    hostname VARCHAR(255) NOT NULL,
    control_path_id VARCHAR(255) NOT NULL,
    num_accelerators BIGINT NOT NULL,
    driver_name VARCHAR(255),
    attributes VARCHAR(8192) NOT NULL DEFAULT '{}',
    enabled BIGINT NOT NULL DEFAULT 1,
    created_at VARCHAR(64) NOT NULL,
    updated_at VARCHAR(64) NOT NULL,
    UNIQUE KEY deployables_uuid_key (uuid),
    UNIQUE KEY deployables_hostname_control_path_id_key (hostname, control_path_id),
    CONSTRAINT deployables_device_id_fkey FOREIGN KEY (device_id)
        REFERENCES devices (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE attach_handles (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    deployable_id BIGINT NOT NULL,
    in_use BIGINT NOT NULL DEFAULT 0,
    attach_type VARCHAR(255) NOT NULL,
    attach_info VARCHAR(255) NOT NULL,
    created_at VARCHAR(64) NOT NULL,
    updated_at VARCHAR(64) NOT NULL,
    UNIQUE KEY attach_handles_uuid_key (uuid),
    UNIQUE KEY attach_handles_deployable_id_attach_info_key (deployable_id, attach_info),
    CONSTRAINT attach_handles_deployable_id_fkey FOREIGN KEY (deployable_id)
        REFERENCES deployables (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE device_profiles (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    name VARCHAR(255) NOT NULL,
    `groups` TEXT NOT NULL,
    description VARCHAR(255),
    created_at VARCHAR(64) NOT NULL,
    UNIQUE KEY device_profiles_uuid_key (uuid),
    UNIQUE KEY device_profiles_name_key (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE accelerator_requests (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    state VARCHAR(255) NOT NULL,
    device_profile_name VARCHAR(255) NOT NULL,
    device_profile_group_id BIGINT NOT NULL,
    hostname VARCHAR(255),
    device_rp_uuid VARCHAR(255),
    instance_uuid VARCHAR(255),
    project_id VARCHAR(255),
    attach_handle_id BIGINT,
    created_at VARCHAR(64) NOT NULL,
    updated_at VARCHAR(64) NOT NULL,
    UNIQUE KEY accelerator_requests_uuid_key (uuid),
    KEY accelerator_requests_instance (instance_uuid),
    CONSTRAINT accelerator_requests_attach_handle_id_fkey FOREIGN KEY (attach_handle_id)
        REFERENCES attach_handles (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE component_versions (
    component VARCHAR(255) NOT NULL PRIMARY KEY,
    record VARCHAR(8192) NOT NULL,
    updated_at VARCHAR(64) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
