#!/usr/bin/env python3
"""Differential fuzzer and expect oracle for verso's object wire form.

The model of ``crates/verso/tests/vectors/ovo-model.json`` is defined here with the real
oslo.versionedobjects; every ``expect`` this script writes is what that library does.

    ovo_fuzz.py generate --seed N --count M [--serial-namespace NS] [--out FILE]
        random cases in the vector format (``tests/vectors/README.md``), expects by OVO;
        the same seed, count and serial namespace always give the same file.
    ovo_fuzz.py expect FILE
        prints FILE with every ``expect`` recomputed by OVO.
    ovo_fuzz.py rekey FILE --serial-namespace NS
        prints FILE with its inputs moved to serial namespace NS (every
        ``versioned_object.*`` key becomes ``NS.*``) and every ``expect`` recomputed by
        OVO with the model in that serial namespace.

The model's serial namespace (OVO's ``OBJ_SERIAL_NAMESPACE``, the prefix of every
primitive key) is ``versioned_object`` unless a case file's ``serial_namespace`` (or
``--serial-namespace``) names another, such as Cyborg's ``cyborg_object``: the base
class of the model then carries it, as Cyborg's ``CyborgObject`` does.

Where verso deliberately refuses an input that OVO takes (or takes it, but reports the
refusal under another exception class), a generated case carries ``"deliberate"`` with
the reason, the OVO outcome under ``"ovo_expect"``, and ``expect`` is the typed
``ValueError`` verso gives. Each such rule is in ``DELIBERATE`` below, with its reason;
the top-level README lists them under "Deliberate differences from
oslo.versionedobjects".
"""

import argparse
import copy
import datetime
import json
import logging
import random
import sys
import warnings

# OVO warns (FutureWarning) about non-UUID text in UUID fields, and an import it makes
# warns about eventlet; neither is an outcome here.
warnings.simplefilter("ignore")

from oslo_utils import versionutils
from oslo_versionedobjects import base
from oslo_versionedobjects import exception
from oslo_versionedobjects import fields

# OVO logs an error for an unregistered name before raising; the raise is the outcome.
logging.disable(logging.ERROR)

GENERATOR = "oslo.versionedobjects 3.12.0 (Python)"
DEFAULT_SERIAL = "versioned_object"
# The model's serial namespace: set once per run by set_serial_namespace.
SERIAL = DEFAULT_SERIAL


def K(part):
    """The primitive key of ``part`` (name, namespace, version, data, changes) in the
    model's serial namespace."""
    return f"{SERIAL}.{part}"


# --------------------------------------------------------------------------- the model
class CyborgObject(base.VersionedObject):
    """Base of the model: namespace cyborg, and the drop of fields added after a target
    (the rule every OVO model writes in obj_make_compatible)."""

    OBJ_PROJECT_NAMESPACE = "cyborg"
    # Non-object fields added after 1.0: name -> version that added them.
    SINCE = {}

    def obj_make_compatible(self, primitive, target_version):
        super().obj_make_compatible(primitive, target_version)
        target = versionutils.convert_version_to_tuple(target_version)
        for name, since in self.SINCE.items():
            if target < versionutils.convert_version_to_tuple(since):
                primitive.pop(name, None)


@base.VersionedObjectRegistry.register
class Device(CyborgObject):
    VERSION = "1.2"
    SINCE = {"vendor_board_info": "1.1", "managed_mode": "1.2"}
    fields = {
        "id": fields.IntegerField(),
        "uuid": fields.UUIDField(),
        "type": fields.EnumField(valid_values=["GPU", "FPGA", "AICHIP", "QAT", "NIC", "SSD"]),
        "vendor": fields.StringField(),
        "model": fields.StringField(),
        "std_board_info": fields.StringField(nullable=True),
        "hostname": fields.StringField(),
        "vendor_board_info": fields.StringField(nullable=True),
        "managed_mode": fields.EnumField(valid_values=["managed", "unmanaged"], default="unmanaged"),
        "created_at": fields.DateTimeField(nullable=True),
        "updated_at": fields.DateTimeField(nullable=True),
    }


@base.VersionedObjectRegistry.register
class Deployable(CyborgObject):
    VERSION = "1.1"
    SINCE = {"labels": "1.1", "utilization": "1.1"}
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
    VERSION = "1.2"
    fields = {
        "id": fields.IntegerField(),
        "uuid": fields.UUIDField(),
        "deployable_id": fields.IntegerField(),
        "in_use": fields.BooleanField(default=False),
        "attach_type": fields.EnumField(valid_values=["PCI", "MDEV", "TEST_PCI"]),
        "attach_info": fields.StringField(),
        "device": fields.ObjectField("Device", nullable=True),
    }
    obj_relationships = {"device": [("1.1", "1.1"), ("1.2", "1.2")]}


@base.VersionedObjectRegistry.register
class DeviceList(base.ObjectListBase, CyborgObject):
    VERSION = "1.2"
    fields = {"objects": fields.ListOfObjectsField("Device")}
    child_versions = {"1.0": "1.0", "1.1": "1.1", "1.2": "1.2"}


