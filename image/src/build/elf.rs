//! Reading the daemon binary's ELF headers: is it an executable for the target?
//!
//! An executable is `ET_EXEC`, or `ET_DYN` that is a PIE: one with an interpreter
//! (`PT_INTERP`) or a static PIE (`DF_1_PIE` in `DT_FLAGS_1`). Any other `ET_DYN` is a shared
//! library; `ET_REL` (an object file) and `ET_CORE` cannot run at all.

use std::path::Path;

use anyhow::{bail, Context, Result};
use pgappliance::plan::Arch;

const ET_REL: u16 = 1;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const ET_CORE: u16 = 4;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_FLAGS_1: u64 = 0x6fff_fffb;
const DF_1_PIE: u64 = 0x0800_0000;

/// What the daemon binary's headers say it is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ElfInfo {
    pub(crate) machine: Arch,
    /// Whether it can be started as a program (see the module comment).
    pub(crate) executable: Result<(), String>,
}

/// Little- or big-endian fields of a 64-bit ELF file.
struct Reader<'a> {
    bytes: &'a [u8],
    little: bool,
}

impl Reader<'_> {
    fn field<const N: usize>(&self, at: u64) -> Option<[u8; N]> {
        let at = usize::try_from(at).ok()?;
        self.bytes.get(at..at.checked_add(N)?)?.try_into().ok()
    }
    fn u16(&self, at: u64) -> Option<u16> {
        let b = self.field::<2>(at)?;
        Some(if self.little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        })
    }
    fn u32(&self, at: u64) -> Option<u32> {
        let b = self.field::<4>(at)?;
        Some(if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }
    fn u64(&self, at: u64) -> Option<u64> {
        let b = self.field::<8>(at)?;
        Some(if self.little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    }
}

/// The machine an ELF file was built for and whether it is an executable, from its headers.
pub(crate) fn elf_info(bytes: &[u8]) -> Result<ElfInfo, String> {
    if bytes.len() < 20 || &bytes[..4] != b"\x7fELF" {
        return Err("not an ELF executable".into());
    }
    if bytes[4] != 2 {
        return Err("a 32-bit ELF file; the appliance runs 64-bit binaries".into());
    }
    let r = Reader {
        bytes,
        little: match bytes[5] {
            1 => true,
            2 => false,
            _ => return Err("an ELF file with an unknown byte order".into()),
        },
    };
    let machine = match r.u16(18) {
        Some(0x3e) => Arch::X86_64,
        Some(0xb7) => Arch::Aarch64,
        Some(other) => {
            return Err(format!(
                "an ELF file for machine 0x{other:x}, neither x86_64 nor aarch64"
            ))
        }
        None => return Err("a truncated ELF file".into()),
    };
    let executable = match r.u16(16) {
        Some(ET_EXEC) => Ok(()),
        Some(ET_DYN) => match segments(&r) {
            Err(e) => Err(e),
            Ok(s) if s.interp || s.static_pie => Ok(()),
            Ok(_) => Err(
                "a shared library (ELF type ET_DYN without an interpreter), not a program".into(),
            ),
        },
        Some(ET_REL) => Err("an object file (ELF type ET_REL), not a linked program".into()),
        Some(ET_CORE) => Err("a core dump (ELF type ET_CORE), not a program".into()),
        Some(other) => Err(format!("an ELF file of type {other}, not an executable")),
        None => Err("a truncated ELF file".into()),
    };
    Ok(ElfInfo {
        machine,
        executable,
    })
}

struct Segments {
    interp: bool,
    static_pie: bool,
}

/// Looks through the program headers for `PT_INTERP` and, in `PT_DYNAMIC`, `DF_1_PIE`.
fn segments(r: &Reader) -> Result<Segments, String> {
    let truncated = || "a truncated ELF file (its program headers lie outside it)".to_string();
    let phoff = r.u64(32).ok_or_else(truncated)?;
    let phentsize = u64::from(r.u16(54).ok_or_else(truncated)?);
    let phnum = u64::from(r.u16(56).ok_or_else(truncated)?);
    if phentsize < 56 {
        return Err(format!(
            "an ELF file with {phentsize}-byte program headers (64-bit ones are 56)"
        ));
    }
    let mut found = Segments {
        interp: false,
        static_pie: false,
    };
    for i in 0..phnum {
        let ph = phoff.checked_add(i * phentsize).ok_or_else(truncated)?;
        match r.u32(ph).ok_or_else(truncated)? {
            PT_INTERP => found.interp = true,
            PT_DYNAMIC => {
                let offset = r.u64(ph + 8).ok_or_else(truncated)?;
                let size = r.u64(ph + 32).ok_or_else(truncated)?;
                for entry in 0..size / 16 {
                    let at = offset.checked_add(entry * 16).ok_or_else(truncated)?;
                    let tag = r.u64(at).ok_or_else(truncated)?;
                    if tag == DT_NULL {
                        break;
                    }
                    if tag == DT_FLAGS_1 && r.u64(at + 8).ok_or_else(truncated)? & DF_1_PIE != 0 {
                        found.static_pie = true;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(found)
}

pub(crate) fn arch_name(a: Arch) -> &'static str {
    match a {
        Arch::Aarch64 => "aarch64",
        Arch::X86_64 => "x86_64",
    }
}

/// Refuses a daemon binary that is unreadable, not an ELF executable (a shared library, an
/// object file, a core dump), built for another machine, or another program than
/// pgapplianced of this version (`pgappliance::identity`). Returns its bytes.
pub(crate) fn read_daemon_binary(path: &Path, want: Arch) -> Result<Vec<u8>> {
    // A device, FIFO or directory is no program, and `/dev/zero` would be read forever.
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read the daemon binary {}", path.display()))?;
    if !meta.is_file() {
        bail!(
            "the daemon binary {} is not a regular file: give the pgapplianced binary built for {}",
            path.display(),
            arch_name(want)
        );
    }
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read the daemon binary {}", path.display()))?;
    let give = || format!("give the pgapplianced binary built for {}", arch_name(want));
    match elf_info(&bytes) {
        Ok(ElfInfo {
            executable: Err(what),
            ..
        }) => bail!("{} is {what}: {}", path.display(), give()),
        Ok(info) if info.machine == want => {
            let versions = pgappliance::identity::marker_versions(&bytes);
            let ours = pgappliance::identity::VERSION;
            if versions.iter().any(|v| v == ours) {
                Ok(bytes)
            } else if let Some(v) = versions.first() {
                bail!(
                    "{} is pgapplianced {v}, but this pgappliance is {ours}: build both from one checkout",
                    path.display()
                )
            } else {
                bail!(
                    "{} is an {} program but not pgapplianced (it lacks the mark every pgapplianced build carries): {}",
                    path.display(),
                    arch_name(want),
                    give()
                )
            }
        }
        Ok(info) => bail!(
            "{} is built for {}, but the plan's target is {}: cross-build it (tools/cross-build-aarch64) or fix appliance.arch",
            path.display(),
            arch_name(info.machine),
            arch_name(want)
        ),
        Err(what) => bail!("{} is {what}: {}", path.display(), give()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-composed 64-bit ELF header with `phdrs` (type, offset, size) after it and
    /// `dynamic` (tag, value) entries at offset 512.
    fn composed(
        data: u8,
        e_type: u16,
        machine: u16,
        phdrs: &[(u32, u64, u64)],
        dynamic: &[(u64, u64)],
    ) -> Vec<u8> {
        let mut h = vec![0u8; 1024];
        let little = data == 1;
        let put = |h: &mut Vec<u8>, at: usize, v: u64, n: usize| {
            let b = if little {
                v.to_le_bytes()[..n].to_vec()
            } else {
                v.to_be_bytes()[8 - n..].to_vec()
            };
            h[at..at + n].copy_from_slice(&b);
        };
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = data;
        put(&mut h, 16, e_type.into(), 2);
        put(&mut h, 18, machine.into(), 2);
        put(&mut h, 32, 64, 8);
        put(&mut h, 54, 56, 2);
        put(&mut h, 56, phdrs.len() as u64, 2);
        for (i, (p_type, offset, size)) in phdrs.iter().enumerate() {
            let at = 64 + i * 56;
            put(&mut h, at, (*p_type).into(), 4);
            put(&mut h, at + 8, *offset, 8);
            put(&mut h, at + 32, *size, 8);
        }
        for (i, (tag, value)) in dynamic.iter().enumerate() {
            put(&mut h, 512 + i * 16, *tag, 8);
            put(&mut h, 512 + i * 16 + 8, *value, 8);
        }
        h
    }

    fn kind(bytes: &[u8]) -> Result<(), String> {
        elf_info(bytes).and_then(|i| i.executable)
    }

    #[test]
    fn machines_in_both_byte_orders() {
        let exec = |data, machine| composed(data, ET_EXEC, machine, &[], &[]);
        assert_eq!(
            elf_info(&exec(1, 0xb7)).map(|i| i.machine),
            Ok(Arch::Aarch64)
        );
        assert_eq!(
            elf_info(&exec(2, 0xb7)).map(|i| i.machine),
            Ok(Arch::Aarch64)
        );
        assert_eq!(
            elf_info(&exec(1, 0x3e)).map(|i| i.machine),
            Ok(Arch::X86_64)
        );
        let mut thirty_two = exec(1, 0x3e);
        thirty_two[4] = 1;
        assert!(elf_info(&thirty_two).is_err());
        assert!(matches!(elf_info(&exec(1, 0x28)), Err(e) if e.contains("0x28")));
        assert!(elf_info(b"#!/bin/sh\n").is_err());
        assert!(elf_info(&exec(1, 0xb7)[..19]).is_err());
    }

    #[test]
    fn executables_and_what_is_not_one() {
        for data in [1, 2] {
            assert_eq!(kind(&composed(data, ET_EXEC, 0xb7, &[], &[])), Ok(()));
            // A PIE: ET_DYN with an interpreter.
            let pie = composed(
                data,
                ET_DYN,
                0xb7,
                &[(6, 64, 112), (PT_INTERP, 800, 27)],
                &[],
            );
            assert_eq!(kind(&pie), Ok(()));
            // A static PIE: no interpreter, DF_1_PIE in DT_FLAGS_1.
            let dynamic = [(1, 5), (DT_FLAGS_1, DF_1_PIE | 1), (DT_NULL, 0)];
            let static_pie = composed(data, ET_DYN, 0xb7, &[(PT_DYNAMIC, 512, 48)], &dynamic);
            assert_eq!(kind(&static_pie), Ok(()));
            // A shared library: ET_DYN, no interpreter, DT_FLAGS_1 without DF_1_PIE.
            let dynamic = [(DT_FLAGS_1, 1), (DT_NULL, 0), (DT_FLAGS_1, DF_1_PIE)];
            let so = composed(data, ET_DYN, 0xb7, &[(PT_DYNAMIC, 512, 48)], &dynamic);
            assert!(matches!(kind(&so), Err(e) if e.contains("shared library")));
            assert!(
                matches!(kind(&composed(data, ET_REL, 0xb7, &[], &[])), Err(e) if e.contains("ET_REL"))
            );
            assert!(
                matches!(kind(&composed(data, ET_CORE, 0xb7, &[], &[])), Err(e) if e.contains("ET_CORE"))
            );
            assert!(
                matches!(kind(&composed(data, 0, 0xb7, &[], &[])), Err(e) if e.contains("type 0"))
            );
        }
        // Program headers or a dynamic section pointing past the end are refused, not read.
        let beyond = composed(1, ET_DYN, 0xb7, &[(PT_DYNAMIC, 1 << 40, 48)], &[]);
        assert!(matches!(kind(&beyond), Err(e) if e.contains("truncated")));
        let mut no_phdrs = composed(1, ET_DYN, 0xb7, &[(PT_INTERP, 800, 27)], &[]);
        no_phdrs[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(kind(&no_phdrs), Err(e) if e.contains("truncated")));
    }

    #[test]
    fn this_test_binary_is_native() {
        let exe = std::env::current_exe().expect("exe");
        let native = if cfg!(target_arch = "aarch64") {
            Arch::Aarch64
        } else {
            Arch::X86_64
        };
        // A native program, but not pgapplianced: refused as such, and taken once marked.
        let err = read_daemon_binary(&exe, native)
            .expect_err("not the daemon")
            .to_string();
        assert!(
            err.contains(&format!(
                "is an {} program but not pgapplianced",
                arch_name(native)
            )),
            "{err}"
        );
        let dir = tempfile::tempdir().expect("tmp");
        let marked = dir.path().join("marked");
        let mut bytes = std::fs::read(&exe).expect("read");
        bytes.extend_from_slice(pgappliance::identity::marker().as_bytes());
        std::fs::write(&marked, bytes).expect("write");
        read_daemon_binary(&marked, native).expect("native and marked");
        let other = if native == Arch::X86_64 {
            Arch::Aarch64
        } else {
            Arch::X86_64
        };
        let err = read_daemon_binary(&exe, other)
            .expect_err("wrong arch")
            .to_string();
        assert!(
            err.contains(arch_name(native)) && err.contains(arch_name(other)),
            "{err}"
        );
    }

    #[test]
    fn a_daemon_binary_that_is_not_a_regular_file_is_refused_unread() {
        // /dev/zero would be read until memory runs out; a directory or FIFO is no program.
        let dir = tempfile::tempdir().expect("dir");
        for path in [dir.path(), Path::new("/dev/null"), Path::new("/dev/zero")] {
            let err = read_daemon_binary(path, Arch::X86_64)
                .expect_err("not a regular file")
                .to_string();
            assert!(
                err.contains("is not a regular file"),
                "{}: {err}",
                path.display()
            );
        }
    }
}
