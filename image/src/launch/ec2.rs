//! EC2 launch: RunInstances through EC2's Query API (version 2016-11-15) signed with
//! object_store's SigV4 authorizer, then DescribeInstances until every instance runs.
//! The user-data is the build's, fetching the payload from a presigned URL of the plan's
//! store; instance-initiated shutdown terminates, so `finish.action = "power-off"` ends
//! the bill.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use base64::Engine;
use object_store::aws::{AwsAuthorizer, AwsCredential};
use object_store::client::HttpRequestBody;
use pgappliance::upload::caller::CallerKeys;

pub(crate) const API_VERSION: &str = "2016-11-15";

/// What to launch.
#[derive(Debug, Clone)]
pub(crate) struct Ec2Request {
    pub(crate) image_id: String,
    pub(crate) instance_type: String,
    pub(crate) count: u32,
    pub(crate) subnet_id: Option<String>,
    pub(crate) key_name: Option<String>,
    pub(crate) security_group_ids: Vec<String>,
    /// The instance profile (by name) whose role the instances get.
    pub(crate) iam_instance_profile: Option<String>,
    pub(crate) user_data: String,
    pub(crate) tags: Vec<(String, String)>,
}

/// RunInstances' Query parameters (pure).
pub(crate) fn run_instances_params(r: &Ec2Request) -> Vec<(String, String)> {
    let mut p: Vec<(String, String)> = vec![
        ("Action".into(), "RunInstances".into()),
        ("Version".into(), API_VERSION.into()),
        ("ImageId".into(), r.image_id.clone()),
        ("InstanceType".into(), r.instance_type.clone()),
        ("MinCount".into(), r.count.to_string()),
        ("MaxCount".into(), r.count.to_string()),
        (
            "UserData".into(),
            base64::engine::general_purpose::STANDARD.encode(r.user_data.as_bytes()),
        ),
        (
            "InstanceInitiatedShutdownBehavior".into(),
            "terminate".into(),
        ),
    ];
    if let Some(s) = &r.subnet_id {
        p.push(("SubnetId".into(), s.clone()));
    }
    if let Some(k) = &r.key_name {
        p.push(("KeyName".into(), k.clone()));
    }
    if let Some(profile) = &r.iam_instance_profile {
        p.push(("IamInstanceProfile.Name".into(), profile.clone()));
    }
    for (i, g) in r.security_group_ids.iter().enumerate() {
        p.push((format!("SecurityGroupId.{}", i + 1), g.clone()));
    }
    for (i, kind) in ["instance", "volume"].iter().enumerate() {
        let spec = format!("TagSpecification.{}", i + 1);
        p.push((format!("{spec}.ResourceType"), kind.to_string()));
        for (j, (k, v)) in r.tags.iter().enumerate() {
            p.push((format!("{spec}.Tag.{}.Key", j + 1), k.clone()));
            p.push((format!("{spec}.Tag.{}.Value", j + 1), v.clone()));
        }
    }
    p
}

/// The text of every `<tag>…</tag>` in document order.
fn elements<'a>(xml: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        let Some(j) = after.find(&close) else { break };
        out.push(&after[..j]);
        rest = &after[j + close.len()..];
    }
    out
}

/// An EC2 error response (`<Errors><Error><Code>…<Message>…`), as "Code: Message".
pub(crate) fn parse_error(xml: &str) -> Option<String> {
    let code = elements(xml, "Code").into_iter().next()?;
    let message = elements(xml, "Message").into_iter().next().unwrap_or("");
    Some(format!("{code}: {message}"))
}

/// Instance ids and state names of a RunInstances or DescribeInstances response: each
/// `instancesSet` item has its `instanceId` before its `instanceState`.
pub(crate) fn parse_instances(xml: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find("<instanceId>") {
        rest = &rest[i..];
        let id = elements(rest, "instanceId")
            .into_iter()
            .next()
            .unwrap_or("")
            .to_string();
        let state = elements(rest, "instanceState")
            .into_iter()
            .next()
            .and_then(|s| elements(s, "name").into_iter().next())
            .unwrap_or("")
            .to_string();
        out.push((id, state));
        rest = &rest["<instanceId>".len()..];
        // Skip to the next item, past this one's instanceState.
        match rest.find("</instanceState>") {
            Some(j) => rest = &rest[j..],
            None => break,
        }
    }
    out
}

/// Where and as whom to call EC2.
pub(crate) struct Ec2Client {
    endpoint: String,
    region: String,
    credential: AwsCredential,
    /// "key AKIA… from …", for the messages.
    keys: String,
    client: reqwest::Client,
}

