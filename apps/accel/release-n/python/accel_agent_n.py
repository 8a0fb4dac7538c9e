#!/usr/bin/env python3
"""accel's release N agent, written with oslo.versionedobjects and oslo.messaging.

It does what the Rust release N agent (apps/accel/release-n/src/agent.rs) does, over
the same wire, so it can take one release N agent's place in a rolling upgrade:

* keeps its component-version record in STATE_DIR/agent-<host>.version, in the JSON
  format of verso_upgrade's FileStore (component "accel"), so a release N+1 Rust agent
  can take the host over later;
* heartbeats on topic accel-upgrade (`upgrade_heartbeat`, software 1, apparent 1) every
  interval; a `finalize_to` changes nothing for release N (it already runs its newest
  version); a typed `Fenced` refusal prints the reason on stderr and exits 3;
* discovers PCI functions (and NVMe namespaces) in a sysfs tree and sends release N's
  DriverDeviceList 1.0 with `report_data` on topic accel-conductor at conductor API 1.0
  (version cap 1.0) every interval;
* serves agent API 1.0 on topic accel-agent, server = host: `report_now()` -> number of
  devices reported.

It prints `ready` on stdout once it has heartbeated and reported; SIGTERM or SIGINT
stops it (exit 0). Exit 2: it cannot start (bad arguments, a version record release N
cannot run on, no conductor answering the first heartbeat).

    python accel_agent_n.py --transport-url rabbit://guest:guest@127.0.0.1:5672/ \\
        --control-exchange accel --host host1 --sysfs-root /sys \\
        --state-dir /var/lib/accel --report-interval 10

`--fingerprints` prints the OVO fingerprints of release N's classes as JSON and exits
(the tests compare them with apps/accel/release-n/objects.lock).
"""

import argparse
import hashlib
import json
import os
import re
import signal
import sys
import tempfile
import threading
import warnings

warnings.filterwarnings("ignore")  # eventlet's deprecation notice, on every import

import oslo_messaging as messaging  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_versionedobjects import base  # noqa: E402
from oslo_versionedobjects import fields  # noqa: E402

CONDUCTOR_TOPIC = "accel-conductor"
UPGRADE_TOPIC = "accel-upgrade"
AGENT_TOPIC = "accel-agent"
COMPONENT = "accel"
# Release N knows one component version: 1 ("release N").
SOFTWARE = 1

DEVICE_TYPES = ("GPU", "FPGA", "AICHIP", "QAT", "NIC", "SSD")
ATTACH_TYPES = ("PCI", "MDEV", "TEST_PCI")


# --- Release N's objects (namespace cyborg), as apps/accel/release-n/src/objects.rs --------


class CyborgObject(base.VersionedObject):
    OBJ_PROJECT_NAMESPACE = "cyborg"


class CyborgSerializer(base.VersionedObjectSerializer):
    OBJ_BASE_CLASS = CyborgObject


@base.VersionedObjectRegistry.register
class Device(CyborgObject):
    # 1.0 initial; 1.1 vendor_board_info; 1.2 managed_mode.
    VERSION = "1.2"
    fields = {
        "id": fields.IntegerField(),
        "uuid": fields.UUIDField(),
        "type": fields.EnumField(valid_values=DEVICE_TYPES),
        "vendor": fields.StringField(),
        "model": fields.StringField(),
        "std_board_info": fields.StringField(nullable=True),
        "hostname": fields.StringField(),
        "vendor_board_info": fields.StringField(nullable=True),
        "managed_mode": fields.EnumField(valid_values=("managed", "unmanaged"), default="unmanaged"),
        "created_at": fields.DateTimeField(nullable=True),
        "updated_at": fields.DateTimeField(nullable=True),
    }

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        if target_version in ("1.0", "1.1"):
            primitive.pop("managed_mode", None)
        if target_version == "1.0":
            primitive.pop("vendor_board_info", None)


