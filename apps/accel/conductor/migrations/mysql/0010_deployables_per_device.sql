-- Release N+1 (MySQL): several deployables per device (Cyborg's SR-IOV NICs, one per
-- virtual function), told apart by name: the unique key widens from (host, control
-- path) to (host, control path, name).
ALTER TABLE deployables ADD UNIQUE KEY deployables_hostname_control_path_id_name_key
    (hostname, control_path_id, name);
ALTER TABLE deployables DROP INDEX deployables_hostname_control_path_id_key;
CREATE INDEX deployables_device ON deployables (device_id);
