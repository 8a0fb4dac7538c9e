-- Release N+1 (postgres): which run of each member its recorded heartbeat came from
-- (verso_upgrade::Incarnation: when the process started, and the report's number in
-- that run), so a heartbeat that arrives late from a run since replaced (a killed
-- agent's last call, delivered after its successor's first) is refused instead of
-- recorded over the live run's versions (verso_upgrade::fleet::run_order). NULL for
-- rows of members that do not number their runs (release N and Cyborg 17 agents).
-- Expand-only: nullable columns release N never reads or writes.
ALTER TABLE fleet_members ADD COLUMN run_started_ms BIGINT;
ALTER TABLE fleet_members ADD COLUMN run_seq BIGINT;