@base.VersionedObjectRegistry.register
class Deployable(CyborgObject):
    # 1.0 initial; 1.1 labels, utilization.
    VERSION = "1.1"
    fields = {
        "id": fields.IntegerField(),
        "uuid": fields.UUIDField(),
        "name": fields.StringField(),
        "device_id": fields.IntegerField(),
        "num_accelerators": fields.IntegerField(),
        "driver_name": fields.StringField(nullable=True),
        "attributes": fields.DictOfStringsField(default={}),
        "enabled": fields.BooleanField(default=True),
        "created_at": fields.DateTimeField(nullable=True),
        "labels": fields.ListOfStringsField(default=[]),
        "utilization": fields.FloatField(default=0.0),
    }


@base.VersionedObjectRegistry.register
class AttachHandle(CyborgObject):
    # 1.0 initial; 1.1 device (Device 1.1); 1.2 Device 1.2.
    VERSION = "1.2"
    fields = {
        "id": fields.IntegerField(),
        "uuid": fields.UUIDField(),
        "deployable_id": fields.IntegerField(),
        "in_use": fields.BooleanField(default=False),
        "attach_type": fields.EnumField(valid_values=ATTACH_TYPES),
        "attach_info": fields.StringField(),
        "device": fields.ObjectField("Device", nullable=True),
    }
    obj_relationships = {"device": [("1.1", "1.1"), ("1.2", "1.2")]}


@base.VersionedObjectRegistry.register
class DeviceProfile(CyborgObject):
    VERSION = "1.0"
    fields = {
        "id": fields.IntegerField(),
        "uuid": fields.UUIDField(),
        "name": fields.StringField(),
        "groups": fields.Field(fields.List(fields.Dict(fields.String()))),
        "description": fields.StringField(nullable=True),
        "created_at": fields.DateTimeField(nullable=True),
    }


@base.VersionedObjectRegistry.register
class AcceleratorRequest(CyborgObject):
    VERSION = "1.0"
    fields = {
        "id": fields.IntegerField(),
        "uuid": fields.UUIDField(),
        "state": fields.StringField(),
        "device_profile_name": fields.StringField(),
        "device_profile_group_id": fields.IntegerField(),
        "hostname": fields.StringField(nullable=True),
        "device_rp_uuid": fields.StringField(nullable=True),
        "instance_uuid": fields.StringField(nullable=True),
        "project_id": fields.StringField(nullable=True),
        "attach_handle_type": fields.StringField(nullable=True),
        "attach_handle_info": fields.StringField(nullable=True),
        "attach_handle_uuid": fields.StringField(nullable=True),
    }


@base.VersionedObjectRegistry.register
class DriverAttachHandle(CyborgObject):
    VERSION = "1.0"
    fields = {
        "attach_type": fields.EnumField(valid_values=ATTACH_TYPES),
        "attach_info": fields.StringField(),
    }


@base.VersionedObjectRegistry.register
class DriverDevice(CyborgObject):
    VERSION = "1.0"
    fields = {
        "control_path_id": fields.StringField(),
        "type": fields.EnumField(valid_values=DEVICE_TYPES),
        "vendor": fields.StringField(),
        "model": fields.StringField(),
        "std_board_info": fields.StringField(nullable=True),
        "driver_name": fields.StringField(nullable=True),
        "attach_handles": fields.ListOfObjectsField("DriverAttachHandle"),
    }
    obj_relationships = {"attach_handles": [("1.0", "1.0")]}


@base.VersionedObjectRegistry.register
class DeviceList(base.ObjectListBase, CyborgObject):
    VERSION = "1.2"
    fields = {"objects": fields.ListOfObjectsField("Device")}
    child_versions = {"1.0": "1.0", "1.1": "1.1", "1.2": "1.2"}


@base.VersionedObjectRegistry.register
class DeployableList(base.ObjectListBase, CyborgObject):
    # No child-version rule (OVO's fallback).
    VERSION = "1.0"
    fields = {"objects": fields.ListOfObjectsField("Deployable")}


@base.VersionedObjectRegistry.register
class AttachHandleList(base.ObjectListBase, CyborgObject):
    # 1.0 AttachHandle 1.1; 1.1 AttachHandle 1.2 (a relationship table, no child_versions).
    VERSION = "1.1"
    fields = {"objects": fields.ListOfObjectsField("AttachHandle")}
    obj_relationships = {"objects": [("1.0", "1.1"), ("1.1", "1.2")]}


