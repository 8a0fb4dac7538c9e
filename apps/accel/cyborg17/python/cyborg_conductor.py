"""Real Cyborg 17's conductor database, for tests in which the conductor service itself
(`cyborg-conductor` of the pinned openstack-cyborg 17.0.0) serves agents.

    schema --config FILE
        Creates Cyborg's tables in the database of FILE's [database] connection with
        Cyborg's own `create_schema` (its alembic migrations run on MySQL/MariaDB only;
        this is how Cyborg's unit tests make a SQLite database). Prints `schema ready`.

    inventory --config FILE --host H
        What Cyborg's conductor stored of host H, read back through Cyborg's own objects
        (`DriverDevice.list`, the view its report diff works on, and `Device` /
        `Deployable` for the ids it made): prints one JSON line, a list of devices
        {uuid, type, vendor, model, std_board_info, vendor_board_info, cpid_type,
        cpid_info, deployables: [{uuid, name, num_accelerators, driver_name, rp_uuid,
        attributes: {key: value}, handles: [{attach_type, attach_info, in_use}]}]}, in
        control-path order.
"""

import argparse
import json
import logging
import warnings

warnings.filterwarnings("ignore")

from cyborg import context  # noqa: E402
from cyborg.common import service as cyborg_service  # noqa: E402
from cyborg.db.sqlalchemy import migration  # noqa: E402
from cyborg.objects.control_path import ControlpathID  # noqa: E402
from cyborg.objects.deployable import Deployable  # noqa: E402
from cyborg.objects.device import Device  # noqa: E402
from cyborg.objects.driver_objects.driver_device import DriverDevice  # noqa: E402


def setup(config):
    cyborg_service.prepare_service(["cyborg-test-conductor", "--config-file", config])
    logging.getLogger("cyborg").setLevel(logging.WARNING)


def schema(args):
    setup(args.config)
    migration.create_schema()
    print("schema ready", flush=True)


def inventory(args):
    setup(args.config)
    ctx = context.get_admin_context()
    # The stored device of each control path, for its uuid.
    uuids = {}
    for device in Device.get_list_by_hostname(ctx, args.host):
        cpid = ControlpathID.get_by_device_id(ctx, device.id)
        if cpid is not None:
            uuids[cpid.cpid_info] = device.uuid
    out = []
    for d in DriverDevice.list(ctx, args.host):
        deployables = []
        for dep in d.deployable_list:
            stored = Deployable.get_by_name(ctx, dep.name)
            deployables.append(
                {
                    "uuid": stored.uuid,
                    "name": dep.name,
                    "num_accelerators": dep.num_accelerators,
                    "driver_name": stored.driver_name,
                    "rp_uuid": stored.rp_uuid,
                    "attributes": {a.key: a.value for a in dep.attribute_list},
                    "handles": sorted(
                        (
                            {
                                "attach_type": h.attach_type,
                                "attach_info": h.attach_info,
                                "in_use": h.in_use,
                            }
                            for h in dep.attach_handle_list
                        ),
                        key=lambda h: h["attach_info"],
                    ),
                }
            )
        out.append(
            {
                "uuid": uuids.get(d.controlpath_id.cpid_info),
                "type": d.type,
                "vendor": d.vendor,
                "model": d.model,
                "std_board_info": d.std_board_info,
                "vendor_board_info": d.vendor_board_info,
                "cpid_type": d.controlpath_id.cpid_type,
                "cpid_info": d.controlpath_id.cpid_info,
                "deployables": deployables,
            }
        )
    out.sort(key=lambda d: d["cpid_info"])
    print(json.dumps(out), flush=True)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("schema")
    p.add_argument("--config", required=True)
    p = sub.add_parser("inventory")
    p.add_argument("--config", required=True)
    p.add_argument("--host", required=True)
    args = parser.parse_args()
    {"schema": schema, "inventory": inventory}[args.mode](args)


if __name__ == "__main__":
    main()
