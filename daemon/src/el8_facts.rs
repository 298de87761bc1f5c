//! What Rocky 8.6's tools accept, in one place: allow-lists per tool version, read from each
//! project's source at the tag Rocky 8.6 ships (util-linux 2.32.1, lvm2 2.03.14, xfsprogs
//! 5.0.0, systemd 239-58, tuned 2.18.0, grubby 8.40-42), and [`check_command`], which holds
//! a command line the daemon builds against them. The tests below run it over every command
//! line and D-Bus property/method the daemon builds, so a change that uses what the target
//! lacks (a newer lsblk column, a systemd 240 property, lvm2's `json_std`) fails a test here
//! instead of on the first Rocky boot. docs/rocky8.md says what this covers and what not.
//!
//! Backports that only RHEL's builds carry (systemd's `Type=exec`, `EnqueueUnitJob`) are
//! left out on purpose: the appliance must not depend on a patch level.
//! Only the tests use it, so it is compiled for them alone.
#![cfg(test)]

use crate::runner::CommandSpec;

/// One option of a command-line tool: short letter and/or long name, and whether it takes a
/// value (`-o X`, `-oX`, `--output X`, `--output=X`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opt {
    pub(crate) short: Option<char>,
    pub(crate) long: Option<&'static str>,
    pub(crate) value: bool,
}

const fn o(short: char, long: &'static str, value: bool) -> Opt {
    Opt {
        short: Some(short),
        long: Some(long),
        value,
    }
}

const fn long(long: &'static str, value: bool) -> Opt {
    Opt {
        short: None,
        long: Some(long),
        value,
    }
}

const fn short(short: char, value: bool) -> Opt {
    Opt {
        short: Some(short),
        long: None,
        value,
    }
}

/// util-linux 2.32.1 `lsblk` options (getopt "abdDze:fhJlnmo:OpPiI:rstVSTx:").
pub(crate) const LSBLK_2_32_1_OPTIONS: &[Opt] = &[
    o('a', "all", false),
    o('b', "bytes", false),
    o('d', "nodeps", false),
    o('D', "discard", false),
    o('z', "zoned", false),
    o('e', "exclude", true),
    o('f', "fs", false),
    o('h', "help", false),
    o('J', "json", false),
    o('l', "list", false),
    o('n', "noheadings", false),
    o('m', "perms", false),
    o('o', "output", true),
    o('O', "output-all", false),
    o('p', "paths", false),
    o('P', "pairs", false),
    o('i', "ascii", false),
    o('I', "include", true),
    o('r', "raw", false),
    o('s', "inverse", false),
    o('t', "topology", false),
    o('V', "version", false),
    o('S', "scsi", false),
    o('T', "tree", false),
    o('x', "sort", true),
];

/// util-linux 2.32.1 `lsblk -o` columns. Not there: PATH, FSAVAIL, FSSIZE, FSUSED, FSUSE%,
/// PTUUID, PTTYPE (2.33), FSROOTS, MOUNTPOINTS (2.37).
pub(crate) const LSBLK_2_32_1_COLUMNS: &[&str] = &[
    "NAME",
    "KNAME",
    "PKNAME",
    "MAJ:MIN",
    "FSTYPE",
    "MOUNTPOINT",
    "LABEL",
    "UUID",
    "PARTTYPE",
    "PARTLABEL",
    "PARTUUID",
    "PARTFLAGS",
    "RA",
    "RO",
    "RM",
    "HOTPLUG",
    "ROTA",
    "RAND",
    "MODEL",
    "SERIAL",
    "SIZE",
    "STATE",
    "OWNER",
    "GROUP",
    "MODE",
    "ALIGNMENT",
    "MIN-IO",
    "OPT-IO",
    "PHY-SEC",
    "LOG-SEC",
    "SCHED",
    "RQ-SIZE",
    "TYPE",
    "DISC-ALN",
    "DISC-GRAN",
    "DISC-MAX",
    "DISC-ZERO",
    "WSAME",
    "WWN",
    "HCTL",
    "TRAN",
    "SUBSYSTEMS",
    "REV",
    "VENDOR",
    "ZONED",
];

/// util-linux 2.32.1 `wipefs` options (getopt "abfhiJnO:o:pqt:V"; no `--lock`).
pub(crate) const WIPEFS_2_32_1_OPTIONS: &[Opt] = &[
    o('a', "all", false),
    o('b', "backup", false),
    o('f', "force", false),
    o('h', "help", false),
    o('i', "noheadings", false),
    o('J', "json", false),
    o('n', "no-act", false),
    o('O', "output", true),
    o('o', "offset", true),
    o('p', "parsable", false),
    o('q', "quiet", false),
    o('t', "types", true),
    o('V', "version", false),
];

/// lvm2 2.03.14 options every command takes (OO_ALL in tools/command-lines.in).
const LVM_COMMON: &[Opt] = &[
    o('y', "yes", false),
    o('f', "force", false),
    o('d', "debug", false),
    o('h', "help", false),
    o('q', "quiet", false),
    o('t', "test", false),
    o('v', "verbose", false),
    long("commandprofile", true),
    long("config", true),
    long("driverloaded", true),
    long("lockopt", true),
    long("longhelp", false),
    long("nolocking", false),
    long("profile", true),
    long("version", false),
    long("devicesfile", true),
    long("devices", true),
];

