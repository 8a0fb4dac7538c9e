//! The API's test harness: a fresh database per test (`accel_conductor::testing`: a
//! SQLite file, or a new database on the PostgreSQL test cluster), the API served on an
//! ephemeral loopback port, and a real HTTP client.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]
#![allow(dead_code, unused_imports)]

use accel_api::{AccelService, Authenticator, ConductorService, DbService, Limits, ServeOptions};
use accel_conductor::db::{Release, ReportedDevice};
use accel_conductor::service::{endpoint, ReleasePolicy};
use accel_conductor::Db;
use accel_objects::rpc::ConductorApi;
use reqwest::{Method, RequestBuilder, Response};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::oneshot;
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::{RpcClient, RpcServer, ServerHandle, Target};

pub use accel_conductor::testing::{postgres, sqlite};

/// A reported device at PCI address `cp`: vendor `10ee`, model `5020`, `handles` PCI
/// handles.
pub fn device(cp: &str, device_type: &str, handles: usize) -> ReportedDevice {
    ReportedDevice {
        driver_name: Some("xclmgmt".to_owned()),
        ..accel_conductor::testing::reported_device(cp, device_type, "10ee", "5020", handles)
    }
}

/// The API on an ephemeral loopback port over `db`, and a client for it.
pub struct Api {
    /// `http://127.0.0.1:PORT` (`https://localhost:PORT` with TLS).
    pub base: String,
    /// Where it listens.
    pub addr: SocketAddr,
    /// The database the API serves (to seed reports).
    pub db: Db,
    client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    conductor: Option<ServerHandle>,
}

impl Api {
    /// Serves the API over `db` alone ([`DbService`]).
    pub async fn start(db: Db) -> Api {
        Api::start_with(db, Limits::default(), ServeOptions::default()).await
    }

    /// Serves the API over `db` alone with these limits and server options.
    pub async fn start_with(db: Db, limits: Limits, options: ServeOptions) -> Api {
        Api::serve(
            db.clone(),
            DbService::new(db),
            None,
            limits,
            options,
            Authenticator::noauth(),
        )
        .await
    }

    /// Serves the API over `db` alone, its callers authenticated by `auth`.
    pub async fn start_authenticated(db: Db, auth: Authenticator) -> Api {
        Api::serve(
            db.clone(),
            DbService::new(db),
            None,
            Limits::default(),
            ServeOptions::default(),
            auth,
        )
        .await
    }

    /// Serves the API as a deployment does ([`ConductorService`]): reads from `db`,
    /// writes through a conductor serving `db` on the memory transport.
    pub async fn start_through_conductor(db: Db) -> Api {
        Api::start_through_conductor_with(db, Limits::default()).await
    }

    /// [`Api::start_through_conductor`] with these limits.
    pub async fn start_through_conductor_with(db: Db, limits: Limits) -> Api {
        Api::start_through_conductor_capped(db, limits, None).await
    }

    /// [`Api::start_through_conductor_with`], the conductor client capped at `cap`
    /// (`[upgrade_levels] conductor`).
    pub async fn start_through_conductor_capped(
        db: Db,
        limits: Limits,
        cap: Option<verso::Version>,
    ) -> Api {
        let transport = Arc::new(MemoryTransport::new());
        let release: ReleasePolicy = Arc::new(|| Release::Immediate);
        let conductor = RpcServer::new(transport.clone(), Target::new("accel-conductor"))
            .endpoint(endpoint(
                db.clone(),
                accel_objects::registry(),
                release,
                |ctx| ctx,
            ))
            .expect("conductor endpoint")
            .start()
            .await
            .expect("conductor starts");
        let client = RpcClient::for_api::<ConductorApi>(transport, "accel-conductor").with_cap(cap);
        let service = ConductorService::new(DbService::new(db.clone()), client);
        Api::serve(
            db,
            service,
            Some(conductor),
            limits,
            ServeOptions::default(),
            Authenticator::noauth(),
        )
        .await
    }

    async fn serve(
        db: Db,
        service: impl AccelService,
        conductor: Option<ServerHandle>,
        limits: Limits,
        options: ServeOptions,
        auth: Authenticator,
    ) -> Api {
        let tls = options.tls.is_some();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            let router = accel_api::router_with(Arc::new(service), limits, auth);
            accel_api::server::serve(listener, router, options, shutdown)
                .await
                .expect("serve");
        });
        let mut client = reqwest::Client::builder().use_rustls_tls();
        if tls {
            let ca = std::fs::read(tls_dir().join("ca.pem")).expect("read the test CA");
            client = client
                .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA"))
                .https_only(true);
        }
        Api {
            base: if tls {
                format!("https://localhost:{}", addr.port())
            } else {
                format!("http://{addr}")
            },
            addr,
            db,
            client: client.build().expect("client"),
            stop: Some(stop),
            conductor,
        }
    }

    /// A request to `path` (which starts with `/`).
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, format!("{}{path}", self.base))
    }

    /// A request to an absolute URL (a `next` link).
    pub fn request_url(&self, method: Method, url: &str) -> RequestBuilder {
        self.client.request(method, url)
    }

    /// Sends, and returns the status and the JSON body (`Null` when empty).
    pub async fn send(&self, request: RequestBuilder) -> (u16, Value) {
        let response = request.send().await.expect("send");
        read(response).await
    }

    /// GET at the default microversion.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.send(self.request(Method::GET, path)).await
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(conductor) = self.conductor.take() {
            tokio::spawn(conductor.stop());
        }
    }
}

/// The status and the JSON body of a response (`Null` when empty).
pub async fn read(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("body");
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("response is not JSON ({e}): {bytes:?}"))
    };
    (status, body)
}

/// Asserts the JSON error form and its status; returns the message.
pub fn assert_error(got: &(u16, Value), status: u16, kind: &str) -> String {
    let (code, body) = got;
    assert_eq!(*code, status, "status of {body}");
    assert_eq!(body["error"]["status"], status, "{body}");
    assert_eq!(body["error"]["type"], kind, "{body}");
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no message in {body}"))
        .to_owned();
    // Cyborg's form beside it: a JSON text with the same message.
    let fault: Value = serde_json::from_str(
        body["error_message"]
            .as_str()
            .unwrap_or_else(|| panic!("no error_message in {body}")),
    )
    .expect("error_message is JSON text");
    let faultcode = if status >= 500 { "Server" } else { "Client" };
    assert_eq!(fault["faultcode"], faultcode, "{body}");
    assert_eq!(fault["faultstring"], message.as_str(), "{body}");
    message
}

/// The test certificates (`VERSO_TLS_DIR`, made by
/// `crates/verso-rpc/interop/make-test-certs.sh`; `server.pem` is for `localhost`).
pub fn tls_dir() -> std::path::PathBuf {
    std::env::var_os("VERSO_TLS_DIR")
        .map(Into::into)
        .unwrap_or_else(|| "/tmp/verso-rabbitmq-tls".into())
}
