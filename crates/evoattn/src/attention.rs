//! The safe entry point: plan, compile (or fetch from the cache), load and launch.

use crate::config::{KernelSpec, Pass};
use crate::error::Result;
use crate::plan::{plan, Plan, Request};
use crate::problem::{Causal, Dtype, Problem, Shape, Strides};
use crate::runtime::backward::{BackwardBuffers, BackwardLaunch, BackwardTensors};
use crate::runtime::cache::CubinCache;
use crate::runtime::compile::compile;
use crate::runtime::device::{Gpu, LaunchImage, LoadedKernel};
use crate::runtime::launch::Launch;
use crate::runtime::scratch::{is_capturing, ScratchStore};
use cudarc::driver::CudaStream;
use std::collections::HashMap;

/// What a prepared launch depends on: the problem signature (shape, strides, dtype, mask,
/// scale, LSE) and the caller's request (a plan's is its config). The device is the
/// `Attention`'s own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct LaunchKey {
    shape: Shape,
    strides: [Strides; 4],
    dtype: Dtype,
    causal: Causal,
    /// The scale's bits (`None`: 1/sqrt(D)); equal bits, equal scale.
    scale_bits: Option<u32>,
    with_lse: bool,
    request: Request,
}

impl LaunchKey {
    fn new(problem: &Problem, request: Request) -> Self {
        LaunchKey {
            shape: problem.shape,
            strides: [problem.q_strides, problem.k_strides, problem.v_strides, problem.o_strides],
            dtype: problem.dtype,
            causal: problem.causal,
            scale_bits: problem.scale.map(f32::to_bits),
            with_lse: problem.with_lse,
            request,
        }
    }
}

pub use crate::runtime::device::{DeviceTensors, ExternalTensors, InputViews};

/// Prepared launches kept per `Attention`; past this the least recently used is dropped (it
/// holds no device memory, so dropping it waits for nothing). A decoding loop whose Sk grows
/// every step prepares one launch per step and so stays within this bound.
pub const MAX_PREPARED_LAUNCHES: usize = 256;

/// Attention on one GPU. Kernels are compiled on first use, cached on disk and kept loaded,
/// and each problem signature's launch is prepared once (plan, grid, parameters, TMA maps), so
/// a repeated call does no compile, no module load, no allocation and no synchronisation: it
/// checks the buffers and launches.
///
/// Launches are asynchronous on `gpu().stream()`, or on the caller's stream with
/// [`Attention::forward_on`]. Buffers used on several streams must be synchronised by the caller
/// (the usual CUDA stream contract). Any problem may run on several streams at once: the scratch
/// some kernels need (`splitkv`'s partials, the persistent schedulers' counters) is each
/// stream's own, allocated on a stream's first such launch (which waits for the zeroing once),
/// and a launch captured into a CUDA graph gets scratch owned by that graph. The first call of
/// a kernel compiles and loads it: make it before capturing calls into a CUDA graph. At most
/// [`MAX_PREPARED_LAUNCHES`] signatures are kept prepared.
///
/// An `Attention` is `Send`; share one between threads behind a lock (launches are a few
/// microseconds of host work).
pub struct Attention {
    gpu: Gpu,
    cache: CubinCache,
    loaded: HashMap<KernelSpec, LoadedKernel>,
    /// Looked up on every call: foldhash hashes a key in about 50 ns where the default SipHash
    /// takes about 160 (this project's x86 build machine); the keys are the caller's own
    /// problems, so SipHash's resistance to chosen collisions buys nothing here. Each launch
    /// with the call count at its last use, for evicting the least recently used.
    launches: HashMap<LaunchKey, (Launch, u64), foldhash::fast::RandomState>,
    /// The backward pass's prepared launches, kept as the forward's are.
    backward_launches: HashMap<LaunchKey, (BackwardLaunch, u64), foldhash::fast::RandomState>,
    calls: u64,
    scratch: ScratchStore,
}

/// How a call brings its tensors.
enum Tensors<'a> {
    Views(DeviceTensors<'a>),
    External(ExternalTensors),
}

