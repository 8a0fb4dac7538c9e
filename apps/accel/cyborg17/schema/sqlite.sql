-- OpenStack Cyborg 17's database schema on SQLite, as Cyborg makes it there (its
-- `create_schema`, SQLAlchemy's tables from `cyborg.db.sqlalchemy.models`, which is how
-- Cyborg's own tests make a SQLite database: its alembic migrations run on MySQL/MariaDB
-- only), stamped with Cyborg 17's alembic revision (b47c8f2d1e3a). Checked against a
-- database `create_schema` made (apps/accel/cyborg17/tests/schema.rs).

CREATE TABLE alembic_version (
    version_num VARCHAR(32) NOT NULL,
    CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);

CREATE TABLE devices (
    id INTEGER NOT NULL,
    uuid VARCHAR(36) NOT NULL,
    type VARCHAR(6) NOT NULL,
    vendor VARCHAR(255) NOT NULL,
    model VARCHAR(255) NOT NULL,
    std_board_info TEXT,
    vendor_board_info TEXT,
    hostname VARCHAR(255) NOT NULL,
    status VARCHAR(11) NOT NULL,
    device_state VARCHAR(16),
    created_at DATETIME,
    updated_at DATETIME,
    PRIMARY KEY (id),
    UNIQUE (uuid)
);

CREATE TABLE controlpath_ids (
    id INTEGER NOT NULL,
    uuid VARCHAR(36) NOT NULL,
    device_id INTEGER NOT NULL,
    cpid_type VARCHAR(3) NOT NULL,
    cpid_info VARCHAR(255) NOT NULL,
    created_at DATETIME,
    updated_at DATETIME,
    PRIMARY KEY (id),
    UNIQUE (uuid),
    FOREIGN KEY(device_id) REFERENCES devices (id) ON DELETE RESTRICT
);

CREATE TABLE deployables (
    id INTEGER NOT NULL,
    uuid VARCHAR(36) NOT NULL,
    parent_id INTEGER,
    root_id INTEGER,
    name VARCHAR(255) NOT NULL,
    num_accelerators INTEGER NOT NULL,
    device_id INTEGER NOT NULL,
    rp_uuid VARCHAR(36),
    driver_name VARCHAR(100),
    bitstream_id VARCHAR(36),
    created_at DATETIME,
    updated_at DATETIME,
    PRIMARY KEY (id),
    UNIQUE (uuid),
    FOREIGN KEY(parent_id) REFERENCES deployables (id),
    FOREIGN KEY(root_id) REFERENCES deployables (id),
    FOREIGN KEY(device_id) REFERENCES devices (id) ON DELETE RESTRICT
);

CREATE TABLE attributes (
    id INTEGER NOT NULL,
    uuid VARCHAR(36) NOT NULL,
    deployable_id INTEGER NOT NULL,
    "key" TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at DATETIME,
    updated_at DATETIME,
    PRIMARY KEY (id),
    UNIQUE (uuid),
    FOREIGN KEY(deployable_id) REFERENCES deployables (id) ON DELETE RESTRICT
);

CREATE TABLE attach_handles (
    id INTEGER NOT NULL,
    uuid VARCHAR(36) NOT NULL,
    deployable_id INTEGER NOT NULL,
    cpid_id INTEGER NOT NULL,
    in_use BOOLEAN,
    attach_type VARCHAR(8) NOT NULL,
    attach_info VARCHAR(255) NOT NULL,
    created_at DATETIME,
    updated_at DATETIME,
    PRIMARY KEY (id),
    UNIQUE (uuid),
    FOREIGN KEY(deployable_id) REFERENCES deployables (id) ON DELETE RESTRICT,
    FOREIGN KEY(cpid_id) REFERENCES controlpath_ids (id) ON DELETE RESTRICT
);

