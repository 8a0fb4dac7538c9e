//! The oslo.messaging envelope and message dict: any received body is read or refused
//! with a typed error by `read_body`, `Request::from_message` and `Reply::from_message`,
//! and a dispatcher (with the conductor's object endpoints over the Cyborg registry)
//! answers whatever request it yields without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use std::sync::{Arc, OnceLock};
use verso::Version;
use verso_rpc::conductor::{add_object_endpoints, INDIRECTION_VERSION};
use verso_rpc::message::{read_body, MessageLimits, Reply, Request};
use verso_rpc::{ArgSpec, ArgType, Args, Dispatcher, Endpoint, MethodSpec};

fn dispatcher() -> &'static Dispatcher {
    static D: OnceLock<Dispatcher> = OnceLock::new();
    D.get_or_init(|| {
        let ping = Endpoint::new(Version::new(1, 1)).method(
            MethodSpec::new("ping", Version::new(1, 0))
                .arg(ArgSpec::required("arg", ArgType::Any))
                .arg(ArgSpec::optional("n", ArgType::Int, 0).since(Version::new(1, 1))),
            |_ctx, args: Args| async move { Ok(json!({"arg": args.value("arg")})) },
        );
        let conductor = add_object_endpoints(
            ping,
            INDIRECTION_VERSION,
            Arc::new(cyborg_model::registry()),
            |ctx| ctx,
        );
        Dispatcher::new(vec![conductor]).expect("valid endpoints")
    })
}

fuzz_target!(|data: &[u8]| {
    let limits = MessageLimits {
        max_message_size: 1 << 20,
        ..MessageLimits::default()
    };
    let message = match read_body(data, &limits) {
        Ok(m) => m,
        Err(unreadable) => {
            let _ = unreadable.reply_to();
            let _ = unreadable.error.to_remote().to_failure_string();
            return;
        }
    };
    if let Ok(reply) = Reply::from_message(message.clone()) {
        let _ = reply.into_message();
    }
    let request = Request::from_message(message);
    if let Ok(r) = &request {
        // What a client would send again reads back the same.
        let again = Request::from_message(r.clone().into_message()).expect("own request reads");
        assert_eq!(&again, r);
    }
    let reply = futures::executor::block_on(dispatcher().handle(request));
    let _ = Reply::from_message(reply.into_message()).expect("own reply reads");
});