impl Attention {
    /// Opens GPU `ordinal` and the kernel cache in its default place.
    pub fn new(ordinal: usize) -> Result<Self> {
        let gpu = Gpu::open(ordinal)?;
        let cache = CubinCache::open(CubinCache::default_dir())?;
        let scratch = ScratchStore::new(&gpu);
        Ok(Attention {
            gpu,
            cache,
            loaded: HashMap::new(),
            launches: HashMap::default(),
            backward_launches: HashMap::default(),
            calls: 0,
            scratch,
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn cache(&self) -> &CubinCache {
        &self.cache
    }

    /// The kernel `request` resolves to for `problem` on this GPU, checked: the problem is
    /// valid and the kernel runs it here. Plan once, then [`Attention::forward`] the plan as
    /// often as needed.
    pub fn plan(&self, problem: &Problem, request: Request) -> Result<Plan> {
        problem.validate()?;
        crate::plan::check_pass(request, Pass::Forward)?;
        if request == Request::Auto {
            crate::plan::auto_covers_head_dim(problem.shape.d)?;
        }
        let plan = plan(problem, self.gpu.arch(), self.gpu.sm_count(), request);
        plan.spec
            .validate(plan.arch)
            .map_err(|reason| crate::Error::Unsupported { imp: plan.spec.imp().to_string(), reason })?;
        Ok(plan)
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

    /// The planned kernel, compiled and packed for a launch by another process.
    pub fn launch_image(&self, plan: &Plan) -> Result<LaunchImage> {
        let compiled = compile(&plan.spec, plan.arch, Some(&self.cache))?;
        compiled.gate()?;
        LaunchImage::new(&compiled, &plan.problem, self.gpu.sm_count(), self.gpu.l2_bytes())
    }

    /// Runs `plan` on the GPU's own stream (asynchronously). Every input check happens before
    /// the launch.
    pub fn forward(&mut self, plan: &Plan, tensors: DeviceTensors<'_>) -> Result<()> {
        let stream = self.gpu.stream().clone();
        self.forward_on(&stream, plan, tensors)
    }

    /// As [`Attention::forward`], on the caller's `stream` (of this GPU's context), so the
    /// launch orders with the caller's other work without a synchronisation.
    pub fn forward_on(&mut self, stream: &CudaStream, plan: &Plan, tensors: DeviceTensors<'_>) -> Result<()> {
        self.launch(stream, Planned::Given(plan), Tensors::Views(tensors)).map(|_| ())
    }

    /// As [`Attention::forward_on`], on buffers given by address ([`ExternalTensors`], made for
    /// the plan's problem).
    pub fn forward_external(&mut self, stream: &CudaStream, plan: &Plan, tensors: ExternalTensors) -> Result<()> {
        self.launch(stream, Planned::Given(plan), Tensors::External(tensors)).map(|_| ())
    }

    /// Plans `request` for `problem` (on the first call of a signature only) and runs it on
    /// `stream`, on buffers given by address: for callers that describe every call afresh (the
    /// Python package), whose repeated call is then one lookup and the launch. Returns the
    /// kernel that ran.
    pub fn call_external(
        &mut self,
        stream: &CudaStream,
        problem: &Problem,
        request: Request,
        tensors: ExternalTensors,
    ) -> Result<KernelSpec> {
        self.launch(stream, Planned::OnMiss(problem, request), Tensors::External(tensors))
    }

    /// Runs a launch prepared by the caller (a kernel variant the planner would not choose) on
    /// `stream`, with scratch from this `Attention`'s arenas.
    pub fn run_prepared(&mut self, launch: &mut Launch, stream: &CudaStream, tensors: DeviceTensors<'_>) -> Result<()> {
        launch.run(&self.gpu, &mut self.scratch, stream, tensors)
    }

    /// Streams holding scratch now (at most [`MAX_STREAM_ARENAS`](crate::runtime::scratch::MAX_STREAM_ARENAS)).
    pub fn scratch_streams(&self) -> usize {
        self.scratch.streams()
    }

    /// Prepared launches kept now (at most [`MAX_PREPARED_LAUNCHES`]).
    pub fn prepared_launches(&self) -> usize {
        self.launches.len()
    }

    /// A plan the caller made: for this GPU's arch, a valid problem, a kernel of `pass`.
    fn check_given(&self, plan: &Plan, pass: Pass) -> Result<()> {
        if plan.arch != self.gpu.arch() {
            return Err(crate::Error::Unsupported {
                imp: plan.spec.imp().to_string(),
                reason: format!("{} was planned for {}, this GPU is {}", plan.spec.name(), plan.arch, self.gpu.arch()),
            });
        }
        plan.problem.validate()?;
        crate::plan::check_pass(Request::Config(plan.spec.config), pass)
    }

    /// The backward kernel `request` resolves to for `problem` (the forward's problem: the
    /// gradients are laid out as Q, K, V and dO as O), checked like [`Attention::plan`].
    pub fn plan_backward(&self, problem: &Problem, request: Request) -> Result<Plan> {
        problem.validate()?;
        crate::plan::check_pass(request, Pass::Backward)?;
        let plan = crate::plan::plan_backward(problem, self.gpu.arch(), self.gpu.sm_count(), request);
        plan.spec
            .validate(plan.arch)
            .map_err(|reason| crate::Error::Unsupported { imp: plan.spec.imp().to_string(), reason })?;
        Ok(plan)
    }

    /// Prepares the backward launch of `plan` (from [`Attention::plan_backward`]): compiles or
    /// loads its module. Run it with [`Attention::run_backward`] as often as needed.
    pub fn prepare_backward(&mut self, plan: &Plan) -> Result<BackwardLaunch> {
        self.check_given(plan, Pass::Backward)?;
        let kernel = self.prepare(plan)?;
        BackwardLaunch::new(kernel, &plan.problem)
    }

    /// Runs a prepared backward launch on `stream`: dQ, dK and dV from the forward's Q, K, V, O
    /// and LSE and the loss's dO (asynchronously; every buffer checked first), with scratch
    /// from the stream's arena.
    pub fn run_backward(
        &mut self,
        launch: &mut BackwardLaunch,
        stream: &CudaStream,
        tensors: BackwardTensors<'_>,
    ) -> Result<()> {
        launch.run(&self.gpu, &mut self.scratch, stream, tensors)
    }

    /// Plans `request` for `problem`'s backward pass (on the first call of a signature only) and
    /// runs it on `stream`, on buffers given by address: the Python package's autograd path.
    /// Returns the kernel that ran.
    pub fn call_backward_external(
        &mut self,
        stream: &CudaStream,
        problem: &Problem,
        request: Request,
        buffers: BackwardBuffers,
    ) -> Result<KernelSpec> {
        let key = LaunchKey::new(problem, request);
        self.calls += 1;
        if let Some((launch, last_use)) = self.backward_launches.get_mut(&key) {
            *last_use = self.calls;
            launch.run_buffers(&self.gpu, &mut self.scratch, stream, buffers)?;
            return Ok(*launch.spec());
        }
        let plan = self.plan_backward(problem, request)?;
        if !self.loaded.contains_key(&plan.spec) && is_capturing(stream)? {
            return Err(first_call_in_capture(&plan.spec));
        }
        let mut launch = self.prepare_backward(&plan)?;
        launch.run_buffers(&self.gpu, &mut self.scratch, stream, buffers)?;
        evict_oldest(&mut self.backward_launches);
        self.backward_launches.insert(key, (launch, self.calls));
        Ok(plan.spec)
    }

    fn launch(&mut self, stream: &CudaStream, planned: Planned<'_>, tensors: Tensors<'_>) -> Result<KernelSpec> {
        let key = match planned {
            Planned::Given(plan) => LaunchKey::new(&plan.problem, Request::Config(plan.spec.config)),
            Planned::OnMiss(problem, request) => LaunchKey::new(problem, request),
        };
        self.calls += 1;
        // The cached call: one hash lookup, the buffer checks, the launch.
        if let Some((launch, last_use)) = self.launches.get_mut(&key) {
            *last_use = self.calls;
            run(launch, &self.gpu, &mut self.scratch, stream, tensors)?;
            return Ok(*launch.spec());
        }
        let planned_here;
        let plan = match planned {
            Planned::Given(plan) => {
                self.check_given(plan, Pass::Forward)?;
                plan.spec
                    .validate(plan.arch)
                    .map_err(|reason| crate::Error::Unsupported { imp: plan.spec.imp().to_string(), reason })?;
                plan
            }
            Planned::OnMiss(problem, request) => {
                planned_here = self.plan(problem, request)?;
                &planned_here
            }
        };
        if !self.loaded.contains_key(&plan.spec) && is_capturing(stream)? {
            return Err(first_call_in_capture(&plan.spec));
        }
        self.prepare(plan)?;
        let mut launch = Launch::new(&self.gpu, &self.loaded[&plan.spec], &plan.problem)?;
        run(&mut launch, &self.gpu, &mut self.scratch, stream, tensors)?;
        evict_oldest(&mut self.launches);
        self.launches.insert(key, (launch, self.calls));
        Ok(plan.spec)
    }
}

/// Why a kernel's first call cannot run while its stream captures a graph.
fn first_call_in_capture(spec: &KernelSpec) -> crate::Error {
    crate::Error::Unsupported {
        imp: spec.imp().to_string(),
        reason: format!(
            "the first call of {} compiles and loads it, which CUDA does not allow while the stream captures a \
             graph: call it once with the same shape before capturing",
            spec.name()
        ),
    }
}

/// Drops the least recently used of `launches` when it holds [`MAX_PREPARED_LAUNCHES`].
fn evict_oldest<L>(launches: &mut HashMap<LaunchKey, (L, u64), foldhash::fast::RandomState>) {
    if launches.len() >= MAX_PREPARED_LAUNCHES {
        let oldest = launches.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| *k);
        if let Some(oldest) = oldest {
            launches.remove(&oldest);
        }
    }
}

/// How a launch gets its kernel: a plan the caller made, or one made here on a cache miss.
#[derive(Clone, Copy)]
enum Planned<'a> {
    Given(&'a Plan),
    OnMiss(&'a Problem, Request),
}

fn run(
    launch: &mut Launch,
    gpu: &Gpu,
    scratch: &mut ScratchStore,
    stream: &CudaStream,
    tensors: Tensors<'_>,
) -> Result<()> {
    match tensors {
        Tensors::Views(views) => launch.run(gpu, scratch, stream, views),
        Tensors::External(ext) => launch.run_buffers(gpu, scratch, stream, ext.buffers, ext.has_lse),
    }
}
