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

    fill --config FILE --host H [--host H2 ...]
        Fills the database the way a running Cyborg 17 deployment does, through Cyborg's
        own code in this process: its conductor's `report_data` of Cyborg's FakeDriver
        discovery on each host (one FPGA with 16 `TEST_PCI` handles), and on the first
        host also an SR-IOV NIC whose two virtual functions are deployables of their own
        (as Cyborg's Intel NIC driver reports them; the providers go to
        the real Placement of FILE's [placement], under each host's compute node, which
        must exist), `device_profile_create` of three profiles (two of FPGAs, one of a
        NIC virtual function), `arq_create` of their requests as Cyborg's API makes them
        (one per unit), binds of one FPGA request on the first host, one on the last and
        the NIC's request to its second virtual function (Cyborg's `start_bind_job`,
        which allocates the attach handle; Nova is not told) and the last host's FPGA
        put in maintenance.
        Prints `filled`.

    dump --config FILE
        Everything the database holds, read through Cyborg's own objects: one JSON line
        {devices, profiles, arqs}, each list sorted by UUID. Devices carry their
        control path and deployables (with attributes and attach handles); requests
        carry their profile's name and the UUID of their attach handle.

    read --config FILE
        What Cyborg's own objects read of the tables accel's schema shares with Cyborg's
        (accel's database, migrations 11 to 13): one JSON line {control_paths,
        deployables, handles, profiles, arqs}, each sorted by UUID, rows named by UUID where
        Cyborg refers to them by id (a handle's deployable and control path, a
        deployable's attributes by key). Times are left out.

    reports --host H
        A sequence of reports of host H, each the list of `DriverDevice` primitives a
        Cyborg agent sends in `report_data` (built with Cyborg's own driver objects and
        FakeDriver): one JSON line, a list of {"what": ..., "devices": [...]}. In order: a
        fake FPGA and an SR-IOV NIC; the same again; board info, accelerators, handles,
        traits and a resource class changed and a virtual function swapped; the FPGA gone,
        a GPU new and the NIC a `stub`; a device Placement refuses (no `rc`) and the NIC
        gone; nothing.

    report --config FILE --host H --file REPORT
        Cyborg 17's own conductor (`ConductorManager.report_data`, in this process, on
        FILE's database and Placement) applies the report in REPORT (a JSON list of
        `DriverDevice` primitives) for host H. Prints `reported`.

    snapshot --config FILE --host H
        Host H's rows as Cyborg's database API reads them (no healing on read): one JSON
        line {devices, counts}; devices sorted by control path, each with its status,
        device_state, control path count, and its deployables (by name) with their
        provider, attributes (sorted) and handles (by attach info, with whether the
        handle's control path is its device's), and whether each row was ever updated;
        counts are the rows of each inventory table, whoever's.

    requests --config FILE --host H [--topic T]
        Cyborg 17's API's calls of its conductor, made as the API makes them: profiles
        created (one a duplicate name), requests created per unit, one bound through
        Cyborg's own `start_bind_job` (the FPGA of host H, stored first with Cyborg's
        `DriverDevice.create`), requests deleted by UUID (a bound one, a missing one) and
        by instance, a profile deleted (and a missing one). Without --topic the calls go
        to Cyborg's `ConductorManager` in this process; with it, over RabbitMQ (FILE's
        transport_url, exchange `cyborg`) through Cyborg's `ConductorAPI` to the
        conductor serving topic T. Prints one JSON line {calls, profiles, arqs, handles}:
        each call's reply (objects as Cyborg's client rebuilt them) or exception class,
        then what the database holds, read by Cyborg's objects; UUIDs, ids and times as
        whether they are set.
