//! Rendering the kickstart and the cloud-init user-data from the plan.

use anyhow::{bail, Result};
use pgappliance::plan::{is_ssh_key_placeholder, Install, Plan, Platform};

/// EC2 refuses user-data over 16 KiB.
pub(crate) const USER_DATA_LIMIT: usize = 16 * 1024;

const KICKSTART: &str = include_str!("../../../kickstart/rocky8.ks.in");

/// Where the store credentials are on the install medium (only when the build delivers them).
pub(crate) const MEDIUM_CREDENTIALS: &str = "pgappliance/store.credentials";

/// The values the template marks for filling in.
const MARKERS: [&str; 11] = [
    "@CREDENTIALS_COPY@",
    "@CREDENTIALS_LABEL@",
    "@APPLIANCE@",
    "@ARCH@",
    "@TIMEZONE@",
    "@OS_DISK@",
    "@BOOTLOADER_APPEND@",
    "@ROOT_ACCESS@",
    "@PAYLOAD_SHA256@",
    "@PAYLOAD_URL_TEXT@",
    "@PAYLOAD_URL@",
];

/// The kickstart lines that say how root gets in: its password (locked, or the plan's
/// crypt hash for the console) and its SSH keys, with a comment saying which way it is.
fn root_access(install: &Install) -> String {
    let keys = &install.ssh_authorized_keys;
    let mut lines = vec![match (keys.is_empty(), &install.root_password_hash) {
        (false, None) => "# root logs in over SSH with the plan's keys (install.ssh_authorized_keys); its password is locked.".to_string(),
        (false, Some(_)) => "# root logs in over SSH with the plan's keys (install.ssh_authorized_keys) and on the console with the password of install.root_password_hash (SSH takes keys only).".to_string(),
        (true, Some(_)) => "# root logs in on the console (BMC or serial) with the password of install.root_password_hash; SSH takes keys only and the plan gives none.".to_string(),
        // Not rendered: `kickstart` refuses an [install] without a way in first.
        (true, None) => "# root's password is locked and the plan gives no key.".to_string(),
    }];
    lines.push(match &install.root_password_hash {
        Some(hash) => format!("rootpw --iscrypted {hash}"),
        None => "rootpw --lock".to_string(),
    });
    lines.extend(
        keys.iter()
            .map(|k| format!("sshkey --username=root \"{k}\"")),
    );
    lines.join("\n")
}

/// The Rocky 8 kickstart for a bare-metal plan (one with `[install]`). Refused for a plan
/// of another platform, without `[install]`, with a placeholder key, or without a way in.
/// `credentials` is the plan's credentials file when the install medium carries the store
/// credentials for it (the `%post` copies them there, 0600 root:root).
pub(crate) fn kickstart(
    plan: &Plan,
    payload_sha256: &str,
    payload_url: Option<&str>,
    credentials: Option<&str>,
) -> Result<String> {
    if let Some(url) = payload_url {
        check_payload_url(url)?;
    }
    if plan.appliance.platform != Platform::Rocky8 {
        bail!(
            "the kickstart installs Rocky 8, but the plan's appliance.platform is {}: a kickstart is only built for a rocky8 plan",
            plan.appliance.platform
        );
    }
    let Some(install) = &plan.install else {
        bail!("the plan has no [install] table: only a bare-metal plan (one with [install]) gets a kickstart");
    };
    if let Some(n) = install
        .ssh_authorized_keys
        .iter()
        .position(|k| is_ssh_key_placeholder(k))
    {
        bail!(
            "install.ssh_authorized_keys[{n}] is a placeholder, not a key: put your OpenSSH public key line there (e.g. ~/.ssh/id_ed25519.pub), or nobody could log in to the installed machine"
        );
    }
    if install.ssh_authorized_keys.is_empty() && install.root_password_hash.is_none() {
        bail!("the plan's [install] names no way in: give install.ssh_authorized_keys or install.root_password_hash");
    }
    let url = payload_url.unwrap_or("");
    let disk = install.os_disk();
    let append = if plan.tuning.kernel_args.is_empty() {
        String::new()
    } else {
        format!("--append=\"{}\"", plan.tuning.kernel_args.join(" "))
    };
    let (copy, label) = match credentials {
        Some(target) => (
            format!(
                "# The store credentials: from the install medium to the plan's file, root's only.\ninstall -D -m 0600 -o root -g root /run/install/repo/{MEDIUM_CREDENTIALS} {}",
                super::credentials::shell_quote(&format!("/mnt/sysimage{target}"))
            ),
            format!(
                "restorecon {} || true",
                super::credentials::shell_quote(target)
            ),
        ),
        None => (
            "# No store credentials on this medium: the plan's upload needs none, or they are put on the machine another way (docs/credentials.md).".to_string(),
            "# (no store credentials to label)".to_string(),
        ),
    };
    let out = KICKSTART
        .replace("@CREDENTIALS_COPY@", &copy)
        .replace("@CREDENTIALS_LABEL@", &label)
        .replace("@APPLIANCE@", &plan.appliance.name)
        .replace("@ARCH@", plan.appliance.arch.as_str())
        .replace("@TIMEZONE@", &install.timezone)
        .replace("@OS_DISK@", disk)
        .replace("@BOOTLOADER_APPEND@", &append)
        .replace("@ROOT_ACCESS@", &root_access(install))
        .replace("@PAYLOAD_SHA256@", payload_sha256)
        .replace(
            "@PAYLOAD_URL_TEXT@",
            if url.is_empty() {
                "(no URL given)"
            } else {
                url
            },
        )
        .replace("@PAYLOAD_URL@", url);
    if let Some(marker) = MARKERS.iter().find(|m| out.contains(*m)) {
        bail!("internal: kickstart marker {marker} left unfilled");
    }
    Ok(out)
}

