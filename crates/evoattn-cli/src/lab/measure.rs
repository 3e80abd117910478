//! The measurement lab: for each case, check ours for correctness, then time ours and every
//! requested peer on the same inputs, interleaved in blocks (ours, peers, ours, ...) so that
//! drift hits both sides; record raw samples. `bench` prints the record, `gate` judges it.

use crate::lab::backend::{flush_bytes, Backend, BackendInfo, Kernel, TimingOptions};
use crate::lab::clock::{clocked, ClockSampler};
use crate::lab::correctness::expected_o;
use crate::lab::inputs::{DescaleGrain, Distribution, Draw, Inputs};
use crate::lab::kernel_args::KernelArgs;
use crate::lab::open::open;
use crate::lab::oracle::{KernelLaunch, Oracle, PeerOutput, PeerTiming, PointerOffsets, FP8_PEERS, PEERS};
use crate::lab::presets::ProblemArgs;
use crate::out::errln;
use crate::stores::record::{git_commit, utc_now};
use crate::stores::record::{
    BenchRecord, CaseRecord, Environment, Measurement, Mode, ResultRecord, Status, Timer, SCHEMA, SELF_PEER,
};
use crate::verdicts::stats::{block_spread, unsteady_drift};
use anyhow::{bail, Context};
use evoattn::plan::ConfigOrigin;
use evoattn::reference::{compare, dense_o, tolerance};
use evoattn::runtime::device::LaunchImage;
use evoattn::{Arch, Layout, Plan, Problem, Request, TensorName};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Samples per interleaved block: small enough that ours and the peers alternate several
/// times within a run, large enough that the per-call warm-up is amortised.
const DEFAULT_BLOCK: usize = 20;
/// Timing passes over a case at most: a second when some side's samples drift
/// (`stats::drift`), whose samples then replace the first's for every side.
pub(crate) const MEASURE_ATTEMPTS: usize = 2;
/// How far apart our block medians may be (largest over smallest, less one) before a case with
/// timer controls takes [`SPREAD_SAMPLES_FACTOR`] times the samples: on an H100 at its power cap
/// block medians were 4-22% apart, and with 6 blocks a side the controls' medians differed from
/// ours by up to 8.5% by chance; with 24, by 3.6% at most (perf log, session 35).
const BLOCK_SPREAD: f64 = 0.05;
const SPREAD_SAMPLES_FACTOR: usize = 4;
/// Mixed into a case's seed for its wide-range correctness inputs, so they differ from the
/// timed (std 1) ones.
const WIDE_SEED: u64 = 0x57_1DE;
/// The flags of a measurement, shared by `bench` and `gate`.
#[derive(clap::Args, Debug)]
pub struct LabArgs {
    #[command(flatten)]
    pub problems: ProblemArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,
    /// Peers measured in the same run, comma-separated: sdpa-cudnn, sdpa-flash,
    /// sdpa-efficient, sdpa-math, sdpa-auto, fa4 (f16 and bf16 inputs), cudnn-fp8 (cuDNN's FP8
    /// SDPA through the cuDNN frontend, E4M3 inputs: with it, E4M3 inputs get one descale per
    /// tensor, all it takes); `self` (our kernel again, as an independent sample set: the A/A
    /// check); `self-torch-events`, `self-do-bench`, `self-torch-profiler` (our kernel launched
    /// by the oracle and timed with PyTorch's events, Triton's do_bench, PyTorch's profiler: the
    /// cross-checks of our timer, the last two eager only; a case where one is more than 3% and
    /// 0.5 µs from ours is flagged, and gate does not judge it); `evoattn-torch` (ours through the Python
    /// package evoattn, what a PyTorch caller sees; needs its wheel in the oracle's Python); or
    /// `none`. Those five are controls, never the best peer a speedup is claimed against. Default: sdpa-cudnn and
    /// sdpa-flash for f16/bf16 cases, cudnn-fp8 for E4M3 ones (both sets when a run has both).
    #[arg(long, value_delimiter = ',')]
    pub peers: Vec<String>,
    /// eager: launches as a caller sees them; graph: CUDA-graph replays (kernel time).
    #[arg(long, value_enum, default_value_t = Mode::Eager)]
    pub mode: Mode,
    /// Timed launches per implementation and case, each after an L2 flush (at most 10^6); four
    /// times as many in a case with timer controls whose block medians spread more than 5% (a
    /// GPU at its power cap), said on stderr.
    #[arg(long, default_value_t = 100)]
    pub reps: usize,
    /// Untimed launches before each side's block of samples.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// Samples per block: each round, every side (ours, each peer) takes a block of this many,
    /// in an order reversed from one round to the next.
    #[arg(long, default_value_t = DEFAULT_BLOCK)]
    pub block: usize,
    /// Seed of the random inputs, for reproducible runs: case i draws its timed inputs (mean 0,
    /// std 1), and the wide-range ones of its correctness check, from SEED + i, with a
    /// counter-based generator that gives the same values on every machine, on the GPU.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// The peers a run measures when `--peers` is not given, per input dtype.
const DEFAULT_PEERS_16_BIT: [&str; 2] = ["sdpa-cudnn", "sdpa-flash"];
const DEFAULT_PEERS_FP8: [&str; 1] = ["cudnn-fp8"];

impl LabArgs {
    /// The peers to measure on `cases`: `--peers` as given, or the defaults of the cases' dtypes.
    fn peers(&self, cases: &[(Problem, Layout)]) -> anyhow::Result<Vec<String>> {
        if self.peers.iter().any(|p| p == "none") {
            return Ok(Vec::new());
        }
        for p in &self.peers {
            if !PEERS.contains(&p.as_str()) && p != SELF_PEER && Timer::of_peer(p).is_none() {
                let timers: Vec<&str> = Timer::ALL.iter().map(|t| t.peer()).collect();
                bail!("unknown peer '{p}'; peers: {}, {SELF_PEER}, {}, or none", PEERS.join(", "), timers.join(", "));
            }
        }
        if !self.peers.is_empty() {
            return Ok(self.peers.clone());
        }
        let has = |fp8: bool| cases.iter().any(|(p, _)| p.dtype.is_fp8() == fp8);
        let defaults = [(has(false), &DEFAULT_PEERS_16_BIT[..]), (has(true), &DEFAULT_PEERS_FP8[..])];
        Ok(defaults
            .into_iter()
            .filter(|(any, _)| *any)
            .flat_map(|(_, peers)| peers.iter().map(|p| p.to_string()))
            .collect())
    }
}

/// How a run's E4M3 inputs are scaled: one descale per tensor when a peer takes no other
/// (`cudnn-fp8`), so that every side computes the same attention; one per group otherwise.
fn descale_grain(peers: &[String]) -> DescaleGrain {
    if peers.iter().any(|p| FP8_PEERS.contains(&p.as_str())) {
        DescaleGrain::PerTensor
    } else {
        DescaleGrain::PerGroup
    }
}

/// A measurement's record, and per case (in case order) our kernel's config and where it came
/// from.
pub struct Measured {
    pub record: BenchRecord,
    pub configs: Vec<CaseConfig>,
}

/// Our kernel on one case: where its config came from, the config, and its short name (the
/// family and the levers that differ from its default for the case).
pub struct CaseConfig {
    pub origin: ConfigOrigin,
    pub config: evoattn::KernelConfig,
    pub short: String,
}

/// Most samples per implementation and case: every one is kept (in memory and in the record),
/// and a million already takes minutes of GPU time per case.
pub const MAX_REPS: usize = 1_000_000;

/// Runs the measurement and returns the record; progress goes to stderr.
pub fn measure(args: &LabArgs) -> anyhow::Result<Measured> {
    let request = args.kernel.request()?;
    if args.reps == 0 || args.block == 0 {
        bail!("--reps and --block must be at least 1");
    }
    if args.reps > MAX_REPS {
        bail!("--reps {} is more than the {MAX_REPS} samples a record holds", args.reps);
    }
    let cases = args.problems.expand()?;
    let peers = args.peers(&cases)?;
    if descale_grain(&peers) == DescaleGrain::PerTensor && cases.iter().any(|(p, _)| p.dtype.is_fp8()) {
        errln!(
            "evoattn: E4M3 inputs get one descale per tensor, as cudnn-fp8 takes no other (ours is also \
             checked on wide-range inputs with one per batch and KV head)"
        );
    }
    let mut backend = open()?;
    let info = backend.info();
    let arch = Arch::parse(&info.arch).with_context(|| format!("backend reports unknown arch {}", info.arch))?;
    let mut oracle = if peers.iter().all(|p| p == SELF_PEER) {
        None
    } else {
        match Oracle::start() {
            Ok(o) => Some(o),
            // Every asked-for peer is then recorded as missing, with this reason.
            Err(e) => {
                errln!("evoattn: peers unavailable: {e:#}");
                return measure_with(
                    args,
                    request,
                    arch,
                    &info,
                    backend.as_mut(),
                    None,
                    &peers,
                    &cases,
                    Some(format!("{e:#}")),
                );
            }
        }
    };
    let measured = measure_with(args, request, arch, &info, backend.as_mut(), oracle.as_mut(), &peers, &cases, None)?;
    if let Some(o) = oracle {
        o.shutdown()?;
    }
    Ok(measured)
}

#[allow(clippy::too_many_arguments)]
fn measure_with(
    args: &LabArgs,
    request: Request,
    arch: Arch,
    info: &BackendInfo,
    backend: &mut dyn Backend,
    mut oracle: Option<&mut Oracle>,
    peers: &[String],
    cases: &[(Problem, Layout)],
    oracle_error: Option<String>,
) -> anyhow::Result<Measured> {
    let flush_bytes = flush_bytes(info.l2_bytes);
    let mut env = Environment {
        gpu: info.gpu.clone(),
        compute_capability: format!("{}.{}", info.compute_capability.0, info.compute_capability.1),
        arch: info.arch.clone(),
        sm_count: Some(info.sm_count),
        driver: info.driver.clone(),
        nvrtc: info.nvrtc.clone(),
        sm_clock_mhz: sm_clock().into_iter().collect(),
        evoattn_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: git_commit(),
        date_utc: utc_now(),
        mode: Some(args.mode),
        samples: args.reps,
        block: args.block,
        warmup: args.warmup,
        flush_bytes,
        seed: args.seed,
        oracle: oracle.as_ref().map(|o| o.hello_json().clone()),
        matmul_tflops: None,
        copy_gbps: None,
    };
    let bar = indicatif::ProgressBar::new(cases.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} cases {msg} [{elapsed}, eta {eta}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let scratch = crate::lab::scratch::Scratch::new("lab")?;
    let dir = scratch.path();
    let mut results = Vec::with_capacity(cases.len());
    let mut configs = Vec::with_capacity(cases.len());
    let tuned = crate::tune::tuned::source(info, args.kernel.no_tuned);
    let grain = descale_grain(peers);
    for (i, (problem, layout)) in cases.iter().enumerate() {
        let problem = problem.clone().with_lse(false);
        bar.set_message(format!("{} {} {}", problem.shape, problem.dtype, problem.causal));
        let (plan, origin) = args.kernel.plan(request, (arch, info.sm_count), &problem, tuned.as_ref())?;
        configs.push(CaseConfig {
            origin,
            config: plan.spec.config,
            short: crate::lab::kernel_name::short(&plan.spec, &problem, arch, info.sm_count),
        });
        let seed = args.seed + i as u64;
        let draw = Draw::new(Distribution::Normal, seed).with_descales(grain);
        let case = CaseContext { problem: &problem, seed, layout: *layout, draw, plan: &plan, dir, id: i };
        let started = std::time::Instant::now();
        let (result, checks) =
            measure_case(args, &case, backend, oracle.as_deref_mut(), peers, oracle_error.as_deref(), flush_bytes)?;
        bar.inc(1);
        if !std::io::stderr().is_terminal() {
            // No bar off a terminal (a log, CI, the GPU machine): one line per case instead, with
            // the time spent outside the timed samples (inputs, checks, compiles, the oracle).
            let elapsed = started.elapsed().as_secs_f64();
            let timed: f64 =
                std::iter::once(&result.ours).chain(&result.peers).flat_map(|m| &m.samples_us).sum::<f64>() * 1e-6;
            errln!(
                "[{}/{}] {} {} {} {} in {elapsed:.1} s, {:.1} s of it outside the timed samples (checking ours \
                 {:.1} s, the peers {:.1} s)",
                i + 1,
                cases.len(),
                problem.shape,
                problem.dtype,
                problem.causal,
                layout,
                elapsed - timed,
                checks.ours.as_secs_f64(),
                checks.peers.as_secs_f64()
            );
        }
        results.push(result);
    }
    bar.finish_and_clear();
    drop(scratch);
    env.sm_clock_mhz.extend(sm_clock());
    let ceilings = match (crate::lab::ceilings::cached(&info.gpu, &info.driver), oracle) {
        (Some(c), _) => Some(c),
        // A fake oracle's numbers are not a GPU's ceilings: never cache them.
        (None, Some(o)) if !o.hello().fake => crate::lab::ceilings::measure(o, &info.gpu, &info.driver).ok(),
        (None, Some(_)) => None,
        (None, None) => None,
    };
    env.matmul_tflops = ceilings.map(|c| c.matmul_tflops);
    env.copy_gbps = ceilings.map(|c| c.copy_gbps);
    Ok(Measured { record: BenchRecord { schema: SCHEMA.to_string(), env, results }, configs })
}

struct CaseContext<'a> {
    problem: &'a Problem,
    seed: u64,
    layout: Layout,
    /// The timed inputs (the correctness check also draws wide-range ones).
    draw: Draw,
    plan: &'a Plan,
    dir: &'a Path,
    id: usize,
}

/// Our kernel packed for the oracle to launch (the timer cross-check), written once per case.
struct TorchTimed {
    cubin: PathBuf,
    image: LaunchImage,
}

impl TorchTimed {
    fn prepare(case: &CaseContext, backend: &mut dyn Backend) -> anyhow::Result<Self> {
        let image = backend.launch_image(case.plan)?;
        let cubin = case.dir.join(format!("case{}.cubin", case.id));
        std::fs::write(&cubin, &image.cubin).with_context(|| format!("writing {}", cubin.display()))?;
        Ok(TorchTimed { cubin, image })
    }

