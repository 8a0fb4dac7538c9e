-- OpenStack Cyborg 17's database schema on MySQL/MariaDB, exactly as Cyborg's own
-- `cyborg-dbsync upgrade` makes it (openstack-cyborg 17.0.0, alembic head
-- b47c8f2d1e3a, "add device_state"), stamped with that revision, so a database made from
-- this file and one Cyborg made are the same schema: its types (`int(11)`, `datetime`,
-- `tinyint(1)`, `enum`, `text`), keys and foreign keys (no `ON DELETE` but the deployable
-- tree's `CASCADE`). Tables take the database's default character set, as Cyborg's do.
-- Checked against a database `cyborg-dbsync` made (apps/accel/cyborg17/tests/schema.rs).

CREATE TABLE `alembic_version` (
  `version_num` varchar(32) NOT NULL,
  PRIMARY KEY (`version_num`)
) ENGINE=InnoDB;

CREATE TABLE `devices` (
  `created_at` datetime DEFAULT NULL,
  `updated_at` datetime DEFAULT NULL,
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `uuid` varchar(36) NOT NULL,
  `type` enum('GPU','FPGA','AICHIP','QAT','NIC','SSD','MDEV','PCI','NVME') NOT NULL,
  `vendor` varchar(255) NOT NULL,
  `model` varchar(255) NOT NULL,
  `std_board_info` text DEFAULT NULL,
  `vendor_board_info` text DEFAULT NULL,
  `hostname` varchar(255) NOT NULL,
  `status` enum('enabled','maintaining') NOT NULL,
  `device_state` enum('available','allocated','pending_cleaning','cleaning','error') DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uuid` (`uuid`)
) ENGINE=InnoDB;

CREATE TABLE `controlpath_ids` (
  `created_at` datetime DEFAULT NULL,
  `updated_at` datetime DEFAULT NULL,
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `uuid` varchar(36) NOT NULL,
  `device_id` int(11) NOT NULL,
  `cpid_type` enum('PCI') NOT NULL,
  `cpid_info` varchar(255) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uuid` (`uuid`),
  KEY `ix_controlpath_ids_device_id` (`device_id`),
  CONSTRAINT `controlpath_ids_ibfk_1` FOREIGN KEY (`device_id`) REFERENCES `devices` (`id`)
) ENGINE=InnoDB;

CREATE TABLE `deployables` (
  `created_at` datetime DEFAULT NULL,
  `updated_at` datetime DEFAULT NULL,
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `uuid` varchar(36) NOT NULL,
  `parent_id` int(11) DEFAULT NULL,
  `root_id` int(11) DEFAULT NULL,
  `name` varchar(255) NOT NULL,
  `num_accelerators` int(11) NOT NULL,
  `device_id` int(11) NOT NULL,
  `rp_uuid` varchar(36) DEFAULT NULL,
  `driver_name` varchar(100) DEFAULT NULL,
  `bitstream_id` varchar(36) DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uuid` (`uuid`),
  KEY `deployables_root_id_idx` (`root_id`),
  KEY `deployables_parent_id_idx` (`parent_id`),
  KEY `deployables_device_id_idx` (`device_id`),
  CONSTRAINT `deployables_ibfk_1` FOREIGN KEY (`parent_id`) REFERENCES `deployables` (`id`) ON DELETE CASCADE,
  CONSTRAINT `deployables_ibfk_2` FOREIGN KEY (`root_id`) REFERENCES `deployables` (`id`) ON DELETE CASCADE,
  CONSTRAINT `deployables_ibfk_3` FOREIGN KEY (`device_id`) REFERENCES `devices` (`id`)
) ENGINE=InnoDB;

CREATE TABLE `attributes` (
  `created_at` datetime DEFAULT NULL,
  `updated_at` datetime DEFAULT NULL,
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `uuid` varchar(36) NOT NULL,
  `deployable_id` int(11) NOT NULL,
  `key` text NOT NULL,
  `value` text NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uuid` (`uuid`),
  KEY `ix_attributes_deployable_id` (`deployable_id`),
  CONSTRAINT `attributes_ibfk_1` FOREIGN KEY (`deployable_id`) REFERENCES `deployables` (`id`)
) ENGINE=InnoDB;

CREATE TABLE `attach_handles` (
  `created_at` datetime DEFAULT NULL,
  `updated_at` datetime DEFAULT NULL,
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `uuid` varchar(36) NOT NULL,
  `deployable_id` int(11) NOT NULL,
  `cpid_id` int(11) NOT NULL,
  `in_use` tinyint(1) DEFAULT NULL,
  `attach_type` enum('PCI','MDEV','TEST_PCI') NOT NULL,
  `attach_info` varchar(255) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uuid` (`uuid`),
  KEY `attach_handles_cpid_id_idx` (`cpid_id`),
  KEY `attach_handles_deployable_id_idx` (`deployable_id`),
  CONSTRAINT `attach_handles_ibfk_1` FOREIGN KEY (`deployable_id`) REFERENCES `deployables` (`id`),
  CONSTRAINT `attach_handles_ibfk_2` FOREIGN KEY (`cpid_id`) REFERENCES `controlpath_ids` (`id`)
) ENGINE=InnoDB;

CREATE TABLE `device_profiles` (
  `created_at` datetime DEFAULT NULL,
  `updated_at` datetime DEFAULT NULL,
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `uuid` varchar(36) NOT NULL,
  `name` varchar(255) NOT NULL,
  `profile_json` text NOT NULL,
  `description` text DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uniq_device_profiles0uuid` (`uuid`),
  UNIQUE KEY `uniq_device_profiles0name` (`name`)
) ENGINE=InnoDB;

CREATE TABLE `extended_accelerator_requests` (
  `created_at` datetime DEFAULT NULL,
  `updated_at` datetime DEFAULT NULL,
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `uuid` varchar(36) NOT NULL,
  `project_id` varchar(255) DEFAULT NULL,
  `state` enum('Initial','BindStarted','Bound','Unbound','BindFailed','Deleting') NOT NULL,
  `device_profile_id` int(11) NOT NULL,
  `hostname` varchar(255) DEFAULT NULL,
  `device_rp_uuid` varchar(36) DEFAULT NULL,
  `attach_handle_id` int(11) DEFAULT NULL,
  `substate` enum('Initial') NOT NULL,
  `deployable_id` int(11) DEFAULT NULL,
  `device_profile_group_id` int(11) NOT NULL,
  `instance_uuid` varchar(36) DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uuid` (`uuid`),
  KEY `extArqs_device_profile_id_idx` (`device_profile_id`),
  KEY `extArqs_deployable_id_idx` (`deployable_id`),
  KEY `extArqs_device_rp_uuid_idx` (`device_rp_uuid`),
  KEY `extArqs_project_id_idx` (`project_id`),
  KEY `extArqs_attach_handle_id_idx` (`attach_handle_id`),
  KEY `extArqs_instance_uuid_idx` (`instance_uuid`),
  CONSTRAINT `extended_accelerator_requests_ibfk_1` FOREIGN KEY (`device_profile_id`) REFERENCES `device_profiles` (`id`),
  CONSTRAINT `extended_accelerator_requests_ibfk_2` FOREIGN KEY (`attach_handle_id`) REFERENCES `attach_handles` (`id`),
  CONSTRAINT `extended_accelerator_requests_ibfk_3` FOREIGN KEY (`deployable_id`) REFERENCES `deployables` (`id`)
) ENGINE=InnoDB;

CREATE TABLE `quota_usages` (
  `created_at` datetime DEFAULT NULL,
  `updated_at` datetime DEFAULT NULL,
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `project_id` varchar(255) DEFAULT NULL,
  `user_id` varchar(255) DEFAULT NULL,
  `resource` varchar(255) NOT NULL,
  `in_use` int(11) NOT NULL,
  `reserved` int(11) NOT NULL,
  `until_refresh` int(11) DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `ix_quota_usages_project_id` (`project_id`),
  KEY `ix_quota_usages_user_id` (`user_id`)
) ENGINE=InnoDB;

CREATE TABLE `reservations` (
  `created_at` datetime DEFAULT NULL,
  `updated_at` datetime DEFAULT NULL,
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `uuid` varchar(36) NOT NULL,
  `usage_id` int(11) NOT NULL,
  `project_id` varchar(255) DEFAULT NULL,
  `user_id` varchar(255) DEFAULT NULL,
  `resource` varchar(255) DEFAULT NULL,
  `delta` int(11) NOT NULL,
  `expire` datetime DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `usage_id` (`usage_id`),
  KEY `ix_reservations_project_id` (`project_id`),
  KEY `ix_reservations_user_id` (`user_id`),
  KEY `reservations_uuid_idx` (`uuid`),
  CONSTRAINT `reservations_ibfk_1` FOREIGN KEY (`usage_id`) REFERENCES `quota_usages` (`id`)
) ENGINE=InnoDB;

INSERT INTO `alembic_version` (`version_num`) VALUES ('b47c8f2d1e3a');
