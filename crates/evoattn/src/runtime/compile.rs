//! From a [`KernelSpec`] to CUBIN for an arch: validate, look in the cache, else compile with
//! NVRTC; then read the resource report the gate judges.

use crate::arch::Arch;
use crate::config::KernelSpec;
use crate::error::{Error, Result};
use crate::kernels::{main_source, HEADERS};
use crate::runtime::cache::{CacheKey, CachedKernel, CubinCache};
use crate::runtime::cubin::report;
use crate::runtime::nvrtc::{CompileFailure, Nvrtc};
use crate::runtime::resources::{parse_ptxas_log, wgmma_serialization, ResourceReport};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// One kernel compiled for one arch.
#[derive(Clone, Debug)]
pub struct CompiledKernel {
    pub spec: KernelSpec,
    pub arch: Arch,
    pub cubin: Vec<u8>,
    pub resources: ResourceReport,
    /// NVRTC's log of the compile that produced the CUBIN (also when served from cache).
    pub log: String,
    pub from_cache: bool,
    /// Wall time of the compile, or of the cache read.
    pub elapsed: Duration,
}

impl CompiledKernel {
    /// `spec`'s kernel for `arch` from a CUBIN made elsewhere (a tuner's variant file, a
    /// stand-in): no compile here, so no log and no resources measured (the resource gate has
    /// judged it where it was compiled, if anywhere).
    pub fn from_cubin(spec: KernelSpec, arch: Arch, cubin: Vec<u8>) -> Self {
        CompiledKernel {
            spec,
            arch,
            cubin,
            resources: ResourceReport::default(),
            log: String::new(),
            from_cache: true,
            elapsed: Duration::ZERO,
        }
    }

    /// The resource gate: no spills or stack, shared memory and registers within the arch's
    /// limits, and no `wgmma` serialised by ptxas. Every failed condition, joined.
    pub fn gate_verdict(&self) -> std::result::Result<(), String> {
        let mut reasons: Vec<String> = self.resources.gate(self.arch).err().into_iter().collect();
        reasons.extend(wgmma_serialization(&self.log, &self.spec.name()));
        // A hybrid's own GEMM, the module's second kernel that runs on every call, is gated too.
        if let Some(gemm) = self.spec.gemm_kernel_name() {
            match parse_ptxas_log(&self.log, &gemm) {
                Some(report) => reasons.extend(report.gate(self.arch).err().map(|r| format!("{gemm}: {r}"))),
                None => reasons.push(format!("no ptxas report for {gemm} in the compile log")),
            }
        }
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(reasons.join("; "))
        }
    }

    /// [`Self::gate_verdict`] as the library's error.
    pub fn gate(&self) -> Result<()> {
        self.gate_verdict().map_err(|reason| Error::ResourceGate {
            kernel: self.spec.name(),
            arch: self.arch.name().to_string(),
            reason,
        })
    }
}

/// The NVRTC options for `spec` on `arch`; the only place they are built. No fast-math: the
/// kernels choose their approximate instructions (`ex2.approx`) explicitly.
pub fn options(spec: &KernelSpec, arch: Arch) -> Vec<String> {
    let mut options = vec![arch.nvrtc_flag(), "-std=c++17".to_string(), "--ptxas-options=-v".to_string()];
    options.extend(spec.defines().into_iter().map(|(name, value)| format!("-D{name}={value}")));
    options
}

/// Compiles `spec` for `arch`, through `cache` when given.
pub fn compile(spec: &KernelSpec, arch: Arch, cache: Option<&CubinCache>) -> Result<CompiledKernel> {
    spec.validate(arch).map_err(|reason| Error::Unsupported { imp: spec.imp().name().to_string(), reason })?;
    let nvrtc = Nvrtc::get()?;
    // Timed from here: loading NVRTC is once per process, not part of any one kernel.
    let start = Instant::now();
    let options = options(spec, arch);
    let key = CacheKey::new(spec, arch, nvrtc.version(), &options);
    let done = |kernel: CachedKernel, from_cache: bool| CompiledKernel {
        spec: *spec,
        arch,
        cubin: kernel.cubin,
        resources: kernel.resources,
        log: kernel.log,
        from_cache,
        elapsed: start.elapsed(),
    };
    if let Some(hit) = cache.and_then(|c| c.get(&key)) {
        return Ok(done(hit, true));
    }

    let name = spec.name();
    let unit = main_source(spec.imp());
    let compiled =
        nvrtc.compile_cubin(&unit, HEADERS, &name, arch, &options).map_err(|f| Error::Compile(Box::new(f)))?;
    let Some(mut resources) = report(&compiled.cubin, &compiled.log, &name, arch) else {
        return Err(Error::Compile(Box::new(CompileFailure {
            kernel: name,
            arch: arch.name().to_string(),
            options,
            log: format!("the CUBIN holds no register count for this kernel; NVRTC's log:\n{}", compiled.log),
            source_name: unit.name.to_string(),
        })));
    };
    // The shared-memory limits are far below u32::MAX, so saturating cannot pass the gate.
    resources.dynamic_smem_bytes = u32::try_from(spec.dynamic_smem_bytes()).unwrap_or(u32::MAX);
    let kernel = CachedKernel { cubin: compiled.cubin, resources, log: compiled.log };
    if let Some(cache) = cache {
        // The cache only saves time: a kernel that compiled is returned even if it cannot be stored.
        let _ = cache.put(&key, &kernel);
    }
    Ok(done(kernel, false))
}

/// Compiles every `(spec, arch)` job on up to `threads` threads (at least one), calling
/// `on_done` after each; results come back in job order. NVRTC compiles programs
/// concurrently, and the cache's writes are atomic, so the jobs share both.
pub fn compile_parallel(
    jobs: &[(KernelSpec, Arch)],
    cache: Option<&CubinCache>,
    threads: usize,
    on_done: impl Fn() + Sync,
) -> Vec<Result<CompiledKernel>> {
    let next = AtomicUsize::new(0);
    let worker = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some((spec, arch)) = jobs.get(i) else {
                return done;
            };
            done.push((i, compile(spec, *arch, cache)));
            on_done();
        }
    };
    let mut results: Vec<(usize, Result<CompiledKernel>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.clamp(1, jobs.len().max(1))).map(|_| s.spawn(worker)).collect();
        // A worker only fails by panicking; pass the panic on, as a sequential loop would.
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Impl;
    use crate::problem::Dtype;

    #[test]
    fn options_name_the_arch_the_standard_and_every_define() {
        let spec = KernelSpec {
            config: crate::defaults::config(Impl::Mma, Arch::Sm90a, Dtype::Bf16, 128),
            dtype: Dtype::Bf16,
            head_dim: 128,
        };
        let opts = options(&spec, Arch::Sm90a);
        assert_eq!(opts[..3], ["--gpu-architecture=sm_90a", "-std=c++17", "--ptxas-options=-v"]);
        assert!(opts.contains(&format!("-DEVOATTN_KERNEL_NAME={}", spec.name())));
        assert!(opts.contains(&"-DEVOATTN_BF16=1".to_string()));
        assert_eq!(opts.len(), 3 + spec.defines().len());
        assert!(!opts.iter().any(|o| o.contains("fast_math")));
    }
}
