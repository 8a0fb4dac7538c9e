//! oslo.messaging's `transport_url` for the rabbit driver, parsed the way
//! `oslo_messaging.TransportURL.parse` reads it.
//!
//! `rabbit://user:pass@host:port[,user:pass@host2:port2]/vhost?option=value`: hosts are
//! comma-separated (a cluster), user and password are percent-decoded, a missing port is
//! 5672 (also with TLS, as oslo.messaging does), an empty vhost is `/`. Query options
//! override the `[oslo_messaging_rabbit]` options of the same name, as oslo.messaging's
//! `ConfigOptsProxy` does; the ones this transport understands are listed in
//! [`KNOWN_OPTIONS`] (an unknown option is refused with that list).

use super::tls::{key_without_cert, TlsOptions};
use super::AmqpError;
use crate::message::MessageLimits;
use crate::transport::redact;
use std::fmt;
use std::time::Duration;

/// Query options of the transport URL this transport understands (oslo.messaging's
/// `[oslo_messaging_rabbit]` names).
const KNOWN_OPTIONS: &[&str] = &[
    "call_monitor_timeout",
    "ssl",
    "ssl_ca_file",
    "ssl_cert_file",
    "ssl_key_file",
    "amqp_durable_queues",
    "rabbit_transient_queues_ttl",
    "heartbeat_timeout_threshold",
    "rabbit_retry_interval",
    "rabbit_interval_max",
    "kombu_missing_consumer_retry_timeout",
];

/// One broker of the cluster.
#[derive(Clone, PartialEq, Eq)]
pub struct BrokerHost {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// AMQP port.
    pub port: u16,
    /// User name (`guest` when the URL gives none, as kombu does).
    pub username: String,
    /// Password (`guest` when the URL gives none). Never printed: see the `Debug` impl.
    pub password: String,
}

impl fmt::Debug for BrokerHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerHost")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &"***")
            .finish()
    }
}

impl fmt::Display for BrokerHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "{}:***@[{}]:{}", self.username, self.host, self.port)
        } else {
            write!(f, "{}:***@{}:{}", self.username, self.host, self.port)
        }
    }
}

/// Everything the AMQP transport needs to know, read from a transport URL and options.
///
/// ```
/// use verso_rpc::transport::amqp::AmqpConfig;
/// let c = AmqpConfig::from_url("rabbit://u:p%40ss@h1:5672,u:p%40ss@h2/prod?ssl=true")?;
/// assert_eq!(c.hosts.len(), 2);
/// assert_eq!(c.hosts[0].password, "p@ss");
/// assert_eq!(c.hosts[1].port, 5672);
/// assert_eq!(c.vhost, "prod");
/// assert!(c.tls.is_some());
/// assert_eq!(c.control_exchange, "openstack");
/// // The password never shows when the config is printed.
/// assert!(!format!("{c} {c:?}").contains("p@ss"));
/// # Ok::<(), verso_rpc::transport::amqp::AmqpError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct AmqpConfig {
    /// The brokers, tried in order on (re)connect.
    pub hosts: Vec<BrokerHost>,
    /// The virtual host (`/` by default).
    pub vhost: String,
    /// The exchange topics live in (oslo.messaging's `control_exchange`, default
    /// `openstack`).
    pub control_exchange: String,
    /// TLS, when `ssl=true`.
    pub tls: Option<TlsOptions>,
    /// `amqp_durable_queues`: durability of the topic exchange and queues (default false).
    pub durable_queues: bool,
    /// `rabbit_transient_queues_ttl`: `x-expires` of reply and fanout queues (default
    /// 1800 s).
    pub transient_queues_ttl: Duration,
    /// `heartbeat_timeout_threshold`: AMQP heartbeat (default 60 s). 0 takes the broker's
    /// proposal (amqprs cannot turn heartbeats off), and 1 counts as 2 (amqprs sends a
    /// heartbeat every half of it, in whole seconds).
    pub heartbeat: Duration,
    /// `rabbit_retry_interval`: first delay between reconnect attempts (default 1 s).
    pub retry_interval: Duration,
    /// `rabbit_interval_max`: longest delay between reconnect attempts (default 30 s).
    pub retry_interval_max: Duration,
    /// How long a cast waits for a connection to the broker before it fails (default 30 s).
    /// A call waits as long as its own timeout.
    pub publish_wait: Duration,
    /// `kombu_missing_consumer_retry_timeout`: how long a server retries a reply whose
    /// reply queue does not exist (the caller is reconnecting, say) before it abandons it
    /// and drops further replies to that queue (default 60 s).
    pub missing_reply_queue_timeout: Duration,
    /// The bounds on every received message, requests and replies alike (default
    /// [`MessageLimits::default`]: 16 MiB, 32 levels, 100,000 members per list or dict).
    /// A message over them is refused unread: a call gets a typed error in reply
    /// ([`RpcError::MessageTooLarge`](crate::RpcError::MessageTooLarge),
    /// [`RpcError::LimitExceeded`](crate::RpcError::LimitExceeded)) and the server goes
    /// on serving.
    pub limits: MessageLimits,
    /// oslo.messaging's `call_monitor_timeout`, for every call of this transport
    /// (default none): the call asks its server for a heartbeat every half of it
    /// (`_timeout`) and fails with
    /// [`RpcError::ServerSilent`](crate::RpcError::ServerSilent) when neither the reply
    /// nor a heartbeat came within it, long before its own timeout: the server died
    /// or lost the broker with the call taken. Servers (verso's and oslo's) send the
    /// heartbeats from the moment they receive the call, so it must exceed the time a
    /// call may wait in the queue of a busy topic.
    pub call_monitor_timeout: Option<Duration>,
}

