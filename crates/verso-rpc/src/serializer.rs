//! [`Serializer`]: the hook that converts arguments and results on their way to and from
//! the wire (oslo.messaging's `Serializer`; the objects layer plugs its primitive codec in
//! here). The default, [`NoOpSerializer`], passes values through.

use crate::RpcError;
use serde_json::Value;
use verso::RequestContext;

/// Converts each argument and result between the application's form and the wire's.
///
/// The client serializes every argument before sending and deserializes the result; the
/// server deserializes every argument before the handler runs and serializes its result.
///
/// ```
/// use serde_json::{json, Value};
/// use verso::RequestContext;
/// use verso_rpc::{RpcError, Serializer};
///
/// /// Upper-cases strings on the way out (a toy).
/// struct Shout;
/// impl Serializer for Shout {
///     fn serialize_entity(&self, _: &RequestContext, v: Value) -> Result<Value, RpcError> {
///         Ok(match v { Value::String(s) => Value::String(s.to_uppercase()), v => v })
///     }
///     fn deserialize_entity(&self, _: &RequestContext, v: Value) -> Result<Value, RpcError> {
///         Ok(v)
///     }
/// }
/// let ctx = RequestContext::new("r");
/// assert_eq!(Shout.serialize_entity(&ctx, json!("hi"))?, json!("HI"));
/// # Ok::<(), RpcError>(())
/// ```
pub trait Serializer: Send + Sync + 'static {
    /// Application value to wire value.
    fn serialize_entity(&self, ctx: &RequestContext, value: Value) -> Result<Value, RpcError>;
    /// Wire value to application value.
    fn deserialize_entity(&self, ctx: &RequestContext, value: Value) -> Result<Value, RpcError>;

    /// Whether both conversions return their input unchanged, so callers may skip them.
    fn is_identity(&self) -> bool {
        false
    }
}

/// Passes values through unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoOpSerializer;

impl Serializer for NoOpSerializer {
    fn serialize_entity(&self, _: &RequestContext, value: Value) -> Result<Value, RpcError> {
        Ok(value)
    }
    fn deserialize_entity(&self, _: &RequestContext, value: Value) -> Result<Value, RpcError> {
        Ok(value)
    }
    fn is_identity(&self) -> bool {
        true
    }
}
