//! Kernel sources compiled outside the library's cache, for [`crate::lab::backend::Variant`]s:
//! a proposer's whole source (the tuner) or an embedded source with extra defines (`invert`'s
//! pathologies).

use evoattn::kernels::{SourceFile, HEADERS};
use evoattn::runtime::compile::{options, CompiledKernel};
use evoattn::runtime::nvrtc::Nvrtc;
use evoattn::{Arch, KernelSpec};

/// Compiles `unit` with `spec`'s defines and each of `defines` set to 1, with its resource
/// report (the gate reads it).
pub fn compile_source(
    spec: &KernelSpec,
    arch: Arch,
    unit: &SourceFile,
    defines: &[&str],
) -> evoattn::Result<CompiledKernel> {
    let nvrtc = Nvrtc::get()?;
    let start = std::time::Instant::now();
    let name = spec.name();
    let mut options = options(spec, arch);
    options.extend(defines.iter().map(|d| format!("-D{d}=1")));
    let compiled =
        nvrtc.compile_cubin(unit, HEADERS, &name, arch, &options).map_err(|f| evoattn::Error::Compile(Box::new(f)))?;
    let mut resources =
        evoattn::runtime::cubin::report(&compiled.cubin, &compiled.log, &name, arch).ok_or_else(|| {
            evoattn::Error::Unsupported {
                imp: spec.imp().to_string(),
                reason: format!("{} defines no kernel {name} (the name comes from EVOATTN_KERNEL_NAME)", unit.name),
            }
        })?;
    resources.dynamic_smem_bytes = u32::try_from(spec.dynamic_smem_bytes()).unwrap_or(u32::MAX);
    Ok(CompiledKernel {
        spec: *spec,
        arch,
        cubin: compiled.cubin,
        resources,
        log: compiled.log,
        from_cache: false,
        elapsed: start.elapsed(),
    })
}
