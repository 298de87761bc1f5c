//! moto_server (PyPI `moto[server]`, tools/requirements.txt) on loopback as AWS STS, IAM
//! and S3 for the credentials tests. IAM authentication is on after the first
//! `no_auth_actions` requests (moto's `INITIAL_NO_AUTH_ACTION_COUNT`): the set-up creates
//! users, roles and buckets without keys, every later request must be signed by known keys
//! and is checked against their IAM policies. Killed when dropped.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use object_store::aws::{AwsAuthorizer, AwsCredential};

pub struct Moto {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

/// The account moto puts everything in.
pub const ACCOUNT: &str = "123456789012";

impl Moto {
    pub fn start(no_auth_actions: u32) -> Moto {
        let bin = crate::seaweed::venv().join("bin/moto_server");
        assert!(
            bin.exists(),
            "{} is missing: run tools/install-deps (it installs moto[server] into the venv)",
            bin.display()
        );
        let port = crate::seaweed::free_port();
        let dir = tempfile::Builder::new()
            .prefix("pga-moto-")
            .tempdir()
            .expect("moto dir");
        let log = std::fs::File::create(dir.path().join("moto.log")).expect("log");
        let child = Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", no_auth_actions.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start moto_server");
        let mut m = Moto { child, port, dir };
        // A TCP connect, not a request: every request counts against the unauthenticated ones.
        let dir = m.dir.path().to_path_buf();
        crate::wait_until_ready(
            "moto_server",
            &mut m.child,
            || std::fs::read_to_string(dir.join("moto.log")).unwrap_or_default(),
            || TcpStream::connect(("127.0.0.1", port)).is_ok(),
        );
        m
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("moto.log")).unwrap_or_default()
    }

    /// A signed Query API call (IAM, STS); the answer's body.
    pub fn query(&self, service: &str, cred: &AwsCredential, params: &[(&str, &str)]) -> String {
        let params: Vec<(&str, String)> = params.iter().map(|(k, v)| (*k, v.to_string())).collect();
        crate::runtime()
            .block_on(pgappliance::upload::sts::query(
                &self.endpoint(),
                service,
                "us-east-1",
                cred,
                &params,
            ))
            .unwrap_or_else(|e| panic!("{service} {params:?}: {e:#}\n{}", self.log()))
    }

    /// Creates a bucket (a signed S3 PUT).
    pub fn create_bucket(&self, bucket: &str, cred: &AwsCredential) {
        let url = format!("{}/{bucket}", self.endpoint());
        let mut request = http::Request::builder()
            .method("PUT")
            .uri(&url)
            .body(object_store::client::HttpRequestBody::from(String::new()))
            .expect("request");
        AwsAuthorizer::new(cred, "s3", "us-east-1")
            .try_authorize(&mut request, None)
            .expect("sign");
        let answer = crate::runtime().block_on(async {
            reqwest::Client::new()
                .put(&url)
                .headers(request.headers().clone())
                .send()
                .await
                .expect("PUT bucket")
        });
        assert!(
            answer.status().is_success(),
            "create bucket {bucket}: {}",
            answer.status()
        );
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of the first `<name>` element of an XML answer (the test's own reading of
/// IAM answers; the product parses STS answers with serde).
pub fn element(xml: &str, name: &str) -> String {
    let open = format!("<{name}>");
    let start = xml
        .find(&open)
        .unwrap_or_else(|| panic!("no <{name}> in {xml}"))
        + open.len();
    let end = xml[start..]
        .find(&format!("</{name}>"))
        .unwrap_or_else(|| panic!("no </{name}> in {xml}"));
    xml[start..start + end].to_string()
}
