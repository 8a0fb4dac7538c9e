-- Release N+1 (PostgreSQL): device profiles in Cyborg 17's form beside accel's, a step
-- of taking Cyborg's schema as accel's own (docs/cyborg-compatibility.md): Cyborg's
-- `profile_json` (`{"groups": [...]}`, what Cyborg's `DeviceProfile` reads and writes)
-- and `updated_at` (null until a change, as Cyborg's), and accel's `groups` (the
-- groups' JSON list) nullable, so a writer of either form can insert: a trigger fills
-- the other from it. Expand-only: release N writes and reads `groups` as before and
-- its inserts get `profile_json`; neither release N, N+1 nor Cyborg 17 changes a
-- profile's groups after its creation (so only inserts are followed).
ALTER TABLE device_profiles
    ALTER COLUMN "groups" DROP NOT NULL,
    ADD COLUMN profile_json TEXT,
    ADD COLUMN updated_at TEXT,
    ADD CONSTRAINT device_profiles_groups_or_profile_json
        CHECK ("groups" IS NOT NULL OR profile_json IS NOT NULL);
UPDATE device_profiles SET profile_json = '{"groups": ' || "groups" || '}';

CREATE FUNCTION accel_profile_forms() RETURNS trigger AS $$
BEGIN
    IF NEW.profile_json IS NULL THEN
        NEW.profile_json := '{"groups": ' || NEW."groups" || '}';
    ELSIF NEW."groups" IS NULL THEN
        NEW."groups" := (NEW.profile_json::json -> 'groups')::text;
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER device_profiles_forms BEFORE INSERT ON device_profiles
    FOR EACH ROW EXECUTE FUNCTION accel_profile_forms();
