//! The compiler's resource report (from `--ptxas-options=-v`) and the gate on it.
//!
//! NVRTC 13 writes, per entry function (the `cmem` items are absent on some archs):
//! ```text
//! ptxas info    : Compiling entry function 'k' for 'sm_80'
//! ptxas info    : Function properties for k
//! ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ptxas info    : Used 36 registers, used 1 barriers, 128 bytes smem, 520 bytes cmem[0]
//! ```

use crate::arch::Arch;

/// What one compiled kernel uses, per thread (registers, stack) or per block (memory).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResourceReport {
    pub registers: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    pub stack_frame_bytes: u32,
    pub static_smem_bytes: u32,
    pub dynamic_smem_bytes: u32,
    /// All constant banks together (`cmem[N]`): parameters and compiler constants.
    pub constant_bytes: u32,
}

const ENTRY_MARKER: &str = "Compiling entry function '";
const PROPERTIES_MARKER: &str = "Function properties for ";
const USED_MARKER: &str = "Used ";

/// Parses the ptxas report of `kernel` out of an NVRTC log; `None` if the log has no
/// complete report for it (`dynamic_smem_bytes` is left 0: ptxas cannot know it).
pub fn parse_ptxas_log(log: &str, kernel: &str) -> Option<ResourceReport> {
    let mut report = ResourceReport::default();
    let (mut have_usage, mut have_frame) = (false, false);
    // A usage line belongs to the last entry function named; a frame line to the last
    // function whose properties were announced (callees get their own blocks).
    let (mut entry, mut properties): (Option<&str>, Option<&str>) = (None, None);
    for line in log.lines() {
        let body = line.split_once(':').map_or(line, |(_, rest)| rest).trim();
        if let Some(rest) = body.strip_prefix(ENTRY_MARKER) {
            entry = rest.split('\'').next();
        } else if let Some(name) = body.strip_prefix(PROPERTIES_MARKER) {
            properties = Some(name.trim());
        } else if let Some(rest) = body.strip_prefix(USED_MARKER).filter(|_| entry == Some(kernel)) {
            for (value, what) in items(rest) {
                match what {
                    "registers" => report.registers = value,
                    "bytes smem" => report.static_smem_bytes = value,
                    w if w.starts_with("bytes cmem[") => report.constant_bytes += value,
                    _ => {}
                }
            }
            have_usage = true;
        } else if line.contains("bytes stack frame") && properties == Some(kernel) {
            for (value, what) in items(line.trim_start_matches(|c: char| !c.is_ascii_digit())) {
                match what {
                    "bytes stack frame" => report.stack_frame_bytes = value,
                    "bytes spill stores" => report.spill_store_bytes = value,
                    "bytes spill loads" => report.spill_load_bytes = value,
                    _ => {}
                }
            }
            have_frame = true;
        }
    }
    (have_usage && have_frame).then_some(report)
}

const SERIALIZED_MARKER: &str = "wgmma.mma_async instructions are serialized due to ";

/// Why ptxas serialised `kernel`'s `wgmma` (each one waited for before the next issues), if its
/// log says it did: a kernel that compiles, and is correct, at a fraction of its speed. ptxas
/// does it when it cannot prove an accumulator safe, e.g. when an accumulator of a running
/// `wgmma` may be read, or when registers run short. NVRTC 13 writes, per cause:
/// `ptxas info : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized
/// due to <cause> in the function '<kernel>'`.
pub fn wgmma_serialization(log: &str, kernel: &str) -> Option<String> {
    log.lines().find_map(|line| {
        let (_, rest) = line.split_once(SERIALIZED_MARKER)?;
        let (cause, function) = rest.rsplit_once(" in the function '")?;
        (function.trim_end().trim_end_matches('\'') == kernel).then(|| {
            let code = line.split_once('(').and_then(|(_, c)| c.split_once(')')).map_or("", |(c, _)| c);
            let cause = cause.split_whitespace().collect::<Vec<_>>().join(" ");
            format!("ptxas serialises its wgmma ({code}: {cause})")
        })
    })
}

