-- Release N+1 (PostgreSQL): a device may have several deployables, as in Cyborg 17 (its
-- Intel NIC driver reports each SR-IOV virtual function as a deployable of its own,
-- with its own attributes and Placement provider). A deployable was unique by
-- (hostname, control_path_id), one per device; it is now unique by (hostname,
-- control_path_id, name). Release N names every deployable `<host>_<control path>`,
-- so two of its reports racing to add the same device still collide on the new key.
ALTER TABLE deployables DROP CONSTRAINT deployables_hostname_control_path_id_key;
ALTER TABLE deployables ADD CONSTRAINT deployables_hostname_control_path_id_name_key
    UNIQUE (hostname, control_path_id, name);
CREATE INDEX deployables_device ON deployables (device_id);
