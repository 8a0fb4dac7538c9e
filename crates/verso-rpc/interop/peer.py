#!/usr/bin/env python3
"""The Python side of verso-rpc's interop tests: a real oslo.messaging peer.

Modes (all take --url TRANSPORT_URL --topic TOPIC [--exchange EXCHANGE]):

  server [--server NAME] [--record FILE]
      An oslo.messaging RPC server (threading executor) with one endpoint at version
      1.1: ping(arg) -> {"arg": arg, "topic", "server", "peer": "python"};
      echo_thing(thing) (1.1) -> the InteropThing with name upper-cased and "py" added
      to its tags; fail(message) -> raises ValueError(message); record(arg) appends
      {"method": "record", "arg": arg} as a JSON line to --record (for casts).
      Prints "ready" once it listens.

  client --method M [--arg JSON] [--thing JSON] [--version V] [--cap C]
         [--server NAME] [--timeout S] [--cast] [--fanout]
      One call (or cast) through an oslo.messaging RPC client. --thing sends an
      InteropThing built from the JSON fields as the keyword argument "thing".
      Prints one JSON line: {"ok": result} (objects as their primitive) or
      {"error": {"class": ..., "module": ..., "message": ..., "exc_type": ...}}.

  bench [--n N] [--server NAME] [--inflight K] [--processes P]
      Starts a Python server (a child process of this script, its executor's thread pool
      at least K), then makes N calls of ping with a small payload, K in flight: K client
      threads, spread over P client processes (P > 1: the GIL lets one process's threads
      run only one at a time); prints {"calls": N, "seconds": S, "calls_per_s": R,
      "inflight": K, "processes": P}.

  bench-client --n N --inflight K
      One client process of a bench with P > 1: K threads warm up, print "ready", wait
      for a line on stdin, make N calls between them, print "done".

Contexts travel as oslo.context RequestContext.to_dict(); arguments and results go
through oslo.versionedobjects' VersionedObjectSerializer.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import warnings

warnings.filterwarnings("ignore")  # eventlet's deprecation notice, on every import

import oslo_messaging as messaging
from oslo_config import cfg
from oslo_context import context as oslo_context
from oslo_versionedobjects import base as ovo_base
from oslo_versionedobjects import fields as ovo_fields


class InteropBase(ovo_base.VersionedObject):
    """The base class of this project's objects (the serializer checks the namespace)."""

    OBJ_PROJECT_NAMESPACE = "verso_interop"


class InteropSerializer(ovo_base.VersionedObjectSerializer):
    OBJ_BASE_CLASS = InteropBase


@ovo_base.VersionedObjectRegistry.register
class InteropThing(InteropBase):
    """The object both sides know. 1.1 added `tags`."""

    VERSION = "1.1"
    fields = {
        "id": ovo_fields.IntegerField(),
        "name": ovo_fields.StringField(),
        "tags": ovo_fields.ListOfStringsField(default=[]),
    }

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        if target_version == "1.0":
            primitive.pop("tags", None)


class ContextSerializer(messaging.Serializer):
    """Entities through the OVO serializer, contexts as oslo.context dicts."""

    def __init__(self):
        self._base = InteropSerializer()

    def serialize_entity(self, ctxt, entity):
        return self._base.serialize_entity(ctxt, entity)

    def deserialize_entity(self, ctxt, entity):
        return self._base.deserialize_entity(ctxt, entity)

    def serialize_context(self, ctxt):
        return ctxt.to_dict()

    def deserialize_context(self, ctxt):
        return oslo_context.RequestContext.from_dict(ctxt)


class Endpoint:
    target = messaging.Target(version="1.1")

    def __init__(self, topic, server, record):
        self.topic = topic
        self.server = server
        self.record_path = record
        self.lock = threading.Lock()

    def ping(self, ctxt, arg):
        return {"arg": arg, "topic": self.topic, "server": self.server,
                "peer": "python", "user": getattr(ctxt, "user_id", None)}

    def echo_thing(self, ctxt, thing):
        if not isinstance(thing, InteropThing):
            raise TypeError("thing must be an InteropThing, got %s"
                            % type(thing).__name__)
        # A 1.0 caller (no `tags`) gets them as if it had sent none.
        tags = list(thing.tags) if thing.obj_attr_is_set("tags") else []
        out = InteropThing(id=thing.id, name=thing.name.upper(),
                           tags=tags + ["py"])
        return out

    def fail(self, ctxt, message):
        raise ValueError(message)

    def record(self, ctxt, arg):
        if self.record_path:
            with self.lock, open(self.record_path, "a") as f:
                f.write(json.dumps({"method": "record", "arg": arg,
                                    "server": self.server}) + "\n")
                f.flush()


def transport(args):
    conf = cfg.CONF
    conf([], project="verso-interop")
    if args.exchange:
        messaging.set_transport_defaults(control_exchange=args.exchange)
    return messaging.get_rpc_transport(conf, url=args.url)


