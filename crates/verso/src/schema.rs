//! What the derive declares about a class: its fields, their OVO types and history,
//! its remotable methods. Plain data, below everything that encodes, decodes or
//! backports objects.

use crate::Version;
use serde_json::Value;
use std::fmt;

/// OVO's default serial namespace, the prefix of every primitive key of a class that
/// sets no other.
pub const DEFAULT_SERIAL_NAMESPACE: &str = "versioned_object";

/// The five keys of an object primitive in one serial namespace (OVO's
/// `OBJ_SERIAL_NAMESPACE`): `{serial}.name`, `.namespace`, `.version`, `.data`,
/// `.changes`. Written out once, at compile time, by the derive (`serial_namespace =
/// "..."` or an [`ObjectFamily`](crate::ObjectFamily)), so neither codec path builds a
/// key at run time.
///
/// ```
/// use verso::{Field, ObjectMeta, PrimitiveKeys, VersionedObject};
/// #[derive(VersionedObject, Clone, Debug, PartialEq)]
/// #[verso(namespace = "cyborg", serial_namespace = "cyborg_object", version = "1.0")]
/// pub struct Widget { pub id: Field<i64>, pub meta: ObjectMeta }
///
/// assert_eq!(Widget::SERIAL_NAMESPACE, "cyborg_object");
/// assert_eq!(Widget::PRIMITIVE_KEYS.version(), "cyborg_object.version");
/// let p = Widget { id: 1.into(), ..Widget::blank() }.to_primitive(verso::Target::Own)?;
/// assert_eq!(p["cyborg_object.name"], "Widget");
/// assert_eq!(PrimitiveKeys::VERSIONED_OBJECT.name(), "versioned_object.name");
/// # Ok::<(), verso::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PrimitiveKeys {
    pub(crate) serial_namespace: &'static str,
    // The whole keys, written out so that no codec path builds one at run time.
    pub(crate) name: &'static str,
    pub(crate) namespace: &'static str,
    pub(crate) version: &'static str,
    pub(crate) data: &'static str,
    pub(crate) changes: &'static str,
}

impl PrimitiveKeys {
    /// The keys of the default serial namespace, `versioned_object`.
    pub const VERSIONED_OBJECT: PrimitiveKeys = PrimitiveKeys {
        serial_namespace: DEFAULT_SERIAL_NAMESPACE,
        name: "versioned_object.name",
        namespace: "versioned_object.namespace",
        version: "versioned_object.version",
        data: "versioned_object.data",
        changes: "versioned_object.changes",
    };

    /// The keys of `serial_namespace`, each given whole (the derive writes them with
    /// `concat!`-like literals). Not part of the public API: declare a serial namespace
    /// with the derive.
    #[doc(hidden)]
    pub const fn __new(
        serial_namespace: &'static str,
        [name, namespace, version, data, changes]: [&'static str; 5],
    ) -> Self {
        PrimitiveKeys {
            serial_namespace,
            name,
            namespace,
            version,
            data,
            changes,
        }
    }

    /// The serial namespace (`versioned_object`, `cyborg_object`).
    pub const fn serial_namespace(&self) -> &'static str {
        self.serial_namespace
    }
    /// `{serial}.name`.
    pub const fn name(&self) -> &'static str {
        self.name
    }
    /// `{serial}.namespace`.
    pub const fn namespace(&self) -> &'static str {
        self.namespace
    }
    /// `{serial}.version`.
    pub const fn version(&self) -> &'static str {
        self.version
    }
    /// `{serial}.data`.
    pub const fn data(&self) -> &'static str {
        self.data
    }
    /// `{serial}.changes`.
    pub const fn changes(&self) -> &'static str {
        self.changes
    }

    /// Whether `map` has any of these keys (the primitive is written in this serial
    /// namespace, whole or not).
    pub(crate) fn used_by(&self, map: &serde_json::Map<String, Value>) -> bool {
        [
            self.namespace,
            self.name,
            self.version,
            self.data,
            self.changes,
        ]
        .iter()
        .any(|k| map.contains_key(*k))
    }
}