/// lvm2 2.03.14 options per command (beyond [`LVM_COMMON`]).
const PVCREATE: &[Opt] = &[
    long("zero", true),
    long("metadatasize", true),
    long("dataalignment", true),
    long("reportformat", true),
    o('u', "uuid", true),
];
const VGCREATE: &[Opt] = &[
    o('s', "physicalextentsize", true),
    long("addtag", true),
    long("setautoactivation", true),
    long("reportformat", true),
    long("clustered", true),
    o('l', "maxlogicalvolumes", true),
    o('p', "maxphysicalvolumes", true),
];
const LVCREATE: &[Opt] = &[
    o('i', "stripes", true),
    o('I', "stripesize", true),
    o('l', "extents", true),
    o('L', "size", true),
    o('n', "name", true),
    o('W', "wipesignatures", true),
    o('Z', "zero", true),
    long("type", true),
    long("reportformat", true),
];
const VGREMOVE: &[Opt] = &[long("reportformat", true), short('S', true)];
/// OO_REPORT plus -o/--options for pvs, vgs and lvs.
const LVM_REPORT: &[Opt] = &[
    long("binary", false),
    long("nameprefixes", false),
    long("noheadings", false),
    long("nosuffix", false),
    o('o', "options", true),
    long("rows", false),
    o('S', "select", true),
    long("separator", true),
    o('O', "sort", true),
    long("units", true),
    long("unquoted", false),
    long("readonly", false),
    long("reportformat", true),
    o('a', "all", false),
];

/// `--reportformat` values of lvm2 2.03.14 (`json_std` came in 2.03.17).
pub(crate) const LVM_2_03_14_REPORT_FORMATS: &[&str] = &["basic", "json"];

/// Report fields of lvm2 2.03.14 the appliance may ask for with `-o`.
pub(crate) const LVM_2_03_14_REPORT_FIELDS: &[&str] = &[
    "pv_name",
    "pv_uuid",
    "pv_size",
    "pv_free",
    "dev_size",
    "vg_name",
    "vg_uuid",
    "vg_size",
    "vg_free",
    "vg_extent_size",
    "vg_extent_count",
    "vg_free_count",
    "lv_name",
    "lv_uuid",
    "lv_path",
    "lv_dm_path",
    "lv_size",
    "lv_attr",
    "lv_layout",
    "segtype",
    "stripes",
    "stripe_size",
    "devices",
    "seg_count",
];

/// lvm2 commands that may prompt and so must carry `-y`/`--yes` (stdin is /dev/null in a
/// transient unit: a prompt reads EOF, answers "n" and the command aborts).
pub(crate) const LVM_MUST_SAY_YES: &[&str] = &["pvcreate", "vgcreate", "lvcreate", "vgremove"];

/// mkfs.xfs 5.0.0 options (getopt "b:d:i:l:L:m:n:KNp:qr:s:CfV").
pub(crate) const MKFS_XFS_5_0_OPTIONS: &[Opt] = &[
    short('b', true),
    short('d', true),
    short('i', true),
    short('l', true),
    short('L', true),
    short('m', true),
    short('n', true),
    short('K', false),
    short('N', false),
    short('p', true),
    short('q', false),
    short('r', true),
    short('s', true),
    short('C', false),
    short('f', false),
    short('V', false),
];

/// mkfs.xfs 5.0.0 sub-options per option letter. `-m bigtime`/`inobtcount` are RHEL
/// backports that older EL8 kernels cannot mount: left out.
pub(crate) const MKFS_XFS_5_0_SUBOPTIONS: &[(char, &[&str])] = &[
    ('b', &["size"]),
    ('m', &["crc", "finobt", "uuid", "rmapbt", "reflink"]),
    (
        'd',
        &[
            "agcount", "agsize", "file", "name", "size", "sunit", "swidth", "su", "sw", "noalign",
            "sectsize",
        ],
    ),
    (
        'i',
        &[
            "log",
            "perblock",
            "size",
            "maxpct",
            "attr",
            "projid32bit",
            "sparse",
        ],
    ),
    (
        'l',
        &[
            "agnum",
            "internal",
            "size",
            "logdev",
            "version",
            "sunit",
            "su",
            "sectsize",
            "lazy-count",
        ],
    ),
    ('n', &["size", "version", "ftype"]),
    ('r', &["extsize", "size", "rtdev"]),
    ('s', &["size"]),
];

/// grubby 8.40-42 (the EL8 BLS script) options.
pub(crate) const GRUBBY_8_40_OPTIONS: &[Opt] = &[
    long("update-kernel", true),
    long("args", true),
    long("remove-args", true),
    long("info", true),
    long("default-kernel", false),
    long("default-index", false),
    long("default-title", false),
    long("set-default", true),
    long("set-default-index", true),
    long("add-kernel", true),
    long("remove-kernel", true),
    long("copy-default", false),
    long("title", true),
    long("initrd", true),
    long("make-default", false),
    long("env", true),
    o('b', "bls-directory", true),
    o('c', "config-file", true),
    long("no-etc-grub-update", false),
];

