-- Release N+1 (MySQL): an operator takes a device out of scheduling (Cyborg's
-- `maintaining`), 0 or 1.
ALTER TABLE devices ADD COLUMN maintaining INT NOT NULL DEFAULT 0;
