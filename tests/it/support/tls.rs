//! A throwaway certificate authority for TLS tests: the `wss://` newHeads
//! server and PostgreSQL with `ssl = on`. Nothing here trusts it but the
//! client a test points at its CA file.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

/// A throwaway certificate authority and a server certificate it signed
/// for `localhost` and 127.0.0.1, written as PEM files into a temp dir.
pub struct TestCa {
    dir: tempfile::TempDir,
    server_cert: rustls::pki_types::CertificateDer<'static>,
    server_key: rustls::pki_types::PrivateKeyDer<'static>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "sender-indexer test CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.path().join("server.pem"), cert.pem()).unwrap();
        std::fs::write(dir.path().join("server.key"), key.serialize_pem()).unwrap();
        TestCa {
            server_cert: cert.der().clone(),
            server_key: rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            dir,
        }
    }

    /// The server's certificate and key, PEM (for a server that reads
    /// files, such as PostgreSQL).
    pub fn server_files(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.path().join("server.pem"),
            self.dir.path().join("server.key"),
        )
    }

    /// The CA certificate, PEM: what a client is told to trust.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    pub fn acceptor(&self) -> TlsAcceptor {
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![self.server_cert.clone()], self.server_key.clone_key())
        .unwrap();
        TlsAcceptor::from(Arc::new(config))
    }
}