/// The tools and versions [`check_command`] knows.
pub(crate) const CHECKED_TOOLS: &[(&str, &str)] = &[
    ("lsblk", "util-linux 2.32.1"),
    ("wipefs", "util-linux 2.32.1"),
    ("pvcreate", "lvm2 2.03.14"),
    ("vgcreate", "lvm2 2.03.14"),
    ("lvcreate", "lvm2 2.03.14"),
    ("vgremove", "lvm2 2.03.14"),
    ("pvs", "lvm2 2.03.14"),
    ("vgs", "lvm2 2.03.14"),
    ("lvs", "lvm2 2.03.14"),
    ("mkfs.xfs", "xfsprogs 5.0.0"),
    ("grubby", "grubby 8.40-42"),
];

/// Programs the appliance runs on Rocky 8 whose version was not read from source: their
/// command lines are not checked here (docs/rocky8.md lists them).
pub(crate) const UNCHECKED_TOOLS: &[&str] = &[
    "dnf",
    "rpm",
    "semanage",
    "restorecon",
    "mkfs.ext4",
    "lscpu",
    "postgresql-setup",
];

/// What [`check_command`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every option and value is in the tool's allow-list.
    Allowed { tool: &'static str },
    /// The program is one of [`UNCHECKED_TOOLS`] (or a PostgreSQL binary).
    Unchecked,
}

fn find_long<'a>(opts: &'a [Opt], name: &str) -> Option<&'a Opt> {
    opts.iter().find(|o| o.long == Some(name))
}

fn find_short(opts: &[Opt], c: char) -> Option<&Opt> {
    opts.iter().find(|o| o.short == Some(c))
}

/// An option as given, by its canonical name (long when it has one), with its value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Given {
    name: String,
    value: Option<String>,
}

/// Splits argv by an option table like getopt_long would; unknown options are errors.
fn parse_args(
    tool: &str,
    opts: &[Opt],
    args: &[String],
) -> Result<(Vec<Given>, Vec<String>), String> {
    let canon = |o: &Opt| {
        o.long
            .map(str::to_string)
            .unwrap_or_else(|| o.short.map(String::from).unwrap_or_default())
    };
    let mut given = Vec::new();
    let mut positional = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if let Some(rest) = a.strip_prefix("--") {
            let (name, inline) = match rest.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (rest, None),
            };
            let opt =
                find_long(opts, name).ok_or_else(|| format!("{tool} has no option --{name}"))?;
            let value = match (opt.value, inline) {
                (true, Some(v)) => Some(v),
                (true, None) => {
                    i += 1;
                    Some(
                        args.get(i)
                            .cloned()
                            .ok_or_else(|| format!("{tool}: --{name} needs a value"))?,
                    )
                }
                (false, Some(_)) => return Err(format!("{tool}: --{name} takes no value")),
                (false, None) => None,
            };
            given.push(Given {
                name: canon(opt),
                value,
            });
        } else if a.len() > 1 && a.starts_with('-') {
            let chars: Vec<char> = a[1..].chars().collect();
            let mut j = 0;
            while j < chars.len() {
                let c = chars[j];
                let opt =
                    find_short(opts, c).ok_or_else(|| format!("{tool} has no option -{c}"))?;
                if opt.value {
                    let rest: String = chars[j + 1..].iter().collect();
                    let value = if rest.is_empty() {
                        i += 1;
                        args.get(i)
                            .cloned()
                            .ok_or_else(|| format!("{tool}: -{c} needs a value"))?
                    } else {
                        rest
                    };
                    given.push(Given {
                        name: canon(opt),
                        value: Some(value),
                    });
                    break;
                }
                given.push(Given {
                    name: canon(opt),
                    value: None,
                });
                j += 1;
            }
        } else {
            positional.push(a.clone());
        }
        i += 1;
    }
    Ok((given, positional))
}

fn values<'a>(given: &'a [Given], name: &'a str) -> impl Iterator<Item = &'a str> {
    given
        .iter()
        .filter(move |g| g.name == name)
        .filter_map(|g| g.value.as_deref())
}

fn has(given: &[Given], name: &str) -> bool {
    given.iter().any(|g| g.name == name)
}

