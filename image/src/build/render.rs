//! Rendering the kickstart and the cloud-init user-data from the plan.

use anyhow::{bail, Result};
use pgappliance::plan::Plan;

/// EC2 refuses user-data over 16 KiB.
pub const USER_DATA_LIMIT: usize = 16 * 1024;

const KICKSTART: &str = include_str!("../../../kickstart/rocky8-aarch64.ks.in");

/// The values the template marks for filling in.
const MARKERS: [&str; 8] = [
    "@APPLIANCE@",
    "@TIMEZONE@",
    "@OS_DISK@",
    "@BOOTLOADER_APPEND@",
    "@SSHKEYS@",
    "@PAYLOAD_SHA256@",
    "@PAYLOAD_URL_TEXT@",
    "@PAYLOAD_URL@",
];

fn shell_single_quoted_ok(s: &str) -> bool {
    !s.contains(['\'', '\n', '\\'])
}

pub fn kickstart(plan: &Plan, payload_sha256: &str, payload_url: Option<&str>) -> Result<String> {
    let url = payload_url.unwrap_or("");
    if !shell_single_quoted_ok(url) {
        bail!("the payload URL contains a quote, backslash or newline");
    }
    let disk = plan.install.os_disk.trim_start_matches("/dev/");
    let append = if plan.tuning.kernel_args.is_empty() {
        String::new()
    } else {
        format!("--append=\"{}\"", plan.tuning.kernel_args.join(" "))
    };
    let keys: Vec<String> = plan
        .install
        .ssh_authorized_keys
        .iter()
        .map(|k| format!("sshkey --username=root \"{k}\""))
        .collect();
    let out = KICKSTART
        .replace("@APPLIANCE@", &plan.appliance.name)
        .replace("@TIMEZONE@", &plan.install.timezone)
        .replace("@OS_DISK@", disk)
        .replace("@BOOTLOADER_APPEND@", &append)
        .replace(
            "@SSHKEYS@",
            &if keys.is_empty() {
                "# no ssh keys in the plan: log in on the console (root is locked)".to_string()
            } else {
                keys.join("\n")
            },
        )
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

pub fn user_data(plan: &Plan, payload_sha256: &str, payload_url: &str) -> Result<String> {
    if !shell_single_quoted_ok(payload_url) || payload_url.is_empty() {
        bail!("--payload-url must be a plain URL (no quotes, backslashes or newlines)");
    }
    let text = format!(
        r#"#cloud-config
# pgappliance {name}: fetch the payload, verify it, unpack it, start the daemon without
# holding up cloud-init (the benchmark runs for hours).
write_files:
  - path: /var/lib/pgappliance/install/payload.tar.gz.sha256
    permissions: '0644'
    content: |
      {sha}  payload.tar.gz
runcmd:
  - - sh
    - -c
    - >-
      set -eu;
      cd /var/lib/pgappliance/install;
      curl -fsSL --retry 10 --retry-delay 5 -o payload.tar.gz '{url}';
      sha256sum -c payload.tar.gz.sha256;
      tar -xzf payload.tar.gz -C / --no-same-owner;
      systemctl daemon-reload;
      systemctl enable --now --no-block pgapplianced.service
"#,
        name = plan.appliance.name,
        sha = payload_sha256,
        url = payload_url
    );
    if text.len() > USER_DATA_LIMIT {
        bail!(
            "user-data is {} bytes, over EC2's {USER_DATA_LIMIT}-byte limit",
            text.len()
        );
    }
    Ok(text)
}
