//! The library paths' modules compile for every arch, both 16-bit dtypes and both score dtypes,
//! and pass the resource gate: the row kernel (kernels/library/rows.cu, `cublas`'s module; one
//! block a row keeps nothing per key in registers) and, in the hybrids' module
//! (kernels/library/hybrid.cu), our GEMM beside it, which the gate covers too.

mod common;

use common::nvrtc_or_skip;
use evoattn::runtime::compile::compile;
use evoattn::runtime::resources::parse_ptxas_log;
use evoattn::{Arch, CublasConfig, Dtype, HybridPvConfig, HybridQkConfig, KernelConfig, KernelSpec, Provider, Scores};

#[test]
fn the_library_modules_compile_and_pass_the_resource_gate_on_every_arch() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    for arch in Arch::ALL {
        for dtype in [Dtype::F16, Dtype::Bf16] {
            for scores in Scores::ALL {
                for config in [
                    // The provider (`gemm`) runs on the host: the module is the same for both.
                    KernelConfig::Cublas(CublasConfig { scores, gemm: Provider::CublasLt }),
                    KernelConfig::HybridQk(HybridQkConfig { scores, gemm: Provider::CublasLt }),
                    KernelConfig::HybridPv(HybridPvConfig { scores, gemm: Provider::CublasLt }),
                ] {
                    let spec = KernelSpec { config, dtype, head_dim: 128 };
                    let kernel = compile(&spec, arch, None).unwrap_or_else(|e| panic!("{e}"));
                    kernel.gate().unwrap_or_else(|e| panic!("{e}"));
                    let registers = kernel.resources.registers;
                    assert!(registers <= 64, "{} on {arch}: {registers} registers", spec.name());
                    if let Some(gemm) = spec.gemm_kernel_name() {
                        let report = parse_ptxas_log(&kernel.log, &gemm).expect("the GEMM's ptxas report");
                        // 64 accumulators a thread, two stages of 16-bit tiles (~30 KiB).
                        assert!(report.registers <= 168, "{gemm} on {arch}: {} registers", report.registers);
                        assert!(report.static_smem_bytes <= 48 << 10, "{gemm}: {} bytes", report.static_smem_bytes);
                    }
                }
            }
        }
    }
}