/// Checks one command line against the facts of the tool's Rocky 8.6 version. `Err` names
/// the tool, its version and what it lacks.
pub(crate) fn check_argv(program: &str, args: &[String]) -> Result<Verdict, String> {
    let base = program.rsplit('/').next().unwrap_or(program);
    let tool = CHECKED_TOOLS.iter().find(|(t, _)| *t == base);
    let Some((tool, version)) = tool else {
        if UNCHECKED_TOOLS.contains(&base)
            || (base.starts_with("postgresql-") && base.ends_with("-setup"))
            || program.starts_with("/usr/pgsql-")
            || program.starts_with("/usr/lib/postgresql/")
        {
            return Ok(Verdict::Unchecked);
        }
        return Err(format!(
            "{program}: no Rocky 8 facts for this program (add it to el8_facts::CHECKED_TOOLS or UNCHECKED_TOOLS)"
        ));
    };
    let who = format!("{tool} ({version})");
    let mut table: Vec<Opt> = Vec::new();
    match *tool {
        "lsblk" => table.extend_from_slice(LSBLK_2_32_1_OPTIONS),
        "wipefs" => table.extend_from_slice(WIPEFS_2_32_1_OPTIONS),
        "mkfs.xfs" => table.extend_from_slice(MKFS_XFS_5_0_OPTIONS),
        "grubby" => table.extend_from_slice(GRUBBY_8_40_OPTIONS),
        lvm => {
            table.extend_from_slice(LVM_COMMON);
            table.extend_from_slice(match lvm {
                "pvcreate" => PVCREATE,
                "vgcreate" => VGCREATE,
                "lvcreate" => LVCREATE,
                "vgremove" => VGREMOVE,
                _ => LVM_REPORT,
            });
        }
    }
    let (given, positional) = parse_args(&who, &table, args)?;
    match *tool {
        "lsblk" => {
            for list in values(&given, "output") {
                for col in list.trim_start_matches('+').split(',') {
                    if !LSBLK_2_32_1_COLUMNS
                        .iter()
                        .any(|c| c.eq_ignore_ascii_case(col))
                    {
                        return Err(format!("{who} has no column {col}"));
                    }
                }
            }
        }
        "mkfs.xfs" => {
            for g in &given {
                let Some(letter) = g.name.chars().next().filter(|_| g.name.len() == 1) else {
                    continue;
                };
                let Some((_, subs)) = MKFS_XFS_5_0_SUBOPTIONS.iter().find(|(c, _)| *c == letter)
                else {
                    continue;
                };
                for sub in g.value.as_deref().unwrap_or("").split(',') {
                    let key = sub.split('=').next().unwrap_or("");
                    if !subs.contains(&key) {
                        return Err(format!("{who} has no -{letter} {key}"));
                    }
                }
            }
        }
        "grubby" => {
            if (has(&given, "args") || has(&given, "remove-args"))
                && !has(&given, "update-kernel")
                && !has(&given, "add-kernel")
            {
                return Err(format!(
                    "{who}: --args/--remove-args without --update-kernel is \"no action specified\""
                ));
            }
            let last = args.last().map(String::as_str);
            if has(&given, "no-etc-grub-update") && last != Some("--no-etc-grub-update") {
                return Err(format!(
                    "{who}: --no-etc-grub-update swallows the next word; it must come last"
                ));
            }
        }
        "wipefs" => {}
        lvm => {
            for f in values(&given, "reportformat") {
                if !LVM_2_03_14_REPORT_FORMATS.contains(&f) {
                    return Err(format!("{who} has no --reportformat {f}"));
                }
            }
            for list in values(&given, "options") {
                for field in list.trim_start_matches('+').split(',') {
                    if !LVM_2_03_14_REPORT_FIELDS.contains(&field) {
                        return Err(format!(
                            "{who}: report field {field} is not in the allow-list"
                        ));
                    }
                }
            }
            if LVM_MUST_SAY_YES.contains(&lvm) && !has(&given, "yes") {
                return Err(format!(
                    "{who} without --yes: a prompt reads EOF from /dev/null, answers n and aborts"
                ));
            }
        }
    }
    if matches!(*tool, "pvcreate" | "vgcreate" | "wipefs" | "mkfs.xfs") && positional.is_empty() {
        return Err(format!("{who} names no device"));
    }
    Ok(Verdict::Allowed { tool })
}

/// [`check_argv`] for a command spec.
pub(crate) fn check_command(spec: &CommandSpec) -> Result<Verdict, String> {
    check_argv(&spec.program, &spec.args)
}

