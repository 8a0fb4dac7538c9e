//! [`Target`]: where a message goes (oslo.messaging's `Target`).

use std::fmt;
use verso::Version;

/// Where a message goes, or what a server listens on.
///
/// - `topic`: the service (`accel-conductor`); a call to a topic goes to one of its
///   servers, round-robin.
/// - `server`: one server of the topic (`conductor-1`); a server listens on both.
/// - `namespace`: the endpoint namespace a call is for; `None` matches endpoints without one.
/// - `version`: on a client, the newest API version its code speaks (a call above it is
///   refused locally); oslo.messaging's default message version, which verso does not
///   need since every call names its version.
/// - `fanout`: a cast goes to every server of the topic.
///
/// ```
/// use verso::Version;
/// use verso_rpc::Target;
/// let t = Target::new("accel-conductor").with_server("conductor-1").with_version(Version::new(1, 2));
/// assert_eq!(t.to_string(), "accel-conductor.conductor-1 (version 1.2)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// The topic (service name).
    pub topic: String,
    /// One server of the topic, if the message is for it alone.
    pub server: Option<String>,
    /// The endpoint namespace.
    pub namespace: Option<String>,
    /// The API version (see the type's documentation).
    pub version: Option<Version>,
    /// Whether a cast goes to every server of the topic.
    pub fanout: bool,
}

impl Target {
    /// A target for `topic`, any server, no namespace.
    pub fn new(topic: impl Into<String>) -> Self {
        Target {
            topic: topic.into(),
            server: None,
            namespace: None,
            version: None,
            fanout: false,
        }
    }

    /// The same target, for one server.
    pub fn with_server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    /// The same target, in an endpoint namespace.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// The same target, with an API version.
    pub fn with_version(mut self, version: Version) -> Self {
        self.version = Some(version);
        self
    }

    /// The same target, with fanout set or cleared.
    pub fn with_fanout(mut self, fanout: bool) -> Self {
        self.fanout = fanout;
        self
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.topic)?;
        if let Some(s) = &self.server {
            write!(f, ".{s}")?;
        }
        if self.fanout {
            f.write_str(" (fanout)")?;
        }
        if let Some(ns) = &self.namespace {
            write!(f, " (namespace {ns})")?;
        }
        if let Some(v) = &self.version {
            write!(f, " (version {v})")?;
        }
        Ok(())
    }
}
