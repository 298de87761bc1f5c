//! What an S3, STS or EC2 failure means, in one line: the cause (the status and the AWS
//! error code and message from the answer's XML body, or what the connection did) and the
//! fix, naming the keys used (their id and where they came from, never the secret).
//! Library error chains (object_store's, reqwest's) repeat the same answer two or three
//! times; these functions read it once from their text (pure, tested on captured answers).

/// The parts of a failed request that matter to the operator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Failure {
    /// The HTTP status, when the server answered.
    pub(crate) status: Option<u16>,
    /// The AWS error code (`<Code>`), when the answer held one.
    pub(crate) code: Option<String>,
    /// The AWS error message (`<Message>`).
    pub(crate) message: Option<String>,
    /// No answer: what the connection did (refused, name not resolved, timed out).
    pub(crate) connection: Option<&'static str>,
}

/// The text of the first `<tag>…</tag>` in `xml`, XML entities decoded.
fn element(xml: &str, tag: &str) -> Option<String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let start = xml.find(&open)? + open.len();
    let len = xml[start..].find(&close)?;
    let text = xml[start..start + len].trim();
    Some(
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// The HTTP status a library error's text names (`status code: 403 Forbidden`, `403
/// Forbidden`, `status 403`), if any.
fn status_in(text: &str) -> Option<u16> {
    for marker in ["status code: ", "status code ", "status: ", "status "] {
        let mut rest = text;
        while let Some(i) = rest.find(marker) {
            let after = &rest[i + marker.len()..];
            let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
            if digits.len() == 3 {
                if let Ok(s) = digits.parse::<u16>() {
                    if (100..600).contains(&s) {
                        return Some(s);
                    }
                }
            }
            rest = after;
        }
    }
    None
}

/// Reads a failure from an error's whole text (`{:#}` of an anyhow chain, or the body of an
/// answer): the first `<Code>`/`<Message>` of an AWS XML error wherever it is (S3 answers
/// `<Error>` at the root, STS `<ErrorResponse><Error>`, EC2 `<Response><Errors><Error>`),
/// the status, or the connection's failure (pure).
pub(crate) fn read(text: &str) -> Failure {
    let lower = text.to_ascii_lowercase();
    let connection = if lower.contains("connection refused") {
        Some("the connection was refused")
    } else if lower.contains("dns error") || lower.contains("failed to lookup address") {
        Some("the host name does not resolve")
    } else if lower.contains("timed out") || lower.contains("operation timed out") {
        Some("the connection timed out")
    } else if lower.contains("error trying to connect") || lower.contains("error sending request") {
        Some("the request did not reach it")
    } else {
        None
    };
    let code = element(text, "Code").filter(|c| !c.is_empty());
    Failure {
        status: status_in(text),
        message: code
            .as_ref()
            .and_then(|_| element(text, "Message"))
            .filter(|m| !m.is_empty()),
        code,
        connection: if status_in(text).is_some() {
            None
        } else {
            connection
        },
    }
}

/// What the operator should do about a failure (pure). `keys` describes the keys used
/// ("key AKIA… from the environment (AWS_ACCESS_KEY_ID)"), `other_keys` how to give others
/// ("--credentials-file FILE, AWS_PROFILE or AWS_ACCESS_KEY_ID").
pub(crate) fn fix(f: &Failure, service: &str, keys: Option<&str>, other_keys: &str) -> String {
    let keys_text = keys.unwrap_or("the keys used");
    if f.connection.is_some() {
        return format!(
            "check the {service} endpoint (the URL, that it runs and that this machine reaches it)"
        );
    }
    match f.code.as_deref().unwrap_or("") {
        "InvalidAccessKeyId" | "InvalidClientTokenId" | "UnrecognizedClientException" => format!(
            "the {service} does not know {keys_text}: give keys it knows ({other_keys})"
        ),
        "SignatureDoesNotMatch" | "AuthFailure" | "IncompleteSignature" => format!(
            "the {service} refused {keys_text}: the secret does not match the key, or the key is not one it knows; check the secret, or give other keys ({other_keys})"
        ),
        "AccessDenied" | "UnauthorizedOperation" | "AccessDeniedException" | "Forbidden" => {
            format!(
                "{keys_text} may not do this: grant the key's user or role the permission, or give other keys ({other_keys})"
            )
        }
        "ExpiredToken" | "RequestExpired" | "TokenRefreshRequired" | "ExpiredTokenException" => {
            format!("{keys_text} expired: get fresh ones ({other_keys})")
        }
        "RequestTimeTooSkewed" => {
            "this machine's clock is more than 15 minutes off the service's: set the clock (chrony or ntpd)".into()
        }
        "NoSuchBucket" => format!(
            "the bucket does not exist at this {service} endpoint: create it, or correct the store URL or the endpoint"
        ),
        "PermanentRedirect" | "AuthorizationHeaderMalformed" | "IllegalLocationConstraintException" => {
            "the bucket is in another region: give the bucket's region (--region)".into()
        }
        "" => match f.status {
            Some(401 | 403) => format!(
                "the {service} refused {keys_text}: check them, or give other keys ({other_keys})"
            ),
            Some(404) => format!(
                "not found: check the store URL and the endpoint (a {service} that is not S3 answers 404 too)"
            ),
            Some(s) if s >= 500 => format!("the {service} is failing: try again later"),
            _ => format!("check the {service} endpoint and the keys ({keys_text})"),
        },
        _ => "change what the message names".into(),
    }
}

/// The cause in a few words: "403 SignatureDoesNotMatch: The request signature …" (pure).
pub(crate) fn cause(f: &Failure) -> Option<String> {
    let mut out = String::new();
    if let Some(s) = f.status {
        out.push_str(&s.to_string());
    }
    if let Some(c) = &f.code {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(c);
        if let Some(m) = &f.message {
            out.push_str(": ");
            out.push_str(m.trim_end_matches('.'));
        }
    }
    if out.is_empty() {
        f.connection.map(str::to_string)
    } else {
        Some(out)
    }
}

/// One line for a failure of `doing` (e.g. "writing the launch record to s3://b/p"): the
/// cause and the fix when the text holds an answer or a connection failure, else the text's
/// first line as it is (pure).
pub fn one_line(
    doing: &str,
    error_text: &str,
    service: &str,
    keys: Option<&str>,
    other_keys: &str,
) -> String {
    let f = read(error_text);
    match cause(&f) {
        Some(c) => format!("{doing}: {c}; {}", fix(&f, service, keys, other_keys)),
        None => format!(
            "{doing}: {}",
            error_text.lines().next().unwrap_or(error_text)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What object_store 0.14 prints for a PUT SeaweedFS 4.48 refused (captured 2026-12-02,
    /// the chain of `{:#}`): the XML body once per level.
    const SEAWEED_WRONG_SECRET: &str = "Generic S3 error: Error performing PUT http://127.0.0.1:41933/pgappliance/lab/launches/x.json in 2.1ms - Server returned non-2xx status code: 403 Forbidden: <?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match the signature you provided. Check your key and signing method.</Message><Resource>/pgappliance/lab/launches/x.json</Resource><RequestId>1</RequestId></Error>: Server returned non-2xx status code: 403 Forbidden: <?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch</Code></Error>";

    #[test]
    fn an_s3_refusal_reads_as_its_code_message_and_fix() {
        let line = one_line(
            "writing the launch record to s3://pgappliance/lab",
            SEAWEED_WRONG_SECRET,
            "store",
            Some("key AKIA1 from --credentials-file /k"),
            "--credentials-file FILE",
        );
        assert_eq!(
            line,
            "writing the launch record to s3://pgappliance/lab: 403 SignatureDoesNotMatch: The request signature we calculated does not match the signature you provided. Check your key and signing method; the store refused key AKIA1 from --credentials-file /k: the secret does not match the key, or the key is not one it knows; check the secret, or give other keys (--credentials-file FILE)"
        );
        assert!(!line.contains("<?xml"));
    }

    #[test]
    fn query_api_errors_and_connection_failures_are_read() {
        let sts = "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidClientTokenId</Code><Message>The security token included in the request is invalid.</Message></Error></ErrorResponse>";
        let f = read(sts);
        assert_eq!(f.code.as_deref(), Some("InvalidClientTokenId"));
        assert!(fix(&f, "STS", Some("key K"), "x").contains("does not know key K"));
        let ec2 = "<Response><Errors><Error><Code>AuthFailure</Code><Message>AWS was not able to validate the provided access credentials</Message></Error></Errors></Response>";
        assert_eq!(read(ec2).code.as_deref(), Some("AuthFailure"));
        let refused = "Generic S3 error: Error performing PUT http://127.0.0.1:1/b/x in 5ms, after 6 retries - HTTP error: error sending request: client error (Connect): tcp connect error: Connection refused (os error 111)";
        let f = read(refused);
        assert_eq!(f.connection, Some("the connection was refused"));
        assert_eq!(f.status, None);
        assert!(one_line("listing s3://b", refused, "store", None, "x")
            .starts_with("listing s3://b: the connection was refused; check the store endpoint"));
        // Text without an answer or a connection failure stays as it is (its first line).
        assert_eq!(
            one_line("reading", "not JSON\nmore", "store", None, "x"),
            "reading: not JSON"
        );
        // A status without a body still gets a fix.
        let f = read("Server returned non-2xx status code: 403 Forbidden: ");
        assert_eq!(f.status, Some(403));
        assert!(fix(&f, "store", Some("key K"), "x").contains("refused key K"));
    }
}
