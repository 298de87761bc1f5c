//! The launch record, `<prefix>/launches/<launch id>.json` in the plan's store: which plan,
//! when, each target and how it was started, so any machine can watch the launch.

use std::time::SystemTime;

use anyhow::Result;
use object_store::ObjectStoreExt;
use serde::{Deserialize, Serialize};

use super::ec2::Ec2Launch;
use super::ipmi::IpmiLaunch;
use super::redfish::RedfishLaunch;

pub(crate) const SCHEMA: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct LaunchRecord {
    pub(crate) schema: u32,
    pub(crate) launch_id: String,
    pub(crate) plan: PlanRef,
    pub(crate) created_at: String,
    /// Where the BMCs fetch the ISO, without its query (a presigned URL's signature is a
    /// read credential and is not recorded).
    pub(crate) iso_url: Option<String>,
    pub(crate) iso_object: Option<String>,
    /// The payload uploaded for EC2 instances.
    pub(crate) payload_object: Option<String>,
    /// Where an EC2 instance whose install failed (payload not fetched, sha256 mismatch)
    /// PUTs its report, through a presigned URL in the user-data.
    #[serde(default)]
    pub(crate) failure_object: Option<String>,
    /// Where the targets' appliances upload their runs and status objects: the store of the
    /// plan packed into their payload (`launch --store` replaces the plan's). `wait` reads
    /// them there. None in records written before it was kept.
    #[serde(default)]
    pub(crate) upload: Option<UploadRef>,
    pub(crate) targets: Vec<Target>,
}

/// A store as the appliances reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct UploadRef {
    pub(crate) store: String,
    pub(crate) endpoint: Option<String>,
    pub(crate) region: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PlanRef {
    pub(crate) name: String,
    pub(crate) file: String,
    pub(crate) sha256: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Started {
    Redfish(RedfishLaunch),
    Ipmi(IpmiLaunch),
    Ec2(Ec2Launch),
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Target {
    /// The BMC URL or IPMI host as given.
    pub(crate) address: String,
    /// `redfish`, `ipmi` or `ec2`.
    pub(crate) method: String,
    pub(crate) at: String,
    pub(crate) started: Option<Started>,
    pub(crate) error: Option<String>,
    /// The store this target's appliance uploads to (the record's `upload.store`).
    #[serde(default)]
    pub(crate) uploads_to: Option<String>,
}

/// RFC 3339 UTC, seconds.
pub(crate) fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// `<plan>-<YYYYMMDDTHHMMSSZ>-<4 hex>`: sorts by time, unique across machines in practice.
pub(crate) fn launch_id(plan: &str, t: SystemTime, entropy: u32) -> String {
    let stamp: String = timestamp(t)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    format!("{plan}-{stamp}-{:04x}", entropy & 0xffff)
}

pub(crate) use pgappliance::url::without_query;

pub(crate) async fn write(
    store: &pgappliance::upload::Store,
    record: &LaunchRecord,
) -> Result<String> {
    let path = store.path(&["launches", &format!("{}.json", record.launch_id)]);
    let body = serde_json::to_vec_pretty(record)?;
    store.objects.put(&path, body.into()).await.map_err(|e| {
        super::store_failure(
            store,
            &format!("writing the launch record {path} to {}", store.url),
            &e,
        )
    })?;
    Ok(path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_by_time_and_urls_lose_their_signature() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        assert_eq!(
            launch_id("altra", t, 0x1_beef),
            "altra-20231114T221320Z-beef"
        );
        assert_eq!(
            without_query("https://s3/b/x.iso?X-Amz-Signature=abc#f"),
            "https://s3/b/x.iso"
        );
    }
}