@base.VersionedObjectRegistry.register
class DeviceProfileList(base.ObjectListBase, CyborgObject):
    VERSION = "1.0"
    fields = {"objects": fields.ListOfObjectsField("DeviceProfile")}
    child_versions = {"1.0": "1.0"}


@base.VersionedObjectRegistry.register
class AcceleratorRequestList(base.ObjectListBase, CyborgObject):
    VERSION = "1.0"
    fields = {"objects": fields.ListOfObjectsField("AcceleratorRequest")}
    child_versions = {"1.0": "1.0"}


@base.VersionedObjectRegistry.register
class DriverDeviceList(base.ObjectListBase, CyborgObject):
    VERSION = "1.0"
    fields = {"objects": fields.ListOfObjectsField("DriverDevice")}
    child_versions = {"1.0": "1.0"}


CLASSES = (Device, Deployable, AttachHandle, DeviceProfile, AcceleratorRequest,
           DriverAttachHandle, DriverDevice, DeviceList, DeployableList, AttachHandleList,
           DeviceProfileList, AcceleratorRequestList, DriverDeviceList)


def manifest():
    """Release N's version of every class: what a release N+1 peer backports to."""
    return {c.obj_name(): c.VERSION for c in CLASSES}


class _OrderedItems(dict):
    # The repr oslo_versionedobjects.fixture.OsloOrderedDict gives child_versions.
    def __repr__(self):
        return "OrderedDict(%r)" % list(self.items()) if self else "OrderedDict()"


def fingerprints():
    """ObjectVersionChecker's fingerprints (its fixture module needs the `fixtures`
    package, which an agent has no use for; these classes have no remotable methods)."""
    out = {}
    for c in CLASSES:
        data = (sorted(c.fields.items()), [])
        if hasattr(c, "child_versions"):
            data += (_OrderedItems(sorted(c.child_versions.items())),)
        digest = hashlib.md5(repr(data).encode(), usedforsecurity=False).hexdigest()
        out[c.obj_name()] = "%s-%s" % (c.VERSION, digest)
    return out


# --- Discovery (as accel_agent::discovery, the parts release N reports) ----------------

INTEL = 0x8086
FPGA_VENDORS = (0x10EE, 0x1172, 0x1BD4)


def classify(class_code, vendor):
    cls, sub, prog_if = (class_code >> 16) & 0xFF, (class_code >> 8) & 0xFF, class_code & 0xFF
    if cls == 0x03:
        return "GPU"
    if cls == 0x01 and sub == 0x08 and prog_if == 0x02:
        return "SSD"
    if cls == 0x02:
        return "NIC"
    if cls == 0x0B and sub == 0x40:
        return "QAT" if vendor == INTEL else "AICHIP"
    if cls == 0x12:
        return "FPGA" if vendor in FPGA_VENDORS else "AICHIP"
    if cls in (0x05, 0xFF) and vendor in FPGA_VENDORS:
        return "FPGA"
    return None


class Skip(Exception):
    """A PCI function that cannot be read (skipped, as the Rust agent does)."""


def read_text(d, name):
    try:
        with open(os.path.join(d, name), encoding="utf-8") as f:
            return f.read().strip()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise Skip("%s: %s" % (name, e))


def required(d, name):
    t = read_text(d, name)
    if t is None:
        raise Skip("%s is missing" % name)
    return t


HEX = re.compile(r"\+?[0-9a-fA-F]+")
DEC = re.compile(r"\+?[0-9]+")


def hexnum(text, name, maximum):
    # Rust's u32::from_str_radix(_, 16) after an optional 0x.
    digits = text[2:] if text.startswith("0x") else text
    v = int(digits, 16) if HEX.fullmatch(digits) else None
    if v is None or v > maximum:
        raise Skip("%s is not a hex number up to %#x: %r" % (name, maximum, text))
    return v


def unsigned(text, bits=32):
    # Rust's str::parse::<u32>() (or u64): None when it would fail.
    if not DEC.fullmatch(text):
        return None
    v = int(text)
    return v if v < 2**bits else None


