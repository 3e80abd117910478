//! Resource usage read from a CUBIN itself (an ELF file): registers, stack frame and static
//! shared memory of one kernel. Unlike ptxas's `-v` report, which some NVRTC builds leave out
//! of the program log, the CUBIN always carries these, so the resource gate never depends on
//! log text.
//!
//! Where they live: the `.nv.info` section is a list of attributes `(format: u8, attr: u8,
//! payload)`; per-function values such as the register count use the "sized value" format
//! with a `(symbol index: u32, value: u32)` payload. Static shared memory is the size of the
//! `.nv.shared.<kernel>` section.

use crate::arch::Arch;
use crate::runtime::resources::{parse_ptxas_log, ResourceReport};

/// Hopper CUBINs count the 1 KiB of shared memory the system reserves per block in the
/// kernel's shared section (seen with NVRTC 13.0: ptxas reports 128 bytes, the section holds
/// 1152); the gate judges what the kernel itself asks for, as ptxas reports it.
const SM90_RESERVED_SMEM: u32 = 1024;

/// Attribute formats of `.nv.info` entries.
const EIFMT_NVAL: u8 = 0x01;
const EIFMT_BVAL: u8 = 0x02;
const EIFMT_HVAL: u8 = 0x03;
const EIFMT_SVAL: u8 = 0x04;
/// Attributes this module reads.
const EIATTR_FRAME_SIZE: u8 = 0x11;
const EIATTR_REGCOUNT: u8 = 0x2f;

const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
const ELFCLASS64: u8 = 2;
const SHT_SYMTAB: u32 = 2;
const SYMBOL_SIZE: usize = 24;

/// What the CUBIN records for one kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CubinResources {
    pub registers: u32,
    pub stack_frame_bytes: u32,
    pub static_smem_bytes: u32,
}

struct Section<'a> {
    name: &'a str,
    kind: u32,
    offset: usize,
    size: usize,
    link: usize,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?)).ok()
}

fn c_str(b: &[u8], at: usize) -> Option<&str> {
    let tail = b.get(at..)?;
    let end = tail.iter().position(|&c| c == 0)?;
    std::str::from_utf8(&tail[..end]).ok()
}

fn sections(elf: &[u8]) -> Option<Vec<Section<'_>>> {
    if elf.get(..4)? != ELF_MAGIC || *elf.get(4)? != ELFCLASS64 {
        return None;
    }
    let shoff = u64_at(elf, 0x28)?;
    let shentsize = usize::from(u16_at(elf, 0x3a)?);
    let shnum = usize::from(u16_at(elf, 0x3c)?);
    let shstrndx = usize::from(u16_at(elf, 0x3e)?);
    let header = |i: usize| shoff + i * shentsize;
    let names_at = u64_at(elf, header(shstrndx) + 0x18)?;
    (0..shnum)
        .map(|i| {
            let h = header(i);
            Some(Section {
                name: c_str(elf, names_at + u32_at(elf, h)? as usize)?,
                kind: u32_at(elf, h + 4)?,
                offset: u64_at(elf, h + 0x18)?,
                size: u64_at(elf, h + 0x20)?,
                link: u32_at(elf, h + 0x28)? as usize,
            })
        })
        .collect()
}

