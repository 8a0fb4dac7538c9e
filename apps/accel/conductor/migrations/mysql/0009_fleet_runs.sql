-- Release N+1 (MySQL): which run of an agent a heartbeat came from (its start time and
-- sequence number), so a late heartbeat of an earlier run never replaces a later one's.
ALTER TABLE fleet_members ADD COLUMN run_started_ms BIGINT;
ALTER TABLE fleet_members ADD COLUMN run_seq BIGINT;