def link_name(path):
    try:
        return os.path.basename(os.readlink(path).rstrip("/")) or None
    except OSError:
        return None


def read_nvme(d):
    try:
        entries = os.listdir(d)
    except OSError:
        return []
    controllers = []
    for name in entries:
        path = os.path.join(d, name)
        namespaces = []
        try:
            listing = os.listdir(path)
        except OSError as e:
            raise Skip("nvme/%s: %s" % (name, e))
        for ns in listing:
            if not (ns.startswith(name) and ns[len(name):].startswith("n")):
                continue
            sectors = required(os.path.join(path, ns), "size")
            count = unsigned(sectors, 64)
            if count is None:
                raise Skip("nvme/%s/%s/size is not a number: %r" % (name, ns, sectors))
            namespaces.append({"name": ns, "size_bytes": min(count * 512, 2**64 - 1),
                               "dev_path": "/dev/" + ns})
        namespaces.sort(key=lambda n: n["name"])
        controllers.append({"controller": name, "model": read_text(path, "model"),
                            "serial": read_text(path, "serial"), "namespaces": namespaces})
    controllers.sort(key=lambda c: c["controller"])
    return controllers


def read_function(d):
    address = os.path.basename(d)
    vendor = hexnum(required(d, "vendor"), "vendor", 0xFFFF)
    device = hexnum(required(d, "device"), "device", 0xFFFF)
    class_code = hexnum(required(d, "class"), "class", 0xFFFFFF)
    device_type = classify(class_code, vendor)
    if device_type is None:
        return None
    group = link_name(os.path.join(d, "iommu_group"))
    iommu_group = None
    if group is not None:
        iommu_group = unsigned(group)
        if iommu_group is None:
            raise Skip("iommu_group is not a number: %r" % group)
    numa_node = None
    n = read_text(d, "numa_node")
    if n is not None:
        # Rust parses an i64 (-1 is "no node") and keeps it only when it fits a u32.
        if not re.fullmatch(r"[+-]?[0-9]+", n) or not -(2**63) <= int(n) < 2**63:
            raise Skip("numa_node is not a number: %r" % n)
        v = int(n)
        numa_node = v if 0 <= v < 2**32 else None
    # SR-IOV counts are not reported by release N, but a malformed one skips the function.
    total = read_text(d, "sriov_totalvfs")
    if total is not None:
        if unsigned(total) is None:
            raise Skip("sriov_totalvfs is not a number: %r" % total)
        num = read_text(d, "sriov_numvfs")
        num = "0" if num is None else num
        if unsigned(num) is None:
            raise Skip("sriov_numvfs is not a number: %r" % num)
    virtfns = []
    try:
        listing = os.listdir(d)
    except OSError as e:
        raise Skip("cannot list: %s" % e)
    for name in listing:
        index = unsigned(name[6:]) if name.startswith("virtfn") else None
        if index is not None:
            target = link_name(os.path.join(d, name))
            if target is not None:
                virtfns.append((index, target))
    virtfns.sort()
    return {
        "address": address,
        "vendor_id": "%04x" % vendor,
        "device_id": "%04x" % device,
        "class_code": class_code,
        "type": device_type,
        "driver": link_name(os.path.join(d, "driver")),
        "iommu_group": iommu_group,
        "numa_node": numa_node,
        "physfn": link_name(os.path.join(d, "physfn")),
        "virtfns": [a for _, a in virtfns],
        "nvme": read_nvme(os.path.join(d, "nvme")) if device_type == "SSD" else [],
    }


def discover(sysfs_root):
    bus = os.path.join(sysfs_root, "bus/pci/devices")
    found = []
    for name in os.listdir(bus):  # a missing bus fails the report, as in Rust
        try:
            f = read_function(os.path.join(bus, name))
        except Skip as e:
            print("device skipped: %s: %s" % (name, e), file=sys.stderr)
            continue
        if f is not None:
            found.append(f)
    found.sort(key=lambda f: f["address"])
    return found


def compact(value):
    # serde_json's to_string: keys sorted, no spaces.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def pci_attach_info(address):
    try:
        domain, rest = address.split(":", 1)
        bus, rest = rest.split(":", 1)
        device, function = rest.split(".", 1)
    except ValueError:
        return None
    return compact({"domain": domain, "bus": bus, "device": device, "function": function})


