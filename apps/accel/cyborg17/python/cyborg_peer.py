"""Cyborg 17's own code on one side of report_data, for accel-cyborg17's wire tests.

    send  --transport-url URL --topic T --host H [--with-nic]
        What a real Cyborg 17 agent sends: Cyborg's fake driver discovers its device
        (FakeDriver.discover(), as the agent's ResourceTracker calls it) and Cyborg's
        ConductorAPI sends report_data through Cyborg's serializer and oslo.messaging on
        exchange `cyborg`. With --with-nic the report also has an SR-IOV NIC whose two
        virtual functions are deployables of their own, as Cyborg's Intel NIC driver
        reports them (cyborg_devices.py). Prints `sent <json list of primitives>`, then
        `reply <json>`.

    agent --transport-url URL --host H --method M [--pci P --type T --uuid U]
        Cyborg 17's own agent client (cyborg.agent.rpcapi.AgentAPI, as Cyborg's conductor
        calls a host's agent) calls method M (create_vgpu_mdev, remove_vgpu_mdev or
        fpga_program, whose bitstream is --uuid and FPGA --pci; or cleanup_device of
        device --uuid, the seed spec's NVMe feature at 1.1) on host H. Prints `reply <json>`, or
        `error <exception class> <message>` for a remote error.

    devices --transport-url URL --topic T --host H [--device-version V]
        A Cyborg agent with the seed spec (cyborg_indirection.py) asks the conductor for
        its host's devices: DeviceList.get_by_hostname(context, H) through
        oslo.versionedobjects' remotable class method, i.e. object_class_action_versions
        at conductor RPC 1.1 with the agent's version manifest. With --device-version
        the agent's newest Device class is that version (1.5: Cyborg 17's; 1.4: Cyborg
        16's, before device_state). Prints `list <DeviceList version> <json list of the members'
        obj_to_primitive()>`, or `error <exception class> <message>`.

    handles --transport-url URL --topic T --host H
        The same agent's read of its host's attach handles (AttachHandleList 1.0,
        get_by_hostname). Prints `list <version> <json list of the members' primitives>`.

    set-managed --transport-url URL --topic T --host H --handle U --managed yes|no [--stale]
        The managed-mode feature: reads the host's handles and calls
        AttachHandle.update_managed(managed) on handle U (AttachHandle 1.1, object_action).
        Prints `ok <json primitive of the handle after>` or `error <kind> <message>`.
        With --stale, the handle is read twice first and the second read updated after
        the first: prints two lines.

    cleanup --transport-url URL --topic T --host H --device U --step started|succeeded|failed
            [--reason R] [--retry | --other]
        The NVMe cleanup feature: reads the host's devices and calls Device.cleanup_<step>()
        on device U (Device 1.6, object_action). Prints `ok <json primitive after>` or
        `error <kind> <message>`. With --retry the same call is made again from the
        device as it was read, in the same request context (a retry after a lost reply);
        with --other, from another request context (another runner): two lines.

    serve --transport-url URL --topic T
        A report_data endpoint behind Cyborg's own serializer on exchange `cyborg`: every
        report it receives is turned into Cyborg's objects by Cyborg's code, and printed
        back as `received <host> <json list of obj_to_primitive()>`. Prints `ready`
        once it listens; exits on SIGTERM.
"""

import argparse
import json
import signal
import sys
import threading
import warnings

warnings.filterwarnings("ignore")

import oslo_messaging as messaging  # noqa: E402
from oslo_config import cfg  # noqa: E402

from cyborg import context  # noqa: E402
from cyborg.accelerator.drivers import fake  # noqa: E402
from cyborg.common import rpc  # noqa: E402
from cyborg.common import service as cyborg_service  # noqa: E402
from cyborg.conductor import rpcapi  # noqa: E402
from cyborg.objects import base as objects_base  # noqa: E402
from cyborg.objects.driver_objects import driver_device  # noqa: E402

from cyborg_devices import nic_with_vfs  # noqa: E402


def setup(transport_url):
    # What Cyborg's services do at start: options, logging, the object registry, RPC on
    # exchange `cyborg`.
    cyborg_service.prepare_service(["cyborg-test-peer"])
    cfg.CONF.set_override("transport_url", transport_url)
    rpc.cleanup()
    rpc.init(cfg.CONF)


def send(args):
    if args.fpga_named_after_host:
        # As on the agent's own host: the fake driver names its FPGA after CONF.host.
        from cyborg.conf import CONF

        CONF.set_override("host", args.host)
    devices = fake.FakeDriver().discover()
    if args.with_nic:
        devices.append(nic_with_vfs(args.host))
    print("sent " + json.dumps([d.obj_to_primitive() for d in devices]), flush=True)
    api = rpcapi.ConductorAPI(topic=args.topic)
    reply = api.report_data(context.get_admin_context(), args.host, devices)
    print("reply " + json.dumps(reply), flush=True)