/// A sequence of storage commands: each device given to `pvcreate` was wiped with
/// `wipefs --all` earlier (lvm2 2.03.14 refuses a disk with a partition table).
pub(crate) fn check_wiped_before_pvcreate(commands: &[Vec<String>]) -> Result<(), String> {
    let mut wiped: Vec<&str> = Vec::new();
    for argv in commands {
        match argv.first().map(String::as_str) {
            Some("wipefs") if argv.iter().any(|a| a == "--all" || a == "-a") => {
                wiped.extend(
                    argv[1..]
                        .iter()
                        .filter(|a| !a.starts_with('-'))
                        .map(String::as_str),
                );
            }
            Some("pvcreate") => {
                for dev in argv[1..].iter().filter(|a| !a.starts_with('-')) {
                    if !wiped.contains(&dev.as_str()) {
                        return Err(format!("pvcreate {dev} without `wipefs --all {dev}` first"));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// systemd 239 (upstream; no RHEL backports) transient `.service` properties with their
/// D-Bus signatures, as `StartTransientUnit` accepts them.
pub(crate) const SYSTEMD_239_SERVICE_PROPERTIES: &[(&str, &str)] = &[
    ("Description", "s"),
    ("Type", "s"),
    ("RemainAfterExit", "b"),
    ("ExecStart", "a(sasb)"),
    ("ExecStartPre", "a(sasb)"),
    ("ExecStartPost", "a(sasb)"),
    ("ExecStop", "a(sasb)"),
    ("ExecStopPost", "a(sasb)"),
    ("User", "s"),
    ("Group", "s"),
    ("SupplementaryGroups", "as"),
    ("WorkingDirectory", "s"),
    ("Environment", "as"),
    ("LimitNOFILE", "t"),
    ("LimitNOFILESoft", "t"),
    ("StandardInput", "s"),
    ("StandardOutput", "s"),
    ("StandardError", "s"),
    ("StandardOutputFile", "s"),
    ("StandardErrorFile", "s"),
    ("TimeoutStartUSec", "t"),
    ("TimeoutStopUSec", "t"),
    ("RuntimeMaxUSec", "t"),
    ("CollectMode", "s"),
    ("AddRef", "b"),
    ("KillMode", "s"),
    ("KillSignal", "i"),
    ("SendSIGKILL", "b"),
    ("Nice", "i"),
    ("OOMScoreAdjust", "i"),
    ("Slice", "s"),
    // A cgroup property, which every unit with a control group takes (src/core/dbus-cgroup.c).
    ("CPUAccounting", "b"),
];

/// Properties systemd 239-58 must never be sent, and why.
pub(crate) const SYSTEMD_239_FORBIDDEN_PROPERTIES: &[(&str, &str)] = &[
    (
        "StandardOutputFileToCreate",
        "systemd 239-58 accepts the name, then fails an assert() in PID 1",
    ),
    (
        "StandardErrorFileToCreate",
        "systemd 239-58 accepts the name, then fails an assert() in PID 1",
    ),
    ("ExecStartEx", "came in systemd 243"),
    ("TimeoutSec", "not a D-Bus property: send TimeoutStartUSec"),
    ("TimeoutUSec", "not a D-Bus property: send TimeoutStartUSec"),
    ("TimeoutAbortUSec", "came in systemd 243"),
    ("OOMPolicy", "came in systemd 243"),
    (
        "StandardOutputFileToAppend",
        "a RHEL backport (upstream 240) with the StandardErrorFile rewrite bug",
    ),
    (
        "StandardErrorFileToAppend",
        "a RHEL backport (upstream 240) with the StandardErrorFile rewrite bug",
    ),
];

/// `Type=` values of upstream systemd 239 (`exec` is a 239-58 backport).
pub(crate) const SYSTEMD_239_SERVICE_TYPES: &[&str] =
    &["simple", "forking", "oneshot", "dbus", "notify", "idle"];

/// `StandardOutput=`/`StandardError=` values systemd 239 takes over D-Bus: the bare mode
/// only; `file:PATH` is rejected (send `StandardOutputFile`).
pub(crate) const SYSTEMD_239_OUTPUT_MODES: &[&str] = &[
    "inherit",
    "null",
    "tty",
    "journal",
    "syslog",
    "kmsg",
    "journal+console",
    "syslog+console",
    "kmsg+console",
    "socket",
    "fd",
    "file",
];

/// `StandardInput=` values of systemd 239.
pub(crate) const SYSTEMD_239_INPUT_MODES: &[&str] = &[
    "null",
    "tty",
    "tty-force",
    "tty-fail",
    "data",
    "socket",
    "fd",
];

/// Checks one transient-unit property (name, D-Bus signature, string value if any).
pub(crate) fn check_transient_property(
    name: &str,
    signature: &str,
    value: Option<&str>,
) -> Result<(), String> {
    if let Some((_, why)) = SYSTEMD_239_FORBIDDEN_PROPERTIES
        .iter()
        .find(|(n, _)| *n == name)
    {
        return Err(format!("transient property {name}: {why}"));
    }
    let Some((_, want)) = SYSTEMD_239_SERVICE_PROPERTIES
        .iter()
        .find(|(n, _)| *n == name)
    else {
        return Err(format!(
            "transient property {name} is not in systemd 239's allow-list (an unknown name fails the whole StartTransientUnit)"
        ));
    };
    if *want != signature {
        return Err(format!(
            "transient property {name} has D-Bus type {signature}; systemd 239 wants {want}"
        ));
    }
    let allowed: Option<&[&str]> = match name {
        "Type" => Some(SYSTEMD_239_SERVICE_TYPES),
        "StandardOutput" | "StandardError" => Some(SYSTEMD_239_OUTPUT_MODES),
        "StandardInput" => Some(SYSTEMD_239_INPUT_MODES),
        "CollectMode" => Some(&["inactive", "inactive-or-failed"]),
        _ => None,
    };
    if let (Some(allowed), Some(v)) = (allowed, value) {
        if !allowed.contains(&v) {
            return Err(format!(
                "transient property {name}={v:?}: systemd 239 takes only {}",
                allowed.join("|")
            ));
        }
    }
    Ok(())
}

/// org.freedesktop.systemd1.Manager methods of upstream systemd 239: name, in, out.
pub(crate) const SYSTEMD_239_MANAGER_METHODS: &[(&str, &str, &str)] = &[
    ("StartTransientUnit", "ssa(sv)a(sa(sv))", "o"),
    ("StartUnit", "ss", "o"),
    ("StopUnit", "ss", "o"),
    ("RestartUnit", "ss", "o"),
    ("ResetFailedUnit", "s", ""),
    ("LoadUnit", "s", "o"),
    ("GetUnit", "s", "o"),
    ("KillUnit", "ssi", ""),
    ("SetUnitProperties", "sba(sv)", ""),
    ("EnableUnitFiles", "asbb", "ba(sss)"),
    ("Reload", "", ""),
    ("ListUnitsByPatterns", "asas", "a(ssssssouso)"),
    ("Subscribe", "", ""),
    ("GetUnitProcesses", "s", "a(sus)"),
];

/// Manager signals of systemd 239.
pub(crate) const SYSTEMD_239_MANAGER_SIGNALS: &[&str] = &[
    "JobRemoved",
    "JobNew",
    "UnitNew",
    "UnitRemoved",
    "Reloading",
];

/// Readable properties of systemd 239 per interface.
pub(crate) const SYSTEMD_239_READ_PROPERTIES: &[(&str, &[&str])] = &[
    (
        "org.freedesktop.systemd1.Unit",
        &[
            "ActiveState",
            "SubState",
            "LoadState",
            "InvocationID",
            "CollectMode",
        ],
    ),
    (
        "org.freedesktop.systemd1.Service",
        &[
            "ExecMainCode",
            "ExecMainStatus",
            "ExecMainPID",
            "ExecMainStartTimestamp",
            "ExecMainExitTimestamp",
            "Result",
            "MainPID",
            "NRestarts",
            // The cgroup properties (src/core/dbus-cgroup.c, since systemd 227).
            "CPUUsageNSec",
        ],
    ),
];

/// tuned 2.18.0's com.redhat.tuned.control methods: name, in, out.
pub(crate) const TUNED_2_18_METHODS: &[(&str, &str, &str)] = &[
    ("switch_profile", "s", "(bs)"),
    ("active_profile", "", "s"),
    ("verify_profile", "", "b"),
    ("verify_profile_ignore_missing", "", "b"),
    ("profiles", "", "as"),
    ("profiles2", "", "a(ss)"),
    ("profile_info", "s", "(bsss)"),
    ("start", "", "b"),
    ("stop", "", "b"),
    ("reload", "", "b"),
    ("is_running", "", "b"),
    ("disable", "", "b"),
    ("auto_profile", "", "(bs)"),
    ("recommend_profile", "", "s"),
    ("profile_mode", "", "(ss)"),
    ("post_loaded_profile", "", "s"),
];

/// A D-Bus member the daemon calls or reads, as found in its proxy definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DbusMember {
    pub(crate) interface: String,
    pub(crate) name: String,
    pub(crate) kind: MemberKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemberKind {
    Method,
    Property,
    Signal,
}

fn camel(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// The members declared in zbus proxy source text (`#[zbus::proxy(interface = …)]` traits,
/// `fn` items, `#[zbus(property)]`, `#[zbus(signal)]`, `#[zbus(name = "…")]`), named as on
/// the bus (zbus turns snake_case into CamelCase unless a name is given). Pure: the tests
/// feed it `systemd/proxies.rs`.
pub(crate) fn proxy_members(source: &str) -> Vec<DbusMember> {
    let mut out = Vec::new();
    let mut interface = String::new();
    let mut kind = MemberKind::Method;
    let mut explicit: Option<String> = None;
    for line in source.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("interface = \"") {
            interface = rest.split('"').next().unwrap_or("").to_string();
        } else if line.starts_with("#[zbus(") {
            if line.contains("property") {
                kind = MemberKind::Property;
            } else if line.contains("signal") {
                kind = MemberKind::Signal;
            }
            if let Some(rest) = line.split("name = \"").nth(1) {
                explicit = rest.split('"').next().map(str::to_string);
            }
        } else if let Some(rest) = line.strip_prefix("fn ") {
            let rust = rest.split('(').next().unwrap_or("").trim();
            out.push(DbusMember {
                interface: interface.clone(),
                name: explicit.take().unwrap_or_else(|| camel(rust)),
                kind,
            });
            kind = MemberKind::Method;
        }
    }
    out
}

/// Checks one proxy member against systemd 239 and tuned 2.18.
pub(crate) fn check_dbus_member(m: &DbusMember) -> Result<(), String> {
    let ok = match (m.interface.as_str(), m.kind) {
        ("org.freedesktop.systemd1.Manager", MemberKind::Method) => SYSTEMD_239_MANAGER_METHODS
            .iter()
            .any(|(n, _, _)| *n == m.name),
        ("org.freedesktop.systemd1.Manager", MemberKind::Signal) => {
            SYSTEMD_239_MANAGER_SIGNALS.contains(&m.name.as_str())
        }
        (iface, MemberKind::Property) => SYSTEMD_239_READ_PROPERTIES
            .iter()
            .any(|(i, props)| *i == iface && props.contains(&m.name.as_str())),
        ("com.redhat.tuned.control", MemberKind::Method) => {
            TUNED_2_18_METHODS.iter().any(|(n, _, _)| *n == m.name)
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{} {:?} {} is not in the systemd 239 / tuned 2.18 allow-list",
            m.interface, m.kind, m.name
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> (String, Vec<String>) {
        let mut w = line.split_whitespace().map(str::to_string);
        let program = w.next().expect("program");
        (program, w.collect())
    }

    fn check(line: &str) -> Result<Verdict, String> {
        let (p, a) = argv(line);
        check_argv(&p, &a)
    }

    #[test]
    fn what_2_32_and_2_03_14_lack_is_refused_by_name() {
        let err = check("lsblk -J -b -o NAME,PATH,SIZE").expect_err("PATH");
        assert!(
            err.contains("no column PATH") && err.contains("2.32.1"),
            "{err}"
        );
        assert!(check("lsblk -J -o NAME,MOUNTPOINTS").is_err());
        assert!(check("lsblk -J -o NAME,FSSIZE").is_err());
        assert!(check("lsblk --merge -J").is_err());
        assert!(check("wipefs --lock -a /dev/x").is_err());
        let err = check("lvs --reportformat json_std -o lv_name").expect_err("json_std");
        assert!(err.contains("json_std"), "{err}");
        assert!(check("pvcreate /dev/x")
            .expect_err("no -y")
            .contains("--yes"));
        assert!(check("vgcreate pgappliance /dev/x").is_err());
        assert!(check("mkfs.xfs -m bigtime=1 /dev/x").is_err());
        assert!(check("mkfs.xfs -c options=a.conf /dev/x").is_err());
        assert!(check("grubby --args=quiet").is_err());
        assert!(check("grubby --no-etc-grub-update --update-kernel=ALL --args=x").is_err());
        assert!(check("no-such-tool -x").is_err());
    }

    #[test]
    fn what_they_have_is_allowed_in_every_spelling() {
        for line in [
            "lsblk -J -b -p -o NAME,SIZE,TYPE,ROTA,MODEL,SERIAL,FSTYPE,MOUNTPOINT,PKNAME,TRAN",
            "lsblk -Jbpo name,maj:min",
            "lsblk --json --bytes --output=NAME",
            "wipefs -a /dev/nvme0n1",
            "wipefs --no-act -J /dev/nvme0n1",
            "pvcreate -y /dev/a /dev/b",
            "lvcreate --yes --name data --extents 100%FREE --stripes 2 --stripesize 64k pgappliance",
            "lvcreate -y -n data -l 100%FREE -i 2 -I 64k -W y pgappliance",
            "vgremove -ff -y pgappliance",
            "lvs --reportformat json --units b --nosuffix -o lv_name,stripes,stripe_size,devices",
            "mkfs.xfs -f -m reflink=1,crc=1 -d su=64k,sw=2 -L pgdata /dev/pgappliance/data",
            "grubby --update-kernel=ALL --args=transparent_hugepage=never",
            "grubby --update-kernel ALL --remove-args=quiet --no-etc-grub-update",
        ] {
            assert!(
                matches!(check(line), Ok(Verdict::Allowed { .. })),
                "{line}: {:?}",
                check(line)
            );
        }
        assert_eq!(check("dnf install -y lvm2"), Ok(Verdict::Unchecked));
        assert_eq!(
            check("/usr/pgsql-14/bin/postgresql-14-setup initdb"),
            Ok(Verdict::Unchecked)
        );
    }

    #[test]
    fn transient_properties_are_held_to_239() {
        assert!(check_transient_property("StandardOutputFile", "s", None).is_ok());
        let e =
            check_transient_property("StandardOutput", "s", Some("file:/x")).expect_err("file:");
        assert!(e.contains("file:/x"), "{e}");
        assert!(
            check_transient_property("StandardErrorFileToCreate", "s", None)
                .expect_err("assert")
                .contains("assert")
        );
        assert!(check_transient_property("ExecStartEx", "a(sasasb)", None).is_err());
        assert!(check_transient_property("TimeoutSec", "t", None).is_err());
        assert!(check_transient_property("Type", "s", Some("exec")).is_err());
        assert!(check_transient_property("LimitNOFILE", "u", None)
            .expect_err("type")
            .contains("wants t"));
    }

    #[test]
    fn proxy_source_is_read_member_by_member() {
        let src = r#"
#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
)]
pub(crate) trait Manager {
    fn start_unit(&self, name: &str) -> zbus::Result<()>;
    fn enqueue_unit_job(&self) -> zbus::Result<()>;
    #[zbus(signal)]
    fn job_removed(&self, id: u32);
}
#[zbus::proxy(
    interface = "com.redhat.tuned.control",
)]
pub(crate) trait Tuned {
    #[zbus(name = "switch_profile")]
    fn switch_profile(&self, profile: &str) -> zbus::Result<(bool, String)>;
}
"#;
        let members = proxy_members(src);
        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "StartUnit",
                "EnqueueUnitJob",
                "JobRemoved",
                "switch_profile"
            ]
        );
        assert_eq!(members[2].kind, MemberKind::Signal);
        assert!(check_dbus_member(&members[0]).is_ok());
        assert!(
            check_dbus_member(&members[1]).is_err(),
            "a 239-58 backport only"
        );
        assert!(check_dbus_member(&members[2]).is_ok());
        assert!(check_dbus_member(&members[3]).is_ok());
    }
}

/// Every command line and D-Bus member the daemon builds, held to the facts above.
#[cfg(test)]
mod daemon_against_el8 {
    use super::*;
    use crate::plan::{Devices, Filesystem, Layout, Platform, Storage};
    use crate::platform::Profile;
    use crate::systemd::transient::{unit_properties, Prop};
    use std::path::Path;

    fn fixture_devices(name: &str) -> Vec<crate::inventory::BlockDevice> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let path = ["storage", "inventory"]
            .iter()
            .map(|d| dir.join(d).join(name))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("fixture {name}"));
        crate::inventory::parse::parse_lsblk(&std::fs::read_to_string(path).expect("read"))
            .expect("parse")
    }

    #[test]
    fn the_inventory_lsblk_runs_on_2_32_1() {
        let spec = crate::inventory::lsblk_command();
        assert_eq!(check_command(&spec), Ok(Verdict::Allowed { tool: "lsblk" }));
    }

    #[test]
    fn every_storage_plan_runs_on_lvm2_2_03_14_and_xfsprogs_5_0() {
        let mut plans = 0;
        for (fixture, devices, wipe) in [
            ("lsblk-two-empty-nvme.json", Devices::Auto, false),
            (
                "lsblk-nvme-with-filesystem.json",
                Devices::List(vec!["/dev/nvme0n1".into(), "/dev/nvme1n1".into()]),
                true,
            ),
        ] {
            for layout in [Layout::Stripe, Layout::Linear, Layout::Single] {
                for filesystem in [Filesystem::Xfs, Filesystem::Ext4] {
                    let storage = Storage {
                        devices: devices.clone(),
                        layout,
                        wipe,
                        filesystem,
                        ..Storage::default()
                    };
                    let Ok(crate::storage::StoragePlan::Build { commands, .. }) =
                        crate::storage::plan_storage(&storage, &fixture_devices(fixture))
                    else {
                        continue;
                    };
                    plans += 1;
                    for argv in &commands {
                        check_argv(&argv[0], &argv[1..])
                            .unwrap_or_else(|e| panic!("{fixture} {layout:?}: {e}"));
                    }
                    check_wiped_before_pvcreate(&commands)
                        .unwrap_or_else(|e| panic!("{fixture} {layout:?}: {e}"));
                }
            }
        }
        assert!(plans >= 6, "{plans} storage plans checked");
        let vgremove = crate::storage::clear_interrupted_build_command();
        assert!(matches!(
            check_argv(&vgremove[0], &vgremove[1..]),
            Ok(Verdict::Allowed { .. })
        ));
    }

    #[test]
    fn rocky_platform_commands_are_known() {
        let p = Profile::of(Platform::Rocky8);
        let pg = crate::plan::Postgres {
            version: Some(14),
            repository: Some("https://m/EL-8-aarch64/pgdg.rpm".into()),
            repository_baseurl: None,
            repository_gpgkey: None,
            data_checksums: true,
        };
        let mut specs = p.install_commands(&p.packages(14), true, &pg);
        specs.push(p.query_installed("lvm2"));
        specs.push(p.initdb(14, "/data/pgdata/data", true));
        specs.extend(
            p.kernel_args_change(&["transparent_hugepage=never".into()], "")
                .commands,
        );
        specs.push(crate::platform::selinux_fcontext_list());
        specs.extend(crate::platform::selinux_fcontext_command(
            "/data/pgdata",
            None,
        ));
        specs.push(crate::platform::restorecon("/data/pgdata"));
        specs.push(crate::in_effect::lvs_command());
        for spec in &specs {
            check_command(spec).unwrap_or_else(|e| panic!("{}: {e}", spec.display()));
        }
    }

    #[test]
    fn transient_units_send_only_239_properties() {
        let spec = CommandSpec::new("pgbench")
            .args(["-c", "1000"])
            .user(Some("postgres"))
            .cwd(Path::new("/var/lib/pgappliance"))
            .env("PGHOST", "/run/postgresql")
            .limit_nofile(4096)
            .timeout(std::time::Duration::from_secs(90));
        for spec in [spec, CommandSpec::new("/bin/true")] {
            let environment = spec.environment(std::iter::empty(), None);
            let props = unit_properties(
                &spec,
                "/usr/bin/x",
                Path::new("/o"),
                Path::new("/e"),
                &environment,
            );
            assert!(props.len() >= 8);
            for (name, prop) in &props {
                let value = match prop {
                    Prop::Str(s) => Some(s.as_str()),
                    _ => None,
                };
                check_transient_property(name, &prop.dbus_signature(), value)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }

    #[test]
    fn the_proxies_call_only_239_and_tuned_2_18_members() {
        let members = proxy_members(include_str!("systemd/proxies.rs"));
        for must in [
            "StartTransientUnit",
            "JobRemoved",
            "ExecMainStatus",
            "switch_profile",
        ] {
            assert!(
                members.iter().any(|m| m.name == must),
                "{must} not found in {members:?}"
            );
        }
        for m in &members {
            check_dbus_member(m).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
