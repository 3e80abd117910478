//! A backend that computes on the CPU: the float64 reference, rounded to the dtype and written
//! by the output strides into a NaN-poisoned buffer, as the GPU backend's contract says. It
//! makes the CLI's behaviour (files, tables, exit codes) testable with no GPU, and its faults
//! (`EVOATTN_MOCK_FAULT`) show that the checks catch a broken kernel.

use crate::lab::backend::digest;
use crate::lab::backend::{
    Backend, BackendInfo, Backward, Forward, HostCostRounds, Kernel, Timing, TimingOptions, TraceRun, Variant,
};
use crate::lab::inputs::{nan_bits, Draw, HostInputs, Inputs};
use crate::out::errln;
use evoattn::config::{TRACE_BLOCKS, TRACE_EVENTS, WARPGROUP_THREADS, WARP_THREADS};
use evoattn::plan::plan;
use evoattn::reference::{attention_f64_descaled, logical_offsets};
use evoattn::runtime::compile::CompiledKernel;
use evoattn::runtime::device::LaunchImage;
use evoattn::trace::{word, Tag};
use evoattn::{Arch, Error, Impl, KernelConfig, KernelSpec, Plan, Problem, ProblemError, Request, TensorName};
use std::collections::{HashMap, HashSet};

/// Environment variable that makes the mock misbehave (tests only): `unwritten`, `wrong` or
/// `warming`.
pub const FAULT_ENV: &str = "EVOATTN_MOCK_FAULT";

/// The arch the mock plans for: the project's main target (H100/H200).
const MOCK_ARCH: Arch = Arch::Sm90a;
/// What the mock reports to be: an H100 SXM, compute capability 9.0 with 132 SMs.
const MOCK_COMPUTE_CAPABILITY: (i32, i32) = (9, 0);
/// An H100's L2 (50 MB), so flush sizes in mock records look like real ones.
const MOCK_L2_BYTES: usize = 50 * 1024 * 1024;
const MOCK_SM_COUNT: u32 = 132;
/// The CUBIN of the mock's launch images: an ELF magic and no kernel (the fake oracle only
/// checks that the file is there).
const MOCK_CUBIN: &[u8] = b"\x7fELF evoattn mock: no kernel";

/// The rate the mock's synthetic timings pretend to reach, so that tables and gates built on
/// them have plausible magnitudes.
const MOCK_TFLOPS: f64 = 100.0;
/// Fixed cost per launch in the synthetic timings, in microseconds.
const MOCK_LAUNCH_US: f64 = 5.0;
/// Relative spread of the synthetic samples (deterministic, seeded by the sample index).
const MOCK_JITTER: f64 = 0.02;
/// Host cost of one prepared call in the synthetic host-cost samples, in microseconds: what
/// an H100 machine's launch path measured (3-4 µs, docs/perf-log.md).
const MOCK_HOST_COST_US: f64 = 3.5;

/// Sample `i`'s deterministic relative deviation in [-MOCK_JITTER, MOCK_JITTER): a fixed
/// low-discrepancy sequence (the golden ratio's fractions) scaled to the spread.
fn jitter(i: usize) -> f64 {
    ((i as f64 * 0.618_033_988_75).fract() * 2.0 - 1.0) * MOCK_JITTER
}

/// The mock's synthetic timeline (`trace`): the marks of a consumer warp's key block with the
/// cycles before each, and of a tile around them; tiles and key blocks per traced warp.
const MOCK_KEY_BLOCK_MARKS: [(Tag, u64); 7] = [
    (Tag::KvReady, 40),
    (Tag::Turn, 120),
    (Tag::Issued, 30),
    (Tag::SDone, 280),
    (Tag::SoftmaxDone, 620),
    (Tag::PvDone, 60),
    (Tag::Packed, 90),
];
const MOCK_TILE_MARKS: [(Tag, u64); 3] = [(Tag::Tile, 200), (Tag::Epilogue, 100), (Tag::EpilogueDone, 400)];
const MOCK_TRACE_TILES: usize = 2;
const MOCK_TRACE_KEY_BLOCKS: usize = 4;
const MOCK_TRACE_BLOCKS: usize = 2;

