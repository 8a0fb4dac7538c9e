//! Version strings: anything is parsed or refused with a typed error, and a parsed
//! version prints as text that parses back to it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use verso::Version;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(v) = text.parse::<Version>() else {
        return;
    };
    let printed = v.to_string();
    assert_eq!(
        printed.parse::<Version>().ok(),
        Some(v),
        "{text:?} -> {printed:?}"
    );
    let _ = v.accepts(&Version::new(1, 0));
});
