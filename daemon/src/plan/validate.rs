//! Semantic checks a plan must pass beyond its types. Each problem names its key path.

use std::collections::BTreeSet;

use super::tuning::RESERVED_CONNECTIONS;
use super::{Devices, KeyPath, Layout, Plan, Platform, Repeats, SettingValue};

pub(super) type Problems = Vec<(KeyPath, String)>;

/// The plan's problems; `doc` (the plan's text as a document) tells the keys the plan wrote
/// from those left at their defaults.
pub(crate) fn validate(plan: &Plan, doc: Option<&toml_edit::DocumentMut>) -> Problems {
    let mut p = Problems::new();
    appliance(plan, &mut p);
    postgres(plan, &mut p);
    storage(plan, &mut p);
    tuning(plan, &mut p);
    dataset(plan, &mut p);
    workloads(plan, doc, &mut p);
    sysbench(plan, &mut p);
    upload(plan, &mut p);
    install(plan, &mut p);
    sweep(plan, &mut p);
    p
}

fn sweep(plan: &Plan, p: &mut Problems) {
    use super::{BetweenRounds, SweepOrder};
    let s = &plan.sweep;
    if s.between_rounds != BetweenRounds::None && s.order == SweepOrder::Points {
        p.push((
            root().key("sweep").key("between_rounds"),
            format!(
                "between_rounds = \"{}\" acts between rounds, and order = \"points\" runs each point's repeats back to back (there are no rounds): use order = \"rounds\", or between_rounds = \"none\"",
                s.between_rounds.as_str()
            ),
        ));
    }
}

fn install(plan: &Plan, p: &mut Problems) {
    let Some(i) = &plan.install else {
        return;
    };
    let at = root().key("install");
    if plan.appliance.platform != Platform::Rocky8 {
        p.push((
            at.clone(),
            format!(
                "[install] makes `pgappliance build` render a Rocky 8 kickstart, but appliance.platform is {}: remove [install] (a {} machine gets the payload another way), or use platform = \"rocky8\"",
                plan.appliance.platform, plan.appliance.platform
            ),
        ));
    }
    let disk = i.os_disk();
    if disk.is_empty() || !disk.chars().all(|c| c.is_ascii_alphanumeric()) {
        p.push((
            at.key("os_disk"),
            format!(
                "\"{}\" is not a disk name such as \"sda\" or \"nvme0n1\"",
                i.os_disk.as_deref().unwrap_or_default()
            ),
        ));
    }
    if let Devices::List(devs) = &plan.storage.devices {
        if devs.iter().any(|d| d.trim_start_matches("/dev/") == disk) {
            p.push((
                at.key("os_disk"),
                format!("{disk} is also listed in storage.devices for the data volume"),
            ));
        }
    }
    for (n, key) in i.ssh_authorized_keys.iter().enumerate() {
        if is_ssh_key_placeholder(key) {
            // Reported as a warning by `check` and refused by `build`.
            continue;
        }
        if !is_ssh_public_key(key) {
            p.push((
                at.key("ssh_authorized_keys").index(n),
                "not an OpenSSH public key line (type, base64 key, optional comment)".into(),
            ));
        }
    }
    if let Some(hash) = &i.root_password_hash {
        if let Err(why) = check_sha512_crypt(hash) {
            p.push((at.key("root_password_hash"), why));
        }
    }
    if i.ssh_authorized_keys.is_empty() && i.root_password_hash.is_none() {
        p.push((
            at.clone(),
            "a bare-metal plan must name a way in: root's password is locked, so give install.ssh_authorized_keys (OpenSSH public key lines) or install.root_password_hash (a console password as a crypt(3) SHA-512 hash: `openssl passwd -6`)".into(),
        ));
    }
    let tz_ok = !i.timezone.is_empty()
        && i.timezone
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/_-+".contains(c));
    if !tz_ok {
        p.push((
            at.key("timezone"),
            format!(
                "\"{}\" is not a time zone name such as \"UTC\" or \"Europe/Berlin\"",
                i.timezone
            ),
        ));
    }
}

/// The example plans' stand-in for a real key: `check` warns about it, `build` refuses it.
pub fn is_ssh_key_placeholder(key: &str) -> bool {
    key.contains("REPLACE")
}

/// An OpenSSH public key line: a key type, its base64 blob, an optional comment; nothing
/// that would break the kickstart's quoting.
fn is_ssh_public_key(key: &str) -> bool {
    let mut fields = key.split_whitespace();
    let kind = fields.next().unwrap_or("");
    let typed = kind.starts_with("ssh-") || kind.starts_with("ecdsa-") || kind.starts_with("sk-");
    let blob = fields.next().unwrap_or("");
    let base64 = blob.len() > 16
        && blob
            .trim_end_matches('=')
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/');
    typed && base64 && !key.contains(['"', '\n', '\\'])
}

