//! `[upgrade_levels]`: any TOML text, command-line override or environment value is
//! applied or refused with a typed error; accepted caps survive `show_config`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use verso::Version;
use verso_rpc::caps::{Limits, UpgradeLevels};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let limits = Limits {
        conductor: Version::new(1, 2),
        agent: Version::new(1, 1),
    };
    let Ok(mut levels) = UpgradeLevels::defaults(limits) else {
        return;
    };
    let _ = levels.apply_toml_str(text, "fuzz.toml");
    let _ = levels.apply_cli(text);
    let (k, v) = text.split_once('\n').unwrap_or((text, ""));
    let _ = levels.apply_env_from([(k.to_owned(), v.to_owned())]);
    let _ = levels.apply_env_from([(format!("VERSO_UPGRADE_LEVELS_{k}"), v.to_owned())]);
    let shown = levels.show_config();
    let mut again = UpgradeLevels::defaults(limits).expect("defaults");
    again
        .apply_toml_str(&shown, "shown")
        .expect("show_config reads back");
    assert_eq!(again.conductor(), levels.conductor());
    assert_eq!(again.agent(), levels.agent());
});
