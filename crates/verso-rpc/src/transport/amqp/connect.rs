//! One connection attempt to one broker, and the diagnosis of a failed one (a refused
//! login, a missing vhost, TLS to a plain port, a refused client certificate).

use super::error::ConnectKind;
use super::io::io_handle;
use super::{tls, AmqpConfig, BrokerHost};
use amqprs::connection::{Connection, OpenConnectionArguments};
use std::time::Duration;

/// How long one connection attempt to one broker may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What to check when a connection failed for a reason verso does not recognise.
pub(super) const CONNECT_CHECKLIST: &str =
    "check that the broker runs, the host and port, the user, \
                                 password and vhost, and ssl=true if it wants TLS";

/// Why one broker could not be connected to.
pub(super) struct Failure {
    /// The reason, without the broker's address (the error names it once).
    pub(super) why: String,
    /// Whether `why` says what is wrong; if not, the error adds what to check.
    pub(super) diagnosed: bool,
    /// What kind of failure it was.
    pub(super) kind: ConnectKind,
}

impl Failure {
    pub(super) fn plain(why: String) -> Self {
        Failure {
            why,
            diagnosed: false,
            kind: ConnectKind::Other,
        }
    }

    pub(super) fn diagnosed(why: String, kind: ConnectKind) -> Self {
        Failure {
            why,
            diagnosed: true,
            kind,
        }
    }
}

/// Connects to one broker.
pub(super) async fn connect_once(
    config: &AmqpConfig,
    host: &BrokerHost,
) -> Result<Connection, Failure> {
    let mut args =
        OpenConnectionArguments::new(&host.host, host.port, &host.username, &host.password);
    args.virtual_host(&config.vhost)
        .heartbeat(heartbeat_secs(config.heartbeat))
        .connection_name("verso-rpc");
    if let Some(tls) = &config.tls {
        // The files are read on every attempt: a renewed certificate is used on the next
        // reconnect.
        args.tls_adaptor(
            tls::adaptor(tls, &host.host)
                .map_err(|e| Failure::diagnosed(e.to_string(), ConnectKind::Tls))?,
        );
    }
    // In a task of its own: amqprs's open, cancelled after it started the connection's
    // tasks, leaves them waiting for an answer that never comes. A late open is closed.
    let args = args.finish();
    let mut opening = io_handle().spawn(async move { Connection::open(&args).await });
    match tokio::time::timeout(CONNECT_TIMEOUT, &mut opening).await {
        Ok(Ok(Ok(c))) => Ok(c),
        Ok(Ok(Err(e))) => {
            let e = e.to_string();
            if let Some(explained) = open_refusal(config, &host.username, &e) {
                let kind = broker_close(&e).map_or(ConnectKind::BrokerClosed, |(code, text)| {
                    close_kind(code, &text)
                });
                return Err(Failure::diagnosed(explained, kind));
            }
            let hints = [
                client_cert_hint(config, &e).to_owned(),
                plain_port_hint(config, host, &e),
                tls_port_hint(config, host, &e),
            ]
            .concat();
            let login = login_hint(&host.username, &e);
            Err(if !hints.is_empty() {
                Failure::diagnosed(format!("{e}{hints}"), ConnectKind::Tls)
            } else if !login.is_empty() {
                Failure::diagnosed(format!("{e}{login}"), ConnectKind::LoginRefused)
            } else {
                Failure::plain(e)
            })
        }
        Ok(Err(e)) => Err(Failure::plain(format!(
            "the connection attempt failed: {e}"
        ))),
        Err(_) => {
            io_handle().spawn(async move {
                match tokio::time::timeout(CONNECT_TIMEOUT, &mut opening).await {
                    Ok(Ok(Ok(late))) => {
                        let _ = late.close().await;
                    }
                    Ok(_) => {}
                    Err(_) => opening.abort(),
                }
            });
            Err(Failure {
                kind: ConnectKind::Timeout,
                ..Failure::plain(format!("no answer within {CONNECT_TIMEOUT:?}"))
            })
        }
    }
}

/// The heartbeat verso proposes: 0 takes the broker's proposal, and at least 2 s
/// otherwise (amqprs sends one every half of it, in whole seconds: 1 s would send them
/// without pause).
pub(super) fn heartbeat_secs(heartbeat: Duration) -> u16 {
    match heartbeat.as_secs() {
        0 => 0,
        s => u16::try_from(s).unwrap_or(u16::MAX).max(2),
    }
}

/// The reply code and text of a `connection.close` the broker answered with, out of
/// amqprs's error text, which carries the frame only in its `Debug` form
/// (`... Close { reply_code: 530, reply_text: ShortStr(37, "NOT_ALLOWED - ..."), ... }`).
pub(super) fn broker_close(error: &str) -> Option<(u16, String)> {
    let after = |key: &str| error.find(key).map(|i| &error[i + key.len()..]);
    let code = after("reply_code: ")?;
    let code: u16 = code
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    // The text is a Rust string literal: read it up to the unescaped closing quote.
    let quoted = after("reply_text: ShortStr(")?;
    let mut chars = quoted.split_once('"')?.1.chars();
    let mut text = String::new();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some((code, text)),
            '\\' => text.extend(chars.next()),
            c => text.push(c),
        }
    }
    None
}