/// A crypt(3) SHA-512 hash: `$6$[rounds=N$]SALT$HASH`, SALT 1-16 and HASH 86 characters of
/// `./0-9A-Za-z`, N from 1000 to 999999999. The message never repeats the value (it may be
/// a password typed where the hash belongs).
pub(crate) fn check_sha512_crypt(hash: &str) -> Result<(), String> {
    const HOW: &str =
        "make one with `openssl passwd -6` (it asks for the password) and paste its output";
    let crypt_char = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '/';
    let Some(rest) = hash.strip_prefix("$6$") else {
        return Err(if hash.starts_with('$') {
            format!("not a SHA-512 crypt hash (it must start with \"$6$\"; MD5, SHA-256 and yescrypt hashes are not taken): {HOW}")
        } else {
            format!("this is not a crypt(3) hash and may be a plain password (it is not shown here): never put a password in a plan; {HOW}")
        });
    };
    let mut parts: Vec<&str> = rest.split('$').collect();
    if let Some(rounds) = parts.first().and_then(|p| p.strip_prefix("rounds=")) {
        match rounds.parse::<u64>() {
            Ok(n) if (1000..=999_999_999).contains(&n) => {
                parts.remove(0);
            }
            _ => {
                return Err(format!(
                    "the rounds= field of the SHA-512 crypt hash must be a number from 1000 to 999999999: {HOW}"
                ))
            }
        }
    }
    match parts.as_slice() {
        [salt, digest]
            if (1..=16).contains(&salt.len())
                && salt.chars().all(crypt_char)
                && digest.len() == 86
                && digest.chars().all(crypt_char) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "not a well-formed SHA-512 crypt hash ($6$, a salt of 1-16 characters, $, 86 characters of ./0-9A-Za-z): {HOW}"
        )),
    }
}

fn root() -> KeyPath {
    KeyPath::root()
}

/// The most clients a point may have: PostgreSQL's max_connections stops at 262143
/// (MAX_BACKENDS) including its background processes, and pgbench holds about two open
/// files per client.
pub(crate) const MAX_CLIENTS: u32 = 100_000;
/// pgbench reads -c, -j, -t, -T, -s and --progress as C ints.
pub(super) const PGBENCH_INT_MAX: u64 = i32::MAX as u64;
/// PostgreSQL's upper bound for max_connections (MAX_BACKENDS).
const MAX_CONNECTIONS: i64 = 262_143;

/// `path` with `.`, `..` and empty segments resolved, as the kernel would read it.
fn normalise(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// An absolute path written plainly: no `.`, `..` or empty segments, which make a path
/// mean another place than it seems to (`/var/lib/../../etc` is `/etc`).
pub(crate) fn check_abs_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("\"{path}\" is not an absolute path"));
    }
    if path.contains(['\0', '\n', '\r']) {
        return Err("a path cannot contain a line break or NUL".into());
    }
    let normal = normalise(path);
    if normal != path {
        return Err(format!(
            "\"{path}\" means \"{normal}\": write the path plainly, without \".\", \"..\" or empty segments"
        ));
    }
    Ok(())
}

/// Every string of the plan that is a URL with a user name or password in it, under any
/// key (`upload.endpoint`, `sysbench.tpcc_source`, the repositories, a store…), with the
/// refusal ([`crate::url::refuse_credentials`]).
pub(crate) fn urls_with_credentials(text: &str) -> Problems {
    fn walk(v: &toml::Value, at: KeyPath, out: &mut Problems) {
        match v {
            toml::Value::String(s) => {
                if let Err(why) = crate::url::refuse_credentials(s) {
                    out.push((at, why));
                }
            }
            toml::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, at.index(i), out);
                }
            }
            toml::Value::Table(t) => {
                for (k, item) in t {
                    walk(item, at.key(k), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(table) = text.parse::<toml::Table>() {
        walk(&toml::Value::Table(table), root(), &mut out);
    }
    out
}

/// A store URL: `s3://bucket/prefix` or `file:///dir`, its prefix or directory written
/// plainly (one trailing `/` allowed). Also checked when a store comes from the command line.
pub(crate) fn check_store_url(url: &str) -> Result<(), String> {
    crate::url::refuse_credentials(url)?;
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let ok = (3..=63).contains(&bucket.len())
            && bucket
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
        if !ok {
            return Err(format!(
                "\"{bucket}\" is not a valid S3 bucket name (3-63 of a-z, 0-9, '-', '.')"
            ));
        }
        let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
        if !prefix.is_empty()
            && prefix
                .split('/')
                .any(|seg| seg.is_empty() || seg == "." || seg == "..")
        {
            return Err(format!(
                "store prefix \"{prefix}\" has an empty, \".\" or \"..\" segment: write it plainly, e.g. s3://{bucket}/results/2026"
            ));
        }
        // The object store library percent-encodes these in a key (a "%2e" is stored as
        // "%252e"), so the objects would not be where the prefix says.
        if let Some(c) = prefix
            .chars()
            .find(|c| !c.is_ascii() || c.is_control() || "%\\{}^`[]\"<>~#|*?".contains(*c))
        {
            return Err(format!(
                "store prefix \"{prefix}\" has {c:?}, which would be stored percent-encoded: write the prefix unencoded with ASCII letters, digits, spaces and - _ . ! ' ( ) = + , ; : @ $ &, e.g. s3://{bucket}/results/2026"
            ));
        }
        Ok(())
    } else if let Some(rest) = url.strip_prefix("file://") {
        if !rest.starts_with('/') {
            return Err(format!(
                "file store \"{url}\" needs an absolute path: file:///dir"
            ));
        }
        let dir = match rest.strip_suffix('/') {
            Some(d) if !d.is_empty() => d,
            _ => rest,
        };
        check_abs_path(dir).map_err(|e| format!("file store: {e}"))
    } else {
        Err(format!(
            "\"{url}\" is not a store URL: use s3://bucket/prefix or file:///dir"
        ))
    }
}

/// Directories the data volume must never be mounted on or under (the OS lives there).
const SYSTEM_DIRS: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/run", "/sbin", "/sys", "/usr",
];
/// Directories the data volume must not replace (it may go below them).
const SYSTEM_PARENTS: &[&str] = &["/home", "/opt", "/root", "/srv", "/tmp", "/var", "/var/lib"];

