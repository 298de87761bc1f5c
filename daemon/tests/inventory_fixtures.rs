//! Inventory parsers against captured (Debian 12 here, util-linux 2.32.1 in the el8-tools
//! guest) and composed (Rocky 8 Altra) outputs.

use pgappliance::inventory::parse::{
    arm_part_name, parse_cpuinfo, parse_lsblk, parse_lscpu, parse_meminfo_total, parse_os_release,
};

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/inventory")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn lscpu_altra_flat_rhel8() {
    let c = parse_lscpu(&fixture("lscpu-rocky8-altra-q80.json")).expect("parses");
    assert_eq!(c.architecture, "aarch64");
    assert_eq!(c.cpus, 80);
    assert_eq!(c.cores(), 80);
    assert_eq!(c.model_name.as_deref(), Some("Neoverse-N1"));
    assert_eq!(c.numa_nodes, Some(1));
}

#[test]
fn lscpu_nested_children() {
    let c = parse_lscpu(&fixture("lscpu-nested-children.json")).expect("parses");
    assert_eq!(c.cpus, 32);
    assert_eq!(c.cores_per_socket, Some(32));
    assert_eq!(c.model_name.as_deref(), Some("Neoverse-N1"));
    assert_eq!(c.numa_nodes, Some(1));
}

#[test]
fn lscpu_captured_debian12() {
    let c = parse_lscpu(&fixture("lscpu-debian12-x86_64.json")).expect("parses");
    assert_eq!(c.architecture, "x86_64");
    assert!(c.cpus >= 1);
}

/// util-linux 2.32.1 on an Altra whose part its table does not name: no `Model name`, the
/// SMBIOS `BIOS Model name`; /proc/cpuinfo's codes name the part.
#[test]
fn altra_without_model_name_is_named_from_cpuinfo() {
    let lscpu =
        parse_lscpu(&fixture("lscpu-rocky8-altra-q80-no-model-composed.json")).expect("parses");
    assert_eq!(lscpu.model_name, None);
    assert_eq!(lscpu.cpus, 80);
    assert_eq!(lscpu.cores(), 80);
    let c = lscpu.with_cpuinfo(&fixture("cpuinfo-altra-q80-composed.txt"));
    assert_eq!(c.model_name.as_deref(), Some("Neoverse-N1"));
    assert_eq!(c.arm_part.as_deref(), Some("0x41:0xd0c"));
    assert_eq!(c.vendor.as_deref(), Some("ARM"));
}

/// Without a readable part (an emulator's, or no cpuinfo), SMBIOS's name is the model.
#[test]
fn altra_without_model_name_or_part_takes_the_bios_model_name() {
    let c = parse_lscpu(&fixture("lscpu-rocky8-altra-q80-no-model-composed.json"))
        .expect("parses")
        .with_cpuinfo("processor\t: 0\nCPU implementer\t: 0x00\nCPU part\t: 0x051\n");
    assert_eq!(
        c.model_name.as_deref(),
        Some("Ampere(R) Altra(R) Processor Q80-30 CPU @ 3.0GHz")
    );
    assert_eq!(c.arm_part.as_deref(), Some("0x00:0x051"));
}

/// Graviton3 under Rocky 8's lscpu, which predates Neoverse-V1.
#[test]
fn graviton3_is_named_from_cpuinfo() {
    let c = parse_lscpu(&fixture("lscpu-rocky8-graviton3-composed.json"))
        .expect("parses")
        .with_cpuinfo(&fixture("cpuinfo-graviton3-composed.txt"));
    assert_eq!(c.model_name.as_deref(), Some("Neoverse-V1"));
    assert_eq!(c.arm_part.as_deref(), Some("0x41:0xd40"));
    assert_eq!(c.cores(), 4);
}

/// Graviton2 under a newer lscpu (nested): its own `Model name` stands.
#[test]
fn graviton2_nested_keeps_lscpus_model_name() {
    let c = parse_lscpu(&fixture("lscpu-graviton2-nested-composed.json"))
        .expect("parses")
        .with_cpuinfo(&fixture("cpuinfo-graviton2-composed.txt"));
    assert_eq!(c.model_name.as_deref(), Some("Neoverse-N1"));
    assert_eq!(
        c.fields.get("BIOS Model name").map(String::as_str),
        Some("AWS Graviton2 Processor")
    );
    assert_eq!(c.cores(), 4);
    assert_eq!(c.arm_part.as_deref(), Some("0x41:0xd0c"));
}

/// x86: lscpu's model name stands and no Arm part is recorded.
#[test]
fn x86_cpuinfo_has_no_arm_part() {
    let ids = parse_cpuinfo(&fixture("cpuinfo-debian12-x86_64.txt"));
    assert!(ids.model_name.is_some());
    assert_eq!(ids.arm, None);
    let lscpu = parse_lscpu(&fixture("lscpu-debian12-x86_64.json")).expect("parses");
    let model = lscpu.model_name.clone();
    let c = lscpu.with_cpuinfo(&fixture("cpuinfo-debian12-x86_64.txt"));
    assert_eq!(c.model_name, model);
    assert_eq!(c.arm_part, None);
}

