//! The test object store the benchmarks start on loopback when given no store: SeaweedFS's
//! `weed mini` with one S3 identity and one bucket, every port on 127.0.0.1. Shared by
//! `pgapplianced bench restore` and `pgappliance bench collect`.

use std::io::Read as _;
use std::path::Path;

use anyhow::Result;

/// The bucket the benchmarks write to.
pub const BUCKET: &str = "pgappliance-bench";

/// A free TCP port on loopback, below the kernel's ephemeral range ([`crate::ports`]).
pub fn free_port() -> Result<u16> {
    crate::ports::free_loopback_port()
}

/// Whether `weed`'s log says a port it was given was taken (by another process, between
/// the pick and its bind): then it is started again on fresh ports (pure).
pub fn port_taken(log: &str) -> bool {
    log.contains("Port allocation failed") || log.contains("address already in use")
}

/// A fresh key pair: (access key, secret key).
pub fn new_keys() -> Result<(String, String)> {
    let mut bytes = [0u8; 20];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok((
        format!("PGA{}", hex[..17].to_uppercase()),
        format!("sk{}", &hex[17..]),
    ))
}

/// The S3 configuration file's text: one identity with every action.
pub fn s3_config(access_key: &str, secret_key: &str) -> String {
    format!(
        r#"{{"identities":[{{"name":"bench","credentials":[{{"accessKey":"{access_key}","secretKey":"{secret_key}"}}],"actions":["Admin","Read","List","Tagging","Write"]}}]}}"#
    )
}

/// `weed mini`'s arguments: data in `data`, identities from `config`, S3 on `s3_port`, every
/// other service on a free loopback port, no telemetry, admin UI or WebDAV.
pub fn mini_args(data: &Path, config: &Path, s3_port: u16) -> Result<Vec<String>> {
    let mut args = vec![
        "-logtostderr".to_string(),
        "mini".into(),
        format!("-dir={}", data.display()),
        "-ip=127.0.0.1".into(),
        "-ip.bind=127.0.0.1".into(),
        "-master.telemetry=false".into(),
        "-admin.ui=false".into(),
        "-webdav=false".into(),
        format!("-s3.config={}", config.display()),
        format!("-bucket={BUCKET}"),
        format!("-s3.port={s3_port}"),
        "-s3.port.iceberg=0".into(),
        "-s3.port.lance=0".into(),
    ];
    for flag in [
        "master.port",
        "master.port.grpc",
        "volume.port",
        "volume.port.grpc",
        "filer.port",
        "filer.port.grpc",
        "s3.port.grpc",
        "admin.port",
        "admin.port.grpc",
    ] {
        args.push(format!("-{flag}={}", free_port()?));
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_port_is_read_from_the_log() {
        // The line of a start that lost its volume port (2026-12-03).
        assert!(port_taken("E1203 12:08:34.885822 mini.go:1244 Port allocation failed: port 43013 for Volume (specified by flag volume.port) is not available on 127.0.0.1 and cannot be used\n"));
        assert!(port_taken(
            "F1203 listen tcp 127.0.0.1:9333: bind: address already in use"
        ));
        assert!(!port_taken("I1203 12:08:30 mini.go:100 Start Volume\n"));
    }
}
