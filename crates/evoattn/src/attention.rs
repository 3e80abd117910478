//! The safe entry point: plan, compile (or fetch from the cache), load and launch.

use crate::config::{KernelConfig, KernelSpec};
use crate::error::Result;
use crate::plan::{plan, ImplChoice, Plan};
use crate::problem::Problem;
use crate::runtime::cache::CubinCache;
use crate::runtime::compile::compile;
use crate::runtime::device::{Gpu, LaunchImage, LoadedKernel};
use cudarc::driver::CudaStream;
use std::collections::HashMap;

pub use crate::runtime::device::DeviceTensors;

/// Attention on one GPU. Kernels are compiled on first use, cached on disk and kept loaded,
/// so a repeated call with the same kernel does no compile and no module load.
///
/// Launches are asynchronous on `gpu().stream()`, or on the caller's stream with
/// [`Attention::forward_on`]. Buffers used on several streams must be synchronised by the caller
/// (the usual CUDA stream contract); evoattn does not track cross-stream use.
pub struct Attention {
    gpu: Gpu,
    cache: CubinCache,
    loaded: HashMap<KernelSpec, LoadedKernel>,
}

impl Attention {
    /// Opens GPU `ordinal` and the kernel cache in its default place.
    pub fn new(ordinal: usize) -> Result<Self> {
        let gpu = Gpu::open(ordinal)?;
        let cache = CubinCache::open(CubinCache::default_dir())?;
        Ok(Attention { gpu, cache, loaded: HashMap::new() })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn cache(&self) -> &CubinCache {
        &self.cache
    }

    /// The kernel `choice` (and optional lever overrides) resolves to for `problem` here.
    pub fn plan(&self, problem: &Problem, choice: ImplChoice, config: Option<KernelConfig>) -> Plan {
        plan(problem, self.gpu.arch(), choice, config)
    }

    /// Compiles (or loads from cache) and loads the planned kernel; it must pass the resource
    /// gate, so a spilling or oversized variant is refused rather than run slowly.
    pub fn prepare(&mut self, plan: &Plan) -> Result<&LoadedKernel> {
        if !self.loaded.contains_key(&plan.spec) {
            let compiled = compile(&plan.spec, plan.arch, Some(&self.cache))?;
            compiled.gate()?;
            let kernel = self.gpu.load(&compiled)?;
            self.loaded.insert(plan.spec, kernel);
        }
        Ok(&self.loaded[&plan.spec])
    }

    /// The planned kernel for `problem`, compiled and packed for a launch by another process.
    pub fn launch_image(
        &self,
        problem: &Problem,
        choice: ImplChoice,
        config: Option<KernelConfig>,
    ) -> Result<LaunchImage> {
        let plan = self.plan(problem, choice, config);
        let compiled = compile(&plan.spec, plan.arch, Some(&self.cache))?;
        compiled.gate()?;
        LaunchImage::new(&compiled, problem, self.gpu.sm_count())
    }

    /// Runs the forward pass on the GPU's own stream (asynchronously) and returns the kernel
    /// that ran. Every input check happens before the launch.
    pub fn forward(
        &mut self,
        problem: &Problem,
        choice: ImplChoice,
        config: Option<KernelConfig>,
        tensors: DeviceTensors<'_>,
    ) -> Result<KernelSpec> {
        let stream = self.gpu.stream().clone();
        self.forward_on(&stream, problem, choice, config, tensors)
    }

    /// As [`Attention::forward`], on the caller's `stream` (of this GPU's context), so the
    /// launch orders with the caller's other work without a synchronisation.
    pub fn forward_on(
        &mut self,
        stream: &CudaStream,
        problem: &Problem,
        choice: ImplChoice,
        config: Option<KernelConfig>,
        tensors: DeviceTensors<'_>,
    ) -> Result<KernelSpec> {
        problem.validate()?;
        let plan = self.plan(problem, choice, config);
        if let Err(reason) = plan.spec.validate(plan.arch) {
            return Err(crate::Error::Unsupported { imp: plan.spec.imp().to_string(), reason });
        }
        let kernel = self.prepare(&plan)?;
        kernel.run(stream, problem, tensors)?;
        Ok(plan.spec)
    }
}
