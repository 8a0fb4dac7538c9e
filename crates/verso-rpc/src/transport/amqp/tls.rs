//! TLS of the AMQP transport (`ssl=true`): what to trust and which client certificate to
//! present.
//!
//! The rustls client configuration is built here, so that
//! - `ssl_ca_file` is the only trust anchor when given (as in oslo.messaging), and the
//!   system's CA certificates are used only without it;
//! - the client certificate and key come from the PEM files oslo.messaging takes
//!   (`ssl_cert_file`, `ssl_key_file`), with PKCS#8, PKCS#1 (RSA) or SEC1 (EC) keys,
//!   checked against each other before any connection is tried;
//!
//! and handed to amqprs as its [`TlsAdaptor`], which runs the handshake on the TCP
//! connection it opens. See [`TlsOptions`] for the behaviour.

use super::AmqpError;
use amqprs::tls::TlsAdaptor;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use tokio_rustls::TlsConnector;

/// TLS settings: `ssl=true` (or an `amqps://` URL) with oslo.messaging's `ssl_ca_file`,
/// `ssl_cert_file` and `ssl_key_file`.
///
/// The broker's certificate is always verified, and so is its name: the host of the URL
/// (a DNS name or an IP address) must be in the certificate's subject alternative names.
/// - With `ssl_ca_file`, the certificates of that PEM file are the only ones trusted, as in
///   oslo.messaging.
/// - Without it, the broker's certificate must chain to one of the system's CA
///   certificates (`/etc/ssl/certs`, or `SSL_CERT_FILE` / `SSL_CERT_DIR`). This is
///   stricter than oslo.messaging, which then checks the chain against the system's CAs
///   but not the broker's name; a broker with a private CA needs `ssl_ca_file` here.
///   oslo.messaging also skips the name check when the URL has several hosts; this
///   transport checks it for each host.
/// - `ssl_cert_file` makes the transport present a client certificate: the certificate
///   (its intermediates may follow it in the file) and its unencrypted private key
///   (PKCS#8 `BEGIN PRIVATE KEY`, PKCS#1 `BEGIN RSA PRIVATE KEY` or SEC1
///   `BEGIN EC PRIVATE KEY`), from `ssl_key_file`, or, without it, from `ssl_cert_file`
///   itself, as oslo.messaging (Python's `load_cert_chain`) reads it. The key stays in
///   memory. `ssl_key_file` without `ssl_cert_file` is refused: oslo.messaging would
///   ignore it and connect without a certificate.
///
/// The files are read on every connection attempt (so a renewed certificate is picked up
/// by the next reconnect); [`check`](Self::check) reads them once to report a bad file
/// early. A bad file makes the connection attempt fail with the file named, never a
/// connection without it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// `ssl_ca_file`: PEM file of the certificate authorities to trust, instead of the
    /// system's.
    pub ca_file: Option<String>,
    /// `ssl_cert_file`: PEM file of the client certificate, and of its private key when
    /// `key_file` is not given.
    pub cert_file: Option<String>,
    /// `ssl_key_file`: PEM file of the client certificate's private key (only with
    /// `cert_file`).
    pub key_file: Option<String>,
}

impl TlsOptions {
    /// Reads the files of these options as a connection attempt would and reports the
    /// first problem: an unreadable or empty `ssl_ca_file`, a client certificate or key
    /// that cannot be read or parsed (or no key at all), a key that does not match its
    /// certificate, or `ssl_key_file` without `ssl_cert_file`.
    ///
    /// ```
    /// use verso_rpc::transport::amqp::{AmqpConfig, AmqpError};
    /// let c = AmqpConfig::from_url("rabbit://u:p@h/?ssl=1&ssl_ca_file=/no/such/ca.pem")?;
    /// let tls = c.tls.as_ref().expect("ssl=1");
    /// assert!(matches!(tls.check(), Err(AmqpError::CaFile { .. })));
    /// # Ok::<(), AmqpError>(())
    /// ```
    pub fn check(&self) -> Result<(), AmqpError> {
        connector(self).map(drop)
    }
}