    fn launch<'a>(&'a self, timer: Timer, output: Option<&'a Path>) -> KernelLaunch<'a> {
        let offset = |t: TensorName| self.image.pointer_offsets.iter().find(|(n, _)| *n == t).map_or(0, |(_, o)| *o);
        let [x, y, z] = self.image.grid.map(|n| n as u32);
        KernelLaunch {
            cubin: &self.cubin,
            kernel: &self.image.kernel,
            grid: [x, y, z],
            block: [self.image.block, 1, 1],
            smem: self.image.smem as u32,
            params: &self.image.params,
            pointer_offsets: PointerOffsets {
                q: offset(TensorName::Q),
                k: offset(TensorName::K),
                v: offset(TensorName::V),
                o: offset(TensorName::O),
            },
            tensor_maps: &self.image.tensor_maps,
            scratch: self.image.scratch,
            scratch_offsets: self.image.scratch_offsets,
            output,
            timer,
        }
    }
}

fn set_status(row: &mut Measurement, status: Status, reason: Option<String>) {
    row.status = status;
    row.reason = reason;
}

/// Records how far an output is from the case's reference.
fn judge(row: &mut Measurement, problem: &Problem, o_bits: &[u16], want: &[f64]) {
    let c = compare(&dense_o(problem, o_bits), want);
    (row.max_abs, row.rel_l2, row.correct) =
        (Some(c.max_abs), Some(c.rel_l2), Some(c.passes(&tolerance(problem.dtype))));
}

/// Peers the oracle runs by name: every peer but our kernel in this process (`self`) and the
/// oracle's launches of our CUBIN (the [`Timer`] controls, its own op). `evoattn-torch` is a
/// control the oracle runs like any peer.
fn is_oracle_peer(name: &str) -> bool {
    name != SELF_PEER && Timer::of_peer(name).is_none()
}

/// One case: ours checked for correctness, each peer's output judged against the same answer,
/// then every side timed in interleaved blocks.
fn measure_case(
    args: &LabArgs,
    case: &CaseContext,
    backend: &mut dyn Backend,
    mut oracle: Option<&mut Oracle>,
    peers: &[String],
    oracle_error: Option<&str>,
    flush_bytes: usize,
) -> anyhow::Result<(ResultRecord, CheckTimes)> {
    let p = case.problem;
    let started = std::time::Instant::now();
    let want = expected_o(backend, p, case.draw)?;
    let new_row = |name: &str| Measurement {
        name: name.to_string(),
        status: Status::Missing,
        reason: oracle_error.map(str::to_string),
        samples_us: Vec::with_capacity(args.reps),
        sm_clock_mhz: Vec::new(),
        max_abs: None,
        rel_l2: None,
        correct: None,
    };
    let ours = check_ours(case, backend, &want, new_row)?;
    let ours_checked = started.elapsed();
    let id = format!("case{}", case.id);
    let mut peer_rows: Vec<Measurement> = peers.iter().map(|name| new_row(name)).collect();
    for row in peer_rows.iter_mut().filter(|r| r.name == SELF_PEER) {
        set_status(row, Status::Ok, None);
        (row.max_abs, row.rel_l2, row.correct) = (ours.max_abs, ours.rel_l2, ours.correct);
    }
    let torch_timed = match oracle.as_deref_mut() {
        Some(o) => check_peers(args, case, &id, backend, o, &mut peer_rows, &want, flush_bytes)?,
        None => None,
    };
    let times = CheckTimes { ours: ours_checked, peers: started.elapsed() - ours_checked };
    let mut sides: Vec<Measurement> = std::iter::once(ours).chain(peer_rows).collect();
    time_interleaved(args, case, &id, backend, oracle.as_deref_mut(), torch_timed.as_ref(), &mut sides, flush_bytes)?;
    let ours = sides.remove(0);
    if let Some(o) = oracle {
        o.unload(&id)?;
    }
    Ok((ResultRecord { case: case_record(p, case.layout), ours, peers: sides }, times))
}

/// Where a case's time outside its samples went: checking ours (its answer, inputs drawn,
/// kernels compiled or loaded) and the peers (the oracle's inputs, each peer's first call).
struct CheckTimes {
    ours: std::time::Duration,
    peers: std::time::Duration,
}

/// Our kernel's row: its output judged on the case's inputs and, as `check` does, on wide-range
/// inputs that stress the softmax (the worse of the two errors is kept).
fn check_ours(
    case: &CaseContext,
    backend: &mut dyn Backend,
    want: &[f64],
    new_row: impl Fn(&str) -> Measurement,
) -> anyhow::Result<Measurement> {
    let p = case.problem;
    let got = backend.forward(p, Kernel::Planned(case.plan), Inputs::Drawn(case.draw))?;
    let mut ours = new_row(&got.kernel);
    set_status(&mut ours, Status::Ok, None);
    judge(&mut ours, p, &got.o, want);
    let wide = Draw::new(Distribution::Wide, case.seed ^ WIDE_SEED);
    let wide_want = expected_o(backend, p, wide)?;
    let wide_got = backend.forward(p, Kernel::Planned(case.plan), Inputs::Drawn(wide))?;
    let mut wide_row = new_row(&got.kernel);
    judge(&mut wide_row, p, &wide_got.o, &wide_want);
    ours.correct = Some(ours.correct == Some(true) && wide_row.correct == Some(true));
    let worse = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a.max(b));
    (ours.max_abs, ours.rel_l2) = (worse(ours.max_abs, wide_row.max_abs), worse(ours.rel_l2, wide_row.rel_l2));
    Ok(ours)
}

