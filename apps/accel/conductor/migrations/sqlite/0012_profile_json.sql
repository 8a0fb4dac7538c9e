-- Release N+1 (SQLite): device profiles in Cyborg 17's form beside accel's, a step of
-- taking Cyborg's schema as accel's own (docs/cyborg-compatibility.md): Cyborg's
-- `profile_json` (`{"groups": [...]}`, what Cyborg's `DeviceProfile` reads and writes)
-- and `updated_at` (null until a change, as Cyborg's), and accel's `groups` (the
-- groups' JSON list) nullable, so a writer of either form can insert: a trigger fills
-- the other from it. Expand-only: release N writes and reads `groups` as before and
-- its inserts get `profile_json`; neither release N, N+1 nor Cyborg 17 changes a
-- profile's groups after its creation (so only inserts are followed).
--
-- SQLite cannot drop a NOT NULL: the table is rebuilt, by SQLite's procedure (see
-- migration 10; nothing references device_profiles by key).
PRAGMA legacy_alter_table = ON;
ALTER TABLE device_profiles RENAME TO device_profiles_before_0012;
CREATE TABLE device_profiles (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    "groups" TEXT,
    description TEXT,
    created_at TEXT NOT NULL,
    profile_json TEXT,
    updated_at TEXT,
    CHECK ("groups" IS NOT NULL OR profile_json IS NOT NULL)
);
INSERT INTO device_profiles (id, uuid, name, "groups", description, created_at, profile_json)
    SELECT id, uuid, name, "groups", description, created_at, '{"groups": ' || "groups" || '}'
    FROM device_profiles_before_0012;
DELETE FROM sqlite_sequence WHERE name = 'device_profiles';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'device_profiles', seq FROM sqlite_sequence
    WHERE name = 'device_profiles_before_0012';
DROP TABLE device_profiles_before_0012;
PRAGMA legacy_alter_table = OFF;

-- SQLite's triggers cannot set NEW: the row is updated right after its insert.
CREATE TRIGGER device_profiles_profile_json AFTER INSERT ON device_profiles
WHEN NEW.profile_json IS NULL
BEGIN
    UPDATE device_profiles SET profile_json = '{"groups": ' || NEW."groups" || '}'
    WHERE id = NEW.id;
END;
CREATE TRIGGER device_profiles_groups AFTER INSERT ON device_profiles
WHEN NEW."groups" IS NULL
BEGIN
    UPDATE device_profiles SET "groups" = json_extract(NEW.profile_json, '$.groups')
    WHERE id = NEW.id;
END;
