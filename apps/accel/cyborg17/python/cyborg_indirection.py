"""The seed spec (Cyborg's `versioned-object-indirection`) applied to Cyborg 17 here, in
the test's Python, as a Cyborg agent with the spec would have it: Cyborg 17 has none of
it, and accel's release N+1 conductor serves it on Cyborg's topic.

- DeviceList: the spec's example class, registered in Cyborg's own registry (a list of
  Cyborg's Device with the remotable class method get_by_hostname).
- ConductorIndirection: oslo.versionedobjects' indirection API over Cyborg's conductor
  topic at RPC 1.1, through Cyborg's serializer and oslo.messaging, as the spec adds it.
- Its two dependent features as version bumps of Cyborg 17's classes, the agent's side
  (their bodies run on the conductor, accel's): AttachHandle 1.1 with the remotable
  update_managed(managed) and AttachHandleList 1.0 with get_by_hostname (PCI managed
  mode); Device 1.6 with the remotable cleanup_started(), cleanup_succeeded() and
  cleanup_failed(reason) (NVMe cleanup on Cyborg's device_state).
- enable(topic, cap): what the spec's agent does at start (CyborgObject.indirection_api).
- AgentAPI: Cyborg 17's agent client with the NVMe feature's cleanup_device (1.1).

    python cyborg_indirection.py fingerprint
        Prints, as JSON, oslo.versionedobjects' fingerprints of the classes above over
        Cyborg 17's registry (ObjectVersionChecker), for tests/cyborg.rs to compare with
        verso's.
"""

import json
import sys
import warnings

warnings.filterwarnings("ignore")

import oslo_messaging as messaging  # noqa: E402
from oslo_versionedobjects import base as ovo_base  # noqa: E402
from oslo_versionedobjects import fixture  # noqa: E402

from cyborg import objects  # noqa: E402
from cyborg.agent import rpcapi as agent_rpcapi  # noqa: E402
from cyborg.common import rpc  # noqa: E402
from cyborg.objects import base  # noqa: E402
from cyborg.objects import fields  # noqa: E402

objects.register_all()


@base.CyborgObjectRegistry.register
class DeviceList(ovo_base.ObjectListBase, base.CyborgObject):
    VERSION = "1.0"
    fields = {"objects": fields.ListOfObjectsField("Device")}

    @ovo_base.remotable_classmethod
    def get_by_hostname(cls, context, hostname):
        devices = objects.Device.list(context, {"hostname": hostname})
        result = cls(context=context, objects=devices)
        result.obj_reset_changes()
        return result


def _on_the_conductor(*_args, **_kwargs):
    raise NotImplementedError("runs on the conductor, through object indirection")


@base.CyborgObjectRegistry.register
class AttachHandle(objects.AttachHandle):
    # Version 1.1: the remotable update_managed (PCI managed mode).
    VERSION = "1.1"

    @ovo_base.remotable
    def update_managed(self, managed):
        _on_the_conductor()


@base.CyborgObjectRegistry.register
class AttachHandleList(ovo_base.ObjectListBase, base.CyborgObject):
    VERSION = "1.0"
    fields = {"objects": fields.ListOfObjectsField("AttachHandle")}

    @ovo_base.remotable_classmethod
    def get_by_hostname(cls, context, hostname):
        _on_the_conductor()


@base.CyborgObjectRegistry.register
class Device(objects.Device):
    # Version 1.6: the remotable cleanup steps (NVMe cleanup on device_state).
    VERSION = "1.6"

    @ovo_base.remotable
    def cleanup_started(self):
        _on_the_conductor()

    @ovo_base.remotable
    def cleanup_succeeded(self):
        _on_the_conductor()

    @ovo_base.remotable
    def cleanup_failed(self, reason):
        _on_the_conductor()


class ConductorIndirection(ovo_base.VersionedObjectIndirectionAPI):
    """The agent's side of conductor RPC 1.1's three object methods."""

    def __init__(self, topic, cap):
        target = messaging.Target(topic=topic, version="1.0")
        self.client = rpc.get_client(
            target, version_cap=cap, serializer=base.CyborgObjectSerializer()
        )

    def object_class_action_versions(
        self, context, objname, objmethod, object_versions, args, kwargs
    ):
        return self.client.prepare(version="1.1").call(
            context,
            "object_class_action_versions",
            objname=objname,
            objmethod=objmethod,
            object_versions=object_versions,
            args=args,
            kwargs=kwargs,
        )

    def object_action(self, context, objinst, objmethod, args, kwargs):
        return self.client.prepare(version="1.1").call(
            context,
            "object_action",
            objinst=objinst,
            objmethod=objmethod,
            args=args,
            kwargs=kwargs,
        )

    def object_backport_versions(self, context, objinst, object_versions):
        return self.client.prepare(version="1.1").call(
            context,
            "object_backport_versions",
            objinst=objinst,
            object_versions=object_versions,
        )


class AgentAPI(agent_rpcapi.AgentAPI):
    """Cyborg's agent API with the NVMe feature's cleanup_device (agent RPC 1.1), as a
    conductor with the feature calls it: Cyborg 17's client with its cap raised."""

    RPC_API_VERSION = "1.1"

    def cleanup_device(self, context, hostname, device_uuid):
        cctxt = self.client.prepare(server=hostname, version="1.1")
        return cctxt.call(context, "cleanup_device", device_uuid=device_uuid)


def enable(topic, cap="1.1"):
    base.CyborgObject.indirection_api = ConductorIndirection(topic, cap)


def fingerprint():
    classes = base.CyborgObjectRegistry.obj_classes()
    checker = fixture.ObjectVersionChecker(classes)
    hashes = checker.get_hashes()
    return {
        name: hashes[name]
        for name in ("DeviceList", "AttachHandleList", "AttachHandle", "Device")
    }


if __name__ == "__main__":
    if sys.argv[1:] != ["fingerprint"]:
        sys.exit("usage: cyborg_indirection.py fingerprint")
    print(json.dumps(fingerprint()))