def agent(args):
    from cyborg.agent import rpcapi as agent_rpcapi

    api = agent_rpcapi.AgentAPI()
    ctx = context.get_admin_context()
    try:
        if args.method == "cleanup_device":
            # The NVMe feature's agent RPC 1.1 (cyborg_indirection.AgentAPI): --uuid is
            # the device.
            import cyborg_indirection

            reply = cyborg_indirection.AgentAPI().cleanup_device(ctx, args.host, args.uuid)
        elif args.method == "fpga_program":
            # The control path as Cyborg's API passes it: the row with cpid_info decoded
            # (here from --pci, DDDD:BB:DD.F).
            domain, bus, rest = (args.pci or "0000:00:00.0").split(":")
            device, function = rest.split(".")
            cpid = {
                "cpid_type": "PCI",
                "cpid_info": {"domain": domain, "bus": bus, "device": device, "function": function},
            }
            reply = api.fpga_program(ctx, args.host, cpid, args.uuid, "fake")
        else:
            call = getattr(api, args.method)
            reply = call(ctx, args.host, args.pci, args.type, args.uuid)
    except Exception as e:  # a remote error, as Cyborg's conductor would see it
        cls = type(e)
        # oslo.messaging rebuilds an allowed module's exception as a `<Class>_Remote`
        # subclass of the real class: name the real one.
        if cls.__name__.endswith("_Remote"):
            cls = cls.__mro__[1]
        print("error %s.%s %s" % (cls.__module__, cls.__name__, e), flush=True)
        return
    print("reply " + json.dumps(reply), flush=True)


def devices(args):
    import cyborg_indirection

    if args.device_version:
        # An older agent: its newest Device (the one its manifest names) is that version.
        cyborg_indirection.Device.VERSION = args.device_version
    cyborg_indirection.enable(args.topic)
    try:
        found = cyborg_indirection.DeviceList.get_by_hostname(
            context.get_admin_context(), args.host
        )
    except Exception as e:
        print("error %s %s" % (type(e).__name__, e), flush=True)
        return
    members = [d.obj_to_primitive() for d in found]
    print("list %s %s" % (found.VERSION, json.dumps(members)), flush=True)


def _error(e):
    # A remote error oslo.messaging could not rebuild names its kind in exc_type.
    kind = getattr(e, "exc_type", None) or type(e).__name__
    value = getattr(e, "value", None) or str(e)
    return "error %s %s" % (kind, value.splitlines()[0] if value else "")


def handles(args):
    import cyborg_indirection

    cyborg_indirection.enable(args.topic)
    found = cyborg_indirection.AttachHandleList.get_by_hostname(
        context.get_admin_context(), args.host
    )
    members = [h.obj_to_primitive() for h in found]
    print("list %s %s" % (found.VERSION, json.dumps(members)), flush=True)


def set_managed(args):
    import cyborg_indirection

    cyborg_indirection.enable(args.topic)
    ctx = context.get_admin_context()
    managed = args.managed == "yes"

    def read():
        found = cyborg_indirection.AttachHandleList.get_by_hostname(ctx, args.host)
        for h in found:
            if str(h.uuid) == args.handle:
                return h
        raise SystemExit("handle %s is not on %s" % (args.handle, args.host))

    reads = [read(), read()] if args.stale else [read()]
    for h in reads:
        try:
            h.update_managed(managed)
            print("ok " + json.dumps(h.obj_to_primitive()), flush=True)
        except Exception as e:
            print(_error(e), flush=True)


def cleanup(args):
    import cyborg_indirection

    cyborg_indirection.enable(args.topic)
    ctx = context.get_admin_context()
    found = cyborg_indirection.DeviceList.get_by_hostname(ctx, args.host)
    device = next((d for d in found if str(d.uuid) == args.device), None)
    if device is None:
        raise SystemExit("device %s is not on %s" % (args.device, args.host))
    calls = [device]
    if args.retry or args.other:
        again = device.obj_clone()
        if args.other:
            again._context = context.get_admin_context()
        calls.append(again)
    for d in calls:
        step = getattr(d, "cleanup_" + args.step)
        try:
            step(args.reason) if args.step == "failed" else step()
            print("ok " + json.dumps(d.obj_to_primitive()), flush=True)
        except Exception as e:
            print(_error(e), flush=True)


class Conductor:
    target = messaging.Target(version="1.0")

    def report_data(self, context, hostname, driver_device_list):
        for d in driver_device_list:
            if not isinstance(d, driver_device.DriverDevice):
                raise TypeError("not a DriverDevice: %r" % (d,))
        body = json.dumps([d.obj_to_primitive() for d in driver_device_list])
        print("received %s %s" % (hostname, body), flush=True)


def serve(args):
    serializer = rpc.RequestContextSerializer(objects_base.CyborgObjectSerializer())
    server = messaging.get_rpc_server(
        rpc.TRANSPORT,
        messaging.Target(topic=args.topic, server="peer"),
        [Conductor()],
        executor="threading",
        serializer=serializer,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    print("ready", flush=True)
    stop.wait()
    server.stop()
    server.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["send", "serve", "agent", "devices", "handles", "set-managed", "cleanup"])
    parser.add_argument("--transport-url", required=True)
    parser.add_argument("--topic", default="cyborg-conductor")
    parser.add_argument("--host", default="cyborg-host")
    parser.add_argument("--method")
    parser.add_argument("--pci")
    parser.add_argument("--type")
    parser.add_argument("--uuid")
    parser.add_argument("--with-nic", action="store_true")
    parser.add_argument("--fpga-named-after-host", action="store_true")
    parser.add_argument("--device-version")
    parser.add_argument("--handle")
    parser.add_argument("--managed", choices=["yes", "no"])
    parser.add_argument("--stale", action="store_true")
    parser.add_argument("--device")
    parser.add_argument("--step", choices=["started", "succeeded", "failed"])
    parser.add_argument("--reason", default="")
    parser.add_argument("--retry", action="store_true")
    parser.add_argument("--other", action="store_true")
    args = parser.parse_args()
    setup(args.transport_url)
    if args.mode == "send":
        send(args)
    elif args.mode == "agent":
        agent(args)
    elif args.mode == "devices":
        devices(args)
    elif args.mode == "handles":
        handles(args)
    elif args.mode == "set-managed":
        set_managed(args)
    elif args.mode == "cleanup":
        cleanup(args)
    else:
        serve(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