/// `"36 registers, used 1 barriers"` as `[(36, "registers"), (1, "barriers")]`: each
/// comma-separated item's number and the words after it.
fn items(text: &str) -> impl Iterator<Item = (u32, &str)> {
    text.split(',').filter_map(|item| {
        let item = item.trim().trim_start_matches("used ");
        let (number, what) = item.split_once(' ')?;
        Some((number.parse().ok()?, what.trim()))
    })
}

impl ResourceReport {
    /// Shared memory one block needs: static plus dynamic.
    pub fn smem_bytes(&self) -> u64 {
        u64::from(self.static_smem_bytes) + u64::from(self.dynamic_smem_bytes)
    }

    /// Rejects kernels that use local memory (spills or a stack frame: slow, and a sign the
    /// configuration is too big), need more shared memory than a block of `arch` may have,
    /// or more registers than a thread may have. The error lists every reason.
    pub fn gate(&self, arch: Arch) -> Result<(), String> {
        let mut reasons = Vec::new();
        if self.spill_store_bytes > 0 || self.spill_load_bytes > 0 {
            reasons.push(format!(
                "spills registers ({} bytes stored, {} bytes loaded)",
                self.spill_store_bytes, self.spill_load_bytes
            ));
        }
        if self.stack_frame_bytes > 0 {
            reasons.push(format!("uses a {}-byte local stack frame", self.stack_frame_bytes));
        }
        let smem_limit = arch.max_smem_per_block() as u64;
        if self.smem_bytes() > smem_limit {
            reasons.push(format!(
                "needs {} bytes of shared memory ({} static + {} dynamic), over {arch}'s {smem_limit}",
                self.smem_bytes(),
                self.static_smem_bytes,
                self.dynamic_smem_bytes
            ));
        }
        if self.registers > arch.max_registers_per_thread() {
            reasons.push(format!(
                "uses {} registers a thread, over {arch}'s {}",
                self.registers,
                arch.max_registers_per_thread()
            ));
        }
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(reasons.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFERENCE: &str = "evoattn_reference_bf16_d128_t128";

    /// NVRTC 13.0's log for the reference kernel, bf16, D=128, sm_80.
    const LOG_SM80: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'evoattn_reference_bf16_d128_t128' for 'sm_80'
ptxas info    : Function properties for evoattn_reference_bf16_d128_t128
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 36 registers, used 1 barriers, 128 bytes smem, 520 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Compile time = 81.179 ms
";

    /// The same kernel for sm_90a: no `cmem` items.
    const LOG_SM90A: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'evoattn_reference_bf16_d128_t128' for 'sm_90a'
ptxas info    : Function properties for evoattn_reference_bf16_d128_t128
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 128 bytes smem
ptxas info    : Compile time = 45.737 ms
";

    /// NVRTC 13.0's note when a `wgmma` pipeline reads an accumulator of a running `wgmma`.
    const SERIALIZED: &str = "\
ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in the function 'k'
ptxas info    : Compiling entry function 'k' for 'sm_90a'
";

    #[test]
    fn wgmma_serialization_names_the_cause_for_its_kernel_only() {
        assert_eq!(
            wgmma_serialization(SERIALIZED, "k").as_deref(),
            Some(
                "ptxas serialises its wgmma (C7514: non wgmma instructions reading accumulator registers of a wgmma \
                 between start and end of the pipeline stage)"
            )
        );
        assert_eq!(wgmma_serialization(SERIALIZED, "other"), None);
        assert_eq!(wgmma_serialization(LOG_SM90A, REFERENCE), None);
    }

    #[test]
    fn parses_sm80_report() {
        let r = parse_ptxas_log(LOG_SM80, REFERENCE).expect("report");
        assert_eq!(
            r,
            ResourceReport {
                registers: 36,
                spill_store_bytes: 0,
                spill_load_bytes: 0,
                stack_frame_bytes: 0,
                static_smem_bytes: 128,
                dynamic_smem_bytes: 0,
                constant_bytes: 528,
            }
        );
        assert_eq!(r.gate(Arch::Sm80), Ok(()));
    }

    #[test]
    fn parses_report_without_cmem() {
        let r = parse_ptxas_log(LOG_SM90A, REFERENCE).expect("report");
        assert_eq!((r.registers, r.static_smem_bytes, r.constant_bytes), (32, 128, 0));
    }

    #[test]
    fn order_of_lines_does_not_matter() {
        let mut lines: Vec<&str> = LOG_SM80.lines().collect();
        // usage before the properties block
        lines.swap(2, 4);
        lines.swap(3, 4);
        let r = parse_ptxas_log(&lines.join("\n"), REFERENCE).expect("report");
        assert_eq!((r.registers, r.stack_frame_bytes, r.constant_bytes), (36, 0, 528));
    }

    #[test]
    fn other_functions_do_not_leak_into_the_report() {
        // A non-inlined callee with a stack frame, and a second entry function, around ours.
        let log = format!(
            "ptxas info    : Function properties for helper\n\
             ptxas         .     48 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n\
             {LOG_SM80}\
             ptxas info    : Compiling entry function 'other' for 'sm_80'\n\
             ptxas info    : Function properties for other\n\
             ptxas         .     16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
             ptxas info    : Used 200 registers, used 0 barriers, 4096 bytes smem\n"
        );
        let r = parse_ptxas_log(&log, REFERENCE).expect("report");
        assert_eq!((r.registers, r.stack_frame_bytes, r.spill_store_bytes, r.static_smem_bytes), (36, 0, 0, 128));
        let other = parse_ptxas_log(&log, "other").expect("report");
        assert_eq!((other.registers, other.stack_frame_bytes, other.static_smem_bytes), (200, 16, 4096));
    }

    #[test]
    fn missing_kernel_or_incomplete_report_is_none() {
        assert_eq!(parse_ptxas_log(LOG_SM80, "evoattn_mma_bf16_d128"), None);
        assert_eq!(parse_ptxas_log("", REFERENCE), None);
        let no_frame: String = LOG_SM80.lines().filter(|l| !l.contains("stack frame")).collect::<Vec<_>>().join("\n");
        assert_eq!(parse_ptxas_log(&no_frame, REFERENCE), None);
    }

    #[test]
    fn gate_rejects_spills_stack_smem_and_registers() {
        let spilling = "\
ptxas info    : Compiling entry function 'k' for 'sm_89'
ptxas info    : Function properties for k
ptxas         .     152 bytes stack frame, 148 bytes spill stores, 160 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 512 bytes smem, 520 bytes cmem[0]
";
        let r = parse_ptxas_log(spilling, "k").expect("report");
        assert_eq!((r.stack_frame_bytes, r.spill_store_bytes, r.spill_load_bytes), (152, 148, 160));
        let err = r.gate(Arch::Sm89).unwrap_err();
        assert!(err.contains("spills registers (148 bytes stored, 160 bytes loaded)"), "{err}");
        assert!(err.contains("152-byte local stack frame"), "{err}");
        assert!(!err.contains("shared memory"), "{err}");

        // 99 KiB on sm_89: 512 static + 101 000 dynamic is over, but fits sm_90a's 227 KiB.
        let big = ResourceReport { static_smem_bytes: 512, dynamic_smem_bytes: 101_000, ..Default::default() };
        let err = big.gate(Arch::Sm89).unwrap_err();
        assert!(
            err.contains("needs 101512 bytes of shared memory (512 static + 101000 dynamic), over sm_89's 101376"),
            "{err}"
        );
        assert_eq!(big.gate(Arch::Sm90a), Ok(()));

        let registers = ResourceReport { registers: 256, ..Default::default() };
        assert!(registers.gate(Arch::Sm80).unwrap_err().contains("256 registers"));
    }
}