@base.VersionedObjectRegistry.register
class AttachHandleList(base.ObjectListBase, CyborgObject):
    VERSION = "1.1"
    fields = {"objects": fields.ListOfObjectsField("AttachHandle")}
    obj_relationships = {"objects": [("1.0", "1.1"), ("1.1", "1.2")]}


@base.VersionedObjectRegistry.register
class DeployableList(base.ObjectListBase, CyborgObject):
    VERSION = "1.0"
    fields = {"objects": fields.ListOfObjectsField("Deployable")}


def set_serial_namespace(ns):
    """Puts the whole model in serial namespace ``ns`` (on the base class, as OVO
    projects declare it)."""
    global SERIAL
    SERIAL = ns
    CyborgObject.OBJ_SERIAL_NAMESPACE = ns


CLASSES = {c.__name__: c for c in (Device, Deployable, AttachHandle, DeviceList, AttachHandleList, DeployableList)}
VERSIONS = {
    "Device": ["1.0", "1.1", "1.2"],
    "Deployable": ["1.0", "1.1"],
    "AttachHandle": ["1.0", "1.1", "1.2"],
    "DeviceList": ["1.0", "1.1", "1.2"],
    "AttachHandleList": ["1.0", "1.1"],
    "DeployableList": ["1.0"],
}
LIST_MEMBER = {"DeviceList": "Device", "AttachHandleList": "AttachHandle", "DeployableList": "Deployable"}

# Exception classes the vector format compares; anything else is reported by the
# nearest of these in its class hierarchy (packaging's InvalidVersion is a ValueError).
KNOWN_EXCEPTIONS = [
    "IncompatibleObjectVersion",
    "UnsupportedObjectError",
    "InvalidTargetVersion",
    "ObjectActionError",
    "KeyError",
    "ValueError",
    "TypeError",
    "AttributeError",
]


def exception_name(e):
    for cls in type(e).__mro__:
        if cls.__name__ in KNOWN_EXCEPTIONS:
            return cls.__name__
    return type(e).__name__


def error(e):
    return {"error": {"exception": exception_name(e), "message": str(e)}}


# ------------------------------------------------------------------- the case operations
def build(spec):
    """An object from a build spec (README "Build spec")."""
    if "decode" in spec:
        return CyborgObject.obj_from_primitive(copy.deepcopy(spec["decode"]))
    cls = CLASSES[spec["class"]]
    kwargs = {name: field_value(cls, name, value) for name, value in spec["fields"].items()}
    obj = cls(**kwargs)
    if "changes" in spec:
        obj._changed_fields = {c for c in spec["changes"] if c in obj.fields}
    return obj


def field_value(cls, name, value):
    field = cls.fields.get(name)
    if isinstance(field, fields.ObjectField) and isinstance(value, dict):
        return build(value)
    if isinstance(field, fields.ListOfObjectsField) and isinstance(value, list):
        return [build(v) for v in value]
    return copy.deepcopy(value)


def apply_step(obj, step):
    (kind, arg), = step.items()
    if kind == "reset_changes":
        obj.obj_reset_changes(arg.get("fields") or None, recursive=arg.get("recursive", False))
    elif kind == "set":
        for name, value in arg.items():
            setattr(obj, name, field_value(type(obj), name, value))
    elif kind == "set_defaults":
        obj.obj_set_defaults(*arg)
    else:
        raise SystemExit(f"unknown step {kind}")


def sort_changes(p):
    """Sorts every ``<serial>.changes`` list, as the files store them."""
    if isinstance(p, dict):
        return {k: (sorted(v) if k == K("changes") and isinstance(v, list)
                    and all(isinstance(x, str) for x in v) else sort_changes(v))
                for k, v in p.items()}
    if isinstance(p, list):
        return [sort_changes(x) for x in p]
    return p


def describe_value(field, value):
    if value is None:
        return None
    if isinstance(value, base.VersionedObject):
        return describe(value)
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, list):
        return [describe_value(None, v) for v in value]
    if isinstance(value, dict):
        return {k: describe_value(None, v) for k, v in value.items()}
    return value


def describe(obj):
    set_fields = {n: describe_value(f, getattr(obj, n)) for n, f in obj.fields.items() if obj.obj_attr_is_set(n)}
    return {
        "class": obj.obj_name(),
        "version": obj.VERSION,
        "fields": set_fields,
        "unset": sorted(n for n in obj.fields if not obj.obj_attr_is_set(n)),
        "what_changed": sorted(obj.obj_what_changed()),
    }


