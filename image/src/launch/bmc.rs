//! The HTTP side of Redfish: requests with Basic authentication, the TLS choice
//! (`--bmc-ca` or `--insecure`, never silently), ETags, Redfish error bodies decoded, and a
//! 202 Accepted followed to the end of its task. What to send is decided in [`super::redfish`].

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::credentials::BmcCredentials;
use super::redfish::{error_messages, odata_id, task_outcome};

/// How to reach a BMC.
pub(crate) struct BmcOptions {
    pub(crate) url: String,
    pub(crate) credentials: BmcCredentials,
    /// PEM CA (or the BMC's self-signed certificate) to trust.
    pub(crate) ca_pem: Option<Vec<u8>>,
    /// No certificate checks (and plain http allowed): only when asked for.
    pub(crate) insecure: bool,
    pub(crate) timeout: Duration,
}

/// A Redfish service: requests with Basic authentication and error bodies decoded.
pub(crate) struct Bmc {
    base: String,
    client: reqwest::Client,
    credentials: BmcCredentials,
    task_timeout: Duration,
}

/// A GET's body and the ETag (header or `@odata.etag`).
pub(crate) struct Fetched {
    pub(crate) body: Value,
    pub(crate) etag: Option<String>,
}

/// The base of a BMC's Redfish URLs from `--bmc`: `https://HOST[:PORT]`, with nothing
/// after it but an optional `/` (the Redfish paths are appended to it), and no user name or
/// password in it (they come from --bmc-credentials or the environment). What is wrong is
/// named, without repeating a query or fragment (they may hold a token).
pub(crate) fn base_url(url: &str) -> Result<String> {
    pgappliance::url::refuse_credentials(url)
        .map_err(|why| anyhow::anyhow!("the BMC URL {why}"))?;
    let Some(p) = pgappliance::url::split(url).filter(|p| !p.authority.is_empty()) else {
        bail!("the BMC URL \"{url}\" is not an https:// URL with a host: give https://HOST[:PORT]");
    };
    let address = format!("{}://{}", p.scheme, p.authority);
    if p.query.is_some() {
        bail!("the BMC URL {address}/… has a query (`?…`): give the BMC's address alone, {address}; the Redfish paths are added to it");
    }
    if p.fragment.is_some() {
        bail!("the BMC URL {address}/… has a fragment (`#…`): give the BMC's address alone, {address}");
    }
    if !matches!(p.path, "" | "/") {
        bail!(
            "the BMC URL {address}{} has a path: give the BMC's address alone, {address}; the Redfish paths (/redfish/v1/…) are added to it",
            p.path
        );
    }
    Ok(address)
}

