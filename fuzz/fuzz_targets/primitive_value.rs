//! The value path: any JSON document given to `Registry::from_primitive` of the Cyborg
//! model (every class registered) is decoded or refused with an error, never a panic.
//! A decoded object encodes again, and its own primitive decodes to an equal object.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;
use verso::{DecodeLimits, Registry};

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(cyborg_model::registry)
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    // The text scan of the byte path never lets through what the walk of the parsed
    // value refuses (it may refuse more: a key given twice counts twice in the text).
    for limits in [
        DecodeLimits {
            max_depth: 3,
            max_members: 2,
        },
        DecodeLimits {
            max_depth: 8,
            max_members: 16,
        },
        DecodeLimits::default(),
    ] {
        if limits.check_json(data).is_ok() {
            assert_eq!(limits.check_value(&value), Ok(()), "{limits:?}");
        }
    }
    let Ok(obj) = registry().from_primitive(&value) else {
        return;
    };
    let again = obj
        .obj_to_primitive(verso::Target::Own)
        .expect("a decoded object encodes at its own version");
    let back = registry()
        .from_primitive(&again)
        .expect("an object's own primitive decodes");
    assert_eq!(
        back.obj_to_primitive(verso::Target::Own).ok(),
        Some(again),
        "decode(encode(x)) differs from x"
    );
    let _ = obj.obj_describe();
    let _ = obj.obj_to_primitive_bytes(verso::Target::Own);
});
