-- Which RPC wire each host's agent reports on ('cyborg': Cyborg's `cyborg-conductor`
-- topic, so it serves Cyborg's agent API; 'accel': accel's `accel-conductor`, so it
-- serves accel's), written by whichever conductor applies the host's report. The
-- conductor calls a host's agent (FPGA programming, cleanup_device) on that wire only.
-- A host with no row (reported only to Cyborg 17's conductor, or not since this
-- migration) is told on both, programmed by the heartbeat rule. A table of its own, not
-- a column of host_reports: those rows are forgotten on every device write.
CREATE TABLE host_wires (
    hostname TEXT PRIMARY KEY,
    wire TEXT NOT NULL CHECK (wire IN ('cyborg', 'accel')),
    updated_at TEXT NOT NULL
);