/// The words a `trace=1` kernel of `spec` would leave (kernels/wgmma/trace.cuh's format) for the
/// mock's synthetic schedule: the producer warp's loads, each consumer warp's key blocks.
fn mock_trace_words(spec: &KernelSpec) -> Vec<u64> {
    let warps = (spec.threads() / WARP_THREADS) as usize;
    let mut words = vec![0u64; TRACE_BLOCKS * warps * TRACE_EVENTS];
    for block in 0..MOCK_TRACE_BLOCKS {
        for warp in 0..warps {
            let mut events = vec![word(Tag::Sm, block as u64)];
            let mut clock = 1000;
            let mut mark = |tag: Tag, cycles: u64, events: &mut Vec<u64>| {
                clock += cycles;
                events.push(word(tag, clock));
            };
            for _ in 0..MOCK_TRACE_TILES {
                if warp == 0 {
                    mark(Tag::ProducerTile, 50, &mut events);
                    for _ in 0..MOCK_TRACE_KEY_BLOCKS {
                        mark(Tag::ProducerK, 600, &mut events);
                        mark(Tag::ProducerV, 640, &mut events);
                    }
                } else if warp >= (WARPGROUP_THREADS / WARP_THREADS) as usize {
                    mark(MOCK_TILE_MARKS[0].0, MOCK_TILE_MARKS[0].1, &mut events);
                    for _ in 0..MOCK_TRACE_KEY_BLOCKS {
                        MOCK_KEY_BLOCK_MARKS.iter().for_each(|&(tag, cycles)| mark(tag, cycles, &mut events));
                    }
                    MOCK_TILE_MARKS[1..].iter().for_each(|&(tag, cycles)| mark(tag, cycles, &mut events));
                }
            }
            let at = (block * warps + warp) * TRACE_EVENTS;
            words[at..at + events.len()].copy_from_slice(&events);
        }
    }
    words
}

/// Added to one output element by the `wrong` fault: far outside any tolerance, and exact in
/// both dtypes so the shift survives rounding.
const WRONG_SHIFT: f64 = 0.25;
/// How much slower the `warming` fault's first timing call is: a warm-up still under way.
const WARMING_SLOWDOWN: f64 = 4.0;
/// How much slower the `power-cap` mock's every other timing call is.
const POWER_CAP_SLOWDOWN: f64 = 1.12;

/// A source variant holding this line hangs in the mock, as an infinite loop hangs on a GPU.
pub const PLANTED_HANG: &str = "EVOATTN_PLANTED_FAULT: hang";
/// A source variant holding this line kills the mock's process, as an out-of-bounds write
/// poisons a CUDA context: nothing after it in that process can be trusted.
pub const PLANTED_CRASH: &str = "EVOATTN_PLANTED_FAULT: out-of-bounds";
/// How long the planted hang sleeps per round (it never returns).
const HANG_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// A source variant holding this and a [`Cheat`]'s name games the gates as a kernel could: it
/// behaves until it is timed (a real one counts its launches in a module global), then cheats.
pub const PLANTED_CHEAT: &str = "EVOATTN_PLANTED_CHEAT: ";
/// What an empty timed stream measures: the events of a kernel that moved its work elsewhere.
const EMPTY_STREAM_US: f64 = 1.0;
/// The time of a cheat that skips half its work, relative to the honest kernel's.
const HALF_WORK: f64 = 0.5;
/// The time of a cheat that copies an old output, relative to the honest kernel's.
const COPY_ONLY: f64 = 0.05;

/// The cheats a planted source acts out once it has been timed, each what the integrity gate
/// is there to catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cheat {
    /// Returns the output of an earlier call on the same problem, whatever the inputs.
    CachedOutput,
    /// Writes only the first half of O.
    PartialWrite,
    /// Skips the second half of the key blocks: those keys contribute nothing to O.
    SkippedKeyBlocks,
    /// Moves its work off the timed stream: correct outputs, timed events around nothing.
    OtherStream,
    /// Overwrites K (with zeros) while it runs.
    InputsOverwritten,
}

