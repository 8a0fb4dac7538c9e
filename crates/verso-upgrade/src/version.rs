//! Component versions: each component's own enum of the incompatible changes it has
//! gained, in order.
//!
//! A component version is not a release number. It names one change that older code
//! cannot live with (a new RPC method a client would call, a new column an old binary
//! would not write, a new enum value it could not read). Each variant carries an integer
//! (the order, persisted and sent on the wire) and a description; the newest variant is
//! the *software version* of the running build.
//!
//! ```
//! verso_upgrade::component_versions! {
//!     /// What the conductor of this service has learnt, release after release.
//!     pub enum ConductorVersion: "conductor" {
//!         /// The first release.
//!         Initial = 1 => "first release",
//!         /// Agents run object methods on the conductor (conductor RPC 1.1).
//!         Indirection = 2 => "object indirection",
//!     }
//! }
//! use verso_upgrade::{ComponentVersion, Observed};
//!
//! assert_eq!(ConductorVersion::software(), ConductorVersion::Indirection);
//! assert!(ConductorVersion::Initial < ConductorVersion::Indirection);
//! assert_eq!(ConductorVersion::observe(2), Ok(Observed::Known(ConductorVersion::Indirection)));
//! // A number this build does not know is kept as a future version, never mapped to the newest.
//! assert_eq!(ConductorVersion::observe(7), Ok(Observed::Future(7)));
//! ```

use serde::{Deserialize, Serialize};
use std::fmt;

/// A component's version enum. Implement it with [`component_versions!`](crate::component_versions).
///
/// The variants are ordered by [`number`](Self::number); numbers are unique and, once
/// released, never change or get reused (they are persisted and sent to peers).
pub trait ComponentVersion:
    Copy + Ord + Eq + std::hash::Hash + fmt::Debug + Send + Sync + 'static
{
    /// The component's name (`conductor`, `agent`), used in messages and status.
    const COMPONENT: &'static str;

    /// Every version, oldest first.
    fn all() -> &'static [Self];

    /// The integer persisted and sent on the wire.
    fn number(self) -> u32;

    /// What this version introduced, for people.
    fn description(self) -> &'static str;

    /// The variant's name in code (`Indirection`).
    fn name(self) -> &'static str;

    /// The newest version this build knows: the software version.
    fn software() -> Self {
        match Self::all().last() {
            Some(v) => *v,
            // component_versions! refuses an enum without variants at compile time.
            None => unreachable!("a component version enum has at least one variant"),
        }
    }

    /// The oldest version: what a fresh component of the first release persisted.
    fn oldest() -> Self {
        match Self::all().first() {
            Some(v) => *v,
            None => unreachable!("a component version enum has at least one variant"),
        }
    }

    /// The version with this number, if this build knows it.
    fn from_number(n: u32) -> Option<Self> {
        Self::all().iter().copied().find(|v| v.number() == n)
    }

    /// Reads a number from disk or a peer: a known version, a *future* version (above
    /// this build's software version), or an error for a number inside the known range
    /// that names no version (a corrupt file or a buggy peer).
    fn observe(n: u32) -> Result<Observed<Self>, UnknownVersion> {
        if let Some(v) = Self::from_number(n) {
            Ok(Observed::Known(v))
        } else if n > Self::software().number() {
            Ok(Observed::Future(n))
        } else {
            Err(UnknownVersion {
                component: Self::COMPONENT,
                number: n,
            })
        }
    }

    /// `name (number): description`, for messages.
    fn label(self) -> String {
        format!(
            "{} {} ({}: {})",
            Self::COMPONENT,
            self.number(),
            self.name(),
            self.description()
        )
    }
}

/// A version number read from disk or the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Observed<V> {
    /// A version this build knows.
    Known(V),
    /// A number above this build's software version: written by newer software.
    Future(u32),
}

impl<V: ComponentVersion> Observed<V> {
    /// The number, whatever it is.
    pub fn number(self) -> u32 {
        match self {
            Observed::Known(v) => v.number(),
            Observed::Future(n) => n,
        }
    }

    /// The known version, or `None` for a future one.
    pub fn known(self) -> Option<V> {
        match self {
            Observed::Known(v) => Some(v),
            Observed::Future(_) => None,
        }
    }
}

impl<V: ComponentVersion> fmt::Display for Observed<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Observed::Known(v) => write!(f, "{} ({})", v.number(), v.name()),
            Observed::Future(n) => write!(f, "{n} (newer than this build)"),
        }
    }
}

/// A number inside the known range that names no version.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{component} version {number} is not a version this build knows, nor a newer one: the version file or the peer is corrupt")]
pub struct UnknownVersion {
    /// The component.
    pub component: &'static str,
    /// The number read.
    pub number: u32,
}

/// Declares a component version enum and implements [`ComponentVersion`] for it.
///
/// ```
/// verso_upgrade::component_versions! {
///     /// Agent versions.
///     pub enum AgentVersion: "agent" {
///         /// First release.
///         Initial = 1 => "first release",
///         /// The conductor may ask the agent to clean a device (agent RPC 1.1).
///         DeviceCleanup = 2 => "NVMe secure cleanup",
///     }
/// }
/// use verso_upgrade::ComponentVersion;
/// assert_eq!(AgentVersion::DeviceCleanup.number(), 2);
/// assert_eq!(AgentVersion::COMPONENT, "agent");
/// ```
///
/// Numbers must increase in declaration order; the check runs at compile time.
#[macro_export]
macro_rules! component_versions {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : $component:literal {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $number:literal => $description:literal
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $variant = $number,
            )+
        }

        const _: () = {
            let numbers: &[u32] = &[$($number),+];
            let mut i = 1;
            while i < numbers.len() {
                assert!(
                    numbers[i - 1] < numbers[i],
                    "component version numbers must increase in declaration order"
                );
                i += 1;
            }
        };

        impl $crate::ComponentVersion for $name {
            const COMPONENT: &'static str = $component;

            fn all() -> &'static [Self] {
                &[$($name::$variant),+]
            }

            fn number(self) -> u32 {
                self as u32
            }

            fn description(self) -> &'static str {
                match self {
                    $($name::$variant => $description,)+
                }
            }

            fn name(self) -> &'static str {
                match self {
                    $($name::$variant => stringify!($variant),)+
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::component_versions! {
        /// Test versions with a gap in the numbers.
        pub enum V: "test" {
            /// one
            One = 1 => "one",
            /// three
            Three = 3 => "three",
        }
    }

    #[test]
    fn order_software_and_observation() {
        assert_eq!(V::software(), V::Three);
        assert_eq!(V::oldest(), V::One);
        assert!(V::One < V::Three);
        assert_eq!(V::observe(1), Ok(Observed::Known(V::One)));
        assert_eq!(V::observe(4), Ok(Observed::Future(4)));
        assert_eq!(
            V::observe(2),
            Err(UnknownVersion {
                component: "test",
                number: 2
            })
        );
        assert_eq!(
            V::observe(0),
            Err(UnknownVersion {
                component: "test",
                number: 0
            })
        );
        assert_eq!(V::Three.label(), "test 3 (Three: three)");
        assert_eq!(
            Observed::<V>::Future(9).to_string(),
            "9 (newer than this build)"
        );
    }
}