impl Ec2Client {
    pub(crate) fn new(endpoint: String, region: String, keys: CallerKeys) -> Result<Self> {
        Ok(Ec2Client {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            region,
            credential: keys.credential(),
            keys: keys.describe(),
            client: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(5))
                .timeout(Duration::from_secs(60))
                .build()?,
        })
    }

    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub(crate) async fn call(&self, params: &[(String, String)]) -> Result<String> {
        let action = params
            .iter()
            .find(|(k, _)| k == "Action")
            .map(|(_, v)| v.as_str())
            .unwrap_or("?");
        let mut url = reqwest::Url::parse(&format!("{}/", self.endpoint))
            .with_context(|| format!("EC2 endpoint \"{}\" is not a URL", self.endpoint))?;
        let body = {
            let mut form = url.clone();
            form.query_pairs_mut().clear().extend_pairs(params);
            form.query().unwrap_or("").to_string()
        };
        url.set_query(None);
        let mut req = http::Request::builder()
            .method("POST")
            .uri(url.as_str())
            .header(
                "content-type",
                "application/x-www-form-urlencoded; charset=utf-8",
            )
            .body(HttpRequestBody::from(body.clone()))
            .context("building the EC2 request")?;
        AwsAuthorizer::new(&self.credential, "ec2", &self.region)
            .try_authorize(&mut req, None)
            .context("signing the EC2 request")?;
        let mut r = self.client.post(url.clone()).body(body);
        for (k, v) in req.headers() {
            r = r.header(k.as_str(), v.as_bytes());
        }
        let how = super::ec2_chain(None, None).how();
        let resp = match r.send().await {
            Ok(resp) => resp,
            Err(e) => bail!(pgappliance::upload::aws_error::one_line(
                &format!("EC2 {action} at {}", self.endpoint),
                &error_chain(&e),
                "EC2",
                Some(&self.keys),
                &how,
            )),
        };
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            if parse_error(&text).is_none() {
                bail!(
                    "EC2 {action} at {} ({}): {status}: {}",
                    self.endpoint,
                    self.keys,
                    text.chars().take(300).collect::<String>()
                );
            }
            bail!(pgappliance::upload::aws_error::one_line(
                &format!("EC2 {action} at {}", self.endpoint),
                &format!("status code: {} {text}", status.as_u16()),
                "EC2",
                Some(&self.keys),
                &how,
            ));
        }
        Ok(text)
    }
}

/// An error and its sources, as one text.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// What an EC2 launch did.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Ec2Launch {
    pub(crate) endpoint: String,
    pub(crate) region: String,
    pub(crate) image_id: String,
    pub(crate) instance_type: String,
    pub(crate) instances: Vec<String>,
    pub(crate) state: String,
    /// Where the user-data fetches the payload (without its query).
    pub(crate) payload_url: String,
}

