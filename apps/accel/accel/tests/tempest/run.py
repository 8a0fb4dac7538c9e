"""Runs cyborg-tempest-plugin's API tests against an accel API, with real Keystone.

Usage: run.py KEYSTONE_V3_URL ACCEL_BASE_URL WORK_DIR

Points the catalog's accelerator endpoints at ACCEL_BASE_URL + "/v2" (as devstack
registers Cyborg's), writes a tempest.conf (dynamic credentials made by Keystone's
admin, oslo.policy new defaults), runs `tempest run` on the plugin's API tests one at a
time, and prints one JSON object: {"test id": "ok" | "FAILED" | "SKIPPED", ...}.
"""

import json
import os
import re
import subprocess
import sys

import requests


def admin_token(keystone):
    body = {"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"name": "Default"}, "password": "verso-admin"}}},
        "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}},
    }}
    r = requests.post(keystone + "/auth/tokens", json=body, timeout=30)
    r.raise_for_status()
    return r.headers["X-Subject-Token"]


def point_catalog(keystone, url):
    headers = {"X-Auth-Token": admin_token(keystone)}
    services = requests.get(keystone + "/services", params={"type": "accelerator"},
                            headers=headers, timeout=30).json()["services"]
    if not services:
        sys.exit("the catalog has no accelerator service: run scripts/start-keystone.sh")
    for service in services:
        endpoints = requests.get(keystone + "/endpoints", params={"service_id": service["id"]},
                                 headers=headers, timeout=30).json()["endpoints"]
        for e in endpoints:
            if e["url"] != url:
                r = requests.patch(keystone + "/endpoints/" + e["id"],
                                   json={"endpoint": {"url": url}}, headers=headers, timeout=30)
                r.raise_for_status()


CONF = """[DEFAULT]
log_file = tempest.log
[auth]
use_dynamic_credentials = true
admin_username = admin
admin_password = verso-admin
admin_project_name = admin
admin_domain_name = Default
[identity]
uri_v3 = {keystone}
auth_version = v3
region = RegionOne
[identity-feature-enabled]
api_v2 = false
[service_available]
cyborg = true
nova = false
glance = false
neutron = false
cinder = false
swift = false
[cyborg_policy]
enforce_new_defaults = true
"""


def main():
    keystone, accel, work = sys.argv[1].rstrip("/"), sys.argv[2].rstrip("/"), sys.argv[3]
    point_catalog(keystone, accel + "/v2")
    bin_dir = os.path.dirname(sys.executable)
    tempest = os.path.join(bin_dir, "tempest")
    # tempest keeps its workspace registry in ~/.tempest: a HOME of the run's own.
    env = dict(os.environ, HOME=work)
    init = subprocess.run([tempest, "init", "--name", "accel", os.path.join(work, "ws")],
                          env=env, capture_output=True, text=True)
    if init.returncode != 0:
        sys.exit("tempest init failed:\n" + init.stdout[-4000:] + init.stderr[-4000:])
    work = os.path.join(work, "ws")
    with open(os.path.join(work, "etc", "tempest.conf"), "w") as f:
        f.write(CONF.format(keystone=keystone))
    run = subprocess.run(
        [tempest, "run", "--regex", r"^cyborg_tempest_plugin\.tests\.api", "--concurrency", "1"],
        cwd=work, env=env, capture_output=True, text=True, timeout=900)
    results = {}
    for line in run.stdout.splitlines():
        m = re.match(r"\{\d+\} (\S+?)(?:\[[^\]]*\])? \[[\d.]+s\] \.\.\. (ok|FAILED|SKIPPED)", line)
        if m:
            results[m.group(1)] = m.group(2)
        m = re.match(r"\{\d+\} setUpClass \((\S+)\) \[[\d.]+s\] \.\.\. (FAILED)", line)
        if m:
            results[m.group(1) + ".setUpClass"] = m.group(2)
    if not results:
        sys.exit("tempest ran no test:\n" + run.stdout[-4000:] + run.stderr[-4000:])
    print(json.dumps(results, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