/// oslo.messaging's default `control_exchange`.
pub const DEFAULT_CONTROL_EXCHANGE: &str = "openstack";

impl AmqpConfig {
    /// Parses an oslo.messaging transport URL (`rabbit://` or `amqp://`).
    pub fn from_url(url: &str) -> Result<AmqpConfig, AmqpError> {
        let bad = |detail: &str| AmqpError::InvalidUrl {
            url: redact(url),
            detail: detail.to_owned(),
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("no scheme; write rabbit://user:pass@host:5672/"))?;
        let mut tls_by_scheme = false;
        match scheme {
            "rabbit" | "amqp" | "kombu+rabbit" | "kombu+amqp" => {}
            "amqps" => tls_by_scheme = true,
            other => {
                return Err(bad(&format!(
                    "scheme '{other}' is not RabbitMQ; write rabbit://... (or memory:// for the \
                     in-process transport)"
                )))
            }
        }
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (netloc, path) = match rest.find('/') {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let mut hosts = Vec::new();
        for spec in netloc.split(',').filter(|s| !s.is_empty()) {
            hosts.push(parse_host(spec).map_err(|d| bad(&d))?);
        }
        if hosts.is_empty() {
            // oslo.messaging connects to localhost with guest/guest then.
            hosts.push(BrokerHost {
                host: "localhost".into(),
                port: 5672,
                username: "guest".into(),
                password: "guest".into(),
            });
        }
        let vhost = match path.map(percent_decode) {
            Some(Ok(v)) if !v.is_empty() => v,
            Some(Err(e)) => return Err(bad(&format!("virtual host: {e}"))),
            _ => "/".to_owned(),
        };
        let mut config = AmqpConfig {
            hosts,
            vhost,
            control_exchange: DEFAULT_CONTROL_EXCHANGE.into(),
            tls: tls_by_scheme.then(TlsOptions::default),
            durable_queues: false,
            transient_queues_ttl: Duration::from_secs(1800),
            heartbeat: Duration::from_secs(60),
            retry_interval: Duration::from_secs(1),
            retry_interval_max: Duration::from_secs(30),
            publish_wait: Duration::from_secs(30),
            missing_reply_queue_timeout: Duration::from_secs(60),
            limits: MessageLimits::default(),
            call_monitor_timeout: None,
        };
        let (mut ca_file, mut cert_file, mut key_file) = (None, None, None);
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = percent_decode(&v.replace('+', " ")).map_err(|e| bad(&e))?;
            let opt_err = |detail: String| AmqpError::InvalidOption {
                option: k.to_owned(),
                value: v.clone(),
                detail,
            };
            match k {
                "ssl" => {
                    if parse_bool(&v).map_err(opt_err)? {
                        config.tls.get_or_insert_with(TlsOptions::default);
                    } else if !tls_by_scheme {
                        config.tls = None;
                    }
                }
                "ssl_ca_file" => ca_file = Some(v.clone()).filter(|s| !s.is_empty()),
                // Empty values are oslo.messaging's defaults: not set.
                "ssl_cert_file" => cert_file = Some(v.clone()).filter(|s| !s.is_empty()),
                "ssl_key_file" => key_file = Some(v.clone()).filter(|s| !s.is_empty()),
                "amqp_durable_queues" => config.durable_queues = parse_bool(&v).map_err(opt_err)?,
                "rabbit_transient_queues_ttl" => {
                    let secs = parse_secs(&v).map_err(opt_err)?;
                    if secs == 0 {
                        return Err(opt_err("must be at least 1 second".into()));
                    }
                    config.transient_queues_ttl = Duration::from_secs(secs);
                }
                "heartbeat_timeout_threshold" => {
                    config.heartbeat = Duration::from_secs(parse_secs(&v).map_err(opt_err)?)
                }
                "rabbit_retry_interval" => {
                    config.retry_interval = Duration::from_secs(parse_secs(&v).map_err(opt_err)?)
                }
                "rabbit_interval_max" => {
                    config.retry_interval_max =
                        Duration::from_secs(parse_secs(&v).map_err(opt_err)?)
                }
                "call_monitor_timeout" => {
                    let secs = parse_secs(&v).map_err(opt_err)?;
                    config.call_monitor_timeout = (secs > 0).then(|| Duration::from_secs(secs));
                }
                "kombu_missing_consumer_retry_timeout" => {
                    config.missing_reply_queue_timeout =
                        Duration::from_secs(parse_secs(&v).map_err(opt_err)?)
                }
                _ => {
                    return Err(AmqpError::UnknownOption {
                        option: k.to_owned(),
                        known: KNOWN_OPTIONS.join(", "),
                    })
                }
            }
        }
        if let (None, Some(k)) = (&cert_file, &key_file) {
            return Err(key_without_cert(k));
        }
        let files = [
            ("ssl_ca_file", &ca_file),
            ("ssl_cert_file", &cert_file),
            ("ssl_key_file", &key_file),
        ];
        match &mut config.tls {
            Some(t) => {
                t.ca_file = ca_file;
                t.cert_file = cert_file;
                t.key_file = key_file;
            }
            None => {
                if let Some((option, Some(value))) = files.iter().find(|(_, v)| v.is_some()) {
                    return Err(AmqpError::InvalidOption {
                        option: (*option).to_owned(),
                        value: value.clone(),
                        detail: "it only applies with TLS; add ssl=true".into(),
                    });
                }
            }
        }
        Ok(config)
    }