impl Cheat {
    pub const ALL: [Cheat; 5] = [
        Cheat::CachedOutput,
        Cheat::PartialWrite,
        Cheat::SkippedKeyBlocks,
        Cheat::OtherStream,
        Cheat::InputsOverwritten,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Cheat::CachedOutput => "cached-output",
            Cheat::PartialWrite => "partial-write",
            Cheat::SkippedKeyBlocks => "skipped-key-blocks",
            Cheat::OtherStream => "other-stream",
            Cheat::InputsOverwritten => "inputs-overwritten",
        }
    }

    /// The cheat planted in `source`, if any.
    fn of(source: &str) -> Option<Cheat> {
        let at = source.find(PLANTED_CHEAT)? + PLANTED_CHEAT.len();
        Cheat::ALL.into_iter().find(|c| source[at..].starts_with(c.name()))
    }

    /// Its timed samples' scale on the honest kernel's, or their fixed time.
    fn timed(self, honest_us: f64) -> f64 {
        match self {
            Cheat::CachedOutput => honest_us * COPY_ONLY,
            Cheat::PartialWrite | Cheat::SkippedKeyBlocks => honest_us * HALF_WORK,
            Cheat::OtherStream => EMPTY_STREAM_US,
            Cheat::InputsOverwritten => honest_us,
        }
    }
}

/// The mock's synthetic speed of a config: 1 at its optimum, each step away from it slower.
/// The mock optimum differs from the hand defaults so that a tuning run has something to find.
fn synthetic_cost(config: KernelConfig) -> f64 {
    let off = |on: bool, cost: f64| if on { 0.0 } else { cost };
    let log2_dist = |x: u32, best: f64| (f64::from(x) / best).log2().abs();
    match config {
        KernelConfig::Reference(_) => 1.0,
        KernelConfig::Mma(c) => {
            1.0 + 0.15 * log2_dist(c.block_n, 128.0)
                + 0.1 * (f64::from(c.stages) - 2.0).abs()
                + off(c.block_m == 128, 0.1)
                + off(c.q_in_regs, 0.2)
        }
        KernelConfig::Wgmma(c) => {
            1.0 + 0.1 * log2_dist(c.block_n, 128.0)
                + 0.05 * (f64::from(c.stages) - 3.0).abs()
                + off(c.consumer_warpgroups == 2, 0.2)
                + off(c.pipeline.loads() == evoattn::Loads::Tma, 0.3)
        }
        KernelConfig::Splitkv(c) => 1.0 + 0.1 * log2_dist(c.block_n, 64.0) + off(c.block_m == 64, 0.1),
        KernelConfig::Resident(c) => 1.0 + 0.1 * log2_dist(c.block_n, 128.0) + off(c.consumer_warpgroups == 2, 0.2),
        KernelConfig::Mma8(c) => 1.0 + 0.15 * log2_dist(c.block_n, 128.0) + off(c.q_in_regs, 0.2),
        KernelConfig::MmaBwd(c) => 1.0 + 0.15 * log2_dist(c.block_n, 128.0) + off(c.stages == 2, 0.1),
        // 16-bit scores move half the bytes of the unfused paths' S.
        KernelConfig::Cublas(_) | KernelConfig::HybridQk(_) | KernelConfig::HybridPv(_) => {
            let scores = config.library().expect("a library path").scores;
            off(scores == evoattn::Scores::Input, 0.5) + 1.0
        }
    }
}

/// Time of `config` relative to the default of its kernel (1 for the default itself, so the
/// mock's other timings do not move).
pub fn relative_cost(config: KernelConfig, dtype: evoattn::Dtype, head_dim: usize) -> f64 {
    synthetic_cost(config) / synthetic_cost(evoattn::defaults::config(config.imp(), MOCK_ARCH, dtype, head_dim))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Leaves the last query row of the last head (of the last batch) unwritten: O stays NaN,
    /// and so does its LSE.
    Unwritten,
    /// Adds [`WRONG_SHIFT`] to the first output element.
    Wrong,
    /// The process's first timing call is [`WARMING_SLOWDOWN`] times slower: its samples drift.
    Warming,
    /// Every other timing call is [`POWER_CAP_SLOWDOWN`] times slower, as blocks are on a GPU
    /// whose clock moves at its power cap: block medians spread without drifting.
    PowerCap,
}

impl Fault {
    const ALL: [Fault; 4] = [Fault::Unwritten, Fault::Wrong, Fault::Warming, Fault::PowerCap];

