//! PostgreSQL over TLS (rustls) on the test cluster, which scripts/start-postgres.sh
//! starts with `ssl = on` and a throwaway CA in `VERSO_TEST_POSTGRES_TLS_DIR` (default
//! `/tmp/verso-postgres-tls`); plain connections keep working beside.

use accel_conductor::{testing, Db, DbError};
use sqlx::Row;
use std::path::PathBuf;
use std::time::Duration;

fn ca() -> PathBuf {
    let dir: PathBuf = std::env::var_os("VERSO_TEST_POSTGRES_TLS_DIR")
        .map_or_else(|| "/tmp/verso-postgres-tls".into(), Into::into);
    let ca = dir.join("ca.pem");
    assert!(
        ca.exists(),
        "{} is missing: the TLS tests need the test cluster with TLS: run scripts/start-postgres.sh (scripts/test.sh does)",
        ca.display()
    );
    ca
}

/// Whether this connection to the database is encrypted, as the server sees it.
async fn encrypted(url: &str) -> Result<bool, DbError> {
    let db = Db::connect_within(url, Duration::from_secs(5)).await?;
    let ssl: bool = sqlx::query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(db.pool())
        .await?
        .try_get("ssl")?;
    db.close().await;
    Ok(ssl)
}

fn with(url: &str, params: &str) -> String {
    format!("{url}?{params}")
}

#[tokio::test]
async fn postgres_over_tls() {
    let ca = ca();
    let url = testing::postgres_database().await;
    for params in [
        "sslmode=require".to_owned(),
        format!("sslmode=verify-ca&sslrootcert={}", ca.display()),
        format!("sslmode=verify-full&sslrootcert={}", ca.display()),
        // prefer (sqlx's default, and libpq's): TLS when the server offers it.
        "sslmode=prefer".to_owned(),
    ] {
        let got = encrypted(&with(&url, &params)).await;
        assert!(matches!(got, Ok(true)), "{params}: {got:?}");
    }
    // The schema works over it.
    let db = Db::connect(&with(
        &url,
        &format!("sslmode=verify-full&sslrootcert={}", ca.display()),
    ))
    .await
    .expect("connect over TLS");
    testing::make_schema(&db).await;
    db.create_profile(
        "fpga",
        vec![[("resources:FPGA".to_owned(), "1".to_owned())].into()],
        None,
    )
    .await
    .expect("write over TLS");
    db.close().await;
    // disable stays plain.
    let got = encrypted(&with(&url, "sslmode=disable")).await;
    assert!(matches!(got, Ok(false)), "{got:?}");
}

#[tokio::test]
async fn verify_full_refuses_a_server_the_ca_did_not_sign() {
    ca();
    // Another CA: the RabbitMQ test certificates' (scripts/test.sh makes them).
    let other = std::env::var_os("VERSO_TLS_DIR")
        .map_or_else(|| PathBuf::from("/tmp/verso-rabbitmq-tls"), Into::into)
        .join("ca.pem");
    assert!(other.exists(), "{} is missing", other.display());
    let url = testing::postgres_database().await;
    let got = encrypted(&with(
        &url,
        &format!("sslmode=verify-full&sslrootcert={}", other.display()),
    ))
    .await;
    match got {
        Err(DbError::Connect { url: shown, .. }) => {
            assert!(!shown.contains(":verso@"), "password masked: {shown}")
        }
        other => panic!("connected with an untrusted certificate: {other:?}"),
    }
}
