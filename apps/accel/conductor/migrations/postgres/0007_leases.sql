-- Release N+1: leases, so that of several conductors one at a time does a
-- deployment-wide task (the Placement reconciler). A holder renews its lease each pass;
-- another takes it once it has expired. expires_ms is the database's clock (milliseconds
-- since the Unix epoch), so conductors whose clocks differ agree on who holds it.
-- Expand-only: a new table release N never reads.
CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);