    fn name(self) -> &'static str {
        match self {
            Fault::Unwritten => "unwritten",
            Fault::Wrong => "wrong",
            Fault::Warming => "warming",
            Fault::PowerCap => "power-cap",
        }
    }
}

/// The values `EVOATTN_MOCK_FAULT` takes, as `--help` lists them.
pub fn fault_names() -> Vec<&'static str> {
    Fault::ALL.iter().map(|f| f.name()).collect()
}

/// The CPU backend selected by `EVOATTN_BACKEND=mock`.
pub struct MockBackend {
    fault: Option<Fault>,
    /// Timing calls so far (the `warming` fault slows the first).
    timing_calls: usize,
    /// What planted cheats leave behind, as a GPU's memory and module globals would.
    cheats: CheatState,
}

/// The state planted cheats keep: which variants were timed (by their source's digest), the
/// outputs they computed honestly (by variant and problem), and the inputs overwritten.
#[derive(Default)]
struct CheatState {
    timed: HashSet<u64>,
    outputs: HashMap<(u64, String), Forward>,
    overwritten: HashSet<(String, Draw)>,
}

impl MockBackend {
    /// A correct mock, or a faulty one when `EVOATTN_MOCK_FAULT` asks for it.
    pub fn from_env() -> anyhow::Result<Self> {
        let fault = match std::env::var(FAULT_ENV).as_deref() {
            Err(_) | Ok("") => None,
            Ok(name) => match Fault::ALL.into_iter().find(|f| f.name() == name) {
                Some(fault) => Some(fault),
                None => {
                    let quoted: Vec<String> = fault_names().iter().map(|n| format!("'{n}'")).collect();
                    let quoted: Vec<&str> = quoted.iter().map(String::as_str).collect();
                    anyhow::bail!("{FAULT_ENV}={name}: expected {}", crate::lab::presets::one_of(&quoted))
                }
            },
        };
        Ok(MockBackend::new(fault))
    }

    fn new(fault: Option<Fault>) -> Self {
        MockBackend { fault, timing_calls: 0, cheats: CheatState::default() }
    }
}

impl Default for MockBackend {
    /// A correct mock.
    fn default() -> Self {
        MockBackend::new(None)
    }
}