impl Default for PrimitiveKeys {
    fn default() -> Self {
        PrimitiveKeys::VERSIONED_OBJECT
    }
}

/// The OVO field type class of a field, as fingerprints and the lint see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldType {
    /// `String`.
    String,
    /// `Integer`.
    Integer,
    /// `Float`.
    Float,
    /// `Boolean`.
    Boolean,
    /// `UUID`.
    Uuid,
    /// `DateTime` (timezone-aware).
    DateTime,
    /// `Enum` with its valid values, in declaration order.
    Enum(&'static [&'static str]),
    /// `Dict` of a value type (keys are strings).
    Dict(Box<FieldType>),
    /// `List` of an element type.
    List(Box<FieldType>),
    /// `Object` of the named class.
    Object(&'static str),
    /// `ListOfObjects` of the named class.
    ListOfObjects(&'static str),
}

impl FieldType {
    /// OVO's field type class name (`String`, `Dict`, `Object`, ...), as it appears in
    /// fingerprints.
    pub fn ovo_class(&self) -> &'static str {
        match self {
            FieldType::String => "String",
            FieldType::Integer => "Integer",
            FieldType::Float => "Float",
            FieldType::Boolean => "Boolean",
            FieldType::Uuid => "UUID",
            FieldType::DateTime => "DateTime",
            FieldType::Enum(_) => "Enum",
            FieldType::Dict(_) => "Dict",
            FieldType::List(_) => "List",
            FieldType::Object(_) => "Object",
            FieldType::ListOfObjects(_) => "List",
        }
    }

    /// The class an `Object` or `ListOfObjects` field holds.
    pub fn child_object(&self) -> Option<&'static str> {
        match self {
            FieldType::Object(n) | FieldType::ListOfObjects(n) => Some(n),
            _ => None,
        }
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldType::Dict(v) => write!(f, "Dict({v})"),
            FieldType::List(v) => write!(f, "List({v})"),
            FieldType::Object(n) => write!(f, "Object({n})"),
            FieldType::ListOfObjects(n) => write!(f, "ListOfObjects({n})"),
            FieldType::Enum(v) => write!(f, "Enum({})", v.join(",")),
            other => f.write_str(other.ovo_class()),
        }
    }
}

/// What a field is: its name, OVO type, nullability, default and history.
#[derive(Debug, Clone)]
pub struct FieldSchema {
    /// The field name (the key in `versioned_object.data`, or `{serial}.data`).
    pub name: &'static str,
    /// The OVO type.
    pub ty: FieldType,
    /// Whether `None` is a value.
    pub nullable: bool,
    /// The default, in primitive form (`obj_set_defaults`, and what `null` becomes on a
    /// non-nullable field).
    pub default: Option<Value>,
    /// The object version that added the field; a backport below it drops the field.
    /// `None` means the field has been there since the first version.
    pub since: Option<Version>,
    /// For an object (or list-of-objects) field, OVO's `obj_relationships` entry:
    /// `(my_version, child_version)` pairs, oldest first.
    pub relationships: Vec<(Version, Version)>,
    /// The schema of the contained class, for object fields.
    pub child: Option<fn() -> &'static ObjectSchema>,
    /// How OVO prints the field in a fingerprint, where the Python declaration makes it
    /// differ from its type's usual form.
    pub ovo_repr: OvoRepr,
}