fn is_simple_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
        && !s.starts_with(['.', '-'])
}

fn appliance(plan: &Plan, p: &mut Problems) {
    let a = &plan.appliance;
    let at = root().key("appliance");
    if !is_simple_name(&a.name) {
        p.push((
            at.key("name"),
            format!(
                "\"{}\" is not a valid name: use 1-63 of a-z, 0-9, '.', '_', '-' (it becomes part of object-store keys)",
                a.name
            ),
        ));
    }
    if !a.hourly_price_usd.is_finite() || a.hourly_price_usd < 0.0 {
        p.push((
            at.key("hourly_price_usd"),
            format!(
                "price must be zero (unknown) or positive, found {}",
                a.hourly_price_usd
            ),
        ));
    }
}

fn postgres(plan: &Plan, p: &mut Problems) {
    let at = root().key("postgres");
    if let Some(v) = plan.postgres.version {
        let majors = super::PG_MAJORS;
        if !majors.contains(&v) {
            p.push((
                at.key("version"),
                format!(
                    "PostgreSQL {v} is not supported: use a major version from {} to {}",
                    majors.start(),
                    majors.end()
                ),
            ));
        }
    }
    repository(plan, p);
}

const URL_SCHEMES: [&str; 3] = ["https://", "http://", "file://"];

fn is_url(s: &str) -> bool {
    URL_SCHEMES.iter().any(|x| s.starts_with(x))
}

/// The distribution release and architecture a PGDG URL names: `EL-8-aarch64` in the
/// repository RPM's path, `rhel-8-x86_64` in a yum repository's (`None` when it names none).
fn pgdg_release_arch(url: &str) -> Option<(String, String)> {
    for marker in ["/EL-", "/rhel-"] {
        if let Some(start) = url.find(marker) {
            let rest = &url[start + marker.len()..];
            let word = rest.split('/').next().unwrap_or("");
            let (release, arch) = word.split_once('-')?;
            return Some((release.to_string(), arch.to_string()));
        }
    }
    None
}

