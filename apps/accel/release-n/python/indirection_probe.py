#!/usr/bin/env python3
"""A Python OVO client one release behind asks the accel conductor (release N+1) for
`AttachHandleList.get_by_host(host)` through object indirection
(`object_class_action_versions` at conductor API 1.1, with release N's manifest), and
loads the reply with release N's classes from accel_agent_n.py. Prints one JSON line
describing what came back; used by apps/accel/release-n/tests/python_agent.rs.

    python indirection_probe.py --transport-url rabbit://... --control-exchange accel --host host1
"""

import argparse
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import accel_agent_n as n  # noqa: E402
import oslo_messaging as messaging  # noqa: E402
from oslo_config import cfg  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--transport-url", required=True)
    p.add_argument("--control-exchange", default="accel")
    p.add_argument("--host", required=True)
    p.add_argument("--timeout", type=float, default=30.0)
    a = p.parse_args()
    conf = cfg.CONF
    conf([], project="accel-probe")
    messaging.set_transport_defaults(control_exchange=a.control_exchange)
    transport = messaging.get_rpc_transport(conf, url=a.transport_url)
    client = messaging.get_rpc_client(
        transport, messaging.Target(topic=n.CONDUCTOR_TOPIC, version="1.0"),
        version_cap="1.1", serializer=n.CyborgSerializer(), timeout=a.timeout)
    ctx = {"request_id": "req-probe-" + a.host, "is_admin": False, "roles": []}
    try:
        got = client.prepare(version="1.1").call(
            ctx, "object_class_action_versions", objname="AttachHandleList",
            objmethod="get_by_host", object_versions=n.manifest(), args=(a.host,), kwargs={})
    finally:
        transport.cleanup()
    out = {
        "class": type(got).__name__,
        "version": got.VERSION,
        "members": [{
            "class": type(h).__name__,
            "version": h.VERSION,
            "fields": sorted(f for f in h.fields if h.obj_attr_is_set(f)),
            "attach_type": h.attach_type,
            "attach_info": h.attach_info,
            "in_use": h.in_use,
            "device": None if not h.obj_attr_is_set("device") or h.device is None else {
                "class": type(h.device).__name__,
                "version": h.device.VERSION,
                "hostname": h.device.hostname,
                "fields": sorted(f for f in h.device.fields if h.device.obj_attr_is_set(f)),
            },
        } for h in got],
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