/// How OVO's `repr()` of an enum field reads, which the fingerprint hashes. Python
/// services declare enum fields in several ways that validate the same values but
/// print differently, so a Rust declaration of their model says which one it matches.
///
/// ```
/// use verso::{Field, ObjectMeta, VersionedEnum, VersionedObject};
///
/// #[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq)]
/// pub enum State { Initial, Bound }
///
/// #[derive(VersionedObject, Clone, Debug, PartialEq)]
/// #[verso(namespace = "demo", version = "1.0")]
/// pub struct Request {
///     #[verso(ovo_enum_class = "ARQState")]
///     pub state: Field<State>,
///     pub meta: ObjectMeta,
/// }
///
/// assert_eq!(
///     verso::fingerprint::ovo_hashed_text(Request::schema()),
///     "([('state', ARQState(default=<class 'oslo_versionedobjects.fields.UnspecifiedDefault'>,\
///      nullable=False,valid_values=('Initial', 'Bound')))], [])"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OvoRepr {
    /// The type's own form; for an enum, `EnumField(valid_values=(..))`:
    /// `Enum(default=..,nullable=..,valid_values=('a', 'b'))`.
    #[default]
    Standard,
    /// An enum whose Python type is a named subclass of `Enum` used through a
    /// `BaseEnumField` (Cyborg's `ARQStateField`): `ARQState(..,valid_values=(..))`.
    /// Attribute `#[verso(ovo_enum_class = "Name")]`.
    EnumClass(&'static str),
    /// An enum declared as an `AutoTypedField` whose type is an `Enum` (Cyborg's
    /// `DeviceTypeField`): OVO prints it as a plain field, `Enum(default=..,nullable=..)`,
    /// without its values. Attribute `#[verso(ovo_auto_typed)]`.
    AutoTyped,
    /// An enum whose Python `valid_values` is one string rather than a tuple (Cyborg's
    /// `CPID_TYPE = "PCI"`): printed as that text, `valid_values=PCI`. It needs exactly
    /// one value. Attribute `#[verso(ovo_values_as_text)]`.
    ValuesAsText,
}

/// Whether a remotable method is called on the class or on an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodKind {
    /// A class method (`@remotable_classmethod`): the caller passes the context.
    Class,
    /// An instance method (`@remotable`): the context is the one on the object.
    Instance,
}

/// One argument of a remotable method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgSchema {
    /// The argument name.
    pub name: &'static str,
    /// Its Rust type, as written in the signature.
    pub ty: &'static str,
}

/// A remotable method of an object, as the registry and fingerprints see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodSchema {
    /// The method name.
    pub name: &'static str,
    /// Class or instance method.
    pub kind: MethodKind,
    /// The arguments after the receiver and context.
    pub args: Vec<ArgSchema>,
    /// The Rust return type, as written.
    pub returns: &'static str,
}

/// Everything verso knows about a class: what the derive declares.
#[derive(Debug, Clone)]
pub struct ObjectSchema {
    /// The object name on the wire.
    pub name: &'static str,
    /// The project namespace (`versioned_object.namespace`; OVO's
    /// `OBJ_PROJECT_NAMESPACE`).
    pub namespace: &'static str,
    /// The keys of the class's primitive, in its serial namespace (OVO's
    /// `OBJ_SERIAL_NAMESPACE`, `versioned_object` unless the class's family sets another).
    pub primitive_keys: PrimitiveKeys,
    /// The class version.
    pub version: Version,
    /// Whether this is a list object (one `objects` field of a list of objects).
    pub is_list: bool,
    /// Fields in declaration order.
    pub fields: Vec<FieldSchema>,
    /// For list objects, OVO's `child_versions`: `(list_version, member_version)` pairs,
    /// in declaration order.
    pub child_versions: Vec<(Version, Version)>,
    /// Remotable methods, sorted by name.
    pub methods: Vec<MethodSchema>,
    /// Registered for tests only: left out of fingerprint lock files.
    pub test_only: bool,
    /// The class has a custom `make_compatible` hook.
    pub custom_make_compatible: bool,
}

impl ObjectSchema {
    /// The serial namespace, the prefix of every key of the class's primitive.
    pub fn serial_namespace(&self) -> &'static str {
        self.primitive_keys.serial_namespace()
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&FieldSchema> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The position of the field called `name` (the index of `VersionedObject::field`).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }
}
