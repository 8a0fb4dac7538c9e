//! A bare lapin peer, to read and write the wire as a second client sees it, and a TCP
//! proxy in front of the broker whose connections can be cut.

use futures::StreamExt;
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use verso_rpc::transport::amqp::AmqpConfig;

/// A bare lapin peer, to read and write the wire directly.
pub struct RawPeer {
    _conn: Connection,
    ch: Channel,
    consumers: Mutex<std::collections::HashMap<String, lapin::Consumer>>,
}

/// lapin's own URL form of the broker (its empty vhost is not `/`).
pub fn amqp_url(url: &str) -> String {
    let c = AmqpConfig::from_url(url).expect("url");
    let h = &c.hosts[0];
    let vhost = c.vhost.replace('%', "%25").replace('/', "%2f");
    format!(
        "amqp://{}:{}@{}:{}/{vhost}",
        h.username, h.password, h.host, h.port
    )
}

impl RawPeer {
    pub async fn connect(url: &str) -> RawPeer {
        let conn = Connection::connect(
            &amqp_url(url),
            ConnectionProperties::default()
                .with_executor(tokio_executor_trait::Tokio::current())
                .with_reactor(tokio_reactor_trait::Tokio),
        )
        .await
        .expect("raw connect");
        let ch = conn.create_channel().await.expect("channel");
        RawPeer {
            _conn: conn,
            ch,
            consumers: Mutex::new(Default::default()),
        }
    }

    /// A queue bound to `openstack` with key `topic`, consumed.
    pub async fn bind_topic_queue(&self, topic: &str) -> String {
        let q = format!("{topic}-raw");
        self.ch
            .exchange_declare(
                "openstack",
                lapin::ExchangeKind::Topic,
                Default::default(),
                FieldTable::default(),
            )
            .await
            .expect("exchange");
        self.ch
            .queue_declare(
                &q,
                QueueDeclareOptions {
                    auto_delete: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("queue");
        self.ch
            .queue_bind(
                &q,
                "openstack",
                topic,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind");
        let c = self
            .ch
            .basic_consume(
                &q,
                "raw",
                BasicConsumeOptions {
                    no_ack: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("consume");
        self.consumers.lock().unwrap().insert(q.clone(), c);
        q
    }

    /// Declares (auto-delete) and consumes the queue `q`, as a caller does its reply
    /// queue.
    pub async fn consume_queue(&self, q: &str) {
        self.ch
            .queue_declare(
                q,
                QueueDeclareOptions {
                    auto_delete: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("queue");
        let c = self
            .ch
            .basic_consume(
                q,
                &format!("raw-{q}"),
                BasicConsumeOptions {
                    no_ack: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("consume");
        self.consumers.lock().unwrap().insert(q.to_owned(), c);
    }

    /// The next message on `queue` within `wait`, if any.
    pub async fn try_next(&self, queue: &str, wait: Duration) -> Option<Value> {
        let mut c = self
            .consumers
            .lock()
            .unwrap()
            .remove(queue)
            .expect("consumed");
        let got = tokio::time::timeout(wait, c.next()).await;
        self.consumers.lock().unwrap().insert(queue.to_owned(), c);
        let d = got.ok()?.expect("consumer open").expect("delivery");
        let body: Value = serde_json::from_slice(&d.data).expect("json body");
        Some(serde_json::from_str(body["oslo.message"].as_str().expect("enveloped")).unwrap())
    }

    pub async fn next(&self, queue: &str) -> lapin::message::Delivery {
        let mut c = self
            .consumers
            .lock()
            .unwrap()
            .remove(queue)
            .expect("consumed");
        let d = tokio::time::timeout(Duration::from_secs(10), c.next())
            .await
            .expect("a message within 10 s")
            .expect("consumer open")
            .expect("delivery");
        self.consumers.lock().unwrap().insert(queue.to_owned(), c);
        d
    }

    pub async fn publish_enveloped(&self, exchange: &str, key: &str, msg: &Value) {
        let body = json!({"oslo.version": "2.0", "oslo.message": msg.to_string()});
        self.publish_raw(exchange, key, body.to_string().as_bytes())
            .await;
    }

    /// Publishes `body` as it is, garbage included.
    pub async fn publish_raw(&self, exchange: &str, key: &str, body: &[u8]) {
        self.ch
            .basic_publish(
                exchange,
                key,
                BasicPublishOptions::default(),
                body,
                BasicProperties::default().with_content_type(ShortString::from("application/json")),
            )
            .await
            .expect("publish");
    }

    /// Checks a queue's flags by redeclaring it passively and then with the flags
    /// oslo.messaging uses (the broker refuses an inequivalent redeclaration).
    pub async fn assert_queue(&self, name: &str, expires: bool) {
        let ch = self._conn.create_channel().await.expect("channel");
        let mut args = FieldTable::default();
        if expires {
            args.insert(
                ShortString::from("x-expires"),
                AMQPValue::LongInt(1_800_000),
            );
        }
        ch.queue_declare(name, QueueDeclareOptions::default(), args)
            .await
            .unwrap_or_else(|e| panic!("queue {name} is not declared as oslo does: {e}"));
    }

    /// How many messages wait, ready, on queue `name` (declared passively): a message a
    /// closed connection had received and not acknowledged is back among them.
    pub async fn ready(&self, name: &str) -> u32 {
        let ch = self._conn.create_channel().await.expect("channel");
        let q = ch
            .queue_declare(
                name,
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("queue {name} is not there: {e}"));
        q.message_count()
    }

    /// Declares a durable topic exchange.
    pub async fn declare_durable_topic_exchange(&self, name: &str) {
        self.ch
            .exchange_declare(
                name,
                lapin::ExchangeKind::Topic,
                lapin::options::ExchangeDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("declaring exchange {name}: {e}"));
    }

    /// Deletes an exchange.
    pub async fn delete_exchange(&self, name: &str) {
        self.ch
            .exchange_delete(name, Default::default())
            .await
            .unwrap_or_else(|e| panic!("deleting exchange {name}: {e}"));
    }

    /// Deletes a queue (the broker cancels its consumers).
    pub async fn delete_queue(&self, name: &str) {
        self.ch
            .queue_delete(name, Default::default())
            .await
            .unwrap_or_else(|e| panic!("deleting queue {name}: {e}"));
    }
}

/// A TCP proxy in front of the broker whose connections can be cut.
pub struct CuttableProxy {
    port: u16,
    conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl CuttableProxy {
    pub async fn start(url: &str) -> CuttableProxy {
        let config = AmqpConfig::from_url(url).expect("url");
        let upstream = format!("{}:{}", config.hosts[0].host, config.hosts[0].port);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let reg = conns.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut out) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                });
                reg.lock().unwrap().push(task.abort_handle());
            }
        });
        CuttableProxy { port, conns }
    }

    /// The broker URL through this proxy.
    pub fn url(&self, url: &str) -> String {
        let config = AmqpConfig::from_url(url).expect("url");
        let h = &config.hosts[0];
        format!(
            "rabbit://{}:{}@127.0.0.1:{}/",
            h.username, h.password, self.port
        )
    }

    /// Drops every proxied connection (as a broker restart or a network cut does).
    pub fn cut(&self) {
        for c in self.conns.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}
