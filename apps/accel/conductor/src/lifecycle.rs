//! The accelerator request (ARQ) lifecycle: its states and, in one table, which state
//! may follow which. The database enforces the table: every transition is a conditional
//! update `... WHERE state IN (allowed predecessors)` inside the transaction that does
//! the work, so two conductors racing on one request cannot both move it.
//!
//! ```text
//! Initial ──bind──▶ BindStarted ──▶ Bound ──unbind──▶ Unbound ──bind──▶ BindStarted ...
//!                        └────────▶ BindFailed        └──▶ UnbindFailed
//! any settled state ──delete──▶ Deleting (then the row goes)
//! ```

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The state of an accelerator request (Cyborg's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArqState {
    /// Created, not bound.
    Initial,
    /// A bind is under way.
    BindStarted,
    /// Bound to an attach handle on a host.
    Bound,
    /// The bind failed (no free device); it may be unbound or deleted.
    BindFailed,
    /// Released; it may be bound again.
    Unbound,
    /// Releasing failed; it may be unbound again or deleted.
    UnbindFailed,
    /// Being deleted.
    Deleting,
}

impl ArqState {
    /// Every state.
    pub const ALL: [ArqState; 7] = [
        ArqState::Initial,
        ArqState::BindStarted,
        ArqState::Bound,
        ArqState::BindFailed,
        ArqState::Unbound,
        ArqState::UnbindFailed,
        ArqState::Deleting,
    ];

    /// The states a request may be in to move to `self`: the lifecycle table.
    pub fn allowed_from(self) -> &'static [ArqState] {
        use ArqState::*;
        match self {
            Initial => &[],
            BindStarted => &[Initial, Unbound],
            Bound => &[BindStarted],
            BindFailed => &[BindStarted],
            Unbound => &[Bound, BindFailed, UnbindFailed],
            UnbindFailed => &[Bound],
            Deleting => &[Initial, Bound, BindFailed, Unbound, UnbindFailed],
        }
    }

    /// True when `self -> to` is in the table.
    pub fn can_become(self, to: ArqState) -> bool {
        to.allowed_from().contains(&self)
    }

    /// The name stored in the database and shown by the API.
    pub fn as_str(self) -> &'static str {
        match self {
            ArqState::Initial => "Initial",
            ArqState::BindStarted => "BindStarted",
            ArqState::Bound => "Bound",
            ArqState::BindFailed => "BindFailed",
            ArqState::Unbound => "Unbound",
            ArqState::UnbindFailed => "UnbindFailed",
            ArqState::Deleting => "Deleting",
        }
    }
}

impl fmt::Display for ArqState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not one.
#[derive(Debug, thiserror::Error)]
#[error("unknown accelerator request state {0:?}")]
pub struct UnknownState(pub String);

impl FromStr for ArqState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ArqState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ArqState::*;

    #[test]
    fn the_table_allows_exactly_these_transitions() {
        let allowed = [
            (Initial, BindStarted),
            (Unbound, BindStarted),
            (BindStarted, Bound),
            (BindStarted, BindFailed),
            (Bound, Unbound),
            (BindFailed, Unbound),
            (UnbindFailed, Unbound),
            (Bound, UnbindFailed),
            (Initial, Deleting),
            (Bound, Deleting),
            (BindFailed, Deleting),
            (Unbound, Deleting),
            (UnbindFailed, Deleting),
        ];
        for from in ArqState::ALL {
            for to in ArqState::ALL {
                assert_eq!(
                    from.can_become(to),
                    allowed.contains(&(from, to)),
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for s in ArqState::ALL {
            assert_eq!(s.as_str().parse::<ArqState>().ok(), Some(s));
        }
        assert!(matches!(
            "bound".parse::<ArqState>(),
            Err(UnknownState(s)) if s == "bound"
        ));
    }
}
