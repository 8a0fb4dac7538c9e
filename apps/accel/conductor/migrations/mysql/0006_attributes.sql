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

-- The host is read first, then its digest deleted by the key (see migration 4: a
-- DELETE with a subquery would lock other hosts' rows).
CREATE TRIGGER attributes_forget_report_insert AFTER INSERT ON attributes FOR EACH ROW
BEGIN
    DECLARE host VARCHAR(255);
    SELECT hostname INTO host FROM deployables WHERE id = NEW.deployable_id;
    DELETE FROM host_reports WHERE hostname = host;
END;
CREATE TRIGGER attributes_forget_report_delete AFTER DELETE ON attributes FOR EACH ROW
BEGIN
    DECLARE host VARCHAR(255);
    SELECT hostname INTO host FROM deployables WHERE id = OLD.deployable_id;
    DELETE FROM host_reports WHERE hostname = host;
END;
CREATE TRIGGER attributes_forget_report_update AFTER UPDATE ON attributes FOR EACH ROW
BEGIN
    DECLARE old_host, new_host VARCHAR(255);
    IF NOT (OLD.deployable_id <=> NEW.deployable_id AND OLD."key" <=> NEW."key"
            AND OLD.value <=> NEW.value) THEN
        SELECT hostname INTO old_host FROM deployables WHERE id = OLD.deployable_id;
        SELECT hostname INTO new_host FROM deployables WHERE id = NEW.deployable_id;
        DELETE FROM host_reports WHERE hostname IN (old_host, new_host);
    END IF;
END;