/// Refuses a `--payload-url` that instances could not fetch with `curl` or that would break
/// the scripts it is pasted into: it must be `http://` or `https://` with a host, and hold
/// no whitespace, control character, quote or backslash.
pub(crate) fn check_payload_url(url: &str) -> Result<()> {
    if let Some(c) = url
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '\'' | '"' | '\\'))
    {
        bail!(
            "--payload-url {url:?} contains {c:?}: give a plain URL (no spaces, quotes, backslashes or control characters)"
        );
    }
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        bail!(
            "--payload-url {url:?} is not an http:// or https:// URL: instances fetch the payload with curl over HTTP(S) (a presigned object-store URL, for example)"
        );
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, p)) if !h.is_empty() => (h, p.strip_prefix(':')),
            _ => bail!("--payload-url {url:?}: the IPv6 host is not closed with ']'"),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        bail!("--payload-url {url:?} names no host");
    }
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |p| p == 0) {
            bail!("--payload-url {url:?}: port \"{p}\" is not a TCP port number");
        }
    }
    Ok(())
}

/// The units a script enables (`systemctl enable [--now] [--no-block] NAME…`), a name
/// without a unit suffix being a `.service`.
pub(crate) fn enabled_units(script: &str) -> Vec<String> {
    let mut units = Vec::new();
    for line in script.lines() {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ';')
            .map(|w| w.trim_matches(['\'', '"']))
            .filter(|w| !w.is_empty())
            .collect();
        let Some(at) = words.windows(2).position(|w| w == ["systemctl", "enable"]) else {
            continue;
        };
        for w in &words[at + 2..] {
            if matches!(*w, "&&" | "||" | "|") {
                break;
            }
            if w.starts_with('-') {
                continue;
            }
            let has_suffix = [
                ".service", ".socket", ".timer", ".target", ".mount", ".path",
            ]
            .iter()
            .any(|s| w.ends_with(s));
            units.push(if has_suffix {
                w.to_string()
            } else {
                format!("{w}.service")
            });
        }
    }
    units
}

