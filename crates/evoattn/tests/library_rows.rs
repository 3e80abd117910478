//! The `cublas` path's row kernel (kernels/library/rows.cu, the family's NVRTC kernel)
//! compiles for every arch, both 16-bit dtypes and both score dtypes, and passes the resource
//! gate; one block a row keeps nothing per key in registers.

mod common;

use common::nvrtc_or_skip;
use evoattn::runtime::compile::compile;
use evoattn::{Arch, CublasConfig, Dtype, KernelConfig, KernelSpec, Scores};

#[test]
fn the_row_kernel_compiles_and_passes_the_resource_gate_on_every_arch() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    for arch in Arch::ALL {
        for dtype in [Dtype::F16, Dtype::Bf16] {
            for scores in Scores::ALL {
                let spec = KernelSpec { config: KernelConfig::Cublas(CublasConfig { scores }), dtype, head_dim: 128 };
                let kernel = compile(&spec, arch, None).unwrap_or_else(|e| panic!("{e}"));
                kernel.gate().unwrap_or_else(|e| panic!("{e}"));
                let registers = kernel.resources.registers;
                assert!(registers <= 64, "{} on {arch}: {registers} registers", spec.name());
            }
        }
    }
}