/// Loads the case into the oracle and has each peer write its output once, judged against
/// `want`; a peer that refuses or is missing is marked so. Returns our kernel packed for the
/// oracle's launch when a timer control is among the peers and the launch ran.
#[allow(clippy::too_many_arguments)]
fn check_peers(
    args: &LabArgs,
    case: &CaseContext,
    id: &str,
    backend: &mut dyn Backend,
    o: &mut Oracle,
    peer_rows: &mut [Measurement],
    want: &[f64],
    flush_bytes: usize,
) -> anyhow::Result<Option<TorchTimed>> {
    let p = case.problem;
    // The peers take V in rows (the same logical V): what they would be given.
    let peer_problem = p.clone().with_v_dense(case.layout);
    o.draw(id, &peer_problem, case.layout, case.draw)?;
    // Our kernel packed for the oracle, and its output from one launch there: the controls
    // differ only in who times that same launcher, so one check serves them all.
    let mut image: Option<Result<(TorchTimed, Vec<u16>), String>> = None;
    for row in peer_rows {
        let out_path = case.dir.join(format!("{id}-{}.safetensors", row.name));
        let timer = Timer::of_peer(&row.name);
        let refusal = match timer {
            Some(_) if p.dtype.is_fp8() => Some(
                "an E4M3 call is two launches (V's transpose, then attention); the oracle launches one".to_string(),
            ),
            Some(t) if args.mode == Mode::Graph && !t.times_graphs() => {
                Some(format!("{} times eager calls; graph mode has no twin in it", t.protocol_name()))
            }
            _ => None,
        };
        if let Some(reason) = refusal {
            set_status(row, Status::Refused, Some(reason));
        } else if timer.is_some() {
            let checked = image.get_or_insert_with(|| {
                let checked = TorchTimed::prepare(case, backend).and_then(|t| {
                    o.time_kernel(id, &t.launch(Timer::Events, Some(&out_path)), args.mode, 0, 1, flush_bytes)?;
                    let out = crate::lab::oracle::read_output(&out_path, p, case.layout)?;
                    Ok((t, out))
                });
                checked.map_err(|e| format!("{e:#}"))
            });
            match checked {
                Ok((_, out)) => {
                    set_status(row, Status::Ok, None);
                    judge(row, p, out, want);
                }
                Err(reason) => set_status(row, Status::Missing, Some(reason.clone())),
            }
        } else if is_oracle_peer(&row.name) {
            match o.output(id, &row.name, &out_path)? {
                PeerOutput::Written(_) => {
                    set_status(row, Status::Ok, None);
                    judge(row, p, &crate::lab::oracle::read_output(&out_path, p, case.layout)?, want);
                }
                PeerOutput::Refused(reason) => set_status(row, Status::Refused, Some(reason)),
                PeerOutput::Missing(reason) => set_status(row, Status::Missing, Some(reason)),
            }
        }
        let _ = std::fs::remove_file(&out_path);
    }
    Ok(image.and_then(Result::ok).map(|(t, _)| t))
}