def run_server(args):
    t = transport(args)
    target = messaging.Target(topic=args.topic, server=args.server or "py-server")
    server = messaging.get_rpc_server(
        t, target, [Endpoint(args.topic, args.server, args.record)],
        executor="threading", serializer=ContextSerializer())
    # The executor's thread pool (oslo's executor_thread_pool_size, 64 by default).
    server.start(override_pool_size=args.pool)
    print("ready", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        server.wait()


def to_json(value):
    if isinstance(value, ovo_base.VersionedObject):
        return value.obj_to_primitive()
    return value


def make_client(args, t):
    kwargs = {"serializer": ContextSerializer()}
    if args.cap:
        kwargs["version_cap"] = args.cap
    return messaging.get_rpc_client(t, messaging.Target(topic=args.topic), **kwargs)


def run_client(args):
    t = transport(args)
    client = make_client(args, t)
    prep = {"version": args.version, "timeout": args.timeout}
    if args.server:
        prep["server"] = args.server
    if args.fanout:
        prep["fanout"] = True
    ctxt = oslo_context.RequestContext(user_id="py-client",
                                       project_id="interop",
                                       request_id="req-py-interop")
    kwargs = {}
    if args.arg is not None:
        kwargs["arg"] = json.loads(args.arg)
    if args.thing is not None:
        kwargs["thing"] = InteropThing(**json.loads(args.thing))
    try:
        cctxt = client.prepare(**prep)
        if args.cast or args.fanout:
            cctxt.cast(ctxt, args.method, **kwargs)
            out = {"ok": None}
        else:
            out = {"ok": to_json(cctxt.call(ctxt, args.method, **kwargs))}
    except Exception as e:  # report every failure to the test, typed
        out = {"error": {"class": type(e).__name__,
                         "module": type(e).__module__,
                         "message": str(e),
                         "exc_type": getattr(e, "exc_type", None)}}
    print(json.dumps(out), flush=True)
    t.cleanup()


def bench_calls(args, n, threads, warm=True):
    """A client with `threads` threads ready to make `n` calls between them; returns
    (run, cleanup): `run()` makes the calls and returns when all are answered."""
    t = transport(args)
    client = make_client(args, t)
    cctxt = client.prepare(version="1.0", timeout=60)
    ctxt = oslo_context.RequestContext(user_id="bench", request_id="req-bench")
    payload = {"hello": "world", "n": 1}
    if warm:
        for _ in range(min(50, max(n, 1))):  # warm up: connections, queues
            cctxt.call(ctxt, "ping", arg=payload)
    shares = [n // threads + (1 if i < n % threads else 0) for i in range(threads)]
    errors = []

    def worker(count):
        try:
            for _ in range(count):
                cctxt.call(ctxt, "ping", arg=payload)
        except Exception as e:  # reported by the bench as a failure
            errors.append(e)

    def run():
        workers = [threading.Thread(target=worker, args=(c,)) for c in shares if c]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if errors:
            raise SystemExit("bench: %d threads failed, first: %r" % (len(errors), errors[0]))

    return run, t.cleanup


def run_bench_client(args):
    run, cleanup = bench_calls(args, args.n, args.inflight)
    print("ready", flush=True)
    sys.stdin.readline()
    run()
    print("done", flush=True)
    cleanup()


def run_bench(args):
    env = dict(os.environ)
    inflight = max(1, args.inflight)
    processes = max(1, min(args.processes, inflight))
    cmd = [sys.executable, os.path.abspath(__file__), "server", "--url", args.url,
           "--topic", args.topic, "--server", args.server or "py-bench",
           "--pool", str(max(64, inflight))]
    if args.exchange:
        cmd += ["--exchange", args.exchange]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True)
    clients = []
    try:
        line = child.stdout.readline().strip()
        if line != "ready":
            raise SystemExit("bench: the Python server did not start (got %r)" % line)
        if processes == 1:
            run, cleanup = bench_calls(args, args.n, inflight)
            start = time.perf_counter()
            run()
            seconds = time.perf_counter() - start
            cleanup()
        else:
            for i in range(processes):
                threads = inflight // processes + (1 if i < inflight % processes else 0)
                calls = args.n // processes + (1 if i < args.n % processes else 0)
                c = [sys.executable, os.path.abspath(__file__), "bench-client",
                     "--url", args.url, "--topic", args.topic, "--n", str(calls),
                     "--inflight", str(threads)]
                if args.exchange:
                    c += ["--exchange", args.exchange]
                clients.append(subprocess.Popen(c, stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, env=env, text=True))
            for c in clients:
                if c.stdout.readline().strip() != "ready":
                    raise SystemExit("bench: a client process did not start")
            start = time.perf_counter()
            for c in clients:
                c.stdin.write("go\n")
                c.stdin.flush()
            for c in clients:
                if c.stdout.readline().strip() != "done":
                    raise SystemExit("bench: a client process failed")
            seconds = time.perf_counter() - start
        print(json.dumps({"calls": args.n, "seconds": seconds,
                          "calls_per_s": args.n / seconds, "inflight": inflight,
                          "processes": processes}), flush=True)
    finally:
        for p in clients + [child]:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["server", "client", "bench", "bench-client"])
    p.add_argument("--url", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--exchange")
    p.add_argument("--server")
    p.add_argument("--record")
    p.add_argument("--method")
    p.add_argument("--arg")
    p.add_argument("--thing")
    p.add_argument("--version", default="1.0")
    p.add_argument("--cap")
    p.add_argument("--timeout", type=float, default=15)
    p.add_argument("--cast", action="store_true")
    p.add_argument("--fanout", action="store_true")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--inflight", type=int, default=1)
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--pool", type=int)
    args = p.parse_args()
    if args.mode == "server":
        run_server(args)
    elif args.mode == "client":
        if not args.method:
            p.error("client needs --method")
        run_client(args)
    elif args.mode == "bench-client":
        run_bench_client(args)
    else:
        run_bench(args)


if __name__ == "__main__":
    main()
