-- Release N+1 (SQLite): the fleet record (verso-upgrade's FleetStore). One row per
-- component any conductor heard of (agents by heartbeat, or only by their reports when
-- they send none), written by whichever conductor heard it, so finalization is decided
-- on the whole fleet. Expand-only: a new table release N never reads.
-- last_seen_ms is the database's clock (milliseconds since the Unix epoch), so
-- conductors on hosts whose clocks differ agree on who is live.
CREATE TABLE fleet_members (
    component TEXT NOT NULL,
    member_id TEXT NOT NULL,
    host TEXT NOT NULL,
    software INTEGER NOT NULL,
    apparent INTEGER NOT NULL,
    heard_by TEXT NOT NULL,
    heartbeats INTEGER NOT NULL DEFAULT 1,
    last_seen_ms INTEGER NOT NULL,
    PRIMARY KEY (component, member_id)
);