impl Backend for MockBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            gpu: "mock (CPU float64)".to_string(),
            compute_capability: MOCK_COMPUTE_CAPABILITY,
            arch: MOCK_ARCH.name().to_string(),
            sm_count: MOCK_SM_COUNT,
            l2_bytes: MOCK_L2_BYTES,
            driver: "none (mock backend)".to_string(),
            nvrtc: "none (mock backend)".to_string(),
            mock: true,
        }
    }

    /// Checks what the GPU path checks before a launch (problem, kernel spec, buffer sizes),
    /// then computes in float64 and stores like a kernel would (or as a planted cheat does).
    /// The float64 reference's gradients rounded to the dtype: an honest backward pass.
    fn backward(&mut self, plan: &Plan, inputs: &HostInputs, d_o: &[u16]) -> evoattn::Result<Backward> {
        let problem = &plan.problem;
        problem.validate()?;
        let grads = evoattn::reference::backward::backward_f64(problem, &inputs.q, &inputs.k, &inputs.v, d_o);
        let laid_out = |t: TensorName, dense: &[f64]| {
            let mut buf = vec![nan_bits(problem.dtype); problem.extent(t)];
            for (off, &x) in logical_offsets(problem, t).zip(dense) {
                buf[off] = problem.dtype.to_bits(x);
            }
            buf
        };
        Ok(Backward {
            dq: laid_out(TensorName::DQ, &grads.dq),
            dk: laid_out(TensorName::DK, &grads.dk),
            dv: laid_out(TensorName::DV, &grads.dv),
            kernel: plan.spec.name(),
        })
    }

    fn forward(&mut self, problem: &Problem, kernel: Kernel, inputs: Inputs) -> evoattn::Result<Forward> {
        // Before drawing: an invalid problem's extents may not fit memory.
        problem.validate()?;
        let Kernel::Variant(variant) = kernel else { return self.honest(problem, kernel, &inputs.host(problem)) };
        let id = digest(variant.source.as_bytes());
        let key = (id, format!("{problem:?}"));
        let cheat = Cheat::of(&variant.source).filter(|_| self.cheats.timed.contains(&id));
        let host = inputs.host(problem);
        match cheat {
            Some(Cheat::CachedOutput) if self.cheats.outputs.contains_key(&key) => {
                Ok(self.cheats.outputs[&key].clone())
            }
            Some(Cheat::PartialWrite) => {
                let mut out = self.honest(problem, kernel, &host)?;
                let written = problem.elements(TensorName::O) / 2;
                let nan = nan_bits(problem.dtype.output());
                for off in logical_offsets(problem, TensorName::O).skip(written) {
                    out.o[off] = nan;
                }
                Ok(out)
            }
            Some(Cheat::SkippedKeyBlocks) => {
                let (sk, d) = (problem.shape.sk, problem.shape.d);
                let mut host = host.into_owned();
                for (i, off) in logical_offsets(problem, TensorName::V).enumerate() {
                    if (i / d) % sk >= sk / 2 {
                        host.v[off] = 0;
                    }
                }
                self.honest(problem, kernel, &host)
            }
            _ => {
                let out = self.honest(problem, kernel, &host)?;
                if Cheat::of(&variant.source) == Some(Cheat::CachedOutput) {
                    self.cheats.outputs.insert(key, out.clone());
                }
                Ok(out)
            }
        }
    }

    /// Synthetic, deterministic samples: FLOPs at [`MOCK_TFLOPS`] plus a launch cost, with a
    /// small spread. They exercise the lab's plumbing, and say nothing about any kernel. A
    /// planted cheat starts cheating here.
    fn time(
        &mut self,
        problem: &Problem,
        kernel: Kernel,
        inputs: Inputs,
        options: TimingOptions,
    ) -> evoattn::Result<Timing> {
        let spec = planned(problem, kernel);
        problem.validate()?;
        let mut base = (MOCK_LAUNCH_US + problem.flops() / (MOCK_TFLOPS * 1e6))
            * relative_cost(spec.config, spec.dtype, spec.head_dim);
        if let Kernel::Variant(variant) = kernel {
            self.cheats.timed.insert(digest(variant.source.as_bytes()));
            if let Some(cheat) = Cheat::of(&variant.source) {
                base = cheat.timed(base);
                if let (Cheat::InputsOverwritten, Inputs::Drawn(draw)) = (cheat, inputs) {
                    self.cheats.overwritten.insert((format!("{problem:?}"), draw));
                }
            }
        }
        self.timing_calls += 1;
        let warming = self.fault == Some(Fault::Warming) && self.timing_calls == 1;
        let capped = self.fault == Some(Fault::PowerCap) && self.timing_calls.is_multiple_of(2);
        let base = match (warming, capped) {
            (true, _) => base * WARMING_SLOWDOWN,
            (_, true) => base * POWER_CAP_SLOWDOWN,
            _ => base,
        };
        let samples_us = (0..options.samples).map(|i| base * (1.0 + jitter(i))).collect();
        Ok(Timing { samples_us })
    }

    /// The planned kernel packed as the GPU backend packs it (parameter bytes, tensor maps,
    /// scratch), around a stand-in CUBIN that only the fake oracle takes.
    fn launch_image(&mut self, plan: &Plan) -> evoattn::Result<LaunchImage> {
        let compiled = CompiledKernel::from_cubin(plan.spec, MOCK_ARCH, MOCK_CUBIN.to_vec());
        LaunchImage::new(&compiled, &plan.problem, MOCK_SM_COUNT, MOCK_L2_BYTES)
    }

    /// The host inputs' digests; K's is that of zeros where a planted cheat overwrote it.
    fn input_digests(&mut self, problem: &Problem, inputs: Inputs) -> evoattn::Result<Vec<(TensorName, u64)>> {
        problem.validate()?;
        let mut host = inputs.host(problem).into_owned();
        if let Inputs::Drawn(draw) = inputs {
            if self.cheats.overwritten.contains(&(format!("{problem:?}"), draw)) {
                host.k.iter_mut().for_each(|x| *x = 0);
            }
        }
        let halves = |x: &[u16]| digest(&x.iter().flat_map(|h| h.to_le_bytes()).collect::<Vec<u8>>());
        let mut digests =
            vec![(TensorName::Q, halves(&host.q)), (TensorName::K, halves(&host.k)), (TensorName::V, halves(&host.v))];
        if let Some(d) = &host.descales {
            let floats = [&d.q, &d.k, &d.v].into_iter().flatten().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
            digests.push((TensorName::Descale, digest(&floats)));
        }
        Ok(digests)
    }

    /// Synthetic, deterministic samples around [`MOCK_HOST_COST_US`], after the checks a first
    /// (preparing) call makes. No pause between rounds: nothing disturbs the mock.
    fn host_cost(&mut self, plan: &Plan, inputs: Inputs, rounds: HostCostRounds) -> evoattn::Result<Vec<Vec<f64>>> {
        plan.problem.validate()?;
        let host = inputs.host(&plan.problem);
        checked_spec(&plan.problem, Kernel::Planned(plan), [&host.q, &host.k, &host.v])?;
        Ok((0..rounds.rounds)
            .map(|r| (0..rounds.calls).map(|i| MOCK_HOST_COST_US * (1.0 + jitter(r * rounds.calls + i))).collect())
            .collect())
    }

    fn trace(&mut self, plan: &Plan, inputs: Inputs, _warmup: usize) -> evoattn::Result<TraceRun> {
        plan.problem.validate()?;
        let host = inputs.host(&plan.problem);
        self.mock_trace(plan, [&host.q, &host.k, &host.v])
    }
}

