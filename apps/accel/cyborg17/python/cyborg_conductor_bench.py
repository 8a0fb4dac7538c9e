"""Real Cyborg 17's conductor handling report_data, timed: the reference of the service
benchmark (`cargo bench -p accel-api --bench throughput`), which hands accel's conductor
the same report.

    cyborg_conductor_bench.py --config FILE --database DIR --host H --report FILE
                              [--calls N]

--config is a cyborg.conf whose [placement] section reaches a real Placement through
Keystone (as Cyborg's conductor needs: it looks up the host's provider on every report);
--report is a JSON list of DriverDevice 1.4 primitives (`cyborg_object.*`), what a Cyborg
agent sends. The conductor runs in this process on a fresh SQLite database in --database
(the schema by Cyborg's own `create_schema`), as `ConductorManager.report_data` runs
behind Cyborg's RPC server: each call parses the message text, turns the primitives into
Cyborg's objects with Cyborg's serializer and calls report_data. The first call creates
the host's devices (and their Placement providers); the timed calls after it are the
unchanged report of the steady state. Cyborg's log lines are turned down to warnings so
the figure is its work, not its logging.

Prints one JSON line: {"calls": N, "cpu_ms": [...], "wall_ms": [...], "devices": D}
with each timed call's process CPU time and wall time.
"""

import argparse
import json
import logging
import time
import uuid
import warnings

warnings.filterwarnings("ignore")

from oslo_config import cfg  # noqa: E402

from cyborg import context  # noqa: E402
from cyborg.common import service as cyborg_service  # noqa: E402
from cyborg.conductor import manager  # noqa: E402
from cyborg.db.sqlalchemy import migration  # noqa: E402
from cyborg.objects import base as objects_base  # noqa: E402
from cyborg.objects.driver_objects import driver_device  # noqa: E402


def compute_node(placement, host):
    """The host's root provider, as Nova's compute service would have made it."""
    found = placement.get("resource_providers?name=" + host).json()
    if found["resource_providers"]:
        return
    resp = placement.post(
        "resource_providers", {"name": host, "uuid": str(uuid.uuid4())}
    )
    if resp.status_code not in (200, 201):
        raise SystemExit(f"placement refused the compute node: {resp.status_code} {resp.text}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--database", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--report", required=True)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()

    cyborg_service.prepare_service(["cyborg-bench", "--config-file", args.config])
    cfg.CONF.set_override(
        "connection", f"sqlite:///{args.database}/cyborg.sqlite", group="database"
    )
    logging.getLogger("cyborg").setLevel(logging.WARNING)
    migration.create_schema()

    ctx = context.get_admin_context()
    conductor = manager.ConductorManager("cyborg-conductor", args.host)
    compute_node(conductor.placement_client, args.host)
    serializer = objects_base.CyborgObjectSerializer()
    with open(args.report) as f:
        text = f.read()
    # The class must be registered before the serializer meets its primitives.
    assert driver_device.DriverDevice

    def call():
        devices = serializer.deserialize_entity(ctx, json.loads(text))
        conductor.report_data(ctx, args.host, devices)
        return len(devices)

    devices = call()  # creates the host's inventory
    call()  # the first unchanged report, outside the figures like criterion's warm-up
    cpu, wall = [], []
    for _ in range(args.calls):
        c0, w0 = time.process_time(), time.perf_counter()
        call()
        cpu.append((time.process_time() - c0) * 1e3)
        wall.append((time.perf_counter() - w0) * 1e3)
    print(
        json.dumps(
            {"calls": args.calls, "cpu_ms": cpu, "wall_ms": wall, "devices": devices}
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
