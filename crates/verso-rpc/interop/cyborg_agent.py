"""A Python Cyborg agent written with oslo.versionedobjects, one release behind.

It defines the cyborg model at older versions (Device 1.1, DeviceList 1.1,
AttachHandle 1.1), points VersionedObject.indirection_api at a conductor over
oslo.messaging (conductor RPC 1.1), runs remotable methods through it, and prints
one JSON line describing what came back, for the Rust test to check:

    python cyborg_agent.py --transport-url rabbit://guest:guest@127.0.0.1:5672/ \
        --topic cyborg-conductor --hostname host1 --uuid <device uuid>
"""

import argparse
import json
import sys

from oslo_config import cfg
import oslo_messaging as messaging
from oslo_versionedobjects import base
from oslo_versionedobjects import fields


class CyborgObject(base.VersionedObject):
    OBJ_PROJECT_NAMESPACE = "cyborg"


class CyborgSerializer(base.VersionedObjectSerializer):
    OBJ_BASE_CLASS = CyborgObject


@base.VersionedObjectRegistry.register
class Device(CyborgObject):
    # One release behind the conductor's 1.2: no managed_mode.
    VERSION = "1.1"
    fields = {
        "id": fields.IntegerField(),
        "uuid": fields.UUIDField(),
        "type": fields.EnumField(valid_values=("GPU", "FPGA", "AICHIP", "QAT", "NIC", "SSD")),
        "vendor": fields.StringField(),
        "model": fields.StringField(),
        "std_board_info": fields.StringField(nullable=True),
        "hostname": fields.StringField(),
        "vendor_board_info": fields.StringField(nullable=True),
        "created_at": fields.DateTimeField(nullable=True),
        "updated_at": fields.DateTimeField(nullable=True),
    }

    @base.remotable_classmethod
    def get_by_uuid(cls, context, uuid):
        raise NotImplementedError("agents have no database")

    @base.remotable
    def save(self):
        raise NotImplementedError("agents have no database")


@base.VersionedObjectRegistry.register
class DeviceList(base.ObjectListBase, CyborgObject):
    VERSION = "1.1"
    fields = {"objects": fields.ListOfObjectsField("Device")}
    child_versions = {"1.0": "1.0", "1.1": "1.1"}

    @base.remotable_classmethod
    def get_by_hostname(cls, context, hostname):
        raise NotImplementedError("agents have no database")


class ConductorAPI(base.VersionedObjectIndirectionAPI):
    """Conductor RPC 1.1, as a Nova-style agent calls it."""

    def __init__(self, client):
        self.client = client

    def _call(self, context, method, **kwargs):
        return self.client.prepare(version="1.1").call(context, method, **kwargs)

    def object_class_action_versions(self, context, objname, objmethod, object_versions, args, kwargs):
        return self._call(context, "object_class_action_versions", objname=objname, objmethod=objmethod,
                          object_versions=object_versions, args=args, kwargs=kwargs)

    def object_action(self, context, objinst, objmethod, args, kwargs):
        return self._call(context, "object_action", objinst=objinst, objmethod=objmethod, args=args, kwargs=kwargs)

    def object_backport_versions(self, context, objinst, object_versions):
        return self._call(context, "object_backport_versions", objinst=objinst, object_versions=object_versions)


def describe(obj):
    return {
        "name": obj.obj_name(),
        "version": obj.VERSION,
        "fields": sorted(f for f in obj.fields if obj.obj_attr_is_set(f)),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--transport-url", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--exchange", default="openstack")
    p.add_argument("--hostname", required=True)
    p.add_argument("--uuid", required=True)
    p.add_argument("--timeout", type=int, default=20)
    a = p.parse_args()

    conf = cfg.CONF
    conf([], project="cyborg-agent")
    messaging.set_transport_defaults(control_exchange=a.exchange)
    transport = messaging.get_rpc_transport(conf, url=a.transport_url)
    client = messaging.get_rpc_client(transport, messaging.Target(topic=a.topic, version="1.0"),
                                      version_cap="1.1", serializer=CyborgSerializer(), timeout=a.timeout)
    CyborgObject.indirection_api = ConductorAPI(client)
    ctx = {"user": "py-agent", "project_id": "demo", "project": "demo", "request_id": "req-py-agent",
           "roles": ["admin"], "is_admin": False}

    out = {}
    devices = DeviceList.get_by_hostname(ctx, a.hostname)
    out["list"] = describe(devices)
    out["members"] = [describe(d) for d in devices]
    device = Device.get_by_uuid(ctx, a.uuid)
    out["device"] = describe(device)
    device.vendor_board_info = "from-python"
    device.save()
    out["after_save_changes"] = sorted(device.obj_what_changed())
    again = Device.get_by_uuid(ctx, a.uuid)
    out["saved_vendor_board_info"] = again.vendor_board_info
    try:
        Device.get_by_uuid(ctx, "00000000-0000-0000-0000-000000000000")
        out["missing"] = None
    except Exception as e:  # a remote error from the conductor
        out["missing"] = getattr(e, "exc_type", type(e).__name__)
    print(json.dumps(out))
    transport.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
