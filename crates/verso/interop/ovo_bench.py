#!/usr/bin/env python3
"""The Python side of verso's codec bench: oslo.versionedobjects doing the round trips
`cargo bench -p verso --bench primitive` times, on the same model (ovo_fuzz.py's, the
one the golden vectors come from).

    ovo_bench.py [--sizes 100,1000,10000] [--seconds S]

A round trip is what a service does with an object on the wire: obj_to_primitive,
json.dumps to text, json.loads, obj_from_primitive. Times one Device and a DeviceList of
each size, each repeated for about S seconds (at least 3 times), and prints one JSON
line: {"device_ns": median ns, "list_ns": {"100": median ns, ...}}.
"""

import argparse
import datetime
import json
import os
import sys
import time
import uuid
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ovo_fuzz  # noqa: E402  (the model; importing it registers the classes)


def device(i):
    # The field values of primitive.rs's `device(id)`.
    d = ovo_fuzz.Device(
        id=i, uuid=str(uuid.UUID(int=i + 1)), type="GPU", vendor="10de", model="A100",
        std_board_info='{"product_id": "20b5"}', hostname="host1",
        vendor_board_info="sxm4", managed_mode="managed",
        created_at=datetime.datetime(2024, 3, 1, 12, 34, 56, tzinfo=datetime.timezone.utc),
        updated_at=None)
    d.obj_reset_changes()
    return d


def round_trip(obj):
    text = json.dumps(obj.obj_to_primitive())
    return type(obj).obj_from_primitive(json.loads(text))


def median_ns(obj, seconds):
    times = []
    deadline = time.perf_counter() + seconds
    while len(times) < 3 or time.perf_counter() < deadline:
        start = time.perf_counter_ns()
        round_trip(obj)
        times.append(time.perf_counter_ns() - start)
    times.sort()
    return times[len(times) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="100,1000,10000")
    p.add_argument("--seconds", type=float, default=2.0)
    args = p.parse_args()
    out = {"device_ns": median_ns(device(1), args.seconds), "list_ns": {}}
    for n in [int(s) for s in args.sizes.split(",") if s]:
        lst = ovo_fuzz.DeviceList(objects=[device(i) for i in range(n)])
        lst.obj_reset_changes(recursive=True)
        out["list_ns"][str(n)] = median_ns(lst, args.seconds)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
