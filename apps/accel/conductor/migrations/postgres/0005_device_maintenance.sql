-- Release N+1: a device taken out of service by an operator (Cyborg's device disable,
-- conductor API 1.3 set_device_maintaining): given to no new request until enabled.
-- Expand-only: release N never names the column, and its inserts get the default.
ALTER TABLE devices ADD COLUMN maintaining INTEGER NOT NULL DEFAULT 0;