/// Index of `kernel` in the symbol table.
fn symbol_index(elf: &[u8], sections: &[Section<'_>], kernel: &str) -> Option<u32> {
    let symtab = sections.iter().find(|s| s.kind == SHT_SYMTAB)?;
    let strtab = sections.get(symtab.link)?;
    (0..symtab.size / SYMBOL_SIZE).find_map(|i| {
        let name_off = u32_at(elf, symtab.offset + i * SYMBOL_SIZE)? as usize;
        (c_str(elf, strtab.offset + name_off)? == kernel).then_some(i as u32)
    })
}

/// Reads `kernel`'s resources from `cubin`; `None` if the bytes are not a CUBIN holding it.
pub fn resources(cubin: &[u8], kernel: &str) -> Option<CubinResources> {
    let sections = sections(cubin)?;
    let symbol = symbol_index(cubin, &sections, kernel)?;
    let mut out = CubinResources::default();
    let mut found_registers = false;
    for info in sections.iter().filter(|s| s.name == ".nv.info") {
        let body = cubin.get(info.offset..info.offset + info.size)?;
        let mut at = 0;
        while at + 2 <= body.len() {
            let (format, attr) = (body[at], body[at + 1]);
            at += 2;
            let payload_len = match format {
                EIFMT_NVAL => 0,
                EIFMT_BVAL => 1,
                EIFMT_HVAL => 2,
                EIFMT_SVAL => {
                    let n = usize::from(u16_at(body, at)?);
                    at += 2;
                    n
                }
                _ => return None,
            };
            let payload = body.get(at..at + payload_len)?;
            at += payload_len;
            if format == EIFMT_SVAL && payload.len() == 8 && u32_at(payload, 0) == Some(symbol) {
                let value = u32_at(payload, 4)?;
                match attr {
                    EIATTR_REGCOUNT => {
                        out.registers = value;
                        found_registers = true;
                    }
                    EIATTR_FRAME_SIZE => out.stack_frame_bytes = value,
                    _ => {}
                }
            }
        }
    }
    let shared_name = format!(".nv.shared.{kernel}");
    out.static_smem_bytes = sections.iter().find(|s| s.name == shared_name).map_or(0, |s| s.size as u32);
    found_registers.then_some(out)
}

/// The resource report of `kernel`: registers, stack frame and static shared memory from the
/// CUBIN; spill and constant bytes from ptxas's report in `log` when NVRTC put one there
/// (spills always live in the stack frame, so the gate sees them either way).
pub fn report(cubin: &[u8], log: &str, kernel: &str, arch: Arch) -> Option<ResourceReport> {
    let r = resources(cubin, kernel)?;
    let static_smem_bytes = match arch {
        Arch::Sm90 | Arch::Sm90a => r.static_smem_bytes.saturating_sub(SM90_RESERVED_SMEM),
        _ => r.static_smem_bytes,
    };
    let from_log = parse_ptxas_log(log, kernel).unwrap_or_default();
    Some(ResourceReport {
        registers: r.registers,
        stack_frame_bytes: r.stack_frame_bytes,
        static_smem_bytes,
        spill_store_bytes: from_log.spill_store_bytes,
        spill_load_bytes: from_log.spill_load_bytes,
        constant_bytes: from_log.constant_bytes,
        dynamic_smem_bytes: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 with `.nv.info`, `.nv.shared.k`, `.symtab` and `.strtab`, built by hand.
    fn tiny_cubin(regs: u32, frame: u32, smem: u64) -> Vec<u8> {
        let shstr = b"\0.nv.info\0.nv.shared.k\0.symtab\0.strtab\0.shstrtab\0";
        let name = |s: &str| shstr.windows(s.len()).position(|w| w == s.as_bytes()).unwrap() as u32;
        let strtab = b"\0other\0k\0";
        let mut symtab = vec![0u8; 3 * SYMBOL_SIZE];
        symtab[SYMBOL_SIZE..SYMBOL_SIZE + 4].copy_from_slice(&1u32.to_le_bytes()); // "other"
        symtab[2 * SYMBOL_SIZE..2 * SYMBOL_SIZE + 4].copy_from_slice(&7u32.to_le_bytes()); // "k"
        let mut info = Vec::new();
        // an unrelated flag, then regcount/frame for symbol 1 ("other") and symbol 2 ("k")
        info.extend_from_slice(&[EIFMT_NVAL, 0x04]);
        for (sym, r, f) in [(1u32, 99u32, 64u32), (2, regs, frame)] {
            for (attr, v) in [(EIATTR_REGCOUNT, r), (EIATTR_FRAME_SIZE, f)] {
                info.extend_from_slice(&[EIFMT_SVAL, attr, 8, 0]);
                info.extend_from_slice(&sym.to_le_bytes());
                info.extend_from_slice(&v.to_le_bytes());
            }
        }
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(ELF_MAGIC);
        elf[4] = ELFCLASS64;
        let place = |data: &[u8], elf: &mut Vec<u8>| {
            let at = elf.len();
            elf.extend_from_slice(data);
            at as u64
        };
        let info_at = place(&info, &mut elf);
        let sym_at = place(&symtab, &mut elf);
        let str_at = place(strtab, &mut elf);
        let shstr_at = place(shstr, &mut elf);
        let shoff = elf.len() as u64;
        // (name, type, offset, size, link)
        let headers = [
            (0, 0, 0, 0, 0),
            (name(".nv.info"), 0x7000_0000, info_at, info.len() as u64, 0),
            (name(".nv.shared.k"), 8, 0, smem, 0),
            (name(".symtab"), SHT_SYMTAB, sym_at, symtab.len() as u64, 4),
            (name(".strtab"), 3, str_at, strtab.len() as u64, 0),
            (name(".shstrtab"), 3, shstr_at, shstr.len() as u64, 0),
        ];
        for (n, kind, off, size, link) in headers {
            let mut h = vec![0u8; 64];
            h[0..4].copy_from_slice(&n.to_le_bytes());
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&off.to_le_bytes());
            h[0x20..0x28].copy_from_slice(&size.to_le_bytes());
            h[0x28..0x2c].copy_from_slice(&(link as u32).to_le_bytes());
            elf.extend_from_slice(&h);
        }
        elf[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        elf[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3c..0x3e].copy_from_slice(&(headers.len() as u16).to_le_bytes());
        elf[0x3e..0x40].copy_from_slice(&5u16.to_le_bytes());
        elf
    }

    #[test]
    fn reads_the_named_kernels_values_only() {
        let elf = tiny_cubin(182, 0, 1024);
        let r = resources(&elf, "k").unwrap();
        assert_eq!(r, CubinResources { registers: 182, stack_frame_bytes: 0, static_smem_bytes: 1024 });
        let other = resources(&elf, "other").unwrap();
        assert_eq!((other.registers, other.stack_frame_bytes, other.static_smem_bytes), (99, 64, 0));
    }

    #[test]
    fn rejects_non_elf_missing_kernels_and_truncation() {
        let elf = tiny_cubin(40, 8, 0);
        assert_eq!(resources(&elf, "k").unwrap().stack_frame_bytes, 8);
        assert!(resources(&elf, "absent").is_none());
        assert!(resources(b"not an elf at all", "k").is_none());
        assert!(resources(&elf[..100], "k").is_none());
    }
}
