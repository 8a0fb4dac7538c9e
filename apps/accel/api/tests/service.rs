//! The router over another implementation of `AccelService` (as the conductor-backed
//! one will be): a backend that cannot be reached is a JSON 503, and a handler that
//! panics is a JSON 500 while the server goes on serving.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_api::service::{ArqRow, DeployableRow, DeviceProfileRow, DeviceRow};
use accel_api::{AccelService, Binding, ErrorKind, ListQuery, NewProfile, ServiceError};
use async_trait::async_trait;
use serde_json::Value;

#[derive(Clone, Copy)]
enum Mode {
    Unreachable,
    Panics,
}

struct Broken(Mode);

impl Broken {
    fn fail<T>(&self) -> Result<T, ServiceError> {
        match self.0 {
            Mode::Unreachable => Err(ServiceError::with_source(
                ErrorKind::Unavailable,
                "the accel conductor cannot be reached",
                std::io::Error::other("connection refused"),
            )),
            Mode::Panics => panic!("a bug in the service"),
        }
    }
}

#[async_trait]
impl AccelService for Broken {
    async fn devices(&self, _: &ListQuery) -> Result<Vec<DeviceRow>, ServiceError> {
        self.fail()
    }
    async fn device(&self, _: &str) -> Result<DeviceRow, ServiceError> {
        self.fail()
    }
    async fn deployables(&self, _: &ListQuery) -> Result<Vec<DeployableRow>, ServiceError> {
        self.fail()
    }
    async fn deployable(&self, _: &str) -> Result<DeployableRow, ServiceError> {
        self.fail()
    }
    async fn profiles(&self, _: &ListQuery) -> Result<Vec<DeviceProfileRow>, ServiceError> {
        self.fail()
    }
    async fn profile(&self, _: &str) -> Result<DeviceProfileRow, ServiceError> {
        self.fail()
    }
    async fn create_profile(&self, _: NewProfile) -> Result<DeviceProfileRow, ServiceError> {
        self.fail()
    }
    async fn delete_profile(&self, _: &str) -> Result<(), ServiceError> {
        self.fail()
    }
    async fn create_arqs(
        &self,
        _: &str,
        _: Option<i64>,
        _: Option<&str>,
    ) -> Result<Vec<ArqRow>, ServiceError> {
        self.fail()
    }
    async fn arqs(&self, _: Option<&str>, _: &ListQuery) -> Result<Vec<ArqRow>, ServiceError> {
        self.fail()
    }
    async fn arq(&self, _: &str) -> Result<ArqRow, ServiceError> {
        self.fail()
    }
    async fn bind(&self, _: &str, _: &Binding) -> Result<ArqRow, ServiceError> {
        self.fail()
    }
    async fn unbind(&self, _: &str) -> Result<ArqRow, ServiceError> {
        self.fail()
    }
    async fn delete_arqs(&self, _: &[String]) -> Result<(), ServiceError> {
        self.fail()
    }
    async fn delete_arqs_of_instance(&self, _: &str) -> Result<(), ServiceError> {
        self.fail()
    }
}

async fn start(mode: Mode) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(accel_api::serve(listener, Broken(mode)));
    format!("http://{addr}")
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{base}{path}")).await.expect("send");
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON body"))
}

#[tokio::test]
async fn an_unreachable_backend_is_a_json_503() {
    let base = start(Mode::Unreachable).await;
    let (status, body) = get(&base, "/v2/device_profiles").await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["type"], "ServiceUnavailable");
    assert_eq!(
        body["error"]["message"],
        "the accel conductor cannot be reached"
    );
}

#[tokio::test]
async fn a_panic_is_a_json_500_and_the_server_goes_on() {
    let base = start(Mode::Panics).await;
    for _ in 0..2 {
        let (status, body) = get(&base, "/v2/accelerator_requests").await;
        assert_eq!(status, 500);
        assert_eq!(body["error"]["type"], "InternalError");
    }
    // Version discovery needs no service.
    let (status, body) = get(&base, "/").await;
    assert_eq!(
        (status, &body["versions"][0]["max_version"]),
        (200, &Value::from("2.3"))
    );
}