/// The broker's refusal of `connection.open` (or of the login before it) in words, when
/// it closed the connection with a reason: a vhost that does not exist or that the user
/// may not use. RabbitMQ answers both with 530 NOT_ALLOWED.
pub(super) fn open_refusal(config: &AmqpConfig, user: &str, error: &str) -> Option<String> {
    let (code, text) = broker_close(error)?;
    let vhost = &config.vhost;
    let said = format!("the broker answered {code} {text}");
    Some(if code == 530 && text.contains("not found") {
        format!(
            "vhost '{vhost}' not found ({said}); create it (rabbitmqctl add_vhost '{vhost}') \
             or name an existing one as the URL's path (rabbit://user:pass@host:5672/VHOST, \
             where an empty path is the default vhost '/')"
        )
    } else if code == 530 && text.contains("refused for user") {
        format!(
            "user '{user}' may not use vhost '{vhost}' ({said}); grant it \
             (rabbitmqctl set_permissions -p '{vhost}' '{user}' '.*' '.*' '.*') or use a \
             vhost it may"
        )
    } else if code == 403 {
        format!(
            "the broker refused the login of user '{user}' ({said}); check the user and \
             password of the URL"
        )
    } else {
        format!("the broker closed the connection: {code} {text}")
    })
}

/// The kind of a broker's `connection.close` answer, as [`open_refusal`] words it.
pub(super) fn close_kind(code: u16, text: &str) -> ConnectKind {
    match code {
        530 if text.contains("not found") => ConnectKind::VhostNotFound,
        530 if text.contains("refused for user") => ConnectKind::VhostRefused,
        403 => ConnectKind::LoginRefused,
        _ => ConnectKind::BrokerClosed,
    }
}

/// What to check when a TLS handshake got an answer that is not TLS at all: rustls reads
/// a plain AMQP listener's protocol header ("AMQP...") as a record of an unknown type.
pub(super) fn plain_port_hint(config: &AmqpConfig, host: &BrokerHost, error: &str) -> String {
    if config.tls.is_some() && error.contains("InvalidContentType") {
        format!(
            " (port {} answered without TLS: it looks like a plain AMQP port; use the \
             broker's TLS port, usually 5671, or remove ssl=true to connect without TLS)",
            host.port
        )
    } else {
        String::new()
    }
}

/// What to check when a connection without TLS to port 5671, RabbitMQ's usual TLS port,
/// was dropped: a TLS listener closes a connection whose first bytes are not a handshake.
pub(super) fn tls_port_hint(config: &AmqpConfig, host: &BrokerHost, error: &str) -> String {
    let dropped = [
        "Connection reset",
        "Broken pipe",
        "UnexpectedEof",
        "early eof",
    ]
    .iter()
    .any(|d| error.contains(d));
    if config.tls.is_none() && host.port == 5671 && dropped {
        " (port 5671 is usually RabbitMQ's TLS port: add ?ssl=true, with ssl_ca_file for a \
         private CA, or use the plain port, usually 5672)"
            .to_owned()
    } else {
        String::new()
    }
}

/// What to check when the broker reset the connection during the AMQP handshake (and no
/// TLS explanation applies): RabbitMQ refuses a login that way to a client that cannot be
/// told why (amqprs does not ask for `authentication_failure_close`), after the TCP
/// connection and any TLS handshake succeeded.
pub(super) fn login_hint(user: &str, error: &str) -> String {
    if error.contains("Connection reset") {
        format!(
            " (RabbitMQ resets the connection when it refuses a login: check the password of \
             user '{user}' in the URL, and that the user exists)"
        )
    } else {
        String::new()
    }
}

/// What to check when a TLS connection that presents a client certificate fails in a way
/// that a broker refusing the certificate causes. Under TLS 1.3 the client finishes its
/// handshake before the broker has looked at the certificate, so the refusal may arrive
/// only as a closed socket ("Broken pipe", "Connection reset") on the first AMQP bytes.
pub(super) fn client_cert_hint(config: &AmqpConfig, error: &str) -> &'static str {
    let presents_cert = config.tls.as_ref().is_some_and(|t| t.cert_file.is_some());
    let refusal = [
        "Broken pipe",
        "Connection reset",
        "UnknownCA",
        "BadCertificate",
        "CertificateRequired",
        "CertificateExpired",
        "CertificateRevoked",
        "AccessDenied",
    ];
    if presents_cert && refusal.iter().any(|r| error.contains(r)) {
        " (the broker may have refused the client certificate: check that ssl_cert_file's \
         certificate is signed by a CA the broker trusts and is still valid)"
    } else {
        ""
    }
}