def compute_expect(case):
    op = case["op"]
    if op == "to_primitive":
        obj = build(case["object"])
        for step in case.get("steps", []):
            apply_step(obj, step)
        try:
            p = obj.obj_to_primitive(
                target_version=case.get("target_version"),
                version_manifest=copy.deepcopy(case.get("version_manifest")),
            )
        except TypeError as e:
            if "dict_items" not in str(e):
                return error(e)
            # OVO bug: a list with child_versions backported to a target between two of
            # its entries indexes dict.items() and crashes. verso does what the code
            # means (the nearest entry below); the expect is OVO with that one fixed.
            case["deliberate"] = "ovo_child_versions_gap"
            return child_versions_fixed(case)
        except Exception as e:  # noqa: BLE001 - the exception is the outcome
            return error(e)
        return {"primitive": sort_changes(p)}
    if op == "from_primitive":
        try:
            obj = CyborgObject.obj_from_primitive(copy.deepcopy(case["primitive"]))
        except Exception as e:  # noqa: BLE001
            return error(e)
        try:
            re = obj.obj_to_primitive()
        except Exception as e:  # noqa: BLE001
            return {"object": describe(obj), "reencoded_error": error(e)["error"]}
        return {"object": describe(obj), "reencoded": sort_changes(re)}
    if op == "manifest":
        return {"manifest": base.obj_tree_get_versions(case["class"])}
    raise SystemExit(f"unknown op {op}")


class _IndexableItems(dict):
    def items(self):
        return list(super().items())


def child_versions_fixed(case):
    saved = {name: cls.child_versions for name, cls in CLASSES.items() if cls.__dict__.get("child_versions")}
    try:
        for name, cv in saved.items():
            CLASSES[name].child_versions = _IndexableItems(cv)
        obj = build(case["object"])
        for step in case.get("steps", []):
            apply_step(obj, step)
        try:
            p = obj.obj_to_primitive(target_version=case.get("target_version"),
                                     version_manifest=copy.deepcopy(case.get("version_manifest")))
        except Exception as e:  # noqa: BLE001
            return error(e)
        return {"primitive": sort_changes(p)}
    finally:
        for name, cv in saved.items():
            CLASSES[name].child_versions = cv


