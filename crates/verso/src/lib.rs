//! verso: versioned objects for services that upgrade one node at a time.
//!
//! A versioned object is a struct of typed [`Field`]s with a version, change tracking,
//! and a JSON *primitive* form that is the same JSON oslo.versionedobjects writes, so a
//! Rust service and a Python one exchange objects across versions. An object can be
//! backported to an older version, contained objects and list members included, in one
//! pass guided by a [`VersionManifest`] of what the receiver knows.
//!
//! ```
//! use verso::{DateTime, Field, ObjectMeta, VersionedEnum, VersionedObject};
//!
//! #[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq)]
//! pub enum Mode {
//!     #[verso(value = "managed")]
//!     Managed,
//!     #[verso(value = "unmanaged")]
//!     Unmanaged,
//! }
//!
//! #[derive(VersionedObject, Clone, Debug, PartialEq)]
//! #[verso(namespace = "demo", name = "Device", version = "1.2")]
//! pub struct Device {
//!     pub id: Field<i64>,
//!     pub hostname: Field<String>,
//!     #[verso(since = "1.1")]
//!     pub vendor_board_info: Field<Option<String>>,
//!     #[verso(since = "1.2", default = Mode::Unmanaged)]
//!     pub managed_mode: Field<Mode>,
//!     pub created_at: Field<Option<DateTime>>,
//!     pub meta: ObjectMeta,
//! }
//!
//! let dev = Device {
//!     id: 1.into(),
//!     hostname: "host1".into(),
//!     managed_mode: Mode::Managed.into(),
//!     ..Device::blank()
//! };
//! let p = dev.to_primitive(verso::Target::Version("1.1".parse()?))?;
//! assert_eq!(p["versioned_object.version"], "1.1");
//! assert!(p["versioned_object.data"].get("managed_mode").is_none());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod backport;
pub mod context;
pub mod datetime;
pub mod error;
pub mod field;
pub mod fingerprint;
pub mod indirection;
pub mod limits;
pub mod list;
pub mod manifest;
pub mod object;
pub mod primitive;
pub mod registry;
pub mod schema;
pub mod sink;
pub mod version;

pub use backport::default_make_compatible;
pub use context::{DictValue, RequestContext};
pub use datetime::{DateTime, DateTimeError};
pub use error::{Error, Result};
pub use field::{
    DecodeContext, DynField, Field, FieldError, FieldType, FieldValue, PrimitiveData, VersionedEnum,
};
pub use fingerprint::{ContractChange, ObjectContract};
pub use indirection::{CallError, IndirectionApi, Remotable};
pub use limits::{DecodeLimits, LimitError};
pub use list::ObjectList;
pub use manifest::{Target, VersionManifest};
pub use object::{AnyObject, ObjectFamily, ObjectMeta, VersionedObject};
pub use registry::Registry;
pub use schema::{
    ArgSchema, FieldSchema, MethodKind, MethodSchema, ObjectSchema, OvoRepr, PrimitiveKeys,
};
pub use sink::{JsonSink, Sink, ValueSink};
pub use version::{Version, VersionError};
pub use verso_derive::{remotable, ObjectFamily, VersionedEnum, VersionedObject};

/// Items the derive macros refer to; not part of the public API.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
