"""Prints, as JSON, the contracts the installed openstack-cyborg declares.

Run by tests/cyborg.rs with the test virtualenv's Python. Everything printed is read
from the package itself: the object fingerprints through oslo.versionedobjects' own
ObjectVersionChecker over Cyborg's registry (with the exact text each hashes), and the
RPC methods from the signatures of Cyborg's client classes.
"""

import ast
import inspect
import json
import warnings

warnings.filterwarnings("ignore")

from importlib import metadata  # noqa: E402

from oslo_versionedobjects import fixture  # noqa: E402

from cyborg import objects  # noqa: E402
from cyborg.agent import rpcapi as agent_rpcapi  # noqa: E402
from cyborg.common import config as cyborg_config  # noqa: E402
from cyborg.common import constants  # noqa: E402
from cyborg.conductor import rpcapi as conductor_rpcapi  # noqa: E402
from cyborg.objects import base  # noqa: E402


def fingerprints():
    objects.register_all()
    classes = base.CyborgObjectRegistry.obj_classes()
    checker = fixture.ObjectVersionChecker(classes)
    out = {}
    for name, fp in checker.get_hashes().items():
        cls = classes[name][0]
        fields = sorted(cls.fields.items())
        methods = []
        for attr in dir(cls):
            thing = getattr(cls, attr)
            if inspect.ismethod(thing) or inspect.isfunction(thing):
                if checker._find_remotable_method(cls, thing):
                    methods.append(attr)
        out[name] = {
            "fingerprint": fp,
            "text": repr((fields, [])),
            "remotable": sorted(methods),
            "serial_namespace": cls.OBJ_SERIAL_NAMESPACE,
            "project_namespace": cls.OBJ_PROJECT_NAMESPACE,
        }
    return out


def sent_arguments(func):
    """The method name and keyword arguments of the `cctxt.call(...)` in a client
    method: what goes on the wire, read from the source, not from its signature."""
    tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(func)))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("call", "cast")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
        ):
            return node.args[1].value, sorted(k.arg for k in node.keywords)
    raise SystemExit("no cctxt.call in %s" % func.__qualname__)


def api(cls):
    methods = {}
    for attr, func in inspect.getmembers(cls, inspect.isfunction):
        if attr.startswith("_"):
            continue
        name, args = sent_arguments(func)
        methods[name] = args
    return {"version": cls.RPC_API_VERSION, "methods": methods}


class _Recorded(Exception):
    pass


def control_exchange():
    """The exchange `parse_args` sets, stopped right after it sets it."""
    seen = {}

    def record(control_exchange):
        seen["exchange"] = control_exchange
        raise _Recorded()

    original = cyborg_config.rpc.set_defaults
    cyborg_config.rpc.set_defaults = record
    try:
        cyborg_config.parse_args(["cyborg"], default_config_files=[])
    except _Recorded:
        pass
    finally:
        cyborg_config.rpc.set_defaults = original
    return seen["exchange"]


print(
    json.dumps(
        {
            "version": metadata.version("openstack-cyborg"),
            "objects": fingerprints(),
            "conductor": dict(
                api(conductor_rpcapi.ConductorAPI),
                topic=constants.CONDUCTOR_TOPIC,
            ),
            "agent": dict(api(agent_rpcapi.AgentAPI), topic=constants.AGENT_TOPIC),
            "exchange": control_exchange(),
        },
        indent=1,
        sort_keys=True,
    )
)