impl MockBackend {
    /// The honest forward pass: float64, rounded and stored by the output strides.
    fn honest(&mut self, problem: &Problem, kernel: Kernel, host: &HostInputs) -> evoattn::Result<Forward> {
        let spec = checked_spec(problem, kernel, [&host.q, &host.k, &host.v])?;
        if problem.dtype.is_fp8() != host.descales.is_some() {
            return Err(Error::Unsupported {
                imp: spec.imp().to_string(),
                reason: "descales come with E4M3 inputs, and only with them".into(),
            });
        }
        let reference = attention_f64_descaled(problem, &host.q, &host.k, &host.v, host.descales.as_ref());
        // Dense O is [B, H, Sq, D]: the last row of the last head is its last D elements.
        let written = match self.fault {
            Some(Fault::Unwritten) => reference.o.len().saturating_sub(problem.shape.d),
            _ => reference.o.len(),
        };
        let out = problem.dtype.output();
        let mut o = vec![nan_bits(out); problem.extent(TensorName::O)];
        for (i, (off, &x)) in logical_offsets(problem, TensorName::O).zip(&reference.o).take(written).enumerate() {
            let x = if i == 0 && self.fault == Some(Fault::Wrong) { x + WRONG_SHIFT } else { x };
            o[off] = out.to_bits(x);
        }
        let lse = problem.with_lse.then(|| {
            let mut lse: Vec<f32> = reference.lse.iter().map(|&x| x as f32).collect();
            if let (Some(Fault::Unwritten), Some(last)) = (self.fault, lse.last_mut()) {
                *last = f32::NAN;
            }
            lse
        });
        Ok(Forward { o, lse, kernel: spec.name() })
    }

    /// A synthetic timeline in the kernel's format, decoded as the GPU path decodes it, after
    /// the checks a launch makes; it exercises the plumbing and says nothing about any kernel.
    fn mock_trace(&self, plan: &Plan, inputs: [&[u16]; 3]) -> evoattn::Result<TraceRun> {
        let spec = checked_spec(&plan.problem, Kernel::Planned(plan), inputs)?;
        evoattn::trace::instrumented(&spec)?;
        let warps = evoattn::trace::decode_kernel(&spec, &mock_trace_words(&spec))?;
        Ok(TraceRun { kernel: spec.name(), warps })
    }
}

