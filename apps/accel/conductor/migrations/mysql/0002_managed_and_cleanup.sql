-- Release N+1 (MySQL): attach handles get a revision for compare-and-swap updates
-- (PCI managed-mode metadata lives in attach_info) and a cleanup state: a released NVMe
-- device is `cleaning` until its agent reports the erase done (`error` if it failed),
-- and is not allocatable meanwhile. Devices record their PCI managed mode. A failure
-- reason is kept to 4,000 bytes (accel_conductor::handles::MAX_CLEANUP_REASON).
ALTER TABLE attach_handles ADD COLUMN revision BIGINT NOT NULL DEFAULT 0;
ALTER TABLE attach_handles ADD COLUMN cleanup_state VARCHAR(32);
ALTER TABLE attach_handles ADD COLUMN cleanup_reason VARCHAR(4096);
ALTER TABLE devices ADD COLUMN managed_mode VARCHAR(255);