/// The error of a client key without its certificate.
pub(super) fn key_without_cert(key_file: &str) -> AmqpError {
    AmqpError::InvalidOption {
        option: "ssl_key_file".to_owned(),
        value: key_file.to_owned(),
        detail: "a client key needs its certificate: give ssl_cert_file too (the client \
                 certificate, PEM), or neither"
            .into(),
    }
}

/// The TLS settings amqprs connects to `host` with: the files of `opts` are read now (on
/// every connection attempt, so a renewed certificate is used on the next reconnect).
pub(crate) fn adaptor(opts: &TlsOptions, host: &str) -> Result<TlsAdaptor, AmqpError> {
    Ok(TlsAdaptor::new(connector(opts)?, host.to_owned()))
}

/// The TLS connector of `opts`: its trust anchors and client certificate.
pub(crate) fn connector(opts: &TlsOptions) -> Result<TlsConnector, AmqpError> {
    let config = with_client_cert(trust_anchors(opts)?, opts)?;
    Ok(TlsConnector::from(Arc::new(config)))
}

/// `ssl_ca_file`'s certificates, or the system's without it.
fn trust_anchors(opts: &TlsOptions) -> Result<RootCertStore, AmqpError> {
    let mut roots = RootCertStore::empty();
    match &opts.ca_file {
        Some(path) => {
            let ca_err = |detail: String| AmqpError::CaFile {
                path: path.clone(),
                detail,
            };
            let certs = read_certs(path).map_err(ca_err)?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(ca_err(
                    "none of its certificates can be used as a CA".into(),
                ));
            }
        }
        None => {
            let certs =
                rustls_native_certs::load_native_certs().map_err(|e| AmqpError::SystemRoots {
                    detail: e.to_string(),
                })?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(AmqpError::SystemRoots {
                    detail: "no CA certificate found (is ca-certificates installed?)".into(),
                });
            }
        }
    }
    Ok(roots)
}

/// The client configuration with the client certificate of `opts`, if it has one: the
/// certificate of `ssl_cert_file`, and the key of `ssl_key_file` or, without it, of
/// `ssl_cert_file` (as Python's `load_cert_chain(certfile, None)` reads it for
/// oslo.messaging).
fn with_client_cert(roots: RootCertStore, opts: &TlsOptions) -> Result<ClientConfig, AmqpError> {
    // ring, named here: the process may hold other rustls providers (no default is
    // guessed).
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| AmqpError::Connect {
                brokers: String::new(),
                detail: format!("TLS cannot be set up: {e}"),
                kind: super::ConnectKind::Tls,
            })?
            .with_root_certificates(roots);
    let cert = match (&opts.cert_file, &opts.key_file) {
        (None, None) => return Ok(builder.with_no_client_auth()),
        (None, Some(key)) => return Err(key_without_cert(key)),
        (Some(cert), _) => cert,
    };
    let chain = read_certs(cert).map_err(|detail| AmqpError::ClientCert {
        path: cert.clone(),
        detail,
    })?;
    // Without ssl_key_file the key is read from ssl_cert_file, and its errors are that
    // file's.
    let key_file = opts.key_file.as_ref();
    let key_err = |detail: String| match key_file {
        Some(key) => AmqpError::ClientKey {
            path: key.clone(),
            detail,
        },
        None => AmqpError::ClientCert {
            path: cert.clone(),
            detail: format!(
                "there is no ssl_key_file, so the certificate's private key must follow it \
                 in this file: {detail}"
            ),
        },
    };
    let key_der = read_key(key_file.unwrap_or(cert)).map_err(key_err)?;
    // rustls checks here that it can sign with the key and that the key is the one of
    // the certificate.
    builder.with_client_auth_cert(chain, key_der).map_err(|e| {
        key_err(format!(
            "cannot be used with the certificate of ssl_cert_file {cert}: {e}"
        ))
    })
}

