//! `[upgrade_levels]` through `verso_rpc::config`: any TOML text, command-line override or
//! environment value is applied or refused with a typed error; accepted caps survive
//! `show_config`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use verso::Version;
use verso_rpc::caps::ApiCap;
use verso_rpc::config::ConfigLoader;

fn loader() -> ConfigLoader {
    ConfigLoader::new()
        .api(ApiCap::new("conductor", Version::new(1, 2), Version::new(1, 1)))
        .api(ApiCap::new("agent", Version::new(1, 1), Version::new(1, 0)))
        .section("database")
        .env_vars([])
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (k, v) = text.split_once('\n').unwrap_or((text, ""));
    let (k, v) = (k.to_owned(), v.to_owned());
    for source in [
        loader().toml_str(text, "fuzz.toml"),
        loader().set(text),
        loader().env_vars([(k.clone(), v.clone())]),
        loader().env_vars([(format!("VERSO_UPGRADE_LEVELS_{k}"), v.clone())]),
        loader().env_vars([(format!("VERSO_DATABASE_{k}"), v.clone())]),
    ] {
        let Ok(config) = source.load() else {
            continue;
        };
        let _ = config.show_config();
        let shown = config.upgrade_levels().show_config();
        let again = loader()
            .toml_str(shown, "shown")
            .load()
            .expect("show_config reads back");
        for api in ["conductor", "agent"] {
            assert_eq!(again.cap(api), config.cap(api));
        }
    }
});