/// Times every side that ran (`sides[0]` is ours) in interleaved blocks until each has
/// `args.reps` samples, reversing the order of the sides from one block to the next (ours,
/// peers; then peers, ours) so that a position effect within a block cancels instead of
/// favouring one side; measures all sides again, once, when a side's samples drift.
#[allow(clippy::too_many_arguments)]
fn time_interleaved(
    args: &LabArgs,
    case: &CaseContext,
    id: &str,
    backend: &mut dyn Backend,
    mut oracle: Option<&mut Oracle>,
    torch_timed: Option<&TorchTimed>,
    sides: &mut [Measurement],
    flush_bytes: usize,
) -> anyhow::Result<()> {
    let p = case.problem;
    let inputs = Inputs::Drawn(case.draw);
    let sampler = backend.sm_clock().map(ClockSampler::start);
    let controls = sides.iter().any(|s| Timer::of_peer(&s.name).is_some());
    for attempt in 1..=MEASURE_ATTEMPTS {
        let mut target = args.reps;
        let mut taken = 0;
        for block in 0.. {
            if taken == target {
                let spread = block_spread(&sides[0].samples_us, args.block);
                match spread {
                    Some(spread) if controls && target == args.reps && spread > BLOCK_SPREAD => {
                        target *= SPREAD_SAMPLES_FACTOR;
                        errln!(
                            "evoattn: {} {} {}: our block medians spread {:.0}%; {target} samples a side, so that the \
                             timer controls compare medians over more blocks",
                            p.shape,
                            p.dtype,
                            p.causal,
                            100.0 * spread
                        );
                    }
                    _ => break,
                }
            }
            let n = (target - taken).min(args.block);
            let options = TimingOptions { warmup: args.warmup, samples: n, mode: args.mode };
            let mut order: Vec<usize> = (0..sides.len()).collect();
            if block % 2 == 1 {
                order.reverse();
            }
            for index in order {
                let row = &mut sides[index];
                if row.status != Status::Ok {
                    continue;
                }
                let before = row.samples_us.len();
                let (timed, mhz) = clocked(sampler.as_ref(), || -> anyhow::Result<()> {
                    match (index, row.name.as_str(), oracle.as_deref_mut(), torch_timed) {
                        (0, _, _, _) | (_, SELF_PEER, _, _) => row
                            .samples_us
                            .extend(backend.time(p, Kernel::Planned(case.plan), inputs, options)?.samples_us),
                        (_, name, Some(o), Some(t)) if Timer::of_peer(name).is_some() => {
                            let timer = Timer::of_peer(name).expect("matched");
                            // A control that fails (an outside harness losing its records) leaves
                            // the case without that cross-check, said in its row; the bench goes on.
                            match o.time_kernel(id, &t.launch(timer, None), args.mode, args.warmup, n, flush_bytes) {
                                Ok(samples) => row.samples_us.extend(samples),
                                Err(e) => {
                                    row.samples_us.clear();
                                    set_status(row, Status::Missing, Some(format!("{e:#}")))
                                }
                            }
                        }
                        (_, name, Some(o), _) if is_oracle_peer(name) => {
                            match o.time(id, name, args.mode, args.warmup, n, flush_bytes)? {
                                PeerTiming::Samples(s) => row.samples_us.extend(s),
                                PeerTiming::Refused(reason) => set_status(row, Status::Refused, Some(reason)),
                                PeerTiming::Missing(reason) => set_status(row, Status::Missing, Some(reason)),
                            }
                        }
                        _ => {}
                    }
                    Ok(())
                });
                timed?;
                note_clock(row, before, mhz);
            }
            taken += n;
        }
        // Samples still moving (a warm-up under way, a disturbance that fades) would make the gate
        // refuse the case: measure every side again, once, so the interleaving stays fair.
        let drifting = drifting(
            sides
                .iter()
                .enumerate()
                .map(|(i, row)| (if i == 0 { "ours" } else { row.name.as_str() }, &row.samples_us[..])),
        );
        if drifting.is_empty() || attempt == MEASURE_ATTEMPTS {
            break;
        }
        errln!(
            "evoattn: {} {} {}: samples drift from the first third to the last ({}); measuring the case again",
            p.shape,
            p.dtype,
            p.causal,
            drifting.join(", ")
        );
        for row in sides.iter_mut() {
            row.samples_us.clear();
            row.sm_clock_mhz.clear();
        }
    }
    Ok(())
}

