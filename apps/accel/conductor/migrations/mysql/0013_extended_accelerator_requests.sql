-- Release N+1 (MySQL): Cyborg 17's `extended_accelerator_requests`, as a view of accel's
-- `accelerator_requests`, so Cyborg's own `ExtARQ` reads accel's requests (a step of
-- taking Cyborg's schema as accel's own, docs/cyborg-compatibility.md): the profile by
-- id (accel's requests name it; a profile outlives its requests), `substate` 'Initial'
-- (the only one Cyborg 17 writes), `deployable_id` the bound handle's deployable. Read
-- only: Cyborg's writes to it fail until accel's queries move onto a table of Cyborg's
-- (then this view goes). Expand-only: release N never reads it. A migration that
-- rebuilds one of the tables it reads drops and recreates it.
CREATE VIEW extended_accelerator_requests AS
    SELECT r.id, r.uuid, r.project_id, r.state, p.id AS device_profile_id,
           r.device_profile_group_id, r.hostname, r.device_rp_uuid, r.instance_uuid,
           r.attach_handle_id, 'Initial' AS substate, h.deployable_id,
           r.created_at, r.updated_at
    FROM accelerator_requests r
    JOIN device_profiles p ON p.name = r.device_profile_name
    LEFT JOIN attach_handles h ON h.id = r.attach_handle_id;