/// The kernel the GPU path would launch for `problem`, after the checks it makes before a
/// launch (problem, kernel spec, buffer sizes).
fn checked_spec(problem: &Problem, kernel: Kernel, inputs: [&[u16]; 3]) -> evoattn::Result<KernelSpec> {
    let spec = planned(problem, kernel);
    problem.validate()?;
    let unsupported = |reason: String| Error::Unsupported { imp: spec.imp().to_string(), reason };
    spec.validate(MOCK_ARCH).map_err(unsupported)?;
    // What the launch refuses for this problem (keys past `resident`'s blocks, a causal split
    // tail), as the GPU path's launch does.
    spec.launch_needs(problem, MOCK_SM_COUNT, 1).map_err(unsupported)?;
    // A plan's launch takes an LSE buffer exactly when its own problem asked for one.
    if let Kernel::Planned(plan) = kernel {
        if plan.problem.with_lse != problem.with_lse {
            return Err(unsupported("an LSE buffer must be given exactly when the problem asks for LSE".into()));
        }
    }
    for (tensor, buf) in [TensorName::Q, TensorName::K, TensorName::V].into_iter().zip(inputs) {
        let need = problem.extent(tensor);
        if buf.len() < need {
            return Err(ProblemError::BufferTooSmall { tensor, need, have: buf.len() }.into());
        }
    }
    Ok(spec)
}

/// The kernel the mock computes `kernel` as. The mock cannot execute CUDA: a variant computes
/// as its config would, once its planted fault ([`PLANTED_HANG`], [`PLANTED_CRASH`]), if any,
/// is acted out.
fn planned(problem: &Problem, kernel: Kernel) -> KernelSpec {
    match kernel {
        Kernel::Planned(plan) => plan.spec,
        Kernel::Reference => plan(problem, MOCK_ARCH, MOCK_SM_COUNT, Request::Family(Impl::Reference)).spec,
        Kernel::Variant(variant) => {
            planted_faults(variant);
            variant.compiled.spec
        }
    }
}

