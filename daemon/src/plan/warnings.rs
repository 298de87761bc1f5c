//! What a valid plan may still get wrong: settings that have no effect, defaults the plan
//! leaves to the machine, placeholders. `pgappliance check` prints these as warnings; they
//! do not stop the plan (except with `--deny-warnings`), and the daemon does not read them.

use toml_edit::{DocumentMut, Item};

use super::{validate, Credentials, Devices, KeyPath, Layout, Plan};

type Warnings = Vec<(KeyPath, String)>;

/// Whether the plan's text sets `path` itself (rather than leaving it to its default).
fn set(doc: &DocumentMut, path: &[&str]) -> bool {
    let mut item: &Item = doc.as_item();
    for key in path {
        match item.get(key) {
            Some(next) => item = next,
            None => return false,
        }
    }
    true
}

pub(crate) fn warnings(plan: &Plan, doc: &DocumentMut) -> Warnings {
    let mut w = Warnings::new();
    postgres(plan, &mut w);
    storage(plan, doc, &mut w);
    tuning(plan, doc, &mut w);
    workloads(plan, &mut w);
    upload(plan, doc, &mut w);
    install(plan, &mut w);
    w
}

fn postgres(plan: &Plan, w: &mut Warnings) {
    let platform = plan.appliance.platform;
    let distro = platform.default_pg_version();
    if let Some(v) = plan.postgres.version {
        if platform == crate::plan::Platform::Debian12
            && v != distro
            && plan.postgres.repository.is_none()
        {
            w.push((
                KeyPath::root().key("postgres").key("version"),
                format!(
                    "Debian 12's own packages hold PostgreSQL {distro} only: an appliance cannot install postgresql-{v} without `repository` (PGDG's apt repository, \"https://apt.postgresql.org/pub/repos/apt\", or its mirror); local mode uses what is installed"
                ),
            ));
        }
    }
    if plan.postgres.version.is_none() {
        w.push((
            KeyPath::root().key("postgres").key("version"),
            format!(
                "no version named: an appliance installs PostgreSQL {distro} (the {platform} default), local mode uses the newest installed; name the version so every machine runs the same server"
            ),
        ));
    }
}

fn storage(plan: &Plan, doc: &DocumentMut, w: &mut Warnings) {
    let s = &plan.storage;
    let at = KeyPath::root().key("storage");
    match s.devices {
        Devices::Auto => {
            if s.wipe {
                // One warning says both: wipe does nothing, and drives holding data are
                // skipped.
                w.push((
                    at.key("wipe"),
                    "wipe = true has no effect with devices = \"auto\": auto takes only drives that are empty (one holding data is skipped, so the volume can be narrower than the machine's drives); list the devices to have them wiped".into(),
                ));
            } else if matches!(s.layout, Layout::Stripe | Layout::Linear) {
                let layout = if s.layout == Layout::Stripe {
                    "stripe"
                } else {
                    "linear"
                };
                w.push((
                    at.key("devices"),
                    format!(
                        "devices = \"auto\" builds the {layout} from the NVMe namespaces that are empty at boot: a drive that holds data is skipped, not refused, so the volume can be narrower than the machine's drives; list the devices to have a drive holding data refused instead"
                    ),
                ));
            }
        }
        Devices::None => {
            if s.wipe {
                w.push((
                    at.key("wipe"),
                    "wipe = true has no effect with devices = \"none\": no drive is touched".into(),
                ));
            }
            for key in ["layout", "filesystem", "stripe_size"] {
                if set(doc, &["storage", key]) {
                    w.push((
                        at.key(key),
                        format!("{key} has no effect with devices = \"none\": there is no data volume (PGDATA is a directory on the root filesystem)"),
                    ));
                }
            }
        }
        Devices::List(_) => {}
    }
    if s.devices != Devices::None
        && s.layout != Layout::Stripe
        && set(doc, &["storage", "stripe_size"])
    {
        w.push((
            at.key("stripe_size"),
            "stripe_size has no effect unless layout = \"stripe\"".into(),
        ));
    }
}

fn tuning(plan: &Plan, doc: &DocumentMut, w: &mut Warnings) {
    if !plan.tuning.auto && set(doc, &["storage", "kind"]) {
        w.push((
            KeyPath::root().key("storage").key("kind"),
            "kind has no effect with tuning.auto = false: only the auto-tuning calculator reads it"
                .into(),
        ));
    }
}