/// `postgres.repository`, `repository_baseurl` and `repository_gpgkey`, per platform.
fn repository(plan: &Plan, p: &mut Problems) {
    let at = root().key("postgres");
    let pg = &plan.postgres;
    let arch = plan.appliance.arch.as_str();
    for (key, value) in [
        ("repository", &pg.repository),
        ("repository_baseurl", &pg.repository_baseurl),
        ("repository_gpgkey", &pg.repository_gpgkey),
    ] {
        if let Some(v) = value {
            if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
                p.push((
                    at.key(key),
                    format!("\"{v}\" is empty or holds white space: give one URL"),
                ));
                return;
            }
        }
    }
    match plan.appliance.platform {
        Platform::Debian12 => {
            if let Some(repo) = &pg.repository {
                if !is_url(repo) {
                    p.push((
                        at.key("repository"),
                        format!("\"{repo}\" is not a URL: use https://, http:// or file://"),
                    ));
                } else if repo.ends_with(".rpm") {
                    p.push((
                        at.key("repository"),
                        format!("\"{repo}\" is an RPM: on debian12 `repository` is the base URL of an apt repository (apt.postgresql.org or its mirror)"),
                    ));
                }
            }
            for key in ["repository_baseurl", "repository_gpgkey"] {
                let set = if key == "repository_baseurl" {
                    pg.repository_baseurl.is_some()
                } else {
                    pg.repository_gpgkey.is_some()
                };
                if set {
                    p.push((
                        at.key(key),
                        "is for platform rocky8 only: on debian12 `repository` is the apt base URL (a mirror included)".into(),
                    ));
                }
            }
        }
        Platform::Rocky8 => match (&pg.repository, &pg.repository_baseurl) {
            (None, None) => p.push((
                at.key("repository"),
                format!(
                    "is required for platform rocky8 (PostgreSQL comes from PGDG): the repository RPM's URL, e.g. \"https://download.postgresql.org/pub/repos/yum/reporpms/EL-8-{arch}/pgdg-redhat-repo-latest.noarch.rpm\", or `repository_baseurl` and `repository_gpgkey` for a mirror"
                ),
            )),
            (Some(_), Some(_)) => p.push((
                at.key("repository_baseurl"),
                "is exclusive with `repository`: give the repository RPM or a mirror's base URL, not both".into(),
            )),
            (Some(repo), None) => {
                if !is_url(repo) {
                    p.push((
                        at.key("repository"),
                        format!("\"{repo}\" is not a URL: use https://, http:// or file://"),
                    ));
                } else if !repo.ends_with(".rpm") {
                    p.push((
                        at.key("repository"),
                        format!("\"{repo}\" is not an RPM: on rocky8 `repository` is the PGDG repository RPM (…/EL-8-{arch}/pgdg-redhat-repo-latest.noarch.rpm); for a mirror's base URL use `repository_baseurl` and `repository_gpgkey`"),
                    ));
                } else {
                    release_arch(&at.key("repository"), repo, arch, p);
                }
                if pg.repository_gpgkey.is_some() {
                    p.push((
                        at.key("repository_gpgkey"),
                        "is only used with `repository_baseurl`: the repository RPM installs its own key".into(),
                    ));
                }
            }
            (None, Some(base)) => {
                if !is_url(base) {
                    p.push((
                        at.key("repository_baseurl"),
                        format!("\"{base}\" is not a URL: use https://, http:// or file://"),
                    ));
                } else if base.ends_with(".rpm") {
                    p.push((
                        at.key("repository_baseurl"),
                        format!("\"{base}\" is an RPM: give the RPM as `repository`, or the mirror's base URL (the directory holding repodata/) here"),
                    ));
                } else {
                    release_arch(&at.key("repository_baseurl"), base, arch, p);
                }
                match &pg.repository_gpgkey {
                    None => p.push((
                        at.key("repository_gpgkey"),
                        "is required with `repository_baseurl`: the PGDG signing key (a URL or an absolute path) the packages are checked against".into(),
                    )),
                    Some(k) if !is_url(k) && !k.starts_with('/') => p.push((
                        at.key("repository_gpgkey"),
                        format!("\"{k}\" is neither a URL (https://, http://, file://) nor an absolute path"),
                    )),
                    Some(_) => {}
                }
            }
        },
    }
}

/// The other keys a problem at `path` is judged against (the repository keys against the
/// platform and architecture): a type error there makes the problem unreal.
pub(crate) fn judged_against(path: &KeyPath) -> Vec<KeyPath> {
    let pg = root().key("postgres");
    let repo = ["repository", "repository_baseurl", "repository_gpgkey"]
        .iter()
        .any(|k| path.starts_with(&pg.key(k)));
    if repo {
        let a = root().key("appliance");
        vec![a.key("platform"), a.key("arch")]
    } else {
        Vec::new()
    }
}

/// A PGDG URL naming another release or architecture than the appliance's is an error.
fn release_arch(key: &KeyPath, url: &str, arch: &str, p: &mut Problems) {
    if let Some((release, url_arch)) = pgdg_release_arch(url) {
        if release != "8" && !release.starts_with('$') {
            p.push((
                key.clone(),
                format!("\"{url}\" is for EL {release}, but platform rocky8 is EL 8"),
            ));
        } else if url_arch != arch && !url_arch.starts_with('$') {
            p.push((
                key.clone(),
                format!("\"{url}\" is for {url_arch}, but appliance.arch is {arch}"),
            ));
        }
    }
}

/// Parses sizes like `64KiB`, `64k`, `1MiB`, `4096` (bytes).
pub(crate) fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

