//! Short-lived, prefix-scoped store credentials minted with AWS STS, for an appliance that
//! has no instance role (bare metal): the operator's own keys call `GetFederationToken` (an
//! IAM user's long-term keys, up to 36 h) or `AssumeRole` (up to the role's maximum), with
//! an inline session policy that allows only what the upload does, under the plan's bucket,
//! prefix and appliance name. STS's Query API is spoken directly: a form-encoded POST signed
//! with SigV4 by object_store's signer (the one that signs every S3 request of the upload),
//! sent with reqwest; the XML answer is parsed into a [`KeyPair`] with its expiry.

use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use object_store::aws::{AwsAuthorizer, AwsCredential};
use serde::Deserialize;

use super::store::{parse_expiration, KeyPair};

/// The STS API version of the Query API.
pub(crate) const STS_VERSION: &str = "2011-06-15";
/// STS limits: the shortest session any call gives, GetFederationToken's longest (an IAM
/// user; 36 h), AssumeRole's longest (a role whose maximum session is set to 12 h).
pub(crate) const MIN_TTL: Duration = Duration::from_secs(900);
pub(crate) const MAX_FEDERATION_TTL: Duration = Duration::from_secs(129_600);
pub(crate) const MAX_ASSUME_ROLE_TTL: Duration = Duration::from_secs(43_200);
/// STS refuses a session policy longer than this (plain text).
pub(crate) const MAX_POLICY_CHARS: usize = 2048;
/// What the appliance's upload does in the store, and nothing else: put objects (also the
/// parts of a multipart upload and its completion), read them back, list the run's keys,
/// abort or list the parts of a multipart upload, and delete the run's `manifest.json` (a
/// repair deletes it first, so a reader never sees a manifest for objects being replaced).
pub(crate) const OBJECT_ACTIONS: [&str; 4] = [
    "s3:PutObject",
    "s3:GetObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
];

/// Where the minted keys may write: `s3://BUCKET/PREFIX` and the plan's appliance name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub bucket: String,
    /// The store's prefix and the appliance name, joined with `/` (no leading or trailing `/`).
    pub key_prefix: String,
}

impl Scope {
    /// The scope of a plan's upload: its `s3://` store and its appliance name.
    pub fn of_plan(plan: &crate::plan::Plan) -> Result<Scope> {
        let url = &plan.upload.store;
        let Some(rest) = url.strip_prefix("s3://") else {
            bail!("the plan's store \"{url}\" is not an s3:// store: there are no store credentials to mint");
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let parts: Vec<&str> = prefix
            .split('/')
            .filter(|s| !s.is_empty())
            .chain([plan.appliance.name.as_str()])
            .collect();
        Ok(Scope {
            bucket: bucket.to_string(),
            key_prefix: parts.join("/"),
        })
    }

    /// The inline session policy (compact JSON): the object actions on
    /// `BUCKET/KEY_PREFIX/*`, `s3:ListBucket` on the bucket only for keys under
    /// `KEY_PREFIX/`, `s3:DeleteObject` only on `KEY_PREFIX/*/manifest.json`.
    pub fn session_policy(&self) -> String {
        let objects = format!("arn:aws:s3:::{}/{}/*", self.bucket, self.key_prefix);
        serde_json::json!({
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "RunObjects",
                    "Effect": "Allow",
                    "Action": OBJECT_ACTIONS,
                    "Resource": objects,
                },
                {
                    "Sid": "ListRunKeys",
                    "Effect": "Allow",
                    "Action": "s3:ListBucket",
                    "Resource": format!("arn:aws:s3:::{}", self.bucket),
                    "Condition": {"StringLike": {"s3:prefix": [format!("{}/*", self.key_prefix)]}},
                },
                {
                    "Sid": "RepairManifest",
                    "Effect": "Allow",
                    "Action": "s3:DeleteObject",
                    "Resource": format!("arn:aws:s3:::{}/{}/*/manifest.json", self.bucket, self.key_prefix),
                },
            ],
        })
        .to_string()
    }
}

/// How the keys are minted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// `GetFederationToken` with the operator's IAM user keys.
    FederationToken,
    /// `AssumeRole` of this role.
    AssumeRole { role_arn: String },
}

impl Method {
    pub(crate) fn action(&self) -> &'static str {
        match self {
            Method::FederationToken => "GetFederationToken",
            Method::AssumeRole { .. } => "AssumeRole",
        }
    }

    fn max_ttl(&self) -> Duration {
        match self {
            Method::FederationToken => MAX_FEDERATION_TTL,
            Method::AssumeRole { .. } => MAX_ASSUME_ROLE_TTL,
        }
    }
}

