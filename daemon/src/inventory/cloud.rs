//! What the machine is from outside: DMI (vendor, product, board, BIOS) on any machine, and
//! on EC2 the instance type, region and id from IMDSv2 (token first, short timeouts; on
//! bare metal and elsewhere there is no answer and nothing is recorded).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The instance as IMDSv2 describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CloudInstance {
    pub(crate) provider: String,
    pub(crate) instance_type: String,
    pub(crate) region: Option<String>,
    pub(crate) availability_zone: Option<String>,
    pub(crate) instance_id: Option<String>,
}

/// The link-local IMDS address; `PGAPPLIANCE_IMDS_ENDPOINT` replaces it (tests), and
/// `off` skips the lookup.
pub(crate) const IMDS_ENDPOINT: &str = "http://169.254.169.254";

const DMI_FIELDS: [&str; 8] = [
    "sys_vendor",
    "product_name",
    "product_version",
    // What a BMC reports as the system's UUID and serial number (Redfish ComputerSystem
    // `UUID`, `SerialNumber`): how a launched server is recognised in the store. Root only.
    "product_uuid",
    "product_serial",
    "board_vendor",
    "board_name",
    "bios_version",
];

/// DMI identity from /sys/class/dmi/id (absent fields are left out).
pub(crate) fn dmi(root: &std::path::Path) -> BTreeMap<String, String> {
    DMI_FIELDS
        .iter()
        .filter_map(|f| {
            let v = std::fs::read_to_string(root.join(f)).ok()?;
            let v = v.trim();
            (!v.is_empty()).then(|| (f.to_string(), v.to_string()))
        })
        .collect()
}

/// How often a meta-data read is tried once IMDS gave a token.
const IMDS_ATTEMPTS: usize = 3;

/// Asks IMDSv2; `None` when nothing answers within the short timeouts.
pub(crate) async fn ec2_instance(endpoint: &str) -> Option<CloudInstance> {
    if endpoint == "off" {
        return None;
    }
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(500))
        .timeout(Duration::from_secs(2))
        .no_proxy()
        .build()
        .ok()?;
    let token = client
        .put(format!("{endpoint}/latest/api/token"))
        .header("X-aws-ec2-metadata-token-ttl-seconds", "60")
        .send()
        .await
        .ok()?
        .error_for_status()
        .ok()?
        .text()
        .await
        .ok()?;
    // Once the token answered, this is an instance: a meta-data read that times out or
    // fails on the way (IMDS throttles; a loaded host answers late) is tried again, a 404 is
    // an answer.
    let get = |path: &'static str| {
        let client = client.clone();
        let token = token.clone();
        async move {
            for _ in 0..IMDS_ATTEMPTS {
                let Ok(r) = client
                    .get(format!("{endpoint}/latest/meta-data/{path}"))
                    .header("X-aws-ec2-metadata-token", &token)
                    .send()
                    .await
                else {
                    continue;
                };
                if r.status() == reqwest::StatusCode::NOT_FOUND {
                    return None;
                }
                let Ok(r) = r.error_for_status() else {
                    continue;
                };
                let Ok(t) = r.text().await else {
                    continue;
                };
                let t = t.trim().to_string();
                return (!t.is_empty()).then_some(t);
            }
            None
        }
    };
    let instance_type = get("instance-type").await?;
    Some(CloudInstance {
        provider: "aws".into(),
        instance_type,
        region: get("placement/region").await,
        availability_zone: get("placement/availability-zone").await,
        instance_id: get("instance-id").await,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dmi_reads_present_fields_only() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::write(d.path().join("sys_vendor"), "Ampere(R)\n").expect("w");
        std::fs::write(d.path().join("product_name"), "Mt.Jade\n").expect("w");
        std::fs::write(d.path().join("board_name"), "  \n").expect("w");
        let m = dmi(d.path());
        assert_eq!(m.get("sys_vendor").map(String::as_str), Some("Ampere(R)"));
        assert_eq!(m.get("product_name").map(String::as_str), Some("Mt.Jade"));
        assert!(!m.contains_key("board_name"));
        assert_eq!(m.len(), 2);
    }

    /// A loopback stand-in speaking IMDSv2's token protocol: metadata only with the token.
    async fn fake_imds() -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = l.local_addr().expect("addr");
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                let first = req.lines().next().unwrap_or("").to_string();
                let has_token = req
                    .to_ascii_lowercase()
                    .contains("x-aws-ec2-metadata-token: tok123");
                let (code, body) = if first.starts_with("PUT /latest/api/token") {
                    (200, "tok123")
                } else if !has_token {
                    (401, "")
                } else if first.contains("/instance-type ") {
                    (200, "m6gd.8xlarge")
                } else if first.contains("/placement/region ") {
                    (200, "eu-west-1")
                } else if first.contains("/instance-id ") {
                    // Throttled once, as IMDS does under load: the read is tried again.
                    if THROTTLED.swap(true, std::sync::atomic::Ordering::SeqCst) {
                        (200, "i-0123")
                    } else {
                        (503, "")
                    }
                } else {
                    (404, "")
                };
                let resp = format!(
                    "HTTP/1.1 {code} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            }
        });
        format!("http://{addr}")
    }

    static THROTTLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    #[test]
    fn imdsv2_token_flow_and_absence() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        rt.block_on(async {
            let ep = fake_imds().await;
            let c = ec2_instance(&ep).await.expect("answers");
            assert_eq!(c.instance_type, "m6gd.8xlarge");
            assert_eq!(c.region.as_deref(), Some("eu-west-1"));
            assert_eq!(c.availability_zone, None);
            assert_eq!(c.instance_id.as_deref(), Some("i-0123"));
            // Nothing listening: no cloud.
            assert_eq!(ec2_instance("http://127.0.0.1:9").await, None);
            assert_eq!(ec2_instance("off").await, None);
        });
    }
}
