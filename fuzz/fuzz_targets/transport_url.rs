//! Transport URLs: anything is parsed or refused with a typed error, never printing the
//! password, and a parsed config prints without panicking.
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
            let shown = format!("{config} {config:?}");
            for h in &config.hosts {
                if h.password.len() >= 4 && !h.username.contains(&h.password) && !h.host.contains(&h.password) && !config.vhost.contains(&h.password) {
                    assert!(!shown.contains(&h.password), "password shown: {shown}");
                }
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