/// One request for keys.
#[derive(Debug, Clone)]
pub struct MintRequest {
    pub method: Method,
    /// `https://sts.REGION.amazonaws.com` or a store's own STS endpoint.
    pub endpoint: String,
    pub region: String,
    pub ttl: Duration,
    pub scope: Scope,
    /// The federated user's or the role session's name (what CloudTrail shows).
    pub session_name: String,
}

/// What STS gave.
#[derive(Debug, Clone)]
pub struct Minted {
    pub keys: KeyPair,
    /// The federated user's or the assumed role session's ARN.
    pub principal: String,
}

/// The STS endpoint when none is given: `AWS_ENDPOINT_URL_STS`, else the store's own
/// endpoint (a lab store that has STS, such as MinIO, serves it there), else AWS's regional one.
pub fn default_endpoint(store_endpoint: Option<&str>, region: &str) -> String {
    std::env::var("AWS_ENDPOINT_URL_STS")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| store_endpoint.map(str::to_string))
        .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"))
}

/// A session name STS accepts (2-32 of `[A-Za-z0-9+=,.@_-]`; GetFederationToken's limit),
/// from the appliance name.
pub fn session_name(appliance: &str) -> String {
    let clean: String = format!("pga-{appliance}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "+=,.@_-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(32)
        .collect();
    clean
}

/// The operator's own keys, by this machine's chain ([`super::caller`]): the environment
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` for session keys),
/// else the `AWS_PROFILE` (or `default`) profile of `~/.aws/credentials`.
pub fn operator_credentials() -> Result<AwsCredential> {
    super::caller::Chain {
        purpose: "minting store credentials (your own keys)",
        file: None,
        profile: None,
        file_flag: "",
        profile_flag: "",
    }
    .resolve()
    .map(|k| k.credential())
}

/// Checks a request before anything is sent: the duration within the method's limits,
/// the policy within STS's size, the keys fit for the method (GetFederationToken needs an
/// IAM user's long-term keys, not session keys).
pub(crate) fn check_request(req: &MintRequest, operator: &AwsCredential) -> Result<()> {
    // From --sts-endpoint, AWS_ENDPOINT_URL_STS or the plan: no credentials in it.
    crate::url::refuse_credentials(&req.endpoint)
        .map_err(|why| anyhow::anyhow!("the STS endpoint {why}"))?;
    let ttl = req.ttl;
    let max = req.method.max_ttl();
    if ttl < MIN_TTL || ttl > max {
        bail!(
            "--credentials-ttl {} is outside what {} gives: from {} to {}",
            humantime::format_duration(ttl),
            req.method.action(),
            humantime::format_duration(MIN_TTL),
            humantime::format_duration(max)
        );
    }
    let policy = req.scope.session_policy();
    if policy.len() > MAX_POLICY_CHARS {
        bail!(
            "the session policy for s3://{}/{} is {} characters, over STS's {MAX_POLICY_CHARS}: use a shorter bucket, prefix or appliance name",
            req.scope.bucket,
            req.scope.key_prefix,
            policy.len()
        );
    }
    if req.method == Method::FederationToken && operator.token.is_some() {
        bail!(
            "GetFederationToken needs an IAM user's long-term keys, and the environment holds session keys (AWS_SESSION_TOKEN is set): give --role-arn to mint with AssumeRole instead"
        );
    }
    Ok(())
}

/// Percent-encoding of a form value as SigV4's canonical form wants it (RFC 3986
/// unreserved characters kept, everything else `%XX`).
fn form_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The form body of a request.
pub(crate) fn form_body(params: &[(&str, String)]) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// An AWS Query API error (`<ErrorResponse><Error><Code>…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueryError {
    pub(crate) status: u16,
    pub(crate) code: String,
    pub(crate) message: String,
}

/// POSTs a SigV4-signed Query API request (`Action=…&Version=…&…`) to `endpoint` for
/// `service` in `region`; the body of a 2xx answer, else the error the service gave.
pub async fn query(
    endpoint: &str,
    service: &str,
    region: &str,
    credential: &AwsCredential,
    params: &[(&str, String)],
) -> Result<String> {
    let body = form_body(params);
    let mut request = http::Request::builder()
        .method("POST")
        .uri(endpoint)
        .header(
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8",
        )
        .body(object_store::client::HttpRequestBody::from(body.clone()))
        .with_context(|| format!("{endpoint:?} is not a URL to send a request to"))?;
    AwsAuthorizer::new(credential, service, region)
        .try_authorize(&mut request, None)
        .context("signing the request")?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .connect_timeout(Duration::from_secs(10))
        .build()
        .context("starting an HTTP client")?;
    let action = params
        .iter()
        .find(|(k, _)| *k == "Action")
        .map_or("", |(_, v)| v.as_str());
    let answer = client
        .post(endpoint)
        .headers(request.headers().clone())
        .body(body)
        .send()
        .await
        .with_context(|| format!("{action} at {endpoint}"))?;
    let status = answer.status().as_u16();
    let text = answer
        .text()
        .await
        .with_context(|| format!("reading the answer of {action} at {endpoint}"))?;
    if !(200..300).contains(&status) {
        let e = parse_error(status, &text);
        if e.code == "(no AWS error)" {
            bail!(
                "{action} at {endpoint} was refused: {} with no AWS error in the answer: {}",
                e.status,
                e.message
            );
        }
        let f = super::aws_error::Failure {
            status: Some(e.status),
            code: Some(e.code.clone()),
            message: Some(e.message.clone()).filter(|m| !m.is_empty()),
            connection: None,
        };
        bail!(
            "{action} at {endpoint} was refused: {}; {}",
            super::aws_error::cause(&f).unwrap_or_default(),
            super::aws_error::fix(
                &f,
                service,
                Some(&format!("key {}", credential.key_id)),
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (your own keys)"
            )
        );
    }
    Ok(text)
}

/// The code and message of an AWS Query API error answer (pure); the raw start of the
/// answer when it is not one.
pub(crate) fn parse_error(status: u16, xml: &str) -> QueryError {
    // AWS answers `<ErrorResponse><Error>…`; moto wraps the error in `<Errors>`.
    #[derive(Deserialize)]
    struct ErrorResponse {
        #[serde(rename = "Error", default)]
        error: Option<ErrorBody>,
        #[serde(rename = "Errors", default)]
        errors: Option<Errors>,
    }
    #[derive(Deserialize)]
    struct Errors {
        #[serde(rename = "Error")]
        error: ErrorBody,
    }
    #[derive(Deserialize)]
    struct ErrorBody {
        #[serde(rename = "Code")]
        code: String,
        #[serde(rename = "Message", default)]
        message: String,
    }
    match quick_xml::de::from_str::<ErrorResponse>(xml)
        .ok()
        .and_then(|r| r.error.or(r.errors.map(|e| e.error)))
    {
        Some(e) => QueryError {
            status,
            code: e.code,
            message: e.message,
        },
        // An S3-style answer (`<Error>` at the root, what S3-compatible stores' STS give)
        // or any other body holding a Code.
        None => match super::aws_error::read(xml) {
            super::aws_error::Failure {
                code: Some(code),
                message,
                ..
            } => QueryError {
                status,
                code,
                message: message.unwrap_or_default(),
            },
            _ => QueryError {
                status,
                code: "(no AWS error)".into(),
                message: xml.chars().take(200).collect(),
            },
        },
    }
}

/// The keys, their expiry and the principal in a `GetFederationTokenResponse` or an
/// `AssumeRoleResponse` (pure).
pub(crate) fn parse_credentials_response(xml: &str) -> Result<Minted> {
    #[derive(Deserialize)]
    struct Response {
        #[serde(
            rename = "GetFederationTokenResult",
            alias = "AssumeRoleResult",
            default
        )]
        result: Option<MintResult>,
    }
    #[derive(Deserialize)]
    struct MintResult {
        #[serde(rename = "Credentials")]
        credentials: Credentials,
        #[serde(rename = "FederatedUser", alias = "AssumedRoleUser")]
        principal: Principal,
    }
    #[derive(Deserialize)]
    struct Credentials {
        #[serde(rename = "AccessKeyId")]
        access_key_id: String,
        #[serde(rename = "SecretAccessKey")]
        secret_access_key: String,
        #[serde(rename = "SessionToken")]
        session_token: String,
        #[serde(rename = "Expiration")]
        expiration: String,
    }
    #[derive(Deserialize)]
    struct Principal {
        #[serde(rename = "Arn")]
        arn: String,
    }
    let r: Response = quick_xml::de::from_str(xml)
        .map_err(|e| anyhow::anyhow!("the STS answer is not a credentials response: {e}"))?;
    let Some(m) = r.result else {
        bail!("the STS answer holds no GetFederationTokenResult or AssumeRoleResult");
    };
    let expires_at = parse_expiration(&m.credentials.expiration)
        .map_err(|why| anyhow::anyhow!("the STS answer's Expiration {why}"))?;
    let c = m.credentials;
    for (what, v) in [
        ("AccessKeyId", &c.access_key_id),
        ("SecretAccessKey", &c.secret_access_key),
        ("SessionToken", &c.session_token),
    ] {
        if v.trim().is_empty() || v.contains(['\n', '\r']) {
            bail!("the STS answer's {what} is empty or spans lines");
        }
    }
    Ok(Minted {
        keys: KeyPair {
            access_key_id: c.access_key_id.trim().to_string(),
            secret_access_key: c.secret_access_key.trim().to_string(),
            session_token: Some(c.session_token.trim().to_string()),
            expires_at: Some(expires_at),
        },
        principal: m.principal.arn,
    })
}

