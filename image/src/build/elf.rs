//! Reading the ELF header of the daemon binary: is it an executable for the target?

use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};
use pgappliance::plan::Arch;

/// The machine an ELF file was built for, from its header.
pub fn elf_machine(bytes: &[u8]) -> Result<Arch, String> {
    if bytes.len() < 20 || &bytes[..4] != b"\x7fELF" {
        return Err("not an ELF executable".into());
    }
    if bytes[4] != 2 {
        return Err("a 32-bit ELF file; the appliance runs 64-bit binaries".into());
    }
    let machine = match bytes[5] {
        1 => u16::from_le_bytes([bytes[18], bytes[19]]),
        2 => u16::from_be_bytes([bytes[18], bytes[19]]),
        _ => return Err("an ELF file with an unknown byte order".into()),
    };
    match machine {
        0x3e => Ok(Arch::X86_64),
        0xb7 => Ok(Arch::Aarch64),
        other => Err(format!(
            "an ELF file for machine 0x{other:x}, neither x86_64 nor aarch64"
        )),
    }
}

pub fn arch_name(a: Arch) -> &'static str {
    match a {
        Arch::Aarch64 => "aarch64",
        Arch::X86_64 => "x86_64",
    }
}

/// Refuses a daemon binary that is unreadable, not ELF, or built for another machine.
pub fn check_daemon_binary(path: &Path, want: Arch) -> Result<()> {
    let mut head = [0u8; 64];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .with_context(|| format!("cannot read the daemon binary {}", path.display()))?;
    match elf_machine(&head[..n]) {
        Ok(got) if got == want => Ok(()),
        Ok(got) => bail!(
            "{} is built for {}, but the plan's target is {}: cross-build it (tools/cross-build-aarch64) or fix appliance.arch",
            path.display(),
            arch_name(got),
            arch_name(want)
        ),
        Err(what) => bail!("{} is {what}: give the pgapplianced binary built for {}", path.display(), arch_name(want)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(class: u8, data: u8, machine: u16) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = class;
        h[5] = data;
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h
    }

    #[test]
    fn machines() {
        assert_eq!(elf_machine(&header(2, 1, 0xb7)), Ok(Arch::Aarch64));
        assert_eq!(elf_machine(&header(2, 1, 0x3e)), Ok(Arch::X86_64));
        assert!(elf_machine(&header(1, 1, 0x3e)).is_err());
        assert!(matches!(elf_machine(&header(2, 1, 0x28)), Err(e) if e.contains("0x28")));
        assert!(elf_machine(b"#!/bin/sh\n").is_err());
    }

    #[test]
    fn this_test_binary_is_native() {
        let exe = std::env::current_exe().expect("exe");
        let native = if cfg!(target_arch = "aarch64") {
            Arch::Aarch64
        } else {
            Arch::X86_64
        };
        check_daemon_binary(&exe, native).expect("native");
        let other = if native == Arch::X86_64 {
            Arch::Aarch64
        } else {
            Arch::X86_64
        };
        let err = check_daemon_binary(&exe, other)
            .expect_err("wrong arch")
            .to_string();
        assert!(
            err.contains(arch_name(native)) && err.contains(arch_name(other)),
            "{err}"
        );
    }
}