CREATE TABLE device_profiles (
    id INTEGER NOT NULL,
    uuid VARCHAR(36) NOT NULL,
    name VARCHAR(255) NOT NULL,
    profile_json TEXT NOT NULL,
    description TEXT,
    created_at DATETIME,
    updated_at DATETIME,
    PRIMARY KEY (id),
    CONSTRAINT uniq_device_profiles0uuid0name UNIQUE (uuid, name),
    UNIQUE (name)
);

CREATE TABLE extended_accelerator_requests (
    id INTEGER NOT NULL,
    uuid VARCHAR(36) NOT NULL,
    project_id VARCHAR(255),
    state VARCHAR(11) NOT NULL,
    device_profile_id INTEGER NOT NULL,
    device_profile_group_id INTEGER NOT NULL,
    hostname VARCHAR(255),
    device_rp_uuid VARCHAR(36),
    instance_uuid VARCHAR(36),
    attach_handle_id INTEGER,
    substate VARCHAR(7) NOT NULL,
    deployable_id INTEGER,
    created_at DATETIME,
    updated_at DATETIME,
    PRIMARY KEY (id),
    UNIQUE (uuid),
    FOREIGN KEY(device_profile_id) REFERENCES device_profiles (id) ON DELETE RESTRICT,
    FOREIGN KEY(attach_handle_id) REFERENCES attach_handles (id) ON DELETE RESTRICT,
    FOREIGN KEY(deployable_id) REFERENCES deployables (id) ON DELETE RESTRICT
);

CREATE TABLE quota_usages (
    id INTEGER NOT NULL,
    project_id VARCHAR(255),
    user_id VARCHAR(255),
    resource VARCHAR(255) NOT NULL,
    in_use INTEGER NOT NULL,
    reserved INTEGER NOT NULL,
    until_refresh INTEGER,
    created_at DATETIME,
    updated_at DATETIME,
    PRIMARY KEY (id)
);

CREATE TABLE reservations (
    id INTEGER NOT NULL,
    uuid VARCHAR(36) NOT NULL,
    usage_id INTEGER NOT NULL,
    project_id VARCHAR(255),
    user_id VARCHAR(255),
    resource VARCHAR(255),
    delta INTEGER NOT NULL,
    expire DATETIME,
    created_at DATETIME,
    updated_at DATETIME,
    PRIMARY KEY (id),
    FOREIGN KEY(usage_id) REFERENCES quota_usages (id)
);

CREATE INDEX attach_handles_cpid_id_idx ON attach_handles (cpid_id);
CREATE INDEX attach_handles_deployable_id_idx ON attach_handles (deployable_id);
CREATE INDEX ix_attributes_deployable_id ON attributes (deployable_id);
CREATE INDEX ix_controlpath_ids_device_id ON controlpath_ids (device_id);
CREATE INDEX deployables_device_id_idx ON deployables (device_id);
CREATE INDEX deployables_parent_id_idx ON deployables (parent_id);
CREATE INDEX deployables_root_id_idx ON deployables (root_id);
CREATE INDEX "extArqs_attach_handle_id_idx" ON extended_accelerator_requests (attach_handle_id);
CREATE INDEX "extArqs_deployable_id_idx" ON extended_accelerator_requests (deployable_id);
CREATE INDEX "extArqs_device_profile_id_idx" ON extended_accelerator_requests (device_profile_id);
CREATE INDEX "extArqs_device_rp_uuid_idx" ON extended_accelerator_requests (device_rp_uuid);
CREATE INDEX "extArqs_instance_uuid_idx" ON extended_accelerator_requests (instance_uuid);
CREATE INDEX "extArqs_project_id_idx" ON extended_accelerator_requests (project_id);
CREATE INDEX ix_quota_usages_project_id ON quota_usages (project_id);
CREATE INDEX ix_quota_usages_user_id ON quota_usages (user_id);
CREATE INDEX ix_reservations_project_id ON reservations (project_id);
CREATE INDEX ix_reservations_user_id ON reservations (user_id);
CREATE INDEX reservations_uuid_idx ON reservations (uuid);

INSERT INTO alembic_version (version_num) VALUES ('b47c8f2d1e3a');
