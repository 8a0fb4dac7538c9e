-- Release N+1 (MySQL): Cyborg's attributes of a deployable, one row per key; a change
-- forgets its host's report digest, as in migration 4 (a deployable's deletion, which
-- cascades here, forgets it through the deployable's own trigger).
CREATE TABLE attributes (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    deployable_id BIGINT NOT NULL,
    "key" VARCHAR(255) NOT NULL,
    value VARCHAR(4096) NOT NULL,
    created_at VARCHAR(64) NOT NULL,
    updated_at VARCHAR(64) NOT NULL,
    UNIQUE KEY attributes_uuid_key (uuid),
    UNIQUE KEY attributes_deployable_id_key_key (deployable_id, "key"),
    CONSTRAINT attributes_deployable_id_fkey FOREIGN KEY (deployable_id)
        REFERENCES deployables (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Through migration 4's procedure: the host read first, its digest deleted by the key.
CREATE TRIGGER attributes_forget_report_insert AFTER INSERT ON attributes FOR EACH ROW
    CALL accel_forget_report_of_deployable(NEW.deployable_id);
CREATE TRIGGER attributes_forget_report_delete AFTER DELETE ON attributes FOR EACH ROW
    CALL accel_forget_report_of_deployable(OLD.deployable_id);
CREATE TRIGGER attributes_forget_report_update AFTER UPDATE ON attributes FOR EACH ROW
BEGIN
    IF NOT (OLD.deployable_id <=> NEW.deployable_id AND OLD."key" <=> NEW."key"
            AND OLD.value <=> NEW.value) THEN
        CALL accel_forget_report_of_deployable(OLD.deployable_id);
        CALL accel_forget_report_of_deployable(NEW.deployable_id);
    END IF;
END;