/// The certificates of a PEM file, at least one.
fn read_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem_bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let certs = CertificateDer::pem_slice_iter(&pem_bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM file: {}", pem_error(&e)))?;
    if certs.is_empty() {
        return Err("no PEM certificate ('-----BEGIN CERTIFICATE-----') in it".into());
    }
    Ok(certs)
}

/// The first private key of a PEM file. Error texts never quote the file.
fn read_key(path: &str) -> Result<PrivateKeyDer<'static>, String> {
    let pem_bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let has = |needle: &[u8]| pem_bytes.windows(needle.len()).any(|w| w == needle);
    // PKCS#8 "ENCRYPTED PRIVATE KEY", or OpenSSL's old encrypted PEM headers.
    let encrypted = has(b"-----BEGIN ENCRYPTED PRIVATE KEY-----") || has(b"Proc-Type: 4,ENCRYPTED");
    match PrivateKeyDer::from_pem_slice(&pem_bytes) {
        Ok(key) => Ok(key),
        Err(_) if encrypted => Err("the private key is encrypted, and there is no \
             option for its passphrase (neither has oslo.messaging); store it unencrypted \
             (openssl pkey -in KEY -out PLAIN_KEY) and protect the file instead"
            .into()),
        Err(pem::Error::NoItemsFound) => Err("no PEM private key in it ('BEGIN PRIVATE KEY', \
             'BEGIN RSA PRIVATE KEY' or 'BEGIN EC PRIVATE KEY')"
            .into()),
        Err(e) => Err(format!("not a PEM file: {}", pem_error(&e))),
    }
}

