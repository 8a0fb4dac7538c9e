-- Release N+1 (MySQL): every agent any conductor heard of (accel_conductor::fleet).
CREATE TABLE fleet_members (
    component VARCHAR(255) NOT NULL,
    member_id VARCHAR(255) NOT NULL,
    host VARCHAR(255) NOT NULL,
    software BIGINT NOT NULL,
    apparent BIGINT NOT NULL,
    heard_by VARCHAR(255) NOT NULL,
    heartbeats BIGINT NOT NULL DEFAULT 1,
    last_seen_ms BIGINT NOT NULL,
    PRIMARY KEY (component, member_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
