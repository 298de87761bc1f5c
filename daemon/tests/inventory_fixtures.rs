//! Inventory parsers against captured (Debian 12 here) and composed (Rocky 8 Altra) outputs.

use pgappliance::inventory::parse::{
    parse_lsblk, parse_lscpu, parse_meminfo_total, parse_os_release,
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

#[test]
fn lscpu_garbage_is_an_error() {
    assert!(parse_lscpu("{}").is_err());
    assert!(parse_lscpu("lscpu: command failed").is_err());
}

#[test]
fn lsblk_rhel8_strings_and_singular_mountpoint() {
    let devs = parse_lsblk(&fixture("lsblk-rocky8-altra.json")).expect("parses");
    assert_eq!(devs.len(), 2);
    assert_eq!(devs[0].size_bytes, 500_107_862_016);
    assert!(!devs[0].rotational);
    assert_eq!(devs[0].children.len(), 3);
    assert_eq!(
        devs[0].children[0].mountpoints,
        vec!["/boot/efi".to_string()]
    );
    assert_eq!(devs[0].children[2].children[2].name, "rl-home");
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
fn impossible_inventory_figures_are_refused() {
    let zero_cpus = r#"{"lscpu": [{"field": "Architecture:", "data": "aarch64"}, {"field": "CPU(s):", "data": "0"}]}"#;
    assert!(parse_lscpu(zero_cpus).is_err());
    assert!(parse_meminfo_total("MemTotal: 0 kB\n").is_err());
    let huge = format!("MemTotal: {} kB\n", u64::MAX / 2);
    assert!(parse_meminfo_total(&huge).is_err(), "bytes past u64");
}