#[test]
fn cpuinfo_reads_the_first_processor_only() {
    let ids = parse_cpuinfo(&fixture("cpuinfo-altra-q80-composed.txt"));
    assert_eq!(ids.arm, Some((0x41, 0xd0c)));
    assert_eq!(ids.model_name, None);
    assert_eq!(parse_cpuinfo(""), Default::default());
    assert_eq!(arm_part_name(0x41, 0xd0c), Some("Neoverse-N1"));
    assert_eq!(arm_part_name(0x41, 0xfff), None);
}

#[test]
fn lscpu_unknown_model_name_is_none() {
    let json =
        r#"{"lscpu": [{"field": "CPU(s):", "data": "2"}, {"field": "Model name:", "data": "-"}]}"#;
    assert_eq!(parse_lscpu(json).expect("parses").model_name, None);
}

#[test]
fn lscpu_garbage_is_an_error() {
    assert!(parse_lscpu("{}").is_err());
    assert!(parse_lscpu("lscpu: command failed").is_err());
}

#[test]
fn lsblk_rhel8_strings_and_singular_mountpoint() {
    let devs = parse_lsblk(&fixture("lsblk-rocky8-altra-composed.json")).expect("parses");
    assert_eq!(devs.len(), 2);
    assert_eq!(devs[0].size_bytes, 500_107_862_016);
    assert!(!devs[0].rotational);
    assert_eq!(devs[0].children.len(), 3);
    assert_eq!(
        devs[0].children[0].mountpoints,
        vec!["/boot/efi".to_string()]
    );
    // `-p`: NAME is the path; the short name is derived from it.
    assert_eq!(devs[0].path, "/dev/nvme0n1");
    assert_eq!(devs[0].name, "nvme0n1");
    assert_eq!(devs[0].children[2].children[2].name, "rl-home");
    assert_eq!(devs[0].children[2].children[2].path, "/dev/mapper/rl-home");
    assert!(!devs[1].is_empty_nvme(), "holds an LVM partition");
}

#[test]
fn lsblk_captured_debian12_numbers_and_mountpoints_array() {
    let devs = parse_lsblk(&fixture("lsblk-debian12-vm.json")).expect("parses");
    let vda = devs.iter().find(|d| d.name == "vda").expect("vda");
    assert!(vda.size_bytes > 0);
    assert_eq!(vda.mountpoints, vec!["/".to_string()]);
}

#[test]
fn meminfo_and_os_release() {
    assert!(parse_meminfo_total(&fixture("meminfo-debian12.txt")).expect("mem") > 1 << 30);
    assert!(parse_meminfo_total("MemFree: 1 kB\n").is_err());
    let os = parse_os_release(&fixture("os-release-rocky86.txt"));
    assert_eq!(os.get("ID").map(String::as_str), Some("rocky"));
    assert_eq!(os.get("VERSION_ID").map(String::as_str), Some("8.6"));
}

#[test]
fn lsblk_2_32_1_captured_in_the_guest() {
    let devs = parse_lsblk(&fixture("lsblk-2.32.1-guest-two-empty-nvme.json")).expect("parses");
    let nvme = devs.iter().find(|d| d.name == "nvme0n1").expect("nvme0n1");
    assert_eq!(nvme.path, "/dev/nvme0n1");
    assert_eq!(nvme.size_bytes, 2 << 30);
    assert!(!nvme.rotational);
    assert_eq!(nvme.serial.as_deref(), Some("NVME0"));
    assert!(nvme.is_empty_nvme());
    let vda = devs.iter().find(|d| d.name == "vda").expect("vda");
    assert!(vda.rotational);
    assert_eq!(vda.mountpoints, vec!["/".to_string()]);
    let built = parse_lsblk(&fixture("lsblk-2.32.1-guest-stripe-built.json")).expect("parses");
    let lv = &built
        .iter()
        .find(|d| d.name == "nvme1n1")
        .expect("nvme1n1")
        .children[0];
    assert_eq!(lv.name, "pgappliance-data");
    assert_eq!(lv.path, "/dev/mapper/pgappliance-data");
    assert_eq!(lv.fstype.as_deref(), Some("xfs"));
}

#[test]
fn impossible_inventory_figures_are_refused() {
    let zero_cpus = r#"{"lscpu": [{"field": "Architecture:", "data": "aarch64"}, {"field": "CPU(s):", "data": "0"}]}"#;
    assert!(parse_lscpu(zero_cpus).is_err());
    assert!(parse_meminfo_total("MemTotal: 0 kB\n").is_err());
    let huge = format!("MemTotal: {} kB\n", u64::MAX / 2);
    assert!(parse_meminfo_total(&huge).is_err(), "bytes past u64");
}
