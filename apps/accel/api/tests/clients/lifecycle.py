"""An accelerator request's life through accel's API, driven by openstacksdk 4.22.

Run by apps/accel/api/tests/clients.rs against an accel API it started (no
authentication, so keystoneauth's "none" plugin with the endpoint given):

    python lifecycle.py http://127.0.0.1:PORT HOSTNAME

The calls are Nova's (its accelerator client is a keystoneauth adapter: profile by
name, requests created, bound by a collection PATCH, read by instance, deleted by
instance) and the SDK's resource methods that `openstack accelerator ...` uses (get,
bind and unbind by PATCH /accelerator_requests/{uuid}, DELETE of one request, profile
delete). It prints one JSON line of what it saw; any mismatch is an AssertionError
(exit status 1) naming the step.
"""

import json
import sys
import uuid

import openstack
from openstack import exceptions


def main(base, hostname):
    conn = openstack.connection.Connection(
        auth_type="none",
        auth={"endpoint": base},
        accelerator_endpoint_override=base,
    )
    acc = conn.accelerator
    seen = {}

    # Profiles: the SDK creates; Nova looks one up by name and wants exactly one.
    fpga = acc.create_device_profile(
        name="sdk-fpga", groups=[{"resources:FPGA": "1"}]
    )
    acc.create_device_profile(name="sdk-gpu", groups=[{"resources:GPU": "1"}])
    assert fpga.name == "sdk-fpga" and fpga.uuid, fpga
    body = acc.get("/device_profiles", params={"name": "sdk-fpga"}).json()
    names = [p["name"] for p in body["device_profiles"]]
    assert names == ["sdk-fpga"], f"profile by name: {names}"
    both = acc.get("/device_profiles", params={"name": "sdk-fpga,sdk-gpu"}).json()
    seen["profiles_by_two_names"] = sorted(p["name"] for p in both["device_profiles"])
    assert acc.get_device_profile(fpga.uuid).name == "sdk-fpga"

    # Nova creates the requests of the flavor's profile ...
    arqs = acc.post(
        "/accelerator_requests", json={"device_profile_name": "sdk-fpga"}
    ).json()["arqs"]
    assert len(arqs) == 1 and arqs[0]["state"] == "Initial", arqs
    arq = arqs[0]["uuid"]
    # ... and binds them once the scheduler picked the host and Placement the device's
    # provider (collection PATCH, with device_rp_uuid).
    instance = str(uuid.uuid4())
    deployables = acc.get("/deployables", params={"hostname": hostname}).json()
    fpga_rps = [
        d["rp_uuid"]
        for d in deployables["deployables"]
        if {"rc": "FPGA"} in json.loads(d["attributes_list"])
    ]
    assert len(fpga_rps) == 1, deployables
    resp = acc.patch(
        "/accelerator_requests",
        json={
            arq: [
                {"path": "/hostname", "op": "add", "value": hostname},
                {"path": "/instance_uuid", "op": "add", "value": instance},
                {"path": "/device_rp_uuid", "op": "add", "value": fpga_rps[0]},
            ]
        },
    )
    assert resp.status_code == 202, f"bind: {resp.status_code}"
    resolved = acc.get(
        "/accelerator_requests",
        params={"instance": instance, "bind_state": "resolved"},
    ).json()["arqs"]
    assert [a["uuid"] for a in resolved] == [arq], resolved
    assert resolved[0]["state"] == "Bound", resolved[0]
    assert resolved[0]["device_rp_uuid"] == fpga_rps[0], resolved[0]
    seen["attach_handle_type"] = resolved[0]["attach_handle_type"]
    seen["attach_handle_info"] = resolved[0]["attach_handle_info"]

    # The SDK (openstack accelerator request ...): get, unbind and bind again by
    # PATCH /accelerator_requests/{uuid}.
    got = acc.get_accelerator_request(arq)
    assert got.state == "Bound" and got.instance_uuid == instance, got
    acc.update_accelerator_request(
        arq,
        [
            {"path": "/hostname", "op": "remove"},
            {"path": "/instance_uuid", "op": "remove"},
        ],
    )
    assert acc.get_accelerator_request(arq).state == "Unbound"
    acc.update_accelerator_request(
        arq,
        [
            {"path": "/hostname", "op": "add", "value": hostname},
            {"path": "/instance_uuid", "op": "add", "value": instance},
        ],
    )
    assert acc.get_accelerator_request(arq).state == "Bound"

    # Nova deletes an instance's requests by instance; the SDK deletes one request.
    resp = acc.delete("/accelerator_requests", params={"instance": instance})
    assert resp.status_code == 204, f"delete by instance: {resp.status_code}"
    try:
        acc.get_accelerator_request(arq)
        raise AssertionError("the request outlived its instance's delete")
    except exceptions.NotFoundException:
        pass
    other = acc.create_accelerator_request(device_profile_name="sdk-gpu")
    acc.delete_accelerator_request(other.uuid, ignore_missing=False)
    try:
        acc.get_accelerator_request(other.uuid)
        raise AssertionError("the SDK's delete left the request")
    except exceptions.NotFoundException:
        pass

    # Devices by vendor, then the profiles deleted (one by the SDK, one by name).
    seen["devices_of_vendor_10ee"] = len(list(acc.devices(vendor="10ee")))
    acc.delete_device_profile(fpga.uuid, ignore_missing=False)
    resp = acc.delete("/device_profiles", params={"value": "sdk-gpu"})
    assert resp.status_code == 204, f"profile delete by name: {resp.status_code}"
    left = [p.name for p in acc.device_profiles()]
    assert left == [], f"profiles left: {left}"
    print(json.dumps(seen, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
