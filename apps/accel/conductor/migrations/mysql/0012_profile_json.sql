-- Release N+1 (MySQL): device profiles in Cyborg 17's form beside accel's, a step of
-- taking Cyborg's schema as accel's own (docs/cyborg-compatibility.md): Cyborg's
-- `profile_json` (`{"groups": [...]}`, what Cyborg's `DeviceProfile` reads and writes)
-- and `updated_at` (null until a change, as Cyborg's), and accel's `groups` (the
-- groups' JSON list) nullable, so a writer of either form can insert: a trigger fills
-- the other from it. Neither release N+1 nor Cyborg 17 changes a profile's groups after
-- its creation (so only inserts are followed).
ALTER TABLE device_profiles
    MODIFY "groups" TEXT NULL,
    ADD COLUMN profile_json TEXT,
    ADD COLUMN updated_at VARCHAR(64),
    ADD CONSTRAINT device_profiles_groups_or_profile_json
        CHECK ("groups" IS NOT NULL OR profile_json IS NOT NULL);
UPDATE device_profiles SET profile_json = CONCAT('{"groups": ', "groups", '}');

CREATE TRIGGER device_profiles_forms BEFORE INSERT ON device_profiles FOR EACH ROW
BEGIN
    IF NEW.profile_json IS NULL THEN
        SET NEW.profile_json = CONCAT('{"groups": ', NEW."groups", '}');
    ELSEIF NEW."groups" IS NULL THEN
        SET NEW."groups" = JSON_EXTRACT(NEW.profile_json, '$.groups');
    END IF;
END;