/// Acts out a variant's planted fault: never returns for a hang, kills the process for a crash.
fn planted_faults(variant: &Variant) {
    if variant.source.contains(PLANTED_CRASH) {
        errln!("mock: planted out-of-bounds write in {}: process aborted", variant.compiled.spec.name());
        std::process::abort();
    }
    if variant.source.contains(PLANTED_HANG) {
        loop {
            std::thread::sleep(HANG_POLL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::inputs::{Distribution, Draw, HostInputs};
    use evoattn::reference::dense_o;
    use evoattn::{Causal, Dtype, Layout, Shape};

    fn mock_plan(problem: &Problem, request: Request) -> Plan {
        plan(problem, MOCK_ARCH, MOCK_SM_COUNT, request)
    }

    fn gqa_problem(layout: Layout) -> Problem {
        let shape = Shape { b: 2, h: 4, hkv: 2, sq: 5, sk: 3, d: 64 };
        Problem::dense(shape, Dtype::F16, layout).with_causal(Causal::BottomRight).with_lse(true)
    }

    fn run(fault: Option<Fault>, problem: &Problem, request: Request) -> evoattn::Result<(Forward, Vec<f64>)> {
        let inputs = Draw::new(Distribution::Wide, 11).host(problem);
        let plan = mock_plan(problem, request);
        let forward = MockBackend::new(fault).forward(problem, Kernel::Planned(&plan), Inputs::Host(&inputs))?;
        let reference = attention_f64_descaled(problem, &inputs.q, &inputs.k, &inputs.v, inputs.descales.as_ref());
        let rounded = reference.o.iter().map(|&x| problem.dtype.output().round(x)).collect();
        Ok((forward, rounded))
    }

    #[test]
    fn writes_the_rounded_reference_by_the_output_strides() {
        for layout in [Layout::Bhsd, Layout::Bshd] {
            let p = gqa_problem(layout);
            let (forward, want) = run(None, &p, Request::Auto).unwrap();
            assert_eq!(forward.o.len(), 2 * 4 * 5 * 64);
            assert_eq!(dense_o(&p, &forward.o), want, "{layout}");
            // Sq=5 > Sk=3 bottom-right: rows 0 and 1 of every head see no key.
            let lse = forward.lse.unwrap();
            assert_eq!(lse.len(), 2 * 4 * 5);
            assert_eq!(lse[..2], [f32::NEG_INFINITY; 2]);
            assert!(lse[2..5].iter().all(|x| x.is_finite()));
        }
    }

    #[test]
    fn unwritten_fault_leaves_exactly_the_last_row_nan() {
        let p = gqa_problem(Layout::Bshd);
        let (forward, want) = run(Some(Fault::Unwritten), &p, Request::Auto).unwrap();
        let got = dense_o(&p, &forward.o);
        let split = got.len() - 64;
        assert!(got[split..].iter().all(|x| x.is_nan()));
        assert_eq!(got[..split], want[..split]);
        let lse = forward.lse.unwrap();
        assert!(lse[lse.len() - 1].is_nan() && !lse[lse.len() - 2].is_nan());
    }

    #[test]
    fn wrong_fault_shifts_one_element() {
        let p = gqa_problem(Layout::Bhsd);
        let (forward, want) = run(Some(Fault::Wrong), &p, Request::Auto).unwrap();
        let got = dense_o(&p, &forward.o);
        let differ: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
        assert_eq!(differ, [0]);
        // rows 0-1 see no key, so element 0 is 0 and the shift lands exactly
        assert_eq!(got[0], WRONG_SHIFT);
    }

    #[test]
    fn reports_the_planned_kernel() {
        let p = gqa_problem(Layout::Bhsd);
        let (auto, _) = run(None, &p, Request::Auto).unwrap();
        // The mock is an H100: the planner picks wgmma there.
        assert!(auto.kernel.starts_with("evoattn_wgmma_f16_d64_"), "{}", auto.kernel);
        let (reference, _) = run(None, &p, Request::Family(Impl::Reference)).unwrap();
        assert_eq!(reference.kernel, "evoattn_reference_f16_d64_t128");
    }

    #[test]
    fn rejects_what_the_gpu_path_rejects() {
        let mut p = gqa_problem(Layout::Bhsd);
        p.shape.hkv = 3;
        let err = run(None, &p, Request::Auto).unwrap_err();
        assert!(matches!(err, Error::Problem(ProblemError::HeadsNotDivisible { h: 4, hkv: 3 })), "{err}");
        // D=32 is a valid problem, but no kernel is instantiated for it
        let p = Problem::dense(Shape::new(1, 1, 4, 32), Dtype::Bf16, Layout::Bhsd);
        let err = run(None, &p, Request::Auto).unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{err}");
        let p = Problem::dense(Shape::new(1, 1, 4, 64), Dtype::Bf16, Layout::Bhsd);
        let short = HostInputs { q: vec![0; 64], k: vec![], v: vec![], descales: None };
        let err = MockBackend::new(None)
            .forward(&p, Kernel::Planned(&mock_plan(&p, Request::Auto)), Inputs::Host(&short))
            .unwrap_err();
        assert!(err.to_string().contains("tensor q: buffer holds 64 elements, the problem needs 256"), "{err}");
    }

    #[test]
    fn synthetic_timings_depend_on_the_config_and_leave_defaults_alone() {
        let p = Problem::dense(Shape::new(1, 4, 256, 64), Dtype::F16, Layout::Bhsd);
        let options = TimingOptions { warmup: 0, samples: 4, mode: crate::stores::record::Mode::Eager };
        let time = |config: Option<KernelConfig>| {
            let request = config.map_or(Request::Family(Impl::Mma), Request::Config);
            let plan = mock_plan(&p, request);
            let inputs = Inputs::Drawn(Draw::new(Distribution::Normal, 0));
            MockBackend::new(None).time(&p, Kernel::Planned(&plan), inputs, options).unwrap().samples_us[0]
        };
        let default = evoattn::defaults::config(Impl::Mma, MOCK_ARCH, Dtype::F16, 64);
        assert_eq!(relative_cost(default, Dtype::F16, 64), 1.0);
        assert_eq!(time(None), time(Some(default)));
        let best = default.with_overrides("block_n=128,stages=2").unwrap();
        assert!(time(Some(best)) < time(None) / 1.2, "the mock optimum is over 20% faster than the default");
    }

    #[test]
    fn empty_problems_give_empty_outputs() {
        let p = Problem::dense(Shape { b: 0, h: 4, hkv: 2, sq: 8, sk: 8, d: 128 }, Dtype::Bf16, Layout::Bhsd);
        let (forward, _) = run(None, &p.with_lse(true), Request::Auto).unwrap();
        assert!(forward.o.is_empty());
        assert_eq!(forward.lse, Some(vec![]));
    }
}