"""

import argparse
import json
import logging
import sys
import warnings

warnings.filterwarnings("ignore")

from cyborg import context  # noqa: E402
from cyborg.common import service as cyborg_service  # noqa: E402
from cyborg.accelerator.drivers.fake import FakeDriver  # noqa: E402
from cyborg.conductor import manager  # noqa: E402
from cyborg.conf import CONF  # noqa: E402
from cyborg.db.sqlalchemy import migration  # noqa: E402
from cyborg import objects  # noqa: E402
from cyborg.objects.attach_handle import AttachHandle  # noqa: E402
from cyborg.objects.attribute import Attribute  # noqa: E402
from cyborg.objects.control_path import ControlpathID  # noqa: E402
from cyborg.objects.deployable import Deployable  # noqa: E402
from cyborg.objects.device import Device  # noqa: E402
from cyborg.objects.driver_objects.driver_device import DriverDevice  # noqa: E402

from cyborg_devices import nic_with_vfs  # noqa: E402
from cyborg.db import api as cyborg_dbapi  # noqa: E402
from cyborg.db.sqlalchemy import api as sqlalchemy_api  # noqa: E402
from cyborg.db.sqlalchemy import models  # noqa: E402
from cyborg.objects.driver_objects.driver_attach_handle import DriverAttachHandle  # noqa: E402
from cyborg.objects.driver_objects.driver_attribute import DriverAttribute  # noqa: E402
from cyborg.objects.driver_objects.driver_controlpath_id import DriverControlPathID  # noqa: E402
from cyborg.objects.driver_objects.driver_deployable import DriverDeployable  # noqa: E402
from cyborg.accelerator.common import utils as accel_utils  # noqa: E402


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
            # Cyborg's conductor deletes a device row by row, each in a transaction of its
            # own: read while it does, a deployable can be gone already. It shows with no
            # stored fields (a reader polling for a settled inventory reads again).
            stored = Deployable.get_by_name(ctx, dep.name)
            deployables.append(
                {
                    "uuid": getattr(stored, "uuid", None),
                    "name": dep.name,
                    "num_accelerators": dep.num_accelerators,
                    "driver_name": getattr(stored, "driver_name", None),
                    "rp_uuid": getattr(stored, "rp_uuid", None),
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


def of_type(devices, device_type):
    return next(d for d in devices if d.type == device_type)


def fill(args):
    setup(args.config)
    ctx = context.get_admin_context()
    conductor = manager.ConductorManager("cyborg-conductor", args.host[0])
    for host in args.host:
        # The fake driver names its deployable after CONF.host, as an agent on that
        # host would.
        CONF.set_override("host", host)
        devices = FakeDriver().discover()
        if host == args.host[0]:
            devices.append(nic_with_vfs(host))
        conductor.report_data(ctx, host, devices)
    profiles = [
        objects.DeviceProfile(
            ctx,
            name="fpga-fake",
            groups=[{"resources:FPGA": "1", "trait:CUSTOM_FAKE_DEVICE": "required"}],
            description="one fake FPGA",
        ),
        objects.DeviceProfile(ctx, name="fpga-pair", groups=[{"resources:FPGA": "2"}]),
        objects.DeviceProfile(
            ctx, name="nic-vf", groups=[{"resources:CUSTOM_NIC": "1"}]
        ),
    ]
    arqs = []
    for profile in profiles:
        profile = conductor.device_profile_create(ctx, profile)
        # As Cyborg's API creates them: per group, one request per unit asked for.
        for group_id, group in enumerate(profile.groups):
            units = sum(int(v) for k, v in group.items() if k.startswith("resources"))
            for _ in range(units):
                arq = objects.ARQ(
                    ctx,
                    device_profile_name=profile.name,
                    device_profile_group_id=group_id,
                    project_id="b8f4c9a1d2e34f5a8b6c7d8e9f0a1b2c",
                )
                extarq = objects.ExtARQ(ctx, arq=arq)
                arqs.append(conductor.arq_create(ctx, extarq, profile.id))
    # Bind the first request on the first host's FPGA, the second on the last host's,
    # and the NIC's request to the NIC's second virtual function.
    for extarq, host, device_type, vf, instance in (
        (arqs[0], args.host[0], "FPGA", 0, "5f1c7e3a-9b2d-4c6e-8a0f-1d3b5c7e9a20"),
        (arqs[1], args.host[-1], "FPGA", 0, "7a2d4f6b-8c0e-4a1b-9c3d-5e7f9a1b3c40"),
        (arqs[-1], args.host[0], "NIC", 1, "9c4e6a8b-0d2f-4b3c-8e5f-7a9b1c3d5e60"),
    ):
        device = of_type(Device.get_list_by_hostname(ctx, host), device_type)
        deps = Deployable.get_list_by_device_id(ctx, device.id)
        dep = sorted(deps, key=lambda d: d.name)[vf]
        uuid = extarq.arq.uuid
        found = objects.ExtARQ.get_suitable_ext_arq(ctx, uuid)
        found.start_bind_job(
            ctx,
            {
                uuid: {
                    "hostname": host,
                    "device_rp_uuid": dep.rp_uuid,
                    "instance_uuid": instance,
                    # What Cyborg's API passes from a bind at microversion 2.1.
                    "project_id": extarq.arq.project_id,
                }
            },
        )
    device = of_type(Device.get_list_by_hostname(ctx, args.host[-1]), "FPGA")
    device.status = "maintaining"
    device.save(ctx)
    print("filled", flush=True)


def dump(args):
    setup(args.config)
    ctx = context.get_admin_context()
    handles_by_id = {}
    devices = []
    cpid_uuids = {c.id: c.uuid for c in ControlpathID.list(ctx)}
    for device in Device.list(ctx):
        cpid = ControlpathID.get_by_device_id(ctx, device.id)
        deployables = []
        for dep in Deployable.get_list_by_device_id(ctx, device.id):
            handles = []
            for h in AttachHandle.list(ctx, filters={"deployable_id": dep.id}):
                handles_by_id[h.id] = h.uuid
                handles.append(
                    {
                        "uuid": h.uuid,
                        "attach_type": h.attach_type,
                        "attach_info": h.attach_info,
                        "in_use": h.in_use,
                        "cpid_uuid": cpid_uuids.get(h.cpid_id),
                    }
                )
            deployables.append(
                {
                    "uuid": dep.uuid,
                    "name": dep.name,
                    "num_accelerators": dep.num_accelerators,
                    "driver_name": dep.driver_name,
                    "rp_uuid": dep.rp_uuid,
                    "attributes": {
                        a.key: a.value
                        for a in Attribute.get_by_deployable_id(ctx, dep.id)
                    },
                    "handles": sorted(handles, key=lambda h: h["uuid"]),
                }
            )
        devices.append(
            {
                "uuid": device.uuid,
                "hostname": device.hostname,
                "type": device.type,
                "vendor": device.vendor,
                "model": device.model,
                "std_board_info": device.std_board_info,
                "vendor_board_info": device.vendor_board_info,
                "status": device.status,
                "cpid_info": cpid.cpid_info if cpid is not None else None,
                "cpid_uuid": cpid.uuid if cpid is not None else None,
                "deployables": deployables,
            }
        )
    profiles = [
        {
            "uuid": p.uuid,
            "name": p.name,
            "groups": p.groups,
            "description": p.description,
        }
        for p in objects.DeviceProfile.list(ctx)
    ]
    arqs = []
    for extarq in objects.ExtARQ.list(ctx):
        arq = extarq.arq
        arqs.append(
            {
                "uuid": arq.uuid,
                "state": arq.state,
                "device_profile_name": arq.device_profile_name,
                "device_profile_group_id": arq.device_profile_group_id,
                "hostname": arq.hostname,
                "device_rp_uuid": arq.device_rp_uuid,
                "instance_uuid": arq.instance_uuid,
                "project_id": arq.project_id,
                "attach_handle_uuid": handles_by_id.get(extarq.attach_handle_id),
            }
        )
    by_uuid = lambda x: x["uuid"]  # noqa: E731
    out = {
        "devices": sorted(devices, key=by_uuid),
        "profiles": sorted(profiles, key=by_uuid),
        "arqs": sorted(arqs, key=by_uuid),
    }
    print(json.dumps(out), flush=True)


def read(args):
    setup(args.config)
    ctx = context.get_admin_context()
    by_uuid = lambda x: x["uuid"]  # noqa: E731
    paths = ControlpathID.list(ctx)
    path_uuids = {c.id: c.uuid for c in paths}
    deployables = Deployable.list(ctx)
    dep_uuids = {d.id: d.uuid for d in deployables}
    out = {
        "control_paths": sorted(
            (
                {
                    "uuid": c.uuid,
                    "device_id": c.device_id,
                    "cpid_type": c.cpid_type,
                    "cpid_info": c.cpid_info,
                }
                for c in paths
            ),
            key=by_uuid,
        ),
        "deployables": sorted(
            (
                {
                    "uuid": d.uuid,
                    "name": d.name,
                    "device_id": d.device_id,
                    "num_accelerators": d.num_accelerators,
                    "driver_name": d.driver_name,
                    "rp_uuid": d.rp_uuid,
                    "parent_id": d.parent_id,
                    "root_id": d.root_id,
                    "bitstream_id": d.bitstream_id,
                    "attributes": {
                        a.key: a.value
                        for a in Attribute.get_by_deployable_id(ctx, d.id)
                    },
                }
                for d in deployables
            ),
            key=by_uuid,
        ),
        "handles": sorted(
            (
                {
                    "uuid": h.uuid,
                    "deployable_uuid": dep_uuids.get(h.deployable_id),
                    "cpid_uuid": path_uuids.get(h.cpid_id),
                    "in_use": h.in_use,
                    "attach_type": h.attach_type,
                    "attach_info": h.attach_info,
                }
                for h in AttachHandle.list(ctx)
            ),
            key=by_uuid,
        ),
        "profiles": sorted(
            (
                {
                    "uuid": p.uuid,
                    "name": p.name,
                    "groups": p.groups,
                    "description": p.description,
                }
                for p in objects.DeviceProfile.list(ctx)
            ),
            key=by_uuid,
        ),
        "arqs": sorted(
            (
                {
                    "uuid": e.arq.uuid,
                    "state": e.arq.state,
                    "device_profile_name": e.arq.device_profile_name,
                    "device_profile_group_id": e.arq.device_profile_group_id,
                    "device_profile_group": e.device_profile_group,
                    "hostname": e.arq.hostname,
                    "device_rp_uuid": e.arq.device_rp_uuid,
                    "instance_uuid": e.arq.instance_uuid,
                    "project_id": e.arq.project_id,
                    "attach_handle_uuid": e.arq.attach_handle_uuid,
                    "substate": e.substate,
                    "deployable_uuid": e.deployable_uuid,
                }
                for e in objects.ExtARQ.list(ctx)
            ),
            key=by_uuid,
        ),
    }
    print(json.dumps(out), flush=True)


def reports(args):
    # The fake driver names its deployable after CONF.host.
    CONF.set_override("host", args.host)
    host = args.host

    def fpga():
        return FakeDriver().discover()[0]

    def attr(key, value):
        return DriverAttribute(key=key, value=value)

    def gpu(with_rc=True, address="0000:af:00.0"):
        attributes = [attr("trait0", "CUSTOM_GPU_NVIDIA")]
        if with_rc:
            attributes.append(attr("rc", "PGPU"))
        return DriverDevice(
            vendor="10de",
            model="1eb8",
            type="GPU",
            std_board_info=json.dumps({"device_id": "0x1eb8", "class": "Fake GPU"}),
            vendor_board_info=None,
            stub=False,
            controlpath_id=DriverControlPathID(
                cpid_type="PCI", cpid_info=accel_utils.pci_str_to_json(address)
            ),
            deployable_list=[
                DriverDeployable(
                    name="%s_gpu_%s" % (host, address.replace(":", "_").replace(".", "_")),
                    num_accelerators=1,
                    driver_name="nvidia",
                    attach_handle_list=[
                        DriverAttachHandle(
                            attach_type="PCI",
                            attach_info=accel_utils.pci_str_to_json(address),
                            in_use=False,
                        )
                    ],
                    attribute_list=attributes,
                )
            ],
        )

    first = [fpga(), nic_with_vfs(host)]

    changed_fpga = fpga()
    changed_fpga.vendor_board_info = "fake_vendor_info_2"
    dep = changed_fpga.deployable_list[0]
    dep.num_accelerators = 8
    # Keeps the 8 oldest handles and changes the newest kept one: Cyborg 17 finds a
    # deployable's handle "by attach_info" through a filter that drops attach_info, so
    # it deletes and updates the deployable's newest handles whatever the report names;
    # on these handles that is the one named (tests/differential.rs shows where not).
    dep.attach_handle_list = dep.attach_handle_list[:8]
    dep.attach_handle_list[7].attach_type = "PCI"
    dep.attribute_list = [
        attr("traits1", "CUSTOM_FAKE_DEVICE_V2"),
        attr("rc", "FPGA"),
        attr("traits2", "CUSTOM_FAKE_REGION_A"),
    ]
    changed_nic = nic_with_vfs(host)
    vf1, vf2 = changed_nic.deployable_list
    vf1.attribute_list = [attr("rc", "CUSTOM_NIC_V2"), attr("trait0", "CUSTOM_PHYSNET_PHYSNET3")]
    vf3 = nic_with_vfs(host).deployable_list[1]
    vf3.name = "%s_nic_vf3" % host
    vf3.attach_handle_list[0].attach_info = accel_utils.pci_str_to_json(
        "0000:5e:00.3", "physnet3"
    )
    changed_nic.deployable_list = [vf1, vf3]

    stub_nic = nic_with_vfs(host)
    stub_nic.stub = True
    stub_nic.deployable_list = []

    sequence = [
        ("a fake FPGA and an SR-IOV NIC", first),
        ("the same again", [fpga(), nic_with_vfs(host)]),
        ("fields, accelerators, handles, traits, a class and a VF changed", [changed_fpga, changed_nic]),
        ("the FPGA gone, a GPU new, the NIC a stub", [gpu(), stub_nic]),
        ("a device Placement refuses, the NIC gone", [gpu(), gpu(with_rc=False, address="0000:b0:00.0")]),
        ("nothing", []),
    ]
    out = [
        {"what": what, "devices": [d.obj_to_primitive() for d in devices]}
        for what, devices in sequence
    ]
    print(json.dumps(out), flush=True)


def report(args):
    setup(args.config)
    ctx = context.get_admin_context()
    with open(args.file) as f:
        primitives = json.load(f)
    devices = [DriverDevice.obj_from_primitive(p) for p in primitives]
    conductor = manager.ConductorManager("cyborg-conductor", args.host)
    conductor.report_data(ctx, args.host, devices)
    print("reported", flush=True)


def snapshot(args):
    setup(args.config)
    ctx = context.get_admin_context()
    api = cyborg_dbapi.get_instance()
    devices = []
    for d in api.device_list_by_filters(ctx, {"hostname": args.host}):
        cpids = api.control_path_get_by_filters(ctx, {"device_id": d.id})
        cpid_ids = {c.id for c in cpids}
        deployables = []
        for dep in api.deployable_get_by_filters(ctx, {"device_id": d.id}):
            attributes = sorted(
                [a.key, a.value] for a in api.attribute_get_by_deployable_id(ctx, dep.id)
            )
            handles = sorted(
                (
                    {
                        "attach_type": h.attach_type,
                        "attach_info": h.attach_info,
                        "in_use": h.in_use,
                        "cpid_is_devices": h.cpid_id in cpid_ids,
                        "updated": h.updated_at is not None,
                    }
                    for h in api.attach_handle_get_by_filters(ctx, {"deployable_id": dep.id})
                ),
                key=lambda h: h["attach_info"],
            )
            deployables.append(
                {
                    "name": dep.name,
                    "num_accelerators": dep.num_accelerators,
                    "driver_name": dep.driver_name,
                    "rp_uuid": dep.rp_uuid,
                    "parent_id": dep.parent_id,
                    "root_id": dep.root_id,
                    "bitstream_id": dep.bitstream_id,
                    "updated": dep.updated_at is not None,
                    "attributes": attributes,
                    "handles": handles,
                }
            )
        deployables.sort(key=lambda x: x["name"])
        devices.append(
            {
                "type": d.type,
                "vendor": d.vendor,
                "model": d.model,
                "std_board_info": d.std_board_info,
                "vendor_board_info": d.vendor_board_info,
                "status": d.status,
                "device_state": d.device_state,
                "updated": d.updated_at is not None,
                "control_paths": sorted([c.cpid_type, c.cpid_info] for c in cpids),
                "deployables": deployables,
            }
        )
    devices.sort(key=lambda x: x["control_paths"])
    counts = {}
    with sqlalchemy_api.main_context_manager.reader.using(ctx) as session:
        for name, model in (
            ("devices", models.Device),
            ("controlpath_ids", models.ControlpathID),
            ("deployables", models.Deployable),
            ("attributes", models.Attribute),
            ("attach_handles", models.AttachHandle),
        ):
            counts[name] = session.query(model).count()
    print(json.dumps({"devices": devices, "counts": counts}), flush=True)


def requests(args):
    setup(args.config)
    ctx = context.get_admin_context()
    if args.topic:
        from cyborg.common import rpc
        from cyborg.conductor import rpcapi

        rpc.init(CONF)
        conductor = rpcapi.ConductorAPI(topic=args.topic)
    else:
        conductor = manager.ConductorManager.__new__(manager.ConductorManager)

    def shape(value):
        """An object's fields as Cyborg's client sees them, with what differs run to run
        (UUIDs, ids, times) only as whether it is set."""
        if hasattr(value, "fields") and hasattr(value, "obj_attr_is_set"):
            out = {}
            for name in sorted(value.fields):
                if not value.obj_attr_is_set(name):
                    out[name] = "<unset>"
                    continue
                v = getattr(value, name)
                if name in ("id", "uuid", "created_at", "updated_at", "attach_handle_id",
                            "deployable_id", "attach_handle_uuid"):
                    out[name] = v is not None
                else:
                    out[name] = shape(v)
            return {value.obj_name(): out}
        if isinstance(value, dict):
            return {k: shape(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [shape(v) for v in value]
        return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)

    calls = []

    def call(what, fn, *a):
        try:
            reply = fn(ctx, *a)
            calls.append([what, "ok", shape(reply)])
            return reply
        except Exception as e:  # noqa: BLE001 (the class is what is compared)
            # oslo.messaging rebuilds a remote exception as a subclass of Cyborg's own
            # named `<class>_Remote`.
            name = type(e).__name__.removesuffix("_Remote")
            print("call %s raised %s: %s" % (what, name, e), file=sys.stderr, flush=True)
            calls.append([what, "error", name])
            return None

    # The host's FPGA, stored as Cyborg's report would store it, offered under a
    # provider UUID as Cyborg's conductor records it.
    CONF.set_override("host", args.host)
    fpga = FakeDriver().discover()[0]
    fpga.create(ctx, args.host)
    dep = Deployable.get_list_by_device_id(ctx, Device.get_list_by_hostname(ctx, args.host)[0].id)[0]
    dep.rp_uuid = "5d2f3e1a-6b7c-4d8e-9f0a-1b2c3d4e5f60"
    dep.save(ctx)

    project = "b8f4c9a1d2e34f5a8b6c7d8e9f0a1b2c"
    pair = call("device_profile_create", conductor.device_profile_create, objects.DeviceProfile(
        ctx, name="fpga-pair",
        groups=[{"resources:FPGA": "2", "trait:CUSTOM_FAKE_DEVICE": "required"}],
        description="two fake FPGAs"))
    nic = call("device_profile_create", conductor.device_profile_create, objects.DeviceProfile(
        ctx, name="nic-vf", groups=[{"resources:CUSTOM_NIC": "1"}]))
    call("device_profile_create duplicate", conductor.device_profile_create, objects.DeviceProfile(
        ctx, name="fpga-pair", groups=[{"resources:FPGA": "1"}]))
    arqs = []
    for profile in (pair, nic):
        for group_id, group in enumerate(profile.groups):
            units = sum(int(v) for k, v in group.items() if k.startswith("resources"))
            for _ in range(units):
                arq = objects.ARQ(ctx, device_profile_name=profile.name,
                                  device_profile_group_id=group_id, project_id=project)
                arqs.append(call("arq_create", conductor.arq_create,
                                 objects.ExtARQ(ctx, arq=arq), profile.id))
    # Bind the first FPGA request as Cyborg's bind does (no Nova: not its master job).
    instance = "5f1c7e3a-9b2d-4c6e-8a0f-1d3b5c7e9a20"
    first = objects.ExtARQ.get_suitable_ext_arq(ctx, arqs[0].arq.uuid)
    first.start_bind_job(ctx, {first.arq.uuid: {
        "hostname": args.host, "device_rp_uuid": dep.rp_uuid,
        "instance_uuid": instance, "project_id": project}})
    calls.append(["bind", "state", objects.ExtARQ.get(ctx, arqs[0].arq.uuid).arq.state])
    # Binds and unbinds as Cyborg's API sends them (PATCH /v2/accelerator_requests):
    # the second FPGA request bound (Nova told), bound again (refused: not Initial),
    # unbound, bound again; the NIC request to a provider no deployable has.
    second = arqs[1].arq.uuid

    def bind_patch(uuid, rp):
        fields = {"hostname": args.host, "device_rp_uuid": rp, "instance_uuid": instance}
        patch = [{"path": "/" + k, "op": "add", "value": v} for k, v in fields.items()]
        return {uuid: patch}, {uuid: dict(fields, project_id=project)}

    def unbind_patch(uuid):
        return {uuid: [{"path": "/" + k, "op": "remove"}
                       for k in ("hostname", "device_rp_uuid", "instance_uuid")]}, {}

    def state(uuid):
        calls.append(["state", "of", shape(objects.ExtARQ.get(ctx, uuid).arq)])

    call("arq_apply_patch bind", conductor.arq_apply_patch, *bind_patch(second, dep.rp_uuid))
    state(second)
    call("arq_apply_patch bind again", conductor.arq_apply_patch, *bind_patch(second, dep.rp_uuid))
    call("arq_apply_patch unbind", conductor.arq_apply_patch, *unbind_patch(second))
    state(second)
    call("arq_apply_patch rebind", conductor.arq_apply_patch, *bind_patch(second, dep.rp_uuid))
    state(second)
    call("arq_apply_patch nowhere", conductor.arq_apply_patch,
         *bind_patch(arqs[2].arq.uuid, "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"))
    state(arqs[2].arq.uuid)
    missing = "0b7e5c1d-2a3f-4e6d-8c9b-0a1f2e3d4c5b"
    call("arq_delete_by_uuid", conductor.arq_delete_by_uuid,
         ",".join([arqs[0].arq.uuid, missing]))
    call("arq_delete_by_instance_uuid", conductor.arq_delete_by_instance_uuid, instance)
    call("arq_delete_by_uuid nic", conductor.arq_delete_by_uuid, arqs[2].arq.uuid)
    call("device_profile_delete", conductor.device_profile_delete, nic)
    gone = objects.DeviceProfile(ctx, uuid=missing, name="gone", groups=[])
    call("device_profile_delete missing", conductor.device_profile_delete, gone)

    profiles = sorted(
        ({"name": p.name, "groups": p.groups, "description": p.description}
         for p in objects.DeviceProfile.list(ctx)), key=lambda p: p["name"])
    left = sorted((shape(a) for a in objects.ExtARQ.list(ctx)), key=json.dumps)
    handles = sorted([h.attach_info, h.in_use] for h in AttachHandle.list(ctx))
    print(json.dumps({"calls": calls, "profiles": profiles, "arqs": left, "handles": handles}),
          flush=True)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("schema")
    p.add_argument("--config", required=True)
    p = sub.add_parser("inventory")
    p.add_argument("--config", required=True)
    p.add_argument("--host", required=True)
    p = sub.add_parser("fill")
    p.add_argument("--config", required=True)
    p.add_argument("--host", required=True, action="append")
    p = sub.add_parser("dump")
    p.add_argument("--config", required=True)
    p = sub.add_parser("read")
    p.add_argument("--config", required=True)
    p = sub.add_parser("reports")
    p.add_argument("--host", required=True)
    p = sub.add_parser("report")
    p.add_argument("--config", required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--file", required=True)
    p = sub.add_parser("snapshot")
    p.add_argument("--config", required=True)
    p.add_argument("--host", required=True)
    p = sub.add_parser("requests")
    p.add_argument("--config", required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--topic")
    args = parser.parse_args()
    modes = {
        "schema": schema,
        "inventory": inventory,
        "fill": fill,
        "dump": dump,
        "read": read,
        "reports": reports,
        "report": report,
        "snapshot": snapshot,
        "requests": requests,
    }
    try:
        modes[args.mode](args)
    except Exception:
        # oslo.log's excepthook would send the traceback to the log file only.
        import traceback

        traceback.print_exc(file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
