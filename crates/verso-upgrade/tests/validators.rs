//! Request validators: a request using a feature of an unfinalized version is refused
//! before it is processed, so components at different apparent versions persist the same
//! results wherever their versions agree.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use proptest::prelude::*;
use std::collections::BTreeMap;
use verso_upgrade::{component_versions, FileStore, RequestValidators, VersionManager};

component_versions! {
    /// The versions of a small handle service.
    pub enum V: "conductor" {
        /// First release.
        Initial = 1 => "first release",
        /// Handles may be in state `cleaning`.
        Cleaning = 2 => "cleaning state",
    }
}

#[derive(Clone, Debug)]
struct SetState {
    handle: u8,
    state: &'static str,
}

fn validators(m: &VersionManager<V>) -> RequestValidators<V, SetState> {
    RequestValidators::new(m).validator(V::Cleaning, "handle state cleaning", |r: &SetState| {
        r.state == "cleaning"
    })
}

/// Processes requests, persisting accepted ones; returns the persisted state and which
/// requests were refused.
fn process(
    v: &RequestValidators<V, SetState>,
    requests: &[SetState],
) -> (BTreeMap<u8, &'static str>, Vec<usize>) {
    let mut persisted = BTreeMap::new();
    let mut refused = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        match v.check(r) {
            Ok(()) => {
                persisted.insert(r.handle, r.state);
            }
            Err(e) => {
                assert_eq!((e.required, e.apparent), (2, 1));
                assert_eq!(e.feature, "handle state cleaning");
                refused.push(i);
            }
        }
    }
    (persisted, refused)
}

async fn manager(dir: &std::path::Path, apparent: u32) -> VersionManager<V> {
    let path = dir.join(format!("v{apparent}"));
    std::fs::write(
        &path,
        format!(r#"{{"format": 1, "component": "conductor", "apparent": {apparent}}}"#),
    )
    .expect("write");
    VersionManager::<V>::open(FileStore::new(path))
        .await
        .expect("open")
}

fn request() -> impl Strategy<Value = SetState> {
    (
        0..4u8,
        prop::sample::select(vec!["available", "in_use", "cleaning"]),
    )
        .prop_map(|(handle, state)| SetState { handle, state })
}

proptest! {
    #[test]
    fn managers_at_different_versions_agree_where_their_versions_do(requests in prop::collection::vec(request(), 0..30)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let dir = tempfile::tempdir().expect("tempdir");
        let (old, new) = rt.block_on(async { (manager(dir.path(), 1).await, manager(dir.path(), 2).await) });
        let (old_state, refused) = process(&validators(&old), &requests);
        let (new_state, new_refused) = process(&validators(&new), &requests);
        prop_assert!(new_refused.is_empty());
        // The old one refused exactly the requests that use the new state...
        let uses_new: Vec<usize> = requests.iter().enumerate().filter(|(_, r)| r.state == "cleaning").map(|(i, _)| i).collect();
        prop_assert_eq!(&refused, &uses_new);
        // ...and persisted what the new one persists for the same sequence without them.
        let common: Vec<SetState> = requests.iter().filter(|r| r.state != "cleaning").cloned().collect();
        prop_assert_eq!(old_state, process(&validators(&new), &common).0);
        if uses_new.is_empty() {
            prop_assert_eq!(process(&validators(&old), &requests).0, new_state);
        }
    }
}

#[tokio::test]
async fn a_validator_opens_at_finalization_and_counts_as_a_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = manager(dir.path(), 1).await;
    assert_eq!(m.unused_versions(), vec![V::Cleaning]);
    let v = validators(&m);
    assert!(m.unused_versions().is_empty());
    let cleaning = SetState {
        handle: 1,
        state: "cleaning",
    };
    let refused = v.check(&cleaning).expect_err("gated until finalized");
    assert_eq!((refused.apparent, refused.required), (1, 2), "{refused}");
    m.finalize().await.expect("finalize");
    assert!(v.check(&cleaning).is_ok());
}