/// Notes the clock a block ran at on each sample it added to `row` (which held `taken` before
/// it): the clocks stay one per sample, or none at all once a block went without one.
fn note_clock(row: &mut Measurement, taken: usize, mhz: Option<f64>) {
    match mhz {
        Some(mhz) if row.sm_clock_mhz.len() == taken && row.samples_us.len() >= taken => {
            row.sm_clock_mhz.extend(std::iter::repeat_n(mhz, row.samples_us.len() - taken))
        }
        _ => row.sm_clock_mhz.clear(),
    }
}

/// "NAME +D%" for each named sample set that drifts from its first third to its last
/// (`stats::unsteady_drift`): why a run measures every side again.
pub(crate) fn drifting<'a>(sides: impl IntoIterator<Item = (&'a str, &'a [f64])>) -> Vec<String> {
    sides
        .into_iter()
        .filter_map(|(name, samples)| Some(format!("{name} {:+.0}%", 100.0 * unsteady_drift(samples)?)))
        .collect()
}

/// The record's description of a case.
fn case_record(p: &Problem, layout: Layout) -> CaseRecord {
    CaseRecord {
        b: p.shape.b,
        h: p.shape.h,
        hkv: p.shape.hkv,
        sq: p.shape.sq,
        sk: p.shape.sk,
        d: p.shape.d,
        dtype: p.dtype.name().into(),
        causal: p.causal.name().into(),
        layout: crate::lab::presets::layout_label(p, layout),
        flops: p.flops(),
    }
}