/// Asks STS for the keys of `req`, signed with the operator's keys.
pub async fn mint(req: &MintRequest, operator: &AwsCredential) -> Result<Minted> {
    check_request(req, operator)?;
    let mut params: Vec<(&str, String)> = vec![
        ("Action", req.method.action().to_string()),
        ("Version", STS_VERSION.to_string()),
        ("DurationSeconds", req.ttl.as_secs().to_string()),
        ("Policy", req.scope.session_policy()),
    ];
    match &req.method {
        Method::FederationToken => params.push(("Name", req.session_name.clone())),
        Method::AssumeRole { role_arn } => {
            params.push(("RoleArn", role_arn.clone()));
            params.push(("RoleSessionName", req.session_name.clone()));
        }
    }
    let answer = query(&req.endpoint, "sts", &req.region, operator, &params).await?;
    let minted = parse_credentials_response(&answer)
        .with_context(|| format!("{} at {}", req.method.action(), req.endpoint))?;
    // STS may shorten a session (a role's maximum); an expiry already past is useless.
    if minted
        .keys
        .expires_at
        .is_some_and(|at| at <= SystemTime::now())
    {
        bail!(
            "{} at {} gave keys that have already expired (is this machine's clock right?)",
            req.method.action(),
            req.endpoint
        );
    }
    Ok(minted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sts")
            .join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn scope() -> Scope {
        Scope {
            bucket: "pgappliance-results".into(),
            key_prefix: "altra/altra-q80".into(),
        }
    }

    #[test]
    fn the_session_policy_allows_the_upload_under_the_prefix_only() {
        let policy: serde_json::Value =
            serde_json::from_str(&scope().session_policy()).expect("JSON");
        let statements = policy["Statement"].as_array().expect("statements");
        assert_eq!(statements.len(), 3);
        let mut actions = Vec::new();
        for s in statements {
            assert_eq!(s["Effect"], "Allow");
            let resource = s["Resource"].as_str().expect("one resource");
            assert!(
                resource.starts_with("arn:aws:s3:::pgappliance-results"),
                "{resource}"
            );
            match &s["Action"] {
                serde_json::Value::String(a) => actions.push(a.clone()),
                serde_json::Value::Array(v) => {
                    actions.extend(v.iter().map(|a| a.as_str().expect("action").to_string()))
                }
                other => panic!("{other}"),
            }
            let action = s["Action"].to_string();
            if action.contains("ListBucket") {
                assert_eq!(resource, "arn:aws:s3:::pgappliance-results");
                assert_eq!(
                    s["Condition"]["StringLike"]["s3:prefix"],
                    serde_json::json!(["altra/altra-q80/*"])
                );
            } else if action.contains("DeleteObject") {
                assert_eq!(
                    resource,
                    "arn:aws:s3:::pgappliance-results/altra/altra-q80/*/manifest.json"
                );
            } else {
                assert_eq!(
                    resource,
                    "arn:aws:s3:::pgappliance-results/altra/altra-q80/*"
                );
            }
        }
        actions.sort();
        assert_eq!(
            actions,
            [
                "s3:AbortMultipartUpload",
                "s3:DeleteObject",
                "s3:GetObject",
                "s3:ListBucket",
                "s3:ListMultipartUploadParts",
                "s3:PutObject"
            ]
        );
        assert!(scope().session_policy().len() <= MAX_POLICY_CHARS);
    }

    #[test]
    fn the_scope_is_the_plans_store_prefix_and_appliance() {
        let plan = crate::plan::Plan::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/altra-q80.toml"),
        )
        .expect("the example plan");
        assert_eq!(Scope::of_plan(&plan).expect("scope"), scope());
        let mut file_plan = plan.clone();
        file_plan.upload.store = "file:///var/tmp/store".into();
        assert!(Scope::of_plan(&file_plan)
            .expect_err("file store")
            .to_string()
            .contains("not an s3:// store"));
    }

    #[test]
    fn requests_outside_stss_limits_are_refused_before_sending() {
        let user = AwsCredential {
            key_id: "AKIAOPERATOR".into(),
            secret_key: "operator-secret".into(),
            token: None,
        };
        let req = |method: Method, secs: u64| MintRequest {
            method,
            endpoint: "https://sts.us-east-1.amazonaws.com".into(),
            region: "us-east-1".into(),
            ttl: Duration::from_secs(secs),
            scope: scope(),
            session_name: session_name("altra-q80"),
        };
        let role = Method::AssumeRole {
            role_arn: "arn:aws:iam::123456789012:role/pga".into(),
        };
        assert!(check_request(&req(Method::FederationToken, 36 * 3600), &user).is_ok());
        assert!(check_request(&req(role.clone(), 12 * 3600), &user).is_ok());
        for (r, says) in [
            (
                req(Method::FederationToken, 36 * 3600 + 1),
                "from 15m to 1day 12h",
            ),
            (
                req(Method::FederationToken, 600),
                "outside what GetFederationToken gives",
            ),
            (
                req(role.clone(), 13 * 3600),
                "outside what AssumeRole gives",
            ),
        ] {
            let e = check_request(&r, &user).expect_err(says).to_string();
            assert!(e.contains(says), "{e}");
        }
        let session = AwsCredential {
            token: Some("session".into()),
            ..user
        };
        let e = check_request(&req(Method::FederationToken, 3600), &session)
            .expect_err("session keys")
            .to_string();
        assert!(e.contains("--role-arn"), "{e}");
        assert!(check_request(&req(role, 3600), &session).is_ok());
        let long = Scope {
            key_prefix: "p/".repeat(1100),
            ..scope()
        };
        let e = check_request(
            &MintRequest {
                scope: long,
                ..req(Method::FederationToken, 3600)
            },
            &AwsCredential {
                key_id: "A".into(),
                secret_key: "B".into(),
                token: None,
            },
        )
        .expect_err("long policy")
        .to_string();
        assert!(e.contains("over STS's 2048"), "{e}");
        assert_eq!(session_name("altra q80/ü"), "pga-altra-q80--");
        assert_eq!(session_name(&"x".repeat(40)).len(), 32);
    }

    #[test]
    fn form_bodies_are_encoded_for_signing() {
        assert_eq!(
            form_body(&[
                ("Action", "AssumeRole".into()),
                ("Policy", "{\"a\": \"b/*\"}".into()),
                ("RoleArn", "arn:aws:iam::1:role/x".into()),
            ]),
            "Action=AssumeRole&Policy=%7B%22a%22%3A%20%22b%2F%2A%22%7D&RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fx"
        );
    }

    #[test]
    fn credentials_and_errors_are_read_from_sts_answers() {
        for (file, key, principal) in [
            (
                "get-federation-token-aws-doc.composed.xml",
                "ASIAIOSFODNN7EXAMPLE",
                "arn:aws:sts::123456789012:federated-user/Bob",
            ),
            (
                "assume-role-moto-5.2.5.xml",
                "ASIA",
                "arn:aws:sts::123456789012:assumed-role/pga-upload/pga-altra-q80",
            ),
        ] {
            let m = parse_credentials_response(&fixture(file)).expect(file);
            assert!(m.keys.access_key_id.starts_with(key), "{file}");
            assert!(m
                .keys
                .session_token
                .as_deref()
                .is_some_and(|t| t.len() > 16));
            assert!(m.keys.expires_at.is_some());
            assert_eq!(m.principal, principal, "{file}");
            assert!(!format!("{:?}", m.keys).contains(&m.keys.secret_access_key));
        }
        let e = parse_error(403, &fixture("error-access-denied-aws-doc.composed.xml"));
        assert_eq!((e.status, e.code.as_str()), (403, "AccessDenied"));
        assert!(e.message.contains("not authorized"), "{}", e.message);
        let e = parse_error(403, &fixture("error-invalid-client-token-moto-5.2.5.xml"));
        assert_eq!(e.code, "InvalidClientTokenId");
        assert!(e.message.contains("invalid"), "{}", e.message);
        let e = parse_error(502, "<html>bad gateway</html>");
        assert_eq!(e.code, "(no AWS error)");
        // S3-compatible stores answer with `<Error>` at the root: its Code and Message are
        // read, not "(no AWS error)" over the XML.
        let e = parse_error(
            403,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied.</Message><RequestId>1</RequestId></Error>",
        );
        assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            ("AccessDenied", "Access Denied.")
        );
        assert!(parse_credentials_response("<html/>").is_err());
        assert!(
            parse_credentials_response(&fixture("error-access-denied-aws-doc.composed.xml"))
                .is_err()
        );
    }
}