    /// The same config with other bounds on received messages.
    pub fn with_limits(mut self, limits: MessageLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The same config with another control exchange.
    pub fn with_control_exchange(mut self, exchange: impl Into<String>) -> Self {
        self.control_exchange = exchange.into();
        self
    }

    /// The same config with another call-monitor timeout (none: calls wait out their
    /// own timeout whatever happens to their server).
    pub fn with_call_monitor_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.call_monitor_timeout = timeout.filter(|t| !t.is_zero());
        self
    }
}

impl fmt::Display for AmqpConfig {
    /// The URL without passwords, for logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("rabbit://")?;
        for (i, h) in self.hosts.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{h}")?;
        }
        let vhost = if self.vhost == "/" { "" } else { &self.vhost };
        write!(f, "/{vhost}")?;
        if self.tls.is_some() {
            f.write_str("?ssl=true")?;
        }
        Ok(())
    }
}

impl fmt::Debug for AmqpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AmqpConfig")
            .field("hosts", &self.hosts)
            .field("vhost", &self.vhost)
            .field("control_exchange", &self.control_exchange)
            .field("tls", &self.tls)
            .field("durable_queues", &self.durable_queues)
            .field("transient_queues_ttl", &self.transient_queues_ttl)
            .field("heartbeat", &self.heartbeat)
            .field("call_monitor_timeout", &self.call_monitor_timeout)
            .finish_non_exhaustive()
    }
}

fn parse_host(spec: &str) -> Result<BrokerHost, String> {
    let (userinfo, hostport) = match spec.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, spec),
    };
    let (username, password) = match userinfo {
        None => ("guest".to_owned(), "guest".to_owned()),
        Some(u) => {
            let (user, pass) = u.split_once(':').unwrap_or((u, ""));
            (
                percent_decode(user).map_err(|e| format!("user name: {e}"))?,
                percent_decode(pass).map_err(|e| format!("password: {e}"))?,
            )
        }
    };
    let (host, port) = if let Some(rest) = hostport.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("host '{hostport}': missing ']' after an IPv6 address"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(format!("host '{hostport}': unexpected text after ']'")),
        };
        (h.to_owned(), port)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (hostport.to_owned(), None),
        }
    };
    if host.is_empty() {
        // Not `spec`: it holds the password.
        return Err(format!("host '{hostport}' has no host name"));
    }
    let port = match port {
        None | Some("") => 5672,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("port '{p}' of host '{host}' is not a number 1-65535"))?,
    };
    Ok(BrokerHost {
        host,
        port,
        username,
        password,
    })
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| "a '%' must be followed by two hex digits".to_owned())?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "percent-encoded bytes are not UTF-8".to_owned())
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err("write true or false".into()),
    }
}

