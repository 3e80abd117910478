//! The CUBIN reader agrees with ptxas: for every default kernel on every arch, the registers,
//! stack frame and static shared memory read from the CUBIN's ELF equal those ptxas reported in
//! the NVRTC log (when this NVRTC puts the report there), and a deliberately spilling kernel
//! shows a stack frame.

mod common;

use common::nvrtc_or_skip;
use evoattn::kernels::SourceFile;
use evoattn::runtime::compile::options;
use evoattn::runtime::cubin::{report, resources};
use evoattn::runtime::resources::parse_ptxas_log;
use evoattn::{defaults, Arch, Dtype, Impl, KernelSpec};

#[test]
fn cubin_values_match_the_ptxas_report() {
    let Some(nvrtc) = nvrtc_or_skip() else { return };
    let mut compared = 0;
    for arch in [Arch::Sm80, Arch::Sm89, Arch::Sm90a] {
        for imp in Impl::ALL.into_iter().filter(|imp| imp.archs().contains(&arch)) {
            for &d in imp.head_dims() {
                let spec =
                    KernelSpec { config: defaults::config(imp, arch, Dtype::Bf16, d), dtype: Dtype::Bf16, head_dim: d };
                let name = spec.name();
                let unit = evoattn::kernels::main_source(imp);
                let out = nvrtc
                    .compile_cubin(&unit, evoattn::kernels::HEADERS, &name, arch, &options(&spec, arch))
                    .unwrap_or_else(|e| panic!("{e}"));
                let from_cubin =
                    report(&out.cubin, "", &name, arch).unwrap_or_else(|| panic!("{name}: no resources in CUBIN"));
                assert!(from_cubin.registers > 0, "{name}");
                if let Some(from_log) = parse_ptxas_log(&out.log, &name) {
                    assert_eq!(from_cubin.registers, from_log.registers, "{name} on {arch}");
                    assert_eq!(from_cubin.stack_frame_bytes, from_log.stack_frame_bytes, "{name} on {arch}");
                    assert_eq!(from_cubin.static_smem_bytes, from_log.static_smem_bytes, "{name} on {arch}");
                    compared += 1;
                }
            }
        }
    }
    println!("{compared} kernels compared with the ptxas log");
}

#[test]
fn a_spilling_kernel_has_a_stack_frame() {
    let Some(nvrtc) = nvrtc_or_skip() else { return };
    // A run-time-indexed local array must live in local memory: a stack frame.
    let unit = SourceFile {
        name: "spill.cu",
        text: r#"extern "C" __global__ void spill(float* out, int i) {
            float a[64];
            for (int j = 0; j < 64; ++j) a[(j * i) & 63] = out[j];
            for (int j = 0; j < 64; ++j) out[j] = a[(j + i) & 63];
        }"#,
    };
    let out = nvrtc
        .compile_cubin(&unit, &[], "spill", Arch::Sm90a, &["--gpu-architecture=sm_90a".to_string()])
        .unwrap_or_else(|e| panic!("{e}"));
    let r = resources(&out.cubin, "spill").expect("resources");
    assert_eq!(r.stack_frame_bytes, 256, "{r:?}\n{}", out.log);
}

#[test]
fn the_timer_hold_kernel_compiles_for_every_arch() {
    let Some(nvrtc) = nvrtc_or_skip() else { return };
    for arch in evoattn::Arch::ALL {
        let out = nvrtc
            .compile_cubin(&evoattn::kernels::HOLD, &[], evoattn::kernels::HOLD_KERNEL, arch, &[arch.nvrtc_flag()])
            .unwrap_or_else(|e| panic!("{e}"));
        let r = resources(&out.cubin, evoattn::kernels::HOLD_KERNEL).expect("resources");
        assert_eq!(r.stack_frame_bytes, 0, "{arch}");
    }
}

#[test]
fn the_input_generator_kernels_compile_for_every_arch_without_spills() {
    let Some(nvrtc) = nvrtc_or_skip() else { return };
    let [draw, fill] = evoattn::kernels::DRAW_KERNELS;
    for arch in evoattn::Arch::ALL {
        let out = nvrtc
            .compile_cubin(&evoattn::kernels::DRAW, &[], draw, arch, &[arch.nvrtc_flag()])
            .unwrap_or_else(|e| panic!("{e}"));
        for kernel in [draw, fill] {
            let r = resources(&out.cubin, kernel).unwrap_or_else(|| panic!("{kernel} is not in the {arch} CUBIN"));
            assert_eq!(r.stack_frame_bytes, 0, "{kernel} on {arch} spills: {r:?}");
        }
    }
}