/// The cloud-config; `credentials` (the plan's credentials file and its text) adds a
/// `write_files` entry that writes it 0600 root:root before the daemon starts.
/// `failure_url` is an http(s) URL that takes a PUT (a presigned one: `launch --ec2` makes
/// it): when the payload cannot be fetched, does not match its sha256 or does not unpack,
/// the instance PUTs one line saying why there and the daemon is not started. Either way the
/// reason is in cloud-init's log (`/var/log/cloud-init-output.log`).
pub(crate) fn user_data(
    plan: &Plan,
    payload_sha256: &str,
    payload_url: &str,
    credentials: Option<(&str, &str)>,
    failure_url: Option<&str>,
) -> Result<String> {
    check_payload_url(payload_url)?;
    if let Some(url) = failure_url {
        check_payload_url(url).map_err(|e| {
            anyhow::anyhow!(
                "{}",
                e.to_string().replace("--payload-url", "--failure-url")
            )
        })?;
    }
    let credentials_entry = match credentials {
        Some((target, text)) => {
            let body: String = text.lines().map(|l| format!("      {l}\n")).collect();
            format!(
                "  - path: {}\n    owner: root:root\n    permissions: '0600'\n    content: |\n{body}",
                serde_json::to_string(target)?
            )
        }
        None => String::new(),
    };
    // The report's PUT: Content-Type is not part of a presigned URL's signature.
    let report = match failure_url {
        Some(url) => format!(
            "curl -fsS --retry 3 -X PUT -H 'Content-Type: text/plain' --data-binary \"pgappliance install failed on $(hostname) (machine $(cat /etc/machine-id)): $1\" '{url}' || echo 'pgappliance: the failure report could not be stored' >&2; "
        ),
        None => String::new(),
    };
    let shown_url = pgappliance::url::without_query(payload_url);
    let text = format!(
        r#"#cloud-config
# pgappliance {name}: fetch the payload, verify it, unpack it, start the daemon without
# holding up cloud-init (the benchmark runs for hours). A payload that cannot be fetched,
# does not match its sha256 or does not unpack leaves the daemon not started and says why
# in cloud-init's output log{report_note}.
write_files:
  - path: /var/lib/pgappliance/install/payload.tar.gz.sha256
    permissions: '0644'
    content: |
      {sha}  payload.tar.gz
{credentials_entry}runcmd:
  - - sh
    - -c
    - >-
      set -eu;
      cd /var/lib/pgappliance/install;
      fail() {{ echo "pgappliance: $1; the daemon is not started" >&2; {report}exit 1; }};
      curl -fsSL --retry 10 --retry-delay 5 -o payload.tar.gz '{url}'
      || fail 'the payload could not be fetched from {shown_url}'" (curl exit status $?; an expired or revoked presigned URL answers 403)";
      sha256sum -c payload.tar.gz.sha256
      || fail "the payload's sha256 is $(sha256sum payload.tar.gz | cut -d' ' -f1), not {sha}";
      tar -xzf payload.tar.gz -C / --no-same-owner
      || fail "the payload did not unpack (tar exit status $?)";
      systemctl daemon-reload;
      systemctl enable --now --no-block pgapplianced.service
"#,
        name = plan.appliance.name,
        sha = payload_sha256,
        url = payload_url,
        report_note = if failure_url.is_some() {
            " and in a report it PUTs to the store"
        } else {
            ""
        },
    );
    if text.len() > USER_DATA_LIMIT {
        bail!(
            "user-data is {} bytes, over EC2's {USER_DATA_LIMIT}-byte limit",
            text.len()
        );
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_urls() {
        for ok in [
            "https://objects.lab.example/b/payload.tar.gz?X-Amz-Signature=abc",
            "http://10.0.0.5:8333/b/p.tar.gz",
            "HTTPS://h",
            "http://[fd00::5]:80/p",
            "https://user:pw@h.example/p",
        ] {
            check_payload_url(ok).unwrap_or_else(|e| panic!("{ok}: {e:#}"));
        }
        for (bad, says) in [
            ("ftp://h/p", "not an http:// or https:// URL"),
            (
                "file:///tmp/payload.tar.gz",
                "not an http:// or https:// URL",
            ),
            ("s3://bucket/p", "not an http:// or https:// URL"),
            ("h.example/p", "not an http:// or https:// URL"),
            ("", "not an http:// or https:// URL"),
            ("https://", "names no host"),
            ("https:///p", "names no host"),
            ("http://:80/p", "names no host"),
            ("http://u@/p", "names no host"),
            ("http://h:x/p", "not a TCP port"),
            ("http://h:0/p", "not a TCP port"),
            ("http://h:/p", "not a TCP port"),
            ("http://[fd00::5/p", "IPv6"),
            ("https://x/'; rm -rf /", "contains '\\''"),
            ("https://x/p q", "contains ' '"),
            ("https://x/p\nq", "contains '\\n'"),
        ] {
            let e = check_payload_url(bad).expect_err(bad).to_string();
            assert!(
                e.contains(says) && e.contains("--payload-url"),
                "{bad}: {e}"
            );
        }
    }

    /// Whether the shell would read the text at `at` of `line` inside single quotes (so
    /// no `$`, backquote or `\` in it is expanded).
    fn single_quoted_at(line: &str, at: usize) -> bool {
        let (mut single, mut double, mut escaped) = (false, false, false);
        for c in line[..at].chars() {
            match c {
                _ if escaped => escaped = false,
                '\\' if !single => escaped = true,
                '\'' if !double => single = !single,
                '"' if !single => double = !double,
                _ => {}
            }
        }
        single
    }

    #[test]
    fn a_payload_url_is_never_expanded_by_the_shell() {
        // `$`, `(`, backquote, `;`, `&` and `!` may all appear in a valid URL; the shell
        // must see each occurrence of it as literal text.
        let url = "https://h.example/b/p.tar.gz?a=$(reboot)&b=`id`;c=${HOME}!x";
        check_payload_url(url).expect("a URL check_payload_url accepts");
        let mut plan = Plan::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/altra-q80.toml"),
        )
        .expect("the example plan");
        let sha = "0".repeat(64);
        let error =
            kickstart(&plan, &sha, Some(url), None).expect_err("the example's placeholder key");
        assert!(error.to_string().contains("placeholder"), "{error}");
        if let Some(install) = plan.install.as_mut() {
            install.ssh_authorized_keys =
                vec!["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests0000000 a@b".into()];
        }
        let ks = kickstart(&plan, &sha, Some(url), None).expect("ks.cfg");
        let ud = user_data(&plan, &sha, url, None, Some(url)).expect("user-data");
        let mut seen = 0;
        for (what, text) in [("ks.cfg", &ks), ("user-data", &ud)] {
            for line in text.lines() {
                for (at, _) in line.match_indices(url) {
                    seen += 1;
                    assert!(
                        single_quoted_at(line, at),
                        "{what}: the URL is not single-quoted in {line:?}"
                    );
                }
            }
        }
        assert!(seen >= 4, "the URL appears {seen} times");
        // The URL without its query, as the failure message shows it, is quoted as well.
        let path_url = "https://h.example/b/$(reboot)/p.tar.gz?X-Amz-Signature=`id`";
        let ud = user_data(&plan, &sha, path_url, None, None).expect("user-data");
        let shown = "https://h.example/b/$(reboot)/p.tar.gz";
        let mut shown_seen = 0;
        for line in ud.lines() {
            for (at, _) in line.match_indices(shown) {
                shown_seen += 1;
                assert!(
                    single_quoted_at(line, at),
                    "user-data: {shown:?} is not single-quoted in {line:?}"
                );
            }
        }
        assert_eq!(shown_seen, 2, "{ud}");
    }

    #[test]
    fn a_failed_install_is_reported_only_where_the_user_data_is_told() {
        let plan = Plan::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/m5d-8xlarge.toml"),
        )
        .expect("the example plan");
        let sha = "ab".repeat(32);
        let get = "https://s3.example/b/launches/x/payload.tar.gz?X-Amz-Signature=1";
        let put = "https://s3.example/b/m5d/failed/x/install-failed.txt?X-Amz-Signature=2";
        let with = user_data(&plan, &sha, get, None, Some(put)).expect("user-data");
        let without = user_data(&plan, &sha, get, None, None).expect("user-data");
        for ud in [&with, &without] {
            // Each check names what failed, and every failure goes through fail(), which
            // exits before the daemon is enabled.
            assert!(ud.contains("|| fail 'the payload could not be fetched from https://s3.example/b/launches/x/payload.tar.gz'"), "{ud}");
            assert!(ud.contains(&format!("not {sha}\";")), "{ud}");
            assert!(ud.contains("|| fail \"the payload did not unpack"), "{ud}");
            let fail = ud.find("fail() {").expect("fail()");
            assert!(fail < ud.find("curl -fsSL").expect("fetch"), "{ud}");
            assert!(
                ud.find("systemctl enable").expect("enable") > ud.find("tar -xzf").expect("tar")
            );
        }
        assert!(with.contains(&format!("curl -fsS --retry 3 -X PUT -H 'Content-Type: text/plain' --data-binary \"pgappliance install failed on $(hostname) (machine $(cat /etc/machine-id)): $1\" '{put}'")), "{with}");
        assert!(!without.contains("PUT"), "{without}");
        let e = user_data(&plan, &sha, get, None, Some("ftp://h/p"))
            .expect_err("an ftp failure URL")
            .to_string();
        assert!(
            e.contains("--failure-url") && !e.contains("--payload-url"),
            "{e}"
        );
    }

    #[test]
    fn units_a_script_enables() {
        assert_eq!(
            enabled_units("set -eu\nsystemctl enable pgapplianced.service\n"),
            ["pgapplianced.service"]
        );
        assert_eq!(
            enabled_units("      systemctl enable --now --no-block pgapplianced.service\n"),
            ["pgapplianced.service"]
        );
        assert_eq!(
            enabled_units("systemctl daemon-reload; systemctl enable a b.timer && echo x\n"),
            ["a.service", "b.timer"]
        );
        assert!(enabled_units("systemctl daemon-reload\n# enable it later\n").is_empty());
    }
}