fn parse_secs(v: &str) -> Result<u64, String> {
    v.parse()
        .map_err(|_| "write a whole number of seconds".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oslo_forms() {
        let c = AmqpConfig::from_url("rabbit://guest:guest@127.0.0.1:5672/").unwrap();
        assert_eq!(c.hosts[0].host, "127.0.0.1");
        assert_eq!(c.vhost, "/");
        assert!(c.tls.is_none());
        assert_eq!(c.transient_queues_ttl, Duration::from_secs(1800));

        let c = AmqpConfig::from_url("rabbit://a:b@h1,c:d@[::1]:5673/v%2Fx").unwrap();
        assert_eq!(c.hosts[1].host, "::1");
        assert_eq!(c.hosts[1].port, 5673);
        assert_eq!(c.hosts[1].username, "c");
        assert_eq!(c.vhost, "v/x");

        let c = AmqpConfig::from_url("rabbit://").unwrap();
        assert_eq!(c.hosts[0].host, "localhost");

        let c = AmqpConfig::from_url(
            "rabbit://u:p@h/?ssl=1&ssl_ca_file=/etc/ca.pem&rabbit_transient_queues_ttl=60",
        )
        .unwrap();
        assert_eq!(
            c.tls,
            Some(TlsOptions {
                ca_file: Some("/etc/ca.pem".into()),
                ..TlsOptions::default()
            })
        );
        assert_eq!(c.transient_queues_ttl, Duration::from_secs(60));
    }

    #[test]
    fn client_certificate_options() {
        let c = AmqpConfig::from_url(
            "amqps://u:p@h/?ssl_cert_file=/etc/c%20d.pem&ssl_key_file=/etc/k.pem&ssl_ca_file=",
        )
        .unwrap();
        assert_eq!(
            c.tls,
            Some(TlsOptions {
                ca_file: None,
                cert_file: Some("/etc/c d.pem".into()),
                key_file: Some("/etc/k.pem".into()),
            })
        );
        // Empty values are oslo's defaults (not set), also without TLS.
        let c = AmqpConfig::from_url("rabbit://h/?ssl_cert_file=&ssl_key_file=").unwrap();
        assert!(c.tls.is_none());

        // A certificate file alone holds its key too (read when connecting).
        for url in [
            "rabbit://h/?ssl=1&ssl_cert_file=/c.pem",
            "rabbit://h/?ssl=1&ssl_cert_file=/c.pem&ssl_key_file=",
        ] {
            let tls = AmqpConfig::from_url(url).unwrap().tls.unwrap();
            assert_eq!(tls.cert_file.as_deref(), Some("/c.pem"), "{url}");
            assert_eq!(tls.key_file, None, "{url}");
        }

        for (url, option) in [
            ("rabbit://h/?ssl=1&ssl_key_file=/k.pem", "ssl_key_file"),
            (
                "rabbit://h/?ssl=1&ssl_key_file=/k.pem&ssl_cert_file=",
                "ssl_key_file",
            ),
            (
                "rabbit://h/?ssl_cert_file=/c.pem&ssl_key_file=/k.pem",
                "ssl_cert_file",
            ),
            (
                "rabbit://h/?ssl=0&ssl_key_file=/k.pem&ssl_cert_file=/c",
                "ssl_cert_file",
            ),
        ] {
            match AmqpConfig::from_url(url) {
                Err(AmqpError::InvalidOption { option: o, .. }) => assert_eq!(o, option, "{url}"),
                other => panic!("{url}: expected InvalidOption({option}), got {other:?}"),
            }
        }
    }

    #[test]
    fn bad_urls_are_typed_and_never_show_the_password() {
        for url in [
            "http://u:secret@h/",
            "rabbit://u:secret@h:notaport/",
            "rabbit://u:secret@h:0/",
            "rabbit://u:secret@:5672/",
            "rabbit://u:secret@h/?ssl=maybe",
            "rabbit://u:secret@h/?nope=1",
            "rabbit://u:secret@h/?ssl_ca_file=/x",
            "rabbit://u:secret@h/?ssl_cert_file=/x",
            "rabbit://u:secret@h/?ssl=1&ssl_key_file=/x",
            "rabbit://u:secret@h/?ssl_cert_file=/x&ssl_key_file=/y",
            "rabbit://u:sec%zzret@h/",
            "u:secret@h",
        ] {
            let e = AmqpConfig::from_url(url).unwrap_err();
            let text = e.to_string();
            assert!(!text.contains("secret"), "{url}: {text}");
        }
        assert!(matches!(
            AmqpConfig::from_url("rabbit://h/?nope=1"),
            Err(AmqpError::UnknownOption { .. })
        ));
    }

    #[test]
    fn display_masks_passwords() {
        let c = AmqpConfig::from_url("rabbit://u:pw@h1:5672/vh").unwrap();
        assert_eq!(c.to_string(), "rabbit://u:***@h1:5672/vh");
    }
}