/// A PEM error without the bytes of the file (a key file's lines are secret).
fn pem_error(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { .. } => "a section has no END line".into(),
        pem::Error::IllegalSectionStart { .. } => "a BEGIN line is malformed".into(),
        pem::Error::Base64Decode(_) => "a section is not valid base64".into(),
        pem::Error::Io(e) => e.to_string(),
        pem::Error::SectionTooLarge => "a section is too large".into(),
        _ => "unreadable PEM".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary directory (removed when dropped) to write PEM files in.
    struct TempDir(tempfile::TempDir);

    impl TempDir {
        fn new() -> TempDir {
            TempDir(tempfile::tempdir().expect("temp dir"))
        }

        fn file(&self, name: &str, text: &str) -> String {
            let p = self.0.path().join(name);
            std::fs::write(&p, text).expect("write");
            p.to_string_lossy().into_owned()
        }
    }

    fn client(cert: Option<&str>, key: Option<&str>) -> TlsOptions {
        TlsOptions {
            ca_file: None,
            cert_file: cert.map(Into::into),
            key_file: key.map(Into::into),
        }
    }

    // A PEM section of bytes that are no certificate.
    const NOT_A_CERT: &str =
        "-----BEGIN CERTIFICATE-----\nAAECAwQFBgcICQ==\n-----END CERTIFICATE-----\n";

    #[test]
    fn bad_ca_files_are_typed() {
        let d = TempDir::new();
        for (path, want) in [
            ("/no/such/ca.pem".to_owned(), "No such file"),
            (d.file("empty.pem", ""), "no PEM certificate"),
            (d.file("text.pem", "hello\n"), "no PEM certificate"),
            (
                d.file("unended.pem", "-----BEGIN CERTIFICATE-----\nAAEC\n"),
                "no END line",
            ),
            (d.file("junk.pem", NOT_A_CERT), "can be used as a CA"),
        ] {
            let opts = TlsOptions {
                ca_file: Some(path.clone()),
                ..TlsOptions::default()
            };
            match connector(&opts) {
                Err(e @ AmqpError::CaFile { .. }) => {
                    let text = e.to_string();
                    assert!(text.contains(&path) && text.contains(want), "{text}");
                }
                other => panic!("{path}: expected CaFile, got {:?}", other.err()),
            }
        }
    }

    #[test]
    fn bad_client_files_are_typed_and_never_quote_the_key() {
        let d = TempDir::new();
        let cert = d.file("cert.pem", NOT_A_CERT);
        let bad_key = d.file(
            "bad.pem",
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n",
        );
        let roots = RootCertStore::empty;

        match with_client_cert(roots(), &client(Some("/no/such/cert.pem"), Some(&bad_key))) {
            Err(AmqpError::ClientCert { path, detail }) => {
                assert_eq!(path, "/no/such/cert.pem");
                assert!(detail.contains("No such file"), "{detail}");
            }
            other => panic!("expected ClientCert, got {:?}", other.err()),
        }
        let empty = d.file("empty-cert.pem", "");
        match with_client_cert(roots(), &client(Some(&empty), Some(&bad_key))) {
            Err(AmqpError::ClientCert { detail, .. }) => {
                assert!(detail.contains("no PEM certificate"), "{detail}")
            }
            other => panic!("expected ClientCert, got {:?}", other.err()),
        }

        let key_cases = [
            ("/no/such/key.pem".to_owned(), "No such file"),
            (d.file("nokey.pem", NOT_A_CERT), "no PEM private key"),
            (
                d.file(
                    "enc.pem",
                    "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAECAwQF\n\
                     -----END ENCRYPTED PRIVATE KEY-----\n",
                ),
                "encrypted",
            ),
            (
                d.file(
                    "legacy.pem",
                    "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\
                     DEK-Info: AES-128-CBC,00\n\nAAECAwQF\n-----END RSA PRIVATE KEY-----\n",
                ),
                "encrypted",
            ),
            (
                d.file(
                    "badb64.pem",
                    "-----BEGIN PRIVATE KEY-----\nc2Vj*cmV0\n-----END PRIVATE KEY-----\n",
                ),
                "not valid base64",
            ),
            (bad_key.clone(), "cannot be used with the certificate"),
        ];
        for (key, want) in key_cases {
            match with_client_cert(roots(), &client(Some(&cert), Some(&key))) {
                Err(e @ AmqpError::ClientKey { .. }) => {
                    let text = format!("{e} {e:?}");
                    assert!(text.contains(&key) && text.contains(want), "{text}");
                    assert!(!text.contains("c2Vj"), "key bytes in the error: {text}");
                }
                other => panic!("{key}: expected ClientKey, got {:?}", other.err()),
            }
        }

        // Without ssl_key_file the key is looked for in ssl_cert_file, and its errors are
        // that file's.
        match with_client_cert(roots(), &client(Some(&cert), None)) {
            Err(e @ AmqpError::ClientCert { .. }) => {
                let text = e.to_string();
                assert!(text.contains(&cert), "{text}");
                assert!(text.contains("no ssl_key_file"), "{text}");
                assert!(text.contains("no PEM private key"), "{text}");
            }
            other => panic!("expected ClientCert, got {:?}", other.err()),
        }
        let key_text = std::fs::read_to_string(&bad_key).expect("key");
        let combined = d.file("combined.pem", &format!("{NOT_A_CERT}{key_text}"));
        match with_client_cert(roots(), &client(Some(&combined), None)) {
            Err(e @ AmqpError::ClientCert { .. }) => {
                let text = format!("{e} {e:?}");
                assert!(text.contains(&combined), "{text}");
                assert!(
                    text.contains("cannot be used with the certificate"),
                    "{text}"
                );
                assert!(!text.contains("c2Vj"), "key bytes in the error: {text}");
            }
            other => panic!("expected ClientCert, got {:?}", other.err()),
        }

        // A key without its certificate is refused (oslo.messaging would ignore it).
        match with_client_cert(roots(), &client(None, Some(&bad_key))) {
            Err(AmqpError::InvalidOption { option, .. }) => assert_eq!(option, "ssl_key_file"),
            other => panic!(
                "expected InvalidOption(ssl_key_file), got {:?}",
                other.err()
            ),
        }
        assert!(with_client_cert(roots(), &client(None, None)).is_ok());
    }
}