def board_info(f):
    info = {"class": "0x%06x" % f["class_code"], "iommu_group": f["iommu_group"],
            "numa_node": f["numa_node"]}
    if f["nvme"]:
        info["nvme"] = f["nvme"]
    return compact(info)


def driver_devices(found):
    """Release N's report: one DriverDevice per physical function, its enabled virtual
    functions (or itself) as attach handles."""
    devices = []
    for f in found:
        if f["physfn"] is not None:
            continue
        addresses = f["virtfns"] or [f["address"]]
        handles = [DriverAttachHandle(attach_type="PCI", attach_info=info)
                   for info in map(pci_attach_info, addresses) if info is not None]
        devices.append(DriverDevice(
            control_path_id=f["address"], type=f["type"], vendor=f["vendor_id"],
            model=f["device_id"], std_board_info=board_info(f), driver_name=f["driver"],
            attach_handles=handles))
    return DriverDeviceList(objects=devices)


# --- The version record (verso_upgrade::FileStore's format) ----------------------------


class StartRefused(Exception):
    pass


def load_record(path):
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(text)
    except ValueError as e:
        raise StartRefused("the version file %s is corrupt or not a version file: %s" % (path, e))
    if not isinstance(record, dict) or record.get("format") != 1:
        raise StartRefused("the version file %s is corrupt or not a version file: format %r"
                           % (path, record.get("format") if isinstance(record, dict) else None))
    if record.get("component") != COMPONENT:
        raise StartRefused("the version file %s belongs to component %r, not %r"
                           % (path, record.get("component"), COMPONENT))
    apparent = record.get("apparent")
    if not isinstance(apparent, int) or apparent > SOFTWARE:
        raise StartRefused(
            "%s was finalized to version %r, past this release's software version %d: "
            "a downgrade after finalization is not possible" % (COMPONENT, apparent, SOFTWARE))
    finalizing = record.get("finalizing")
    if finalizing and finalizing.get("target", 0) > SOFTWARE:
        raise StartRefused(
            "%s is being finalized to version %r, past this release's software version %d"
            % (COMPONENT, finalizing.get("target"), SOFTWARE))
    return record


