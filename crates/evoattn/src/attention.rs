//! The safe entry point: plan, compile (or fetch from the cache), load and launch.

use crate::config::{KernelConfig, KernelSpec};
use crate::error::Result;
use crate::plan::{plan, ImplChoice, Plan};
use crate::problem::{Causal, Dtype, Problem, Shape, Strides};
use crate::runtime::cache::CubinCache;
use crate::runtime::compile::compile;
use crate::runtime::device::{Gpu, LaunchImage, LoadedKernel};
use crate::runtime::launch::PreparedLaunch;
use cudarc::driver::CudaStream;
use std::collections::HashMap;

/// What a prepared launch depends on: the problem signature (shape, strides, dtype, mask,
/// scale, LSE) and the caller's choice of kernel. The device is the `Attention`'s own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct LaunchKey {
    shape: Shape,
    strides: [Strides; 4],
    dtype: Dtype,
    causal: Causal,
    /// The scale's bits (`None`: 1/sqrt(D)); equal bits, equal scale.
    scale_bits: Option<u32>,
    with_lse: bool,
    choice: ImplChoice,
    config: Option<KernelConfig>,
}

impl LaunchKey {
    fn new(problem: &Problem, choice: ImplChoice, config: Option<KernelConfig>) -> Self {
        LaunchKey {
            shape: problem.shape,
            strides: [problem.q_strides, problem.k_strides, problem.v_strides, problem.o_strides],
            dtype: problem.dtype,
            causal: problem.causal,
            scale_bits: problem.scale.map(f32::to_bits),
            with_lse: problem.with_lse,
            choice,
            config,
        }
    }
}

pub use crate::runtime::device::DeviceTensors;

/// Attention on one GPU. Kernels are compiled on first use, cached on disk and kept loaded,
/// and each problem signature's launch is prepared once (plan, grid, parameters, `splitkv`
/// workspace, TMA maps), so a repeated call does no compile, no module load, no allocation
/// and no synchronisation: it checks the buffers and launches.
///
/// Launches are asynchronous on `gpu().stream()`, or on the caller's stream with
/// [`Attention::forward_on`]. Buffers used on several streams must be synchronised by the caller
/// (the usual CUDA stream contract); evoattn does not track cross-stream use. Calls with the same
/// problem signature share a prepared launch (and `splitkv`'s workspace or the dynamic `wgmma`
/// scheduler's tile counters), so they must not run concurrently on different streams. The
/// first call of a signature allocates and synchronises evoattn's own stream once: make it
/// before capturing calls into a CUDA graph. Prepared launches are kept for the life of the
/// `Attention`, one per signature (a decoding loop whose Sk grows every step prepares one per
/// step).
pub struct Attention {
    gpu: Gpu,
    cache: CubinCache,
    loaded: HashMap<KernelSpec, LoadedKernel>,
    /// Looked up on every call: foldhash hashes a key in about 50 ns where the default SipHash
    /// takes about 160 (this project's x86 build machine); the keys are the caller's own
    /// problems, so SipHash's resistance to chosen collisions buys nothing here.
    launches: HashMap<LaunchKey, PreparedLaunch, foldhash::fast::RandomState>,
}

impl Attention {
    /// Opens GPU `ordinal` and the kernel cache in its default place.
    pub fn new(ordinal: usize) -> Result<Self> {
        let gpu = Gpu::open(ordinal)?;
        let cache = CubinCache::open(CubinCache::default_dir())?;
        Ok(Attention { gpu, cache, loaded: HashMap::new(), launches: HashMap::default() })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn cache(&self) -> &CubinCache {
        &self.cache
    }

    /// The kernel `choice` (and optional lever overrides) resolves to for `problem` here.
    pub fn plan(&self, problem: &Problem, choice: ImplChoice, config: Option<KernelConfig>) -> Plan {
        plan(problem, self.gpu.arch(), self.gpu.sm_count(), choice, config)
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

    /// The loaded `trace=1` kernel `spec` (launched before through this `Attention`).
    fn traced(&self, spec: &KernelSpec) -> Result<&LoadedKernel> {
        crate::trace::instrumented(spec)?;
        self.loaded.get(spec).ok_or_else(|| crate::Error::Unsupported {
            imp: spec.imp().to_string(),
            reason: format!("{} has not been launched here", spec.name()),
        })
    }

    /// Clears the timeline of the `trace=1` kernel `spec`, on the GPU's stream, so that the
    /// next launch's marks are the only ones [`Attention::read_trace`] reads.
    pub fn clear_trace(&self, spec: &KernelSpec) -> Result<()> {
        self.traced(spec)?.zero_global(crate::trace::SYMBOL, self.gpu.stream())
    }

    /// The timeline the `trace=1` kernel `spec` wrote since [`Attention::clear_trace`] (waits
    /// for the GPU's stream): each traced warp's marks.
    pub fn read_trace(&self, spec: &KernelSpec) -> Result<Vec<crate::trace::WarpTrace>> {
        let bytes = self.traced(spec)?.read_global(crate::trace::SYMBOL, self.gpu.stream())?;
        let words: Vec<u64> =
            bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8-byte chunks"))).collect();
        crate::trace::decode_kernel(spec, &words)
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
        LaunchImage::new(&compiled, problem, self.gpu.sm_count(), self.gpu.l2_bytes())
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
        let key = LaunchKey::new(problem, choice, config);
        // The cached call: one hash lookup, the buffer checks, the launch.
        if let Some(launch) = self.launches.get_mut(&key) {
            launch.run(stream, tensors)?;
            return Ok(*launch.spec());
        }
        problem.validate()?;
        let plan = self.plan(problem, choice, config);
        if let Err(reason) = plan.spec.validate(plan.arch) {
            return Err(crate::Error::Unsupported { imp: plan.spec.imp().to_string(), reason });
        }
        self.prepare(&plan)?;
        let mut launch = PreparedLaunch::new(&self.gpu, &self.loaded[&plan.spec], problem)?;
        launch.run(stream, tensors)?;
        self.launches.insert(key, launch);
        Ok(plan.spec)
    }
}