fn storage(plan: &Plan, p: &mut Problems) {
    let s = &plan.storage;
    let at = root().key("storage");
    if let Devices::List(devs) = &s.devices {
        if devs.is_empty() {
            p.push((
                at.key("devices"),
                "device list is empty: list block devices or use \"auto\"".into(),
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, d) in devs.iter().enumerate() {
            if let Err(e) = check_abs_path(d) {
                p.push((at.key("devices").index(i), e));
            } else if !d.starts_with("/dev/") || d.len() <= "/dev/".len() {
                p.push((
                    at.key("devices").index(i),
                    format!("\"{d}\" is not a device path under /dev/"),
                ));
            }
            if !seen.insert(d) {
                p.push((
                    at.key("devices").index(i),
                    format!("\"{d}\" is listed twice"),
                ));
            }
        }
        match s.layout {
            Layout::Single if devs.len() > 1 => p.push((
                at.key("layout"),
                format!(
                    "layout \"single\" takes one device but {} are listed",
                    devs.len()
                ),
            )),
            Layout::Stripe if devs.len() == 1 => p.push((
                at.key("layout"),
                "a stripe needs at least two devices: list more or use layout = \"single\"".into(),
            )),
            _ => {}
        }
    }
    match parse_size(&s.stripe_size) {
        Some(n) if n.is_power_of_two() && (4096..=(512 << 20)).contains(&n) => {}
        _ => p.push((
            at.key("stripe_size"),
            format!(
                "\"{}\" is not a valid stripe size: use a power of two from 4KiB to 512MiB, e.g. \"64KiB\"",
                s.stripe_size
            ),
        )),
    }
    let mount = s.mount_point.as_str();
    if let Err(e) = check_abs_path(mount) {
        p.push((at.key("mount_point"), format!("mount point: {e}")));
    } else if mount == "/" {
        p.push((
            at.key("mount_point"),
            "the data volume cannot be mounted on /".into(),
        ));
    } else if let Some(sys) = SYSTEM_DIRS
        .iter()
        .find(|d| mount == **d || mount.starts_with(&format!("{d}/")))
    {
        p.push((
            at.key("mount_point"),
            format!("\"{mount}\" is in {sys}, which belongs to the operating system: use e.g. \"/var/lib/pgappliance/pgdata\""),
        ));
    } else if SYSTEM_PARENTS.contains(&mount) {
        p.push((
            at.key("mount_point"),
            format!("mounting the data volume on {mount} would hide what the system keeps there: use a directory below it"),
        ));
    }
}

/// Settings the daemon's connection sets for its own session (tokio-postgres's startup
/// message: `client_encoding` always, `application_name` from [`crate::postgres::sql`]), with
/// the values it sets.
const SESSION_SETTINGS: &[(&str, &str)] = &[
    ("application_name", "\"pgappliance\""),
    ("client_encoding", "\"UTF8\""),
];

fn tuning(plan: &Plan, p: &mut Problems) {
    let t = &plan.tuning;
    let at = root().key("tuning");
    for (name, value) in &t.settings {
        let valid_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid_name {
            p.push((
                at.key("settings").key(name),
                format!("\"{name}\" is not a PostgreSQL setting name"),
            ));
        }
        if let Some(major) = plan.postgres.version {
            if super::PG_MAJORS.contains(&major) {
                if let Some(problem) = super::units::version_problem(name, major) {
                    p.push((at.key("settings").key(name), problem));
                }
            }
        }
        if let Some((_, session)) = SESSION_SETTINGS.iter().find(|(n, _)| n == name) {
            p.push((
                at.key("settings").key(name),
                format!(
                    "{name} is set by the daemon's own connection (to {session}), so the session that reads the settings back never sees the server's value and the in-effect check would fail every run: leave it out of [tuning.settings]"
                ),
            ));
        }
        if let SettingValue::Text(s) = value {
            if s.contains('\n') || s.contains('\0') {
                p.push((
                    at.key("settings").key(name),
                    "setting values cannot contain newlines".into(),
                ));
                continue;
            }
        }
        // Every kind of value: a unit, a word or an overflowing number (`1e400`, past a
        // setting's 32-bit range) first, then the common settings' own bounds.
        let text = value.to_string();
        if let Some(problem) = super::units::unit_problem(name, &text) {
            p.push((at.key("settings").key(name), problem));
            continue;
        }
        if let Some(problem) = super::units::range_problem(name, &text) {
            p.push((at.key("settings").key(name), problem));
        }
    }
    if let Some(mc) = t.settings.get("max_connections") {
        // pgbench connects as the superuser, which may also use the reserved slots, so
        // the hard floor is the client count itself (scenario A ran 1000 clients at 1000).
        let needed = u64::from(plan.max_clients());
        match mc {
            SettingValue::Int(n) if *n > MAX_CONNECTIONS => p.push((
                at.key("settings").key("max_connections"),
                format!("max_connections = {n} is above PostgreSQL's limit of {MAX_CONNECTIONS}"),
            )),
            SettingValue::Int(n) if *n >= 0 && (*n as u64) >= needed => {}
            SettingValue::Int(n) => p.push((
                at.key("settings").key("max_connections"),
                format!(
                    "max_connections = {n} is below the largest client count {needed}: pgbench would be refused connections (the auto calculator gives clients + {RESERVED_CONNECTIONS})"
                ),
            )),
            _ => p.push((
                at.key("settings").key("max_connections"),
                "max_connections must be an integer".into(),
            )),
        }
    }
    if t.tuned_profile.is_empty()
        || !t
            .tuned_profile
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        p.push((
            at.key("tuned_profile"),
            format!(
                "\"{}\" is not a tuned profile name (letters, digits, '-', '_'; \"none\" to skip)",
                t.tuned_profile
            ),
        ));
    }
    for (i, arg) in t.kernel_args.iter().enumerate() {
        if arg.is_empty() || arg.chars().any(char::is_whitespace) {
            p.push((
                at.key("kernel_args").index(i),
                format!("kernel argument \"{arg}\" must be one word without spaces"),
            ));
        }
    }
}

/// What to say when a required key is left out and its default (which is not a valid value)
/// would otherwise be judged instead: `scale must be at least 1` for a plan that never
/// named a scale says the wrong thing.
pub(crate) fn missing_message(path: &KeyPath) -> Option<String> {
    let dataset_scale = root().key("dataset").key("scale");
    if *path == dataset_scale {
        return Some(
            "missing: a plan with pgbench workloads needs [dataset] scale, pgbench's -s (1 is 100,000 accounts, about 15 MB)".into(),
        );
    }
    if path.last_key() == Some("clients")
        && path
            .parent()
            .and_then(|w| w.parent())
            .is_some_and(|ws| ws == root().key("workloads"))
    {
        return Some(
            "missing: a pgbench workload needs clients, the client counts to sweep (e.g. clients = [1, 8, 32])".into(),
        );
    }
    None
}

fn dataset(plan: &Plan, p: &mut Problems) {
    let d = &plan.dataset;
    let at = root().key("dataset");
    if !plan.has_pgbench() {
        // Only sysbench-tpcc workloads: [dataset] describes pgbench's tables, unused here.
    } else if d.scale == 0 {
        p.push((at.key("scale"), "scale must be at least 1".into()));
    } else if u64::from(d.scale) > PGBENCH_INT_MAX {
        p.push((
            at.key("scale"),
            format!(
                "scale must be at most {PGBENCH_INT_MAX} (pgbench's limit), found {}",
                d.scale
            ),
        ));
    }
    if let Some(n) = d.parallel_degree {
        if !(1..=1024).contains(&n) {
            p.push((
                at.key("parallel_degree"),
                format!("parallel_degree must be from 1 to 1024, found {n}"),
            ));
        } else if d.init != super::InitMode::Parallel {
            p.push((
                at.key("parallel_degree"),
                "parallel_degree only applies with init = \"parallel\"".into(),
            ));
        }
    }
    if d.snapshot == Some(false) {
        if d.restore != super::RestorePolicy::Never {
            p.push((
                at.key("snapshot"),
                "snapshot = false, but restore puts the data directory back from the snapshot: set restore = \"never\" or keep the snapshot".into(),
            ));
        }
        if d.snapshot_store_url("").is_some() {
            p.push((
                at.key("snapshot"),
                "snapshot = false, but snapshot_store shares the local snapshot: keep the snapshot or drop snapshot_store".into(),
            ));
        }
    }
    if let Some(super::SnapshotStore::Url(url)) = &d.snapshot_store {
        if let Err(e) = check_store_url(url) {
            p.push((at.key("snapshot_store"), e));
        }
    }
    if !(10..=100).contains(&d.fillfactor) {
        p.push((
            at.key("fillfactor"),
            format!("fillfactor must be from 10 to 100, found {}", d.fillfactor),
        ));
    }
    let db_ok = !d.database.is_empty()
        && d.database.len() <= 63
        && d.database
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !d.database.starts_with(|c: char| c.is_ascii_digit());
    if db_ok
        && plan
            .tpcc_datasets()
            .iter()
            .any(|t| t.database() == d.database)
    {
        p.push((
            at.key("database"),
            format!(
                "\"{}\" is the database of this plan's sysbench-tpcc dataset (tpcc.lua prepare drops and remakes it): name pgbench's database otherwise",
                d.database
            ),
        ));
    }
    if !db_ok {
        p.push((
            at.key("database"),
            format!(
                "\"{}\" is not a plain database name (a-z, 0-9, '_')",
                d.database
            ),
        ));
    }
}

fn parse_duration_field(
    value: &Option<String>,
    at: KeyPath,
    what: &str,
    p: &mut Problems,
) -> Option<std::time::Duration> {
    let s = value.as_deref()?;
    match humantime::parse_duration(s) {
        Ok(d) => Some(d),
        Err(e) => {
            p.push((
                at,
                format!("\"{s}\" is not a {what} ({e}); write e.g. \"600s\" or \"10min\""),
            ));
            None
        }
    }
}

fn workloads(plan: &Plan, doc: Option<&toml_edit::DocumentMut>, p: &mut Problems) {
    let at = root().key("workloads");
    if plan.workloads.is_empty() {
        p.push((at.clone(), "the plan has no workloads".into()));
    }
    let mut names = BTreeSet::new();
    for (i, w) in plan.workloads.iter().enumerate() {
        let at = at.index(i);
        if !is_simple_name(&w.name) || w.name.contains('.') {
            p.push((
                at.key("name"),
                format!(
                    "\"{}\" is not a valid workload name (a-z, 0-9, '_', '-')",
                    w.name
                ),
            ));
        } else if !names.insert(w.name.clone()) {
            p.push((
                at.key("name"),
                format!("workload name \"{}\" is used twice", w.name),
            ));
        }
        let written = |key: &str| doc.is_some_and(|d| at.key(key).item(d).is_some());
        super::workloads::refuse_other_kinds_keys(w, &at, &written, p);
        w.section().check(plan, w, &at, &written, p);
        if let Some(d) = parse_duration_field(&w.duration, at.key("duration"), "duration", p) {
            if d.subsec_nanos() != 0 {
                p.push((
                    at.key("duration"),
                    format!(
                        "duration {:?} is not a whole number of seconds: pgbench's -T and sysbench's --time take whole seconds (it would run {} s)",
                        w.duration.as_deref().unwrap_or_default(),
                        d.as_secs()
                    ),
                ));
            } else if d.as_secs() == 0 {
                p.push((at.key("duration"), "duration must be at least 1s".into()));
            } else if d.as_secs() > PGBENCH_INT_MAX {
                p.push((
                    at.key("duration"),
                    format!("duration must be at most {PGBENCH_INT_MAX}s (pgbench's -T limit)"),
                ));
            }
        }
        if let Some(d) = parse_duration_field(&w.warmup, at.key("warmup"), "warm-up duration", p) {
            if d.subsec_nanos() != 0 {
                p.push((
                    at.key("warmup"),
                    format!(
                        "warm-up {:?} is not a whole number of seconds: pgbench's -T and sysbench's --time take whole seconds (it would run {} s)",
                        w.warmup.as_deref().unwrap_or_default(),
                        d.as_secs()
                    ),
                ));
            } else if d.as_secs() > PGBENCH_INT_MAX {
                p.push((
                    at.key("warmup"),
                    format!("warm-up must be at most {PGBENCH_INT_MAX}s (pgbench's -T limit)"),
                ));
            }
        }
        match w.repeats {
            Repeats::Fixed(n) if !(1..=100).contains(&n) => p.push((
                at.key("repeats"),
                format!("repeats must be from 1 to 100, found {n}"),
            )),
            Repeats::Fixed(_) => {}
            Repeats::Adaptive(a) => {
                let at = at.key("repeats");
                // An interval needs two repeats a side; fewer would leave every point to
                // further rounds with nothing to judge them by.
                if !(2..=100).contains(&a.min) {
                    p.push((
                        at.key("min"),
                        format!(
                            "min must be from 2 to 100 (a 95 % interval needs two repeats), found {}",
                            a.min
                        ),
                    ));
                }
                if !(1..=100).contains(&a.max) || a.max < a.min {
                    p.push((
                        at.key("max"),
                        format!("max must be from min ({}) to 100, found {}", a.min, a.max),
                    ));
                }
                if !(a.ci_pct.is_finite() && a.ci_pct > 0.0 && a.ci_pct <= 50.0) {
                    p.push((
                        at.key("ci_pct"),
                        format!(
                            "ci_pct is the interval's half-width in percent of the mean tps: above 0 and at most 50, found {}",
                            a.ci_pct
                        ),
                    ));
                }
            }
        }
        let mut seen = BTreeSet::new();
        for (j, c) in w.data_checksums.iter().enumerate() {
            if !seen.insert(*c) {
                p.push((
                    at.key("data_checksums").index(j),
                    "checksum state listed twice".into(),
                ));
            }
        }
        if w.progress_interval_s == 0 {
            p.push((
                at.key("progress_interval_s"),
                "progress_interval_s must be at least 1 (second)".into(),
            ));
        } else if u64::from(w.progress_interval_s) > PGBENCH_INT_MAX {
            p.push((
                at.key("progress_interval_s"),
                format!("progress_interval_s must be at most {PGBENCH_INT_MAX} (seconds)"),
            ));
        }
    }
}

/// `[sysbench]`: a source URL and a sha256 of 64 hex digits.
fn sysbench(plan: &Plan, p: &mut Problems) {
    let Some(sb) = &plan.sysbench else { return };
    let at = root().key("sysbench");
    let src = sb.tpcc_source.as_str();
    if !(src.starts_with("https://") || src.starts_with("http://") || src.starts_with("file:///")) {
        p.push((
            at.key("tpcc_source"),
            format!("\"{src}\" is not an https://, http:// or file:/// URL of a .tar.gz"),
        ));
    } else {
        // The scripts are unpacked as a gzip-compressed tar (sysbench::scripts::unpack).
        let path = src.split(['?', '#']).next().unwrap_or(src);
        if !(path.ends_with(".tar.gz") || path.ends_with(".tgz")) {
            p.push((
                at.key("tpcc_source"),
                format!("\"{src}\" does not name a .tar.gz (or .tgz): that is the only archive format the scripts are unpacked from"),
            ));
        }
    }
    let h = sb.tpcc_sha256.as_str();
    if h.len() != 64 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
        p.push((
            at.key("tpcc_sha256"),
            format!("\"{h}\" is not a sha256 (64 hex digits)"),
        ));
    }
    if !plan.workloads.iter().any(|w| w.is_tpcc()) {
        p.push((
            at.clone(),
            "[sysbench] is set but no workload has kind = \"sysbench-tpcc\"".into(),
        ));
    }
}