pub(crate) async fn launch(
    ec2: &Ec2Client,
    request: &Ec2Request,
    wait: Duration,
    payload_url: &str,
    say: &mut dyn FnMut(String),
) -> Result<Ec2Launch> {
    let xml = ec2.call(&run_instances_params(request)).await?;
    let ids: Vec<String> = parse_instances(&xml)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    if ids.is_empty() {
        bail!("EC2 RunInstances answered without instance ids");
    }
    say(format!("started {}", ids.join(", ")));
    let deadline = Instant::now() + wait;
    let state = loop {
        let mut p = vec![
            ("Action".to_string(), "DescribeInstances".to_string()),
            ("Version".to_string(), API_VERSION.to_string()),
        ];
        for (i, id) in ids.iter().enumerate() {
            p.push((format!("InstanceId.{}", i + 1), id.clone()));
        }
        let states = parse_instances(&ec2.call(&p).await?);
        let not_running: Vec<String> = ids
            .iter()
            .filter(|id| {
                states
                    .iter()
                    .find(|(i, _)| i == *id)
                    .is_none_or(|(_, s)| s != "running")
            })
            .cloned()
            .collect();
        if let Some((id, s)) = states
            .iter()
            .find(|(_, s)| matches!(s.as_str(), "terminated" | "shutting-down" | "stopped"))
        {
            bail!("instance {id} is {s} instead of starting");
        }
        if not_running.is_empty() {
            break "running".to_string();
        }
        if Instant::now() > deadline {
            bail!(
                "{} not running after {}",
                not_running.join(", "),
                humantime::format_duration(wait)
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    say(format!("{} running", ids.join(", ")));
    Ok(Ec2Launch {
        endpoint: ec2.endpoint.clone(),
        region: ec2.region.clone(),
        image_id: request.image_id.clone(),
        instance_type: request.instance_type.clone(),
        instances: ids,
        state,
        payload_url: super::record::without_query(payload_url),
    })
}

/// TerminateInstances; returns each instance's state as EC2 answers it (`shutting-down`, or
/// `terminated` for one already gone).
pub(crate) async fn terminate(ec2: &Ec2Client, ids: &[String]) -> Result<Vec<(String, String)>> {
    if ids.is_empty() {
        bail!("no instances to terminate");
    }
    let mut p = vec![
        ("Action".to_string(), "TerminateInstances".to_string()),
        ("Version".to_string(), API_VERSION.to_string()),
    ];
    for (i, id) in ids.iter().enumerate() {
        p.push((format!("InstanceId.{}", i + 1), id.clone()));
    }
    let states = parse_terminated(&ec2.call(&p).await?);
    let missing: Vec<&String> = ids
        .iter()
        .filter(|id| !states.iter().any(|(i, _)| i == *id))
        .collect();
    if !missing.is_empty() {
        bail!(
            "EC2 TerminateInstances did not answer for {}",
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(states)
}

/// Instance ids and their new states from a TerminateInstances response: each item has
/// its `instanceId`, then `currentState` (pure).
pub(crate) fn parse_terminated(xml: &str) -> Vec<(String, String)> {
    elements(xml, "item")
        .into_iter()
        .filter_map(|item| {
            let id = elements(item, "instanceId").into_iter().next()?;
            let state = elements(item, "currentState")
                .into_iter()
                .next()
                .and_then(|s| elements(s, "name").into_iter().next())
                .unwrap_or("");
            Some((id.to_string(), state.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/ec2")
            .join(name);
        std::fs::read_to_string(&p).expect("fixture")
    }

    #[test]
    fn run_instances_carries_user_data_tags_and_terminate_on_shutdown() {
        let p = run_instances_params(&Ec2Request {
            image_id: "ami-1".into(),
            instance_type: "m6gd.8xlarge".into(),
            count: 2,
            subnet_id: Some("subnet-1".into()),
            key_name: None,
            iam_instance_profile: None,
            security_group_ids: vec!["sg-1".into(), "sg-2".into()],
            user_data: "#cloud-config\n".into(),
            tags: vec![("pgappliance:plan".into(), "m6gd".into())],
        });
        let get = |k: &str| p.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
        assert_eq!(get("InstanceInitiatedShutdownBehavior"), Some("terminate"));
        assert_eq!(get("UserData"), Some("I2Nsb3VkLWNvbmZpZwo="));
        assert_eq!(get("MinCount"), Some("2"));
        assert_eq!(get("SecurityGroupId.2"), Some("sg-2"));
        assert_eq!(get("TagSpecification.1.ResourceType"), Some("instance"));
        assert_eq!(
            get("TagSpecification.1.Tag.1.Key"),
            Some("pgappliance:plan")
        );
        assert_eq!(get("TagSpecification.2.Tag.1.Value"), Some("m6gd"));
        assert_eq!(get("KeyName"), None);
        assert_eq!(get("IamInstanceProfile.Name"), None);
        let with_role = run_instances_params(&Ec2Request {
            iam_instance_profile: Some("pgappliance-upload".into()),
            key_name: Some("lab".into()),
            ..Ec2Request {
                image_id: "ami-1".into(),
                instance_type: "m5d.8xlarge".into(),
                count: 1,
                subnet_id: None,
                key_name: None,
                iam_instance_profile: None,
                security_group_ids: Vec::new(),
                user_data: String::new(),
                tags: Vec::new(),
            }
        });
        let get = |k: &str| {
            with_role
                .iter()
                .find(|(a, _)| a == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("IamInstanceProfile.Name"), Some("pgappliance-upload"));
        assert_eq!(get("KeyName"), Some("lab"));
    }

    #[test]
    fn responses_captured_from_moto() {
        let run = parse_instances(&fixture("run-instances-moto.xml"));
        assert_eq!(run.len(), 1, "{run:?}");
        assert!(run[0].0.starts_with("i-"));
        assert_eq!(run[0].1, "pending");
        let d = parse_instances(&fixture("describe-instances-moto.xml"));
        assert_eq!(d, vec![(run[0].0.clone(), "running".to_string())]);
        let t = parse_terminated(&fixture("terminate-instances-moto.xml"));
        assert_eq!(
            t,
            vec![(
                "i-eeae0388bfa270872".to_string(),
                "shutting-down".to_string()
            )]
        );
        assert!(parse_terminated("<TerminateInstancesResponse/>").is_empty());
        let e = parse_error(&fixture("error-auth-moto.xml")).expect("error");
        assert!(
            e.starts_with("SignatureDoesNotMatch") || e.starts_with("AuthFailure"),
            "{e}"
        );
    }
}