impl Bmc {
    pub(crate) fn new(o: BmcOptions) -> Result<Bmc> {
        let base = base_url(&o.url)?;
        if base.starts_with("http://") && !o.insecure {
            bail!("the BMC URL {base} is plain http: use https, or --insecure to send credentials unencrypted");
        }
        if !base.starts_with("http://") && !base.starts_with("https://") {
            bail!("the BMC URL \"{base}\" is not an https:// URL");
        }
        let mut b = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(o.timeout);
        match (&o.ca_pem, o.insecure) {
            (Some(pem), _) => {
                let cert = reqwest::Certificate::from_pem(pem).context("reading the --bmc-ca certificate")?;
                b = b.tls_certs_only([cert]);
            }
            (None, true) => b = b.tls_danger_accept_invalid_certs(true),
            (None, false) if base.starts_with("https://") => bail!(
                "BMCs use self-signed certificates: give the BMC's certificate or CA with --bmc-ca FILE, or --insecure to skip the check"
            ),
            (None, false) => {}
        }
        Ok(Bmc {
            base,
            client: b.build().context("building the HTTP client")?,
            credentials: o.credentials,
            task_timeout: o.timeout.max(Duration::from_secs(300)),
        })
    }

    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        if path.starts_with("http://") || path.starts_with("https://") {
            path.to_string()
        } else {
            format!("{}{path}", self.base)
        }
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        etag: Option<&str>,
    ) -> Result<reqwest::Response> {
        let what = format!("{method} {path}");
        let mut r = self
            .client
            .request(method, self.url(path))
            .basic_auth(&self.credentials.user, Some(self.credentials.password()))
            .header("Accept", "application/json");
        if let Some(b) = body {
            r = r
                .header("Content-Type", "application/json")
                .body(serde_json::to_vec(b)?);
        }
        if let Some(e) = etag {
            r = r.header("If-Match", e);
        }
        let resp = r.send().await.map_err(|e| {
            let reason = if e.is_connect() {
                "cannot connect"
            } else if e.is_timeout() {
                "timed out"
            } else {
                "request failed"
            };
            let chain = source_chain(&e);
            anyhow::anyhow!(
                "{what} on the BMC at {}: {reason}: {chain}{}",
                self.base,
                tls_hint(&chain)
            )
        })?;
        let status = resp.status();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            bail!(
                "the BMC at {} refused the credentials of user \"{}\" (401 on {what})",
                self.base,
                self.credentials.user
            );
        }
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            bail!(
                "{what}: the BMC answered {status}: {}",
                error_messages(&text)
            );
        }
        Ok(resp)
    }

    pub(crate) async fn get(&self, path: &str) -> Result<Fetched> {
        let resp = self.send(reqwest::Method::GET, path, None, None).await?;
        let header = resp
            .headers()
            .get("ETag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = json_body(resp, path).await?;
        let etag = header.or_else(|| {
            body.get("@odata.etag")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        Ok(Fetched { body, etag })
    }

    /// POSTs an action and, when the BMC answers 202, follows the task to its end.
    pub(crate) async fn post_action(&self, path: &str, body: &Value) -> Result<()> {
        let resp = self
            .send(reqwest::Method::POST, path, Some(body), None)
            .await?;
        if resp.status() == reqwest::StatusCode::ACCEPTED {
            let location = resp
                .headers()
                .get("Location")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let text = resp.text().await.unwrap_or_default();
            let task = location.or_else(|| {
                serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| odata_id(&v).map(str::to_string))
            });
            let Some(task) = task else {
                bail!("POST {path}: the BMC answered 202 but named no task to follow");
            };
            self.follow_task(path, &task).await?;
        }
        Ok(())
    }

    async fn follow_task(&self, action: &str, task: &str) -> Result<()> {
        let deadline = Instant::now() + self.task_timeout;
        loop {
            let resp = self.send(reqwest::Method::GET, task, None, None).await?;
            let running = resp.status() == reqwest::StatusCode::ACCEPTED;
            let text = resp.text().await.unwrap_or_default();
            let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            match task_outcome(&body) {
                Some(Ok(())) => return Ok(()),
                Some(Err(e)) => bail!("POST {action}: {e}"),
                None if !running && body.get("TaskState").is_none() => return Ok(()),
                None => {}
            }
            if Instant::now() > deadline {
                bail!(
                    "POST {action}: the task {task} did not end in {:?}",
                    self.task_timeout
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    pub(crate) async fn patch(&self, path: &str, body: &Value, etag: Option<&str>) -> Result<()> {
        self.send(reqwest::Method::PATCH, path, Some(body), etag)
            .await
            .map(drop)
    }
}

async fn json_body(resp: reqwest::Response, path: &str) -> Result<Value> {
    let text = resp
        .text()
        .await
        .with_context(|| format!("reading GET {path}"))?;
    serde_json::from_str(&text).with_context(|| format!("GET {path}: the BMC's answer is not JSON"))
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        parts.push(s.to_string());
        cur = s.source();
    }
    parts.dedup();
    parts.join(": ")
}

/// What to do about a certificate the TLS stack refused, read from its error (pure); empty
/// for other errors.
fn tls_hint(chain: &str) -> &'static str {
    if chain.contains("CaUsedAsEndEntity") {
        "; the BMC's certificate is marked as a CA (basicConstraints CA:TRUE), which is refused as a server's own: install a certificate issued by your own CA on the BMC and give that CA with --bmc-ca, or use --insecure (docs/launch.md, \"BMC credentials and TLS\")"
    } else if chain.contains("UnknownIssuer") {
        "; no certificate in --bmc-ca issued it: give the BMC's own certificate when it is self-signed, else the CA that issued it (a certificate a CA issued is not trusted alone)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_certificate_says_what_to_give_instead() {
        // reqwest 0.13's chain for a leaf a CA issued, given alone as --bmc-ca (the docs
        // walk of 2026-12-02, sushy-emulator with a certificate of the lab's own CA).
        let unknown = "error sending request for url (https://127.0.0.1:44765/redfish/v1/): client error (Connect): invalid peer certificate: UnknownIssuer";
        assert!(tls_hint(unknown).contains("else the CA that issued it"));
        let ca = "client error (Connect): invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))";
        assert!(
            tls_hint(ca).contains("basicConstraints CA:TRUE")
                && tls_hint(ca).contains("--insecure")
        );
        assert_eq!(
            tls_hint(
                "client error (Connect): tcp connect error: Connection refused (os error 111)"
            ),
            ""
        );
    }

    #[test]
    fn a_bmc_url_is_an_address_alone_without_credentials() {
        for (url, base) in [
            ("https://bmc.lab", "https://bmc.lab"),
            ("https://bmc.lab:8443/", "https://bmc.lab:8443"),
            ("http://10.0.0.5", "http://10.0.0.5"),
        ] {
            assert_eq!(base_url(url).expect(url), base);
        }
        for (url, says) in [
            ("https://h/?token=Q", "has a query"),
            ("https://h?token=Q", "has a query"),
            ("https://h/#Q", "has a fragment"),
            ("https://h/redfish/v1", "https://h/redfish/v1 has a path"),
            (
                "https://admin:Q@h",
                "https://***@h\" has a user name or password",
            ),
            ("https://admin:Q@h/x?y", "has a user name or password"),
            ("bmc.lab", "is not an https:// URL"),
        ] {
            let e = base_url(url).expect_err(url).to_string();
            assert!(e.contains(says), "{url}: {e}");
            assert!(!e.contains('Q'), "{url}: {e}");
        }
    }
}