/// The current SM clock in MHz, if `nvidia-smi` answers.
fn sm_clock() -> Option<u32> {
    let out = std::process::Command::new("nvidia-smi")
        .args(["--query-gpu=clocks.sm", "--format=csv,noheader,nounits", "--id=0"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::record::tests::ok_measurement;

    #[test]
    fn each_sample_carries_its_blocks_clock_or_the_side_carries_none() {
        let mut row = ok_measurement("ours", &[], None);
        row.samples_us.extend([1.0, 1.0]);
        note_clock(&mut row, 0, Some(1980.0));
        row.samples_us.extend([1.1, 1.1]);
        note_clock(&mut row, 2, Some(1800.0));
        assert_eq!(row.sm_clock_mhz, [1980.0, 1980.0, 1800.0, 1800.0]);
        // A block without a reading leaves the side without clocks: partial ones would pair
        // samples with the wrong blocks.
        row.samples_us.push(1.0);
        note_clock(&mut row, 4, None);
        assert!(row.sm_clock_mhz.is_empty());
        row.samples_us.push(1.0);
        note_clock(&mut row, 5, Some(1980.0));
        assert!(row.sm_clock_mhz.is_empty());
        // A control that failed cleared its samples; its clocks go with them.
        let mut failed = ok_measurement("self-do-bench", &[], None);
        failed.samples_us.extend([1.0, 1.0]);
        note_clock(&mut failed, 0, Some(1980.0));
        failed.samples_us.clear();
        note_clock(&mut failed, 2, Some(1980.0));
        assert!(failed.sm_clock_mhz.is_empty());
    }
}