def cmd_expect(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    set_serial_namespace(doc.get("serial_namespace", DEFAULT_SERIAL))
    for case in doc["cases"]:
        case["expect"] = compute_expect(case)
        apply_deliberate(case)
    json.dump(doc, sys.stdout, indent=2, ensure_ascii=False, allow_nan=False)
    sys.stdout.write("\n")


def rekeyed(value, ns):
    """``value`` with every ``versioned_object.*`` key of every dict, at any depth,
    moved to ``ns.*`` (values are left alone: a project namespace named
    "versioned_object" stays one)."""
    prefix = DEFAULT_SERIAL + "."
    if isinstance(value, dict):
        return {(ns + "." + k[len(prefix):] if k.startswith(prefix) else k): rekeyed(v, ns)
                for k, v in value.items()}
    if isinstance(value, list):
        return [rekeyed(v, ns) for v in value]
    return value


def cmd_rekey(path, ns):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("serial_namespace", DEFAULT_SERIAL) != DEFAULT_SERIAL:
        raise SystemExit(f"{path} is already in serial namespace {doc['serial_namespace']}")
    set_serial_namespace(ns)
    out = {}
    for k, v in doc.items():
        out[k] = v
        if k == "model":
            out["serial_namespace"] = ns
    out["group"] = f"{doc.get('group', 'cases')}-{ns}"
    cases = []
    for case in doc["cases"]:
        case = {k: (rekeyed(v, ns) if k in ("object", "steps", "primitive") else v)
                for k, v in case.items() if k not in ("expect", "ovo_expect")}
        case["name"] = f"{ns}_{case['name']}"
        # A deliberate mark is recomputed below, from OVO's outcome and the input.
        reason = case.pop("deliberate", None)
        case["expect"] = compute_expect(case)
        if reason and reason != "ovo_child_versions_gap" and "deliberate" not in case:
            case["deliberate"] = reason
        apply_deliberate(case)
        cases.append(case)
    out["cases"] = cases
    json.dump(out, sys.stdout, indent=2, ensure_ascii=False, allow_nan=False)
    sys.stdout.write("\n")


# ------------------------------------------------------------- deliberate differences
# Inputs verso refuses on purpose, with a typed ValueError that names the value, where
# OVO takes them (or fails with an exception class that only says which Python
# operation tripped). A case whose input matches one of these is marked "deliberate":
# its expect becomes ValueError and OVO's outcome is kept as "ovo_expect".
DELIBERATE = {
    # OVO's UUID field only warns about a non-UUID and keeps any text, even str(5):
    # verso's field is a uuid::Uuid and refuses text that is not a UUID.
    "uuid_not_a_uuid": "a UUID field takes only UUID text (OVO warns and keeps anything)",
    # OVO keeps a UUID as written (upper case, no hyphens, braces, urn:uuid:); verso
    # holds a parsed Uuid and writes the canonical form, so it takes only that form
    # rather than write back other text than it was given.
    "uuid_not_canonical": "a UUID field takes only the canonical lower-case hyphenated text",
    # Python's int is unbounded; verso's Integer field is an i64.
    "int_range": "an Integer field holds an i64; OVO keeps any Python int",
    # A JSON number beyond the 64-bit integer range reaches verso as a float (serde_json
    # without arbitrary precision), so an integer literal such as 2**70 cannot be told
    # from a float and its text in a String field would differ from Python's str(int).
    "string_from_huge_number": "a String field refuses numbers beyond the 64-bit integer range",
    # bool(value): OVO makes "false", "no", 1, [0] true. verso takes only JSON booleans.
    "bool_truthiness": "a Boolean field takes only true/false (OVO applies Python bool())",
    # int(True), float(False), int("1_000"), unicode digits: Python literal rules that
    # verso does not copy; it takes numbers and plain [+-]digits / float text.
    "number_python_literal": "Integer/Float fields take JSON numbers and plain numeric text only",
    # float("nan") / float("inf"): OVO writes NaN/Infinity, which is not JSON.
    "float_not_finite": "a Float field refuses NaN and infinities (OVO writes non-JSON NaN/Infinity)",
    # List/Dict fields: OVO's from_primitive iterates any iterable (a string becomes its
    # characters, a dict its keys) or fails with TypeError/AttributeError.
    "container_shape": "List and Dict fields take only a JSON array / object",
    # String fields: OVO's coerce also takes datetimes; JSON has none, but a list/dict
    # fails in OVO with ValueError and in from_primitive paths with other classes.
    "object_shape": "an Object field, versioned_object.data and .changes must be JSON objects/lists; "
    "OVO fails on other JSON types with whatever Python raised (TypeError, AttributeError) or "
    "reads a list as empty data",
    # OVO's exception for a value of the wrong JSON type is whatever Python operation
    # tripped on it (int([]) is a TypeError, [].items() an AttributeError); verso reports
    # every value a field or primitive refuses as a typed ValueError naming it.
    "exception_class": "a refused value is a ValueError (OVO raises whatever Python raised: "
    "TypeError, AttributeError)",
    # iso8601 (OVO's parser) also takes reduced and basic forms: 2024, 2024-3-5,
    # 2024-03-01T12, 20240301T1234; verso takes YYYY-MM-DD[(T| )HH:MM[:SS[.f]]][offset].
    "datetime_form": "DateTime text is YYYY-MM-DD[(T| )HH:MM[:SS[.fraction]]][Z|+-HH[:MM]|+-HHMM]; "
    "OVO's iso8601 also takes reduced and basic forms",
    # See child_versions_fixed: a case where OVO itself crashes; expect is OVO with
    # the crash fixed.
    "ovo_child_versions_gap": "OVO crashes (TypeError on dict_items) backporting a list with "
    "child_versions to a version between two entries; verso uses the nearest entry below",
    # Version text: OVO compares through packaging.version (v1.2, 1.2rc1, 1, 1.2.3.4,
    # whitespace) in one place and int() tuples in another; verso takes 2 or 3 dotted
    # decimal parts.
    "version_text": "a version is 2 or 3 dotted decimal integers (OVO also takes PEP 440 forms)",
}


def apply_deliberate(case):
    expect = case["expect"]
    if case.get("deliberate") == "ovo_child_versions_gap":
        return
    if "error" in expect and expect["error"]["exception"] in ("TypeError", "AttributeError"):
        case["deliberate"] = case.get("deliberate") or "exception_class"
    if "reencoded_error" in expect:
        # OVO decodes it but cannot encode it again: only version texts its int()
        # tuple conversion refuses get here (1.0rc1 passes packaging, not int()).
        case["deliberate"] = case.get("deliberate") or "version_text"
    reason = case.get("deliberate")
    if not reason:
        return
    if "error" in expect and expect["error"]["exception"] in (
            "ValueError", "IncompatibleObjectVersion", "UnsupportedObjectError", "KeyError"):
        # OVO refuses it too, under the same class, or fails earlier for another reason
        # (a contained object too new, a missing key) that verso must meet first as
        # well: not a difference after all.
        case.pop("deliberate", None)
        case.pop("ovo_expect", None)
        return
    # As text: what OVO wrote may not be JSON (a float NaN).
    case["ovo_expect"] = json.dumps(expect, ensure_ascii=False)
    case["expect"] = {"error": {"exception": "ValueError", "message": "deliberate: " + DELIBERATE[reason]}}


# ------------------------------------------------------------------------- generation
UNICODE = ["", "host1", "ü", "日本語", "😀", "a\"b\\c", "line\nbreak", "\t", "\u2028", "\x01", " ", "null", "0",
           "x" * 300, "Ωmega", "\u00e9\u0301", "</script>", "{\"a\": 1}"]
BIG_INTS = [0, 1, -1, 7, 2**31 - 1, -(2**31), 2**53 + 1, 2**63 - 1, -(2**63)]
HUGE_INTS = [2**63, 2**64 - 1, 2**64, -(2**63) - 1, 2**70, -(2**70)]
FLOATS = [0.0, -0.0, 0.25, 1.5, -2.5, 1e-07, 1e16, 1.5e16, 1e300, 5e-324, 0.1, 123456.789, 1e22, -1e-05]
OFFSETS = ["Z", "", "+00:00", "-00:00", "+02:00", "-05:30", "+0530", "-0800", "+14:00", "-12:00", "+01", "z"]
FRACTIONS = ["", ".5", ".123", ".123456", ".000001", ",25"]
CANONICAL_UUIDS = ["5d5a3e0b-6b2f-4b9a-9d0c-6d3f2c1b0a01", "00000000-0000-0000-0000-000000000000",
                   "a7c1f0de-0000-4000-8000-000000000001", "ffffffff-ffff-ffff-ffff-ffffffffffff"]


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.n = 0
        self.seed = seed

    def chance(self, p):
        return self.r.random() < p

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    # ---- values
    def uuid(self):
        if self.chance(0.5):
            return self.pick(CANONICAL_UUIDS)
        return "%08x-%04x-4%03x-%04x-%012x" % (self.r.getrandbits(32), self.r.getrandbits(16),
                                               self.r.getrandbits(12), 0x8000 | self.r.getrandbits(14),
                                               self.r.getrandbits(48))

    def string(self):
        if self.chance(0.3):
            return self.pick(UNICODE)
        alphabet = "abcXYZ019 -_ü日😀\"\\/\n"
        return "".join(self.pick(alphabet) for _ in range(self.r.randrange(0, 12)))

    def datetime_text(self):
        y = self.pick([2024, 1970, 2000, 9999, 1900, 1])
        text = "%04d-%02d-%02dT%02d:%02d:%02d" % (y, self.r.randint(1, 12), self.r.randint(1, 28),
                                                  self.r.randint(0, 23), self.r.randint(0, 59),
                                                  self.r.randint(0, 59))
        if self.chance(0.1):
            text = text.replace("T", " ")
        return text + self.pick(FRACTIONS) + self.pick(OFFSETS)

    def value(self, field, loose=False):
        """A value the field takes. loose: also the coercions OVO's setattr applies."""
        if field.nullable and self.chance(0.15):
            return None
        if loose and field.default != fields.UnspecifiedDefault and self.chance(0.1):
            return None  # a non-nullable field with a default takes None as the default
        t = field._type
        if isinstance(t, fields.Enum):
            return self.pick(list(t.valid_values))
        if isinstance(t, fields.String):
            if loose and self.chance(0.25):
                # (not beyond 64-bit integers: see "string_from_huge_number")
                return self.pick([5, -3, 0, 1.5, 1e-07, 1e16, 2.0, 1e15, 2**63 - 1, True, False,
                                  123456.789, -0.0, 5e-324, 0.0001, 1e-05, 2**64 - 1])
            return self.string()
        if isinstance(t, fields.Integer):
            if loose and self.chance(0.2):
                return self.pick(["7", " -12 ", "+3", "0007", 1.9, -1.9, 3.0])
            return self.pick(BIG_INTS) if self.chance(0.5) else self.r.randint(-1000, 10**6)
        if isinstance(t, fields.Float):
            if loose and self.chance(0.2):
                return self.pick([3, -7, 2**53, "1.25", " 2.5 ", "-1e3"])
            return self.pick(FLOATS) if self.chance(0.6) else round(self.r.uniform(-1e6, 1e6), self.r.randint(0, 8))
        if isinstance(t, fields.Boolean):
            return self.chance(0.5)
        if isinstance(t, fields.UUID):
            return self.uuid()
        if isinstance(t, fields.DateTime):
            return self.datetime_text()
        if isinstance(t, fields.Dict):
            return {self.string(): self.string() for _ in range(self.r.randrange(0, 4))}
        if isinstance(t, fields.List):
            return [self.string() for _ in range(self.r.randrange(0, 4))]
        raise SystemExit(f"no generator for {t}")

    # ---- objects
    def spec(self, cls_name, depth=0, loose=True):
        cls = CLASSES[cls_name]
        if cls_name in LIST_MEMBER:
            member = LIST_MEMBER[cls_name]
            items = [self.member_spec(member, depth + 1) for _ in range(self.r.randrange(0, 4 if depth == 0 else 2))]
            spec = {"class": cls_name, "fields": {"objects": items} if self.chance(0.9) else {}}
        else:
            chosen = {}
            names = list(cls.fields)
            full = self.chance(0.4)
            for name in names:
                if not full and self.chance(0.35):
                    continue
                field = cls.fields[name]
                if isinstance(field, fields.ObjectField):
                    if field.nullable and self.chance(0.2):
                        chosen[name] = None
                    elif depth < 2:
                        chosen[name] = self.member_spec(field.objname, depth + 1)
                    continue
                chosen[name] = self.value(field, loose)
            spec = {"class": cls_name, "fields": chosen}
        if self.chance(0.5):
            pool = list(cls.fields) + ["bogus"]
            spec["changes"] = sorted(self.r.sample(pool, self.r.randrange(0, len(pool) + 1)))
        return spec

    def member_spec(self, cls_name, depth):
        """A contained object: built, or decoded at an older instance version."""
        spec = self.spec(cls_name, depth)
        if self.chance(0.3):
            try:
                obj = build(spec)
                versions = VERSIONS[cls_name]
                p = obj.obj_to_primitive(target_version=self.pick(versions))
                if self.chance(0.2):
                    # relabelled older than its data (see mutate)
                    p = obj.obj_to_primitive()
                    p[K("version")] = self.pick(versions)
                return {"decode": sort_changes(p)}
            except Exception:  # noqa: BLE001 - an unbuildable spec stays a spec
                return spec
        return spec

    def steps(self, cls_name):
        cls = CLASSES[cls_name]
        out = []
        for _ in range(self.r.randrange(0, 4)):
            k = self.r.randrange(3)
            if k == 0:
                arg = {}
                if self.chance(0.5):
                    pool = list(cls.fields) + ["bogus"]
                    arg["fields"] = self.r.sample(pool, self.r.randrange(1, len(pool) + 1))
                if self.chance(0.5):
                    arg["recursive"] = self.chance(0.5)
                out.append({"reset_changes": arg})
            elif k == 1:
                name = self.pick(list(cls.fields))
                field = cls.fields[name]
                if isinstance(field, fields.ObjectField):
                    value = None if self.chance(0.3) else self.member_spec(field.objname, 1)
                elif isinstance(field, fields.ListOfObjectsField):
                    value = [self.member_spec(field.objname, 1) for _ in range(self.r.randrange(0, 3))]
                else:
                    value = self.value(field, loose=True)
                out.append({"set": {name: value}})
            else:
                with_default = [n for n, f in cls.fields.items() if f.default != fields.UnspecifiedDefault]
                if self.chance(0.5) or not with_default:
                    out.append({"set_defaults": []})
                else:
                    out.append({"set_defaults": self.r.sample(with_default, self.r.randrange(1, len(with_default) + 1))})
        return out

    def target(self, cls_name):
        versions = VERSIONS[cls_name]
        k = self.r.random()
        if k < 0.75:
            return self.pick(versions)
        latest = versions[-1]
        major, minor = latest.split(".")
        odd = [f"{major}.{int(minor) + 1}", "2.0", f"{major}.{minor}.0", "1.0.0", "1.01", "01.0",
               f"{major}.0{minor}", "1.x", "1.0.1"]
        return self.pick(odd)

    def manifest(self):
        k = self.r.random()
        if k < 0.25:
            return {}
        m = {}
        for name, versions in VERSIONS.items():
            if self.chance(0.5):
                m[name] = self.pick(versions + (["1.01", "1.0.0", "1.5"] if self.chance(0.1) else []))
        return m

    # ---- cases
    def next_name(self, kind):
        self.n += 1
        return f"fuzz_{self.seed}_{self.n:05d}_{kind}"

    def to_primitive_case(self):
        cls_name = self.pick(list(CLASSES))
        obj_spec = self.member_spec(cls_name, 0) if self.chance(0.3) else self.spec(cls_name)
        case = {"name": self.next_name("to"), "op": "to_primitive", "object": obj_spec}
        if self.chance(0.5):
            case["steps"] = self.steps(cls_name)
        if self.chance(0.6):
            case["target_version"] = self.target(cls_name)
        if self.chance(0.4):
            case["version_manifest"] = self.manifest()
        return case

    def valid_primitive(self, cls_name):
        spec = self.spec(cls_name)
        obj = build(spec)
        p = obj.obj_to_primitive(target_version=self.pick(VERSIONS[cls_name]),
                                 version_manifest=self.manifest() if self.chance(0.2) else None)
        if self.chance(0.5):
            pool = list(CLASSES[cls_name].fields) + ["bogus"]
            changes = self.r.sample(pool, self.r.randrange(0, len(pool) + 1))
            if changes or self.chance(0.3):
                p[K("changes")] = changes
            else:
                p.pop(K("changes"), None)
        return p

    def from_primitive_case(self):
        cls_name = self.pick(list(CLASSES))
        for _ in range(20):
            try:
                p = self.valid_primitive(cls_name)
                break
            except Exception:  # noqa: BLE001 - a spec OVO's constructor refuses: try again
                continue
        else:
            raise SystemExit("could not build a primitive")
        case = {"name": self.next_name("from"), "op": "from_primitive"}
        if self.chance(0.55):
            reason = self.mutate(p, cls_name)
            if reason:
                case["deliberate"] = reason
        case["primitive"] = sort_changes(p)
        return case

    def mutate(self, p, cls_name):
        """Mutates primitive p in place; returns a DELIBERATE key when verso refuses the
        result on purpose, whatever OVO does with it."""
        data = p[K("data")]
        # Another serial namespace adds one mutation; the default family's cases stay
        # what the same seed always gave.
        k = self.r.randrange(12 if SERIAL == DEFAULT_SERIAL else 13)
        if k == 12:
            # Keys in the default serial namespace, or another family's, at the top or
            # in a contained object: OVO reads the model's keys only (KeyError).
            other = self.pick([DEFAULT_SERIAL, "nova_object"])
            target = p
            if cls_name in LIST_MEMBER and data.get("objects") and self.chance(0.5):
                target = self.pick(data["objects"])
            elif cls_name == "AttachHandle" and isinstance(data.get("device"), dict) and self.chance(0.5):
                target = data["device"]
            for key in [k for k in target if k.startswith(SERIAL + ".")]:
                if self.chance(0.8):
                    target[other + key[len(SERIAL):]] = target.pop(key)
            return None
        if k == 11:
            # Labelled older than its data: fields added later are still in data (OVO
            # keeps every field it finds, whatever the version says).
            p[K("version")] = self.pick(VERSIONS[cls_name])
            return None
        if k == 9:
            key = self.pick([K("name"), K("namespace"), K("version")])
            p[key] = self.pick([5, None, 1.2, ["Device"], True, {"a": 1}])
            if self.chance(0.3):
                p[K("namespace")] = "nova"
            return None
        if k == 10:
            p[self.pick([K("extra"), "other"])] = self.pick([1, "x", None])
            data[self.pick(["bogus", "Id", K("name")])] = self.pick([1, "x", None, []])
            return None
        if k == 0:
            del p[self.pick([K("name"), K("namespace"),
                             K("version"), K("data")])]
            return None
        if k == 1:
            if self.chance(0.5):
                p[K("name")] = self.pick(["Accelerator", "device", "Devices", ""])
            else:
                p[K("namespace")] = self.pick(["nova", "Cyborg", "", "versioned_object"])
            return None
        if k == 2:
            v, reason = self.pick([
                ("1.3", None), ("1.10", None), ("2.0", None), ("0.9", None), ("1.2.1", None),
                ("1.2.0", None), ("1.0.0", None), ("1.1.0", None), ("1.01", None), ("01.1", None),
                ("1.00", None), ("1.0.5", None), ("1", "version_text"), ("1.0.0.0", "version_text"),
                ("v1.0", "version_text"), (" 1.0", "version_text"), ("1.0rc1", "version_text"),
                ("x", "version_text"), ("", "version_text"), ("1.-1", "version_text"),
            ])
            p[K("version")] = v
            return reason
        if k == 3:
            return self.mutate_nested(p, cls_name)
        if k == 4:
            shape = self.pick([[], "data", 5, None])
            p[K("data")] = shape
            return "object_shape"
        if k == 5:
            changes = self.pick(["hostname", 5, None, {"id": 1}, [1, "id"], [None], ["id", "id"]])
            p[K("changes")] = changes
            # A list is read by both (names that are not fields are ignored); OVO also
            # iterates a string's characters and a dict's keys.
            return None if isinstance(changes, list) else "object_shape"
        # k >= 6: a field value of another kind
        cls = CLASSES[cls_name]
        name = self.pick(list(cls.fields))
        field = cls.fields[name]
        if self.chance(0.15):
            data[name] = None  # nullable: None; with a default: the default; else ValueError
            return None
        value, reason = self.odd_value(field)
        data[name] = value
        return reason

    def mutate_nested(self, p, cls_name):
        data = p[K("data")]
        if cls_name in LIST_MEMBER:
            items = data.get("objects")
            if not items:
                return None
            target = self.pick(items)
        elif cls_name == "AttachHandle" and isinstance(data.get("device"), dict):
            target = data["device"]
        else:
            return None
        k = self.r.randrange(6)
        if k == 0:
            target[K("name")] = self.pick(["Accelerator", "Deployable", "AttachHandle"])
        elif k == 1:
            target[K("version")] = self.pick(["1.3", "1.9", "2.0", "0.1", "1.2.0", "1.01"])
        elif k == 2:
            target[K("namespace")] = "nova"
        elif k == 3:
            del target[self.pick([K("name"), K("namespace"),
                                  K("version"), K("data")])]
        elif k == 4:
            target[K("data")]["id"] = self.pick(["x", None, [1]])
        else:
            if cls_name in LIST_MEMBER:
                data["objects"][0] = self.pick(["Device", 5, None, []])
            else:
                data["device"] = self.pick(["Device", 5, []])
            return "object_shape"
        return None

    def odd_value(self, field):
        t = field._type
        if isinstance(t, fields.Object) or isinstance(field, fields.ListOfObjectsField):
            v = self.pick(["x", 5, {}, [], None])
            if isinstance(field, fields.ListOfObjectsField):
                # OVO iterates whatever it gets: {} is an empty list, "x" a list of "x".
                return v, None if v is None or v == [] else "container_shape"
            # {} is a primitive without keys: KeyError in both.
            return v, None if isinstance(v, dict) or v is None else "object_shape"
        if isinstance(t, fields.Enum):
            return self.pick(["bogus", 5, None, "gpu", ["GPU"]]), None
        if isinstance(t, fields.String):
            v = self.pick([5, 1.5, 1e-07, 1e16, 1e22, 2**63 - 1, 2**64 - 1, True, None, [], {}, 2**70, 1e300, -0.0])
            if isinstance(v, (list, dict)):
                return v, "object_shape"
            if (isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**64) or \
                    (isinstance(v, float) and abs(v) >= 2**63):
                return v, "string_from_huge_number"
            return v, None
        if isinstance(t, fields.Integer):
            v = self.pick(["12", " 7 ", "x", "1.5", 2.9, -2.9, None, True, "1_000", [], 1e300,
                           *HUGE_INTS, "99999999999999999999", "7\n", "\u00a07", "\u0663", "1e3",
                           "0x10", "-0", "+0007", ""])
            if isinstance(v, bool) or v in ("1_000", "\u0663"):
                return v, "number_python_literal"
            if isinstance(v, list):
                return v, "object_shape"
            if (isinstance(v, int) and not -(2**63) <= v < 2**63) or v == 1e300 or v == "99999999999999999999":
                return v, "int_range"
            return v, None
        if isinstance(t, fields.Float):
            v = self.pick(["1.5", "x", 3, True, None, "nan", "inf", "-Infinity", 2**70, " 2 ", "1_0.5",
                           "1e3", ".5", "5.", "+.5", "\u00a01.5\n", "1e400", "", "0x1p3"])
            if isinstance(v, bool) or v == "1_0.5":
                return v, "number_python_literal"
            if v == "1e400":
                return v, "float_not_finite"
            if v in ("nan", "inf", "-Infinity"):
                return v, "float_not_finite"
            return v, None
        if isinstance(t, fields.Boolean):
            v = self.pick([0, 1, "true", "false", "", None, [], 2.5])
            if v is None:
                return v, None
            return v, "bool_truthiness"
        if isinstance(t, fields.UUID):
            v, reason = self.pick([
                ("5D5A3E0B-6B2F-4B9A-9D0C-6D3F2C1B0A01", "uuid_not_canonical"),
                ("5d5a3e0b6b2f4b9a9d0c6d3f2c1b0a01", "uuid_not_canonical"),
                ("{5d5a3e0b-6b2f-4b9a-9d0c-6d3f2c1b0a01}", "uuid_not_canonical"),
                ("urn:uuid:5d5a3e0b-6b2f-4b9a-9d0c-6d3f2c1b0a01", "uuid_not_canonical"),
                ("not-a-uuid", "uuid_not_a_uuid"), ("", "uuid_not_a_uuid"), (5, "uuid_not_a_uuid"),
                (None, None),
            ])
            return v, reason
        if isinstance(t, fields.DateTime):
            v = self.pick(["2024-03-01", "2024-03-01T12:34", "20240301T123456Z", "bogus", 5, None,
                           "2024-13-01T00:00:00Z", "2024-03-01T24:00:00Z", "2024-03-01T12:34:56.1234567Z",
                           "2024-03-01T12:34:56+25:00", "2024-03-01t12:34:56Z", "2024-03-01T12:34:56z",
                           "0000-01-01T00:00:00Z", "2024", "2024-3-5", "2024-03-01T12",
                           "2024-03-01T12:34:56-0000", "0999-12-31T23:59:59-00"])
            if v in ("20240301T123456Z", "2024", "2024-3-5", "2024-03-01T12"):
                return v, "datetime_form"
            return v, None
        if isinstance(t, fields.Dict):
            v = self.pick([{"a": 5}, {"a": None}, {"a": 1.5}, {"a": True}, ["a"], "ab", 5, {"a": []}])
            if not isinstance(v, dict) or isinstance(v.get("a"), list):
                return v, "container_shape"
            return v, None
        if isinstance(t, fields.List):
            v = self.pick([[5], [None], [1e-07], [True], "ab", {"a": "b"}, 5, [[]]])
            if not isinstance(v, list) or v == [[]]:
                return v, "container_shape"
            return v, None
        return None, None

    def case(self):
        k = self.r.random()
        for _ in range(50):
            case = self.to_primitive_case() if k < 0.5 else self.from_primitive_case()
            try:
                case["expect"] = compute_expect(case)
            except Exception:  # noqa: BLE001 - OVO refused the build or a step: not a case
                self.n -= 1
                continue
            apply_deliberate(case)
            return case
        raise SystemExit("no case could be generated")


def cmd_generate(seed, count, out, ns):
    set_serial_namespace(ns)
    g = Gen(seed)
    cases = [g.case() for _ in range(count)]
    doc = {"format": 1, "generator": GENERATOR, "model": "ovo-model.json"}
    if ns != DEFAULT_SERIAL:
        doc["serial_namespace"] = ns
    doc.update({"group": "fuzz", "seed": seed, "cases": cases})
    text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="random cases, expects by OVO")
    g.add_argument("--seed", type=int, required=True)
    g.add_argument("--count", type=int, required=True)
    g.add_argument("--out")
    g.add_argument("--serial-namespace", default=DEFAULT_SERIAL)
    e = sub.add_parser("expect", help="recompute every expect of a case file")
    e.add_argument("file")
    r = sub.add_parser("rekey", help="a case file moved to another serial namespace, expects by OVO")
    r.add_argument("file")
    r.add_argument("--serial-namespace", required=True)
    args = ap.parse_args()
    if args.cmd == "generate":
        cmd_generate(args.seed, args.count, args.out, args.serial_namespace)
    elif args.cmd == "rekey":
        cmd_rekey(args.file, args.serial_namespace)
    else:
        cmd_expect(args.file)


if __name__ == "__main__":
    main()
