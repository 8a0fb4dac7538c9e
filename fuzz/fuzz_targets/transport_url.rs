//! Transport URLs: anything is parsed or refused with a typed error, and a parsed config
//! prints the same whatever its passwords are (they are never shown).
#![no_main]

use libfuzzer_sys::fuzz_target;
use verso_rpc::transport::amqp::{redact, AmqpConfig};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = redact(text);
    match AmqpConfig::from_url(text) {
        Ok(config) => {
            let mut other = config.clone();
            for h in &mut other.hosts {
                h.password = "\u{1}a password that must not show\u{1}".into();
            }
            assert_eq!(
                format!("{config} {config:?}"),
                format!("{other} {other:?}"),
                "the printed config depends on the password"
            );
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