fn upload(plan: &Plan, p: &mut Problems) {
    let u = &plan.upload;
    let at = root().key("upload");
    if let Err(e) = check_store_url(&u.store) {
        p.push((at.key("store"), e));
    }
    if let Some(e) = &u.endpoint {
        if !(e.starts_with("https://") || e.starts_with("http://")) {
            p.push((
                at.key("endpoint"),
                format!("endpoint \"{e}\" must be an http:// or https:// URL"),
            ));
        }
    }
    match (u.credentials, &u.credentials_file) {
        (super::Credentials::File, None) => p.push((
            at.key("credentials"),
            "credentials = \"file\" needs credentials_file".into(),
        )),
        (super::Credentials::File, Some(f)) if check_abs_path(f).is_err() => p.push((
            at.key("credentials_file"),
            format!(
                "credentials file: {}",
                check_abs_path(f).err().unwrap_or_default()
            ),
        )),
        (super::Credentials::Environment | super::Credentials::InstanceRole, Some(_)) => p.push((
            at.key("credentials_file"),
            "credentials_file only applies with credentials = \"file\"".into(),
        )),
        _ => {}
    }
    if let Some(profile) = &u.credentials_profile {
        if u.credentials != super::Credentials::File {
            p.push((
                at.key("credentials_profile"),
                "credentials_profile only applies with credentials = \"file\"".into(),
            ));
        } else if let Err(why) = super::check_profile_name(profile) {
            p.push((at.key("credentials_profile"), why));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{check_abs_path, check_store_url, parse_size};

    #[test]
    fn paths_and_store_urls_are_written_plainly() {
        assert!(check_abs_path("/var/lib/pgappliance/pgdata").is_ok());
        for bad in [
            "/var/..",
            "/.",
            "/var/lib/../../etc",
            "//x",
            "/x/",
            "x",
            "/a/./b",
        ] {
            assert!(check_abs_path(bad).is_err(), "{bad}");
        }
        for ok in [
            "s3://bucket",
            "s3://bucket/",
            "s3://bucket/a/b",
            "s3://bucket/a/b/",
            "s3://bucket/results 2026/run=1,a+b",
            "file:///srv/store",
            "file:///srv/store/",
        ] {
            assert_eq!(check_store_url(ok), Ok(()), "{ok}");
        }
        for bad in [
            "s3://bucket//a",
            "s3://bucket/a/../b",
            "s3://bucket/./a",
            "s3://bucket/a//",
            "s3://bucket/%2e%2e/b",
            "s3://bucket/results%202026",
            "s3://bucket/a#b",
            "s3://bucket/runs/*",
            "s3://bucket/résultats",
            "s3://bucket/a\tb",
            "file:///srv/../etc",
            "file:///srv//x",
            "file://rel",
        ] {
            assert!(check_store_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_store_url_from_the_command_line_is_checked_too() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("file://{}/a/../b", dir.path().display());
        let cfg = crate::upload::StoreConfig::environment(url, "us-east-1");
        let err = crate::upload::Store::open(&cfg).err().expect("refused");
        assert!(err.to_string().contains("means"), "{err}");
        assert!(!dir.path().join("a").exists() && !dir.path().join("b").exists());
    }

    #[test]
    fn root_password_hashes_and_where_the_hash_goes() {
        use super::check_sha512_crypt;
        let good = "$6$abcdefgh$NUEwtPiqb.Qt1V3Yi77GwJrTOkwNudr4Zg70eABz2v9Ul0C0X60dAP4frAE3oTyO0l.m2C1awRDIlv2.2OJY3.";
        assert_eq!(check_sha512_crypt(good), Ok(()));
        let rounds = format!("$6$rounds=656000${}", &good[3..]);
        assert_eq!(check_sha512_crypt(&rounds), Ok(()));
        let too_long_salt = format!("$6$abcdefghijklmnopq${}", &good[12..]);
        let short = &good[..good.len() - 1];
        let long = format!("{good}x");
        let bad_chars = good.replace('.', "!");
        let low_rounds = format!("$6$rounds=999${}", &good[3..]);
        for bad in [
            "secret",
            "",
            "$5$abcdefgh$x",
            "$6$$abc",
            &too_long_salt,
            short,
            &long,
            &bad_chars,
            &low_rounds,
        ] {
            let e = check_sha512_crypt(bad).expect_err(bad);
            assert!(bad.is_empty() || !e.contains(bad), "{bad}: {e}");
        }
        // The plan as results.json records it leaves the hash out.
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/altra-q80.toml"),
        )
        .expect("example")
        .replace(
            "ssh_authorized_keys = [\"ssh-ed25519 REPLACE-WITH-YOUR-PUBLIC-KEY you@laptop\"]",
            &format!("root_password_hash = \"{good}\""),
        );
        let plan = crate::plan::Plan::parse(&text).expect("plan");
        assert_eq!(
            plan.install
                .as_ref()
                .and_then(|i| i.root_password_hash.as_deref()),
            Some(good)
        );
        let json = serde_json::to_string(&plan).expect("json");
        assert!(
            !json.contains("$6$") && !json.contains("root_password_hash"),
            "{json}"
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64KiB"), Some(65536));
        assert_eq!(parse_size("64k"), Some(65536));
        assert_eq!(parse_size("1MiB"), Some(1 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("big"), None);
        assert_eq!(parse_size("5 parsecs"), None);
    }
}