def save_record(path, record):
    """Atomically, as FileStore does: temp file, fsync, rename, fsync of the directory."""
    d = os.path.dirname(path) or "."
    body = json.dumps(record, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".verso-version-", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


# --- The agent ------------------------------------------------------------------------


class Fenced(Exception):
    pass


class Agent:
    def __init__(self, args, transport):
        self.host = args.host
        self.sysfs_root = args.sysfs_root
        self.timeout = args.rpc_timeout
        serializer = CyborgSerializer()
        self.conductor = messaging.get_rpc_client(
            transport, messaging.Target(topic=CONDUCTOR_TOPIC, version="1.0"),
            version_cap="1.0", serializer=serializer, timeout=self.timeout)
        self.upgrade = messaging.get_rpc_client(
            transport, messaging.Target(topic=UPGRADE_TOPIC, version="1.0"),
            serializer=serializer, timeout=self.timeout)
        self.reporting = threading.Lock()
        self.apparent = SOFTWARE

    def context(self, what):
        return {"request_id": "req-%s-%s" % (what, self.host), "user": None,
                "project_id": None, "is_admin": False, "roles": []}

    def heartbeat_call(self, apparent):
        report = {"id": self.host, "host": self.host, "software": SOFTWARE, "apparent": apparent}
        try:
            return self.upgrade.call(self.context("heartbeat"), "upgrade_heartbeat", report=report)
        except messaging.RemoteError as e:
            if e.exc_type == "Fenced":
                raise Fenced(e.value)
            raise

    def heartbeat(self):
        """One heartbeat; raises Fenced when the agent must stop. A failure to reach the
        conductor is retried at the next interval."""
        try:
            reply = self.heartbeat_call(self.apparent)
        except Fenced:
            raise
        except Exception as e:  # noqa: BLE001 (transport, timeout, remote): retried
            print("heartbeat failed; retried at the next interval: %s" % e, file=sys.stderr)
            return
        # Release N runs its newest version: a finalize_to (to 1, or past it) changes nothing;
        # a conductor finalized past release N fences it on a later heartbeat.
        if reply.get("finalize_to") is not None and reply["finalize_to"] > SOFTWARE:
            print("the conductor finalized to %s; release N stays at %d"
                  % (reply["finalize_to"], SOFTWARE), file=sys.stderr)

    def report(self):
        with self.reporting:
            devices = driver_devices(discover(self.sysfs_root))
            self.conductor.call(self.context("report"), "report_data",
                                hostname=self.host, devices=devices)
            return len(devices)


class AgentEndpoint:
    """Agent API 1.0."""

    target = messaging.Target(version="1.0")

    def __init__(self, agent):
        self.agent = agent

    def report_now(self, ctxt):
        return self.agent.report()


def parse_args(argv):
    p = argparse.ArgumentParser(description="accel release N agent (Python, oslo.versionedobjects)")
    p.add_argument("--transport-url")
    p.add_argument("--control-exchange", default="accel")
    p.add_argument("--host")
    p.add_argument("--sysfs-root", default="/sys")
    p.add_argument("--state-dir")
    p.add_argument("--report-interval", type=float, default=10.0)
    p.add_argument("--rpc-timeout", type=float, default=30.0)
    p.add_argument("--fingerprints", action="store_true",
                   help="print release N's OVO fingerprints as JSON and exit")
    a = p.parse_args(argv)
    if not a.fingerprints:
        missing = [n for n in ("transport_url", "host", "state_dir") if getattr(a, n) is None]
        if missing:
            p.error("missing: " + ", ".join("--" + m.replace("_", "-") for m in missing))
        if not a.host or "/" in a.host or "\\" in a.host:
            p.error("--host %r: a non-empty name without path separators" % a.host)
        if a.report_interval <= 0:
            p.error("--report-interval must be above zero")
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.fingerprints:
        print(json.dumps(fingerprints(), sort_keys=True))
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    conf = cfg.CONF
    conf([], project="accel-agent-n")
    messaging.set_transport_defaults(control_exchange=a.control_exchange)
    transport = messaging.get_rpc_transport(conf, url=a.transport_url)
    agent = Agent(a, transport)
    server = None
    try:
        try:
            os.makedirs(a.state_dir, exist_ok=True)
            path = os.path.join(a.state_dir, "agent-%s.version" % a.host)
            if load_record(path) is None:
                # A fresh install asks the conductor first (a fenced agent writes nothing).
                try:
                    agent.heartbeat_call(1)
                except Fenced:
                    raise
                except Exception as e:  # noqa: BLE001
                    raise StartRefused("the conductor did not answer its heartbeat on topic %s: %s"
                                       % (UPGRADE_TOPIC, e))
                # Release N knows only version 1: it starts there whatever the conductor runs.
                save_record(path, {"format": 1, "component": COMPONENT, "apparent": 1})
            agent.heartbeat()
        except StartRefused as e:
            print("release N agent %s: %s" % (a.host, e), file=sys.stderr)
            return 2
        server = messaging.get_rpc_server(
            transport, messaging.Target(topic=AGENT_TOPIC, server=a.host),
            [AgentEndpoint(agent)], executor="threading", serializer=CyborgSerializer())
        server.start()
        first = True
        while not stop.is_set():
            if not first:
                agent.heartbeat()
            try:
                n = agent.report()
                if first:
                    print("release N agent %s: reported %d devices" % (a.host, n), file=sys.stderr)
            except Exception as e:  # noqa: BLE001: retried at the next interval
                print("inventory report failed; retried at the next interval: %s" % e,
                      file=sys.stderr)
            if first:
                print("ready", flush=True)
                first = False
            stop.wait(a.report_interval)
        return 0
    except Fenced as e:
        print("release N agent %s: refused by the conductor: %s" % (a.host, e), file=sys.stderr)
        return 3
    finally:
        if server is not None:
            server.stop()
            server.wait()
        transport.cleanup()


if __name__ == "__main__":
    sys.exit(main())
