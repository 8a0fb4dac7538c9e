//! The value path: any JSON document given to `Registry::from_primitive` of the Cyborg
//! model (every class registered) is decoded or refused with an error, never a panic.
//! A decoded object encodes again, and its own primitive decodes to an equal object.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;
use verso::Registry;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(cyborg_model::registry)
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
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