fn workloads(plan: &Plan, w: &mut Warnings) {
    for (i, wl) in plan.workloads.iter().enumerate() {
        let zero = wl
            .warmup
            .as_deref()
            .and_then(|d| humantime::parse_duration(d).ok())
            .is_some_and(|d| d.is_zero());
        if zero {
            w.push((
                KeyPath::root().key("workloads").index(i).key("warmup"),
                "a warm-up of zero has no effect: leave warmup out, or give it a length".into(),
            ));
        }
        let tests = wl.connections().len() * wl.repeats.max() as usize;
        if wl.is_tpcc() && tests > 1 && plan.dataset.restore == super::RestorePolicy::Never {
            w.push((
                KeyPath::root().key("workloads").index(i).key("kind"),
                format!(
                    "sysbench-tpcc writes: with [dataset] restore = \"never\" each of its {tests} tests after the first starts from the data the one before left; scenario B restored the prepared data directory before every test (restore = \"each-point\")"
                ),
            ));
        }
    }
}

/// The host of an http(s) URL when it is this machine's own (loopback, `localhost`, or the
/// unspecified address, which connects locally).
pub(crate) fn loopback_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match hostport.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => hostport.split(':').next()?,
    };
    let lower = host.to_ascii_lowercase();
    let local = lower == "localhost"
        || lower.ends_with(".localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified());
    local.then(|| host.to_string())
}

fn upload(plan: &Plan, doc: &DocumentMut, w: &mut Warnings) {
    let u = &plan.upload;
    // (With a file:// store the endpoint has no effect at all, which is said below.)
    if let Some(endpoint) = u
        .endpoint
        .as_ref()
        .filter(|_| !u.store.starts_with("file://"))
    {
        if let Some(host) = loopback_host(endpoint) {
            w.push((
                KeyPath::root().key("upload").key("endpoint"),
                format!(
                    "\"{endpoint}\" is a loopback address ({host}): on an appliance it names the appliance itself, which holds no store, so the upload cannot reach it; give an address the appliance can reach (only `run --local` on the store's own machine gets there)"
                ),
            ));
        }
    }
    if !u.store.starts_with("file://") {
        return;
    }
    let at = KeyPath::root().key("upload");
    for key in ["endpoint", "region"] {
        if set(doc, &["upload", key]) {
            w.push((
                at.key(key),
                format!("{key} has no effect with a file:// store (it is for s3:// stores)"),
            ));
        }
    }
    if u.credentials != Credentials::Environment {
        w.push((
            at.key("credentials"),
            "credentials have no effect with a file:// store (it is for s3:// stores)".into(),
        ));
    }
}

fn install(plan: &Plan, w: &mut Warnings) {
    let Some(i) = &plan.install else {
        return;
    };
    let at = KeyPath::root().key("install");
    if i.os_disk.is_none() {
        w.push((
            at.key("os_disk"),
            format!(
                "no os_disk named: the kickstart clears and installs the OS on \"{}\"; name the machine's OS drive (machines with only NVMe drives have no sda: e.g. \"nvme0n1\", leaving it out of storage.devices)",
                super::Install::DEFAULT_OS_DISK
            ),
        ));
    }
    for (n, key) in i.ssh_authorized_keys.iter().enumerate() {
        if validate::is_ssh_key_placeholder(key) {
            w.push((
                at.key("ssh_authorized_keys").index(n),
                "a placeholder, not a key: put your OpenSSH public key line here (e.g. the contents of ~/.ssh/id_ed25519.pub); `pgappliance build` refuses to build a kickstart with it, since nobody could log in".into(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::loopback_host;

    #[test]
    fn loopback_hosts_are_told_from_reachable_ones() {
        for url in [
            "http://127.0.0.1:8333",
            "http://127.1.2.3/",
            "https://localhost:9000",
            "http://LOCALHOST",
            "http://s3.localhost:9000",
            "http://[::1]:8333/x",
            "http://0.0.0.0:8333",
        ] {
            assert!(loopback_host(url).is_some(), "{url}");
        }
        for url in [
            "https://objects.lab.example:9000",
            "http://10.0.0.5:8333",
            "http://[2001:db8::1]:8333",
            "https://s3.us-east-1.amazonaws.com",
            "http://localhost.example.com",
        ] {
            assert_eq!(loopback_host(url), None, "{url}");
        }
    }
}
