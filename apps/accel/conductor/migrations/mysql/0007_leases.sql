-- Release N+1 (MySQL): one holder at a time for a deployment-wide task, by the
-- database's clock (accel_conductor::db::Db::take_lease).
CREATE TABLE leases (
    name VARCHAR(255) NOT NULL PRIMARY KEY,
    holder VARCHAR(255) NOT NULL,
    expires_ms BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
