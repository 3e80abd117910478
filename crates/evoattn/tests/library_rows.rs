//! The library paths' row kernel (kernels/library/rows.cu) compiles for every arch the paths
//! run on, for both 16-bit dtypes and both score dtypes, and passes the resource gate: no
//! spills or stack, registers and shared memory within the arch's limits.

mod common;

use common::nvrtc_or_skip;
use evoattn::kernels::library::{rows_kernel, Scores, ROWS};
use evoattn::kernels::HEADERS;
use evoattn::runtime::compile::options_with;
use evoattn::runtime::cubin::report;
use evoattn::{Arch, Dtype};

#[test]
fn the_row_kernel_compiles_and_passes_the_resource_gate_on_every_arch() {
    let Some(nvrtc) = nvrtc_or_skip() else { return };
    for arch in [Arch::Sm80, Arch::Sm89, Arch::Sm90a] {
        for dtype in [Dtype::F16, Dtype::Bf16] {
            for scores in Scores::ALL {
                let (name, defines) = rows_kernel(dtype, scores);
                let options = options_with(arch, defines);
                let out = nvrtc.compile_cubin(&ROWS, HEADERS, &name, arch, &options).unwrap_or_else(|e| panic!("{e}"));
                let resources =
                    report(&out.cubin, &out.log, &name, arch).unwrap_or_else(|| panic!("{name}: no report"));
                resources.gate(arch).unwrap_or_else(|e| panic!("{name} on {arch}: {e}"));
                // One block a row: the kernel keeps nothing per key in registers.
                assert!(resources.registers <= 64, "{name} on {arch}: {} registers", resources.registers);
            }
        }
    }
}
