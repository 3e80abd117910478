//! `evoattn invert`: inversion thinking, the founding documents' phase 6. For each problem the
//! planner's kernel, then that kernel with one pathology at a time (`lab::pathology`): each
//! checked against the oracle first (a pathology keeps the output right), then timed in blocks
//! that take turns with the original's in the same run, ranked by slowdown; with `--counters`,
//! Nsight Compute's counters of each. The ranking is a map of which properties the kernel's
//! speed depends on.

use crate::lab::backend::{Backend, Kernel, TimingOptions, Variant};
use crate::lab::correctness::{check_case, summary, CheckOptions, ExpectedCache};
use crate::lab::inputs::{Distribution, Draw, Inputs};
use crate::lab::kernel_args::KernelArgs;
use crate::lab::measure::{drifting, MEASURE_ATTEMPTS};
use crate::lab::ncu::NcuTerms;
use crate::lab::pathology::{Injection, Pathology};
use crate::lab::presets::ProblemArgs;
use crate::stores::record::Mode;
use crate::text::{self, Column, Notes, Table};
use crate::tune::profiler::Profiler;
use crate::tune::protocol::{Request as WorkerRequest, VariantFile};
use crate::verdicts::stats::{bootstrap_median_change, summarize};
use anyhow::{bail, Context};
use evoattn::kernels::main_source;
use evoattn::{Arch, Layout, Plan, Problem, Request};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The status of an arm that ran as asked.
const TIMED: &str = "timed";
/// Bootstrap resamples of each slowdown's interval.
const RESAMPLES: usize = 10_000;
const CONFIDENCE: f64 = 0.95;

#[derive(clap::Args)]
#[command(after_help = "Each pathology breaks one property a fast kernel relies on, in the planner's kernel for the
problem (or --impl/--config's), and keeps its output right: uncoalesced-loads and bank-conflicts
(cp.async copies into padded rows: mma), extra-barrier (one more barrier a key block),
divergent-softmax (odd lanes branch in the softmax), depth-one (one K/V stage), tiny-grid (one
persistent block in eight works: wgmma). Code changes are EVOATTN_PATHOLOGY_* defines compiled only
here; a pathology the kernel has nothing for is listed as not applicable, with why. Every arm
passes the correctness check before it is timed; the arms then take turns, a block of samples
each, in an order reversed every round (all measured again, once, when one's samples drift).
slowdown = the arm's median / the original's, with a 95% bootstrap interval.

Examples:
  evoattn invert --shape 1,16,16384,128 --dtype bf16 --counters --json invert.json --svg invert.svg
  evoattn invert --preset seed --impl mma --pathology bank-conflicts,uncoalesced-loads")]
pub struct Args {
    #[command(flatten)]
    problems: ProblemArgs,
    #[command(flatten)]
    kernel: KernelArgs,
    /// Pathologies to inject, comma-separated: uncoalesced-loads, bank-conflicts, extra-barrier,
    /// divergent-softmax, depth-one, tiny-grid (default: all).
    #[arg(long, value_delimiter = ',', value_enum, hide_possible_values = true)]
    pathology: Vec<Pathology>,
    /// Timed launches per arm and problem, each after an L2 flush.
    #[arg(long, default_value_t = 60)]
    reps: usize,
    /// Samples per block: each round every arm takes a block of this many.
    #[arg(long, default_value_t = 10)]
    block: usize,
    /// Untimed launches before each block.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Seed of the timed inputs (mean 0, std 1); the correctness check draws its own.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Read each arm's Nsight Compute counters (tensor pipe, SM busy, DRAM, barrier stalls,
    /// registers): one launch per arm under ncu, with the clocks as they are.
    #[arg(long)]
    counters: bool,
    /// The ncu binary for --counters (default: ncu on PATH, then /usr/local/cuda/bin/ncu).
    #[arg(long, value_name = "PATH", requires = "counters")]
    ncu: Option<PathBuf>,
    /// A run of ncu on one arm that lasts longer is killed, and that arm gets no counters.
    #[arg(long, default_value = "120s", value_parser = crate::commands::tune::parse_duration, requires = "counters")]
    ncu_timeout: std::time::Duration,
    /// Write every arm (its change, status, samples' median, slowdown and counters) as JSON here.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write the slowdowns as a bar chart (SVG) here.
    #[arg(long, value_name = "PATH")]
    svg: Option<PathBuf>,
}

/// What an arm runs.
enum ArmKernel {
    /// A config, planned for the timed problem and for the checked one (the check reads the
    /// LSE too, and a plan's launch takes an LSE buffer exactly when its problem asks for one).
    Planned {
        timed: Box<Plan>,
        checked: Box<Plan>,
    },
    Variant(Variant),
}

impl ArmKernel {
    /// `config` planned for `problem` (timed without LSE) and for its check (with).
    fn planned(problem: &Problem, config: evoattn::KernelConfig, (arch, sm_count): (Arch, u32)) -> Self {
        let plan = |p: &Problem| evoattn::plan::plan(p, arch, sm_count, Request::Config(config));
        ArmKernel::Planned { timed: Box::new(plan(problem)), checked: Box::new(plan(&problem.clone().with_lse(true))) }
    }

    /// The kernel for the checked problem (`checked`) or the timed one.
    fn kernel(&self, checked: bool) -> Kernel<'_> {
        match self {
            ArmKernel::Planned { timed, checked: c } => Kernel::Planned(if checked { c } else { timed }),
            ArmKernel::Variant(variant) => Kernel::Variant(variant),
        }
    }
}

/// One arm of a problem's run: the original, or one pathology.
struct Arm {
    name: String,
    change: String,
    /// None once it could not run (not applicable, no compile, wrong output), with why.
    kernel: Option<ArmKernel>,
    status: String,
    samples_us: Vec<f64>,
    counters: Option<NcuTerms>,
}

#[derive(Serialize)]
struct ArmJson<'a> {
    pathology: &'a str,
    change: &'a str,
    /// `timed`, or why it was not.
    status: &'a str,
    median_us: Option<f64>,
    /// The arm's median / the original's.
    slowdown: Option<f64>,
    slowdown_ci: Option<[f64; 2]>,
    counters: Option<NcuTerms>,
    samples_us: &'a [f64],
}

#[derive(Serialize)]
struct ProblemJson<'a> {
    shape: String,
    dtype: &'static str,
    causal: &'static str,
    kernel: String,
    gpu: &'a str,
    arms: Vec<ArmJson<'a>>,
}

/// The arms of `plan`'s problem: the original first, then each pathology as it applies.
fn arms(plan: &Plan, (arch, sm_count): (Arch, u32), pathologies: &[Pathology]) -> Vec<Arm> {
    let original = Arm {
        name: "original".into(),
        change: "none".into(),
        kernel: Some(ArmKernel::planned(&plan.problem, plan.spec.config, (arch, sm_count))),
        status: TIMED.into(),
        samples_us: Vec::new(),
        counters: None,
    };
    let mut arms = vec![original];
    for &p in pathologies {
        let injected = p
            .inject(&plan.spec, arch)
            .and_then(|injection| build(plan, (arch, sm_count), &injection).map(|k| (injection, k)));
        let (change, kernel, status) = match injected {
            Ok((injection, kernel)) => (injection.describe(&plan.spec.config), Some(kernel), TIMED.to_string()),
            Err(why) => ("-".to_string(), None, format!("not run: {why}")),
        };
        arms.push(Arm { name: p.name().into(), change, kernel, status, samples_us: Vec::new(), counters: None });
    }
    arms
}

/// The kernel of an injection: the planned config, or its source compiled with the define
/// (through the resource gate, as every kernel).
fn build(plan: &Plan, (arch, sm_count): (Arch, u32), injection: &Injection) -> Result<ArmKernel, String> {
    let spec = evoattn::KernelSpec { config: injection.config, ..plan.spec };
    let Some(define) = injection.define else {
        return Ok(ArmKernel::planned(&plan.problem, spec.config, (arch, sm_count)));
    };
    let unit = main_source(spec.imp());
    let compiled =
        crate::lab::variant::compile_source(&spec, arch, &unit, &[define]).map_err(|e| format!("compile: {e}"))?;
    compiled.gate().map_err(|e| format!("resources: {e}"))?;
    Ok(ArmKernel::Variant(Variant { source: unit.text.to_string(), compiled }))
}

/// Each arm that runs, checked against the oracle; a wrong one is not timed.
fn check(backend: &mut dyn Backend, problem: &Problem, layout: Layout, arms: &mut [Arm]) {
    let mut expected = ExpectedCache::default();
    let checked = problem.clone().with_lse(true);
    for arm in arms.iter_mut() {
        let Some(kernel) = &arm.kernel else { continue };
        let result = check_case(backend, &CheckOptions::TUNE, kernel.kernel(true), &checked, layout, &mut expected);
        if !result.passed {
            arm.status = format!("not timed: wrong output ({})", summary(&result));
            arm.kernel = None;
        }
    }
}

/// Every arm that runs, a block at a time, in an order reversed every round; an arm whose
/// timing fails stops there, with why. When an arm's samples drift (a warm-up under way, a
/// disturbance that fades), every arm is measured again, once, as `bench` does.
fn time(args: &Args, backend: &mut dyn Backend, problem: &Problem, seed: u64, arms: &mut [Arm]) {
    let inputs = Inputs::Drawn(Draw::new(Distribution::Normal, seed));
    for attempt in 1..=MEASURE_ATTEMPTS {
        let mut remaining = args.reps;
        let mut round = 0;
        while remaining > 0 {
            let n = remaining.min(args.block.max(1));
            let options = TimingOptions { warmup: args.warmup, samples: n, mode: Mode::Eager };
            let mut order: Vec<usize> = (0..arms.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let arm = &mut arms[i];
                let Some(kernel) = &arm.kernel else { continue };
                match backend.time(problem, kernel.kernel(false), inputs, options) {
                    Ok(t) => arm.samples_us.extend(t.samples_us),
                    Err(e) => {
                        arm.status = format!("not timed: {e}");
                        arm.kernel = None;
                    }
                }
            }
            remaining -= n;
            round += 1;
        }
        let drifting =
            drifting(arms.iter().filter(|a| a.kernel.is_some()).map(|a| (a.name.as_str(), &a.samples_us[..])));
        if drifting.is_empty() || attempt == MEASURE_ATTEMPTS {
            return;
        }
        crate::out::errln!(
            "invert: {} {}: samples drift from the first third to the last ({}); measuring every arm again",
            problem.shape,
            problem.dtype,
            drifting.join(", ")
        );
        for arm in arms.iter_mut() {
            arm.samples_us.clear();
        }
    }
}

/// Each timed arm's counters: one launch under ncu, through the tuner's worker.
fn read_counters(profiler: &Profiler, problem: &Problem, dir: &Path, arms: &mut [Arm]) {
    for (i, arm) in arms.iter_mut().enumerate() {
        let Some(kernel) = &arm.kernel else { continue };
        let (spec, variant) = match kernel {
            ArmKernel::Planned { timed, .. } => (timed.spec, None),
            ArmKernel::Variant(v) => {
                match VariantFile::write(dir.join(format!("arm-{i}.cubin")), &v.source, &v.compiled) {
                    Ok(file) => (v.compiled.spec, Some(file)),
                    Err(e) => {
                        arm.status = format!("timed; counters not read: {e}");
                        continue;
                    }
                }
            }
        };
        let request =
            WorkerRequest { variant, ..WorkerRequest::new(i as u64, &spec, problem.causal, &[problem.shape]) };
        match profiler.profile(0, &request, &spec.name()) {
            Ok(c) => arm.counters = Some(c),
            Err(e) => arm.status = format!("timed; counters not read: {e}"),
        }
    }
}

/// A timed arm's slowdown against the original (its median / the original's) and the 95%
/// bootstrap interval of that ratio.
type Slowdown = Option<(f64, [f64; 2])>;

/// The arms with their slowdowns, ranked: the original, then the timed ones by slowdown
/// (largest first), then those that did not run.
fn rank(arms: Vec<Arm>, block: usize, seed: u64) -> Vec<(Arm, Slowdown)> {
    let base = arms[0].samples_us.clone();
    let slowdown = |arm: &Arm| -> Slowdown {
        let (b, a) = (summarize(&base)?, summarize(&arm.samples_us)?);
        let ci = bootstrap_median_change(&arm.samples_us, &base, block, RESAMPLES, CONFIDENCE, seed)?;
        Some((a.median / b.median, [1.0 + ci.lo, 1.0 + ci.hi]))
    };
    let mut ranked: Vec<(Arm, Slowdown)> = arms
        .into_iter()
        .map(|a| {
            let s = slowdown(&a);
            (a, s)
        })
        .collect();
    // Largest first; those with none (not run) last, as `None` sorts below any `Some`.
    ranked[1..]
        .sort_by(|(_, x), (_, y)| y.map(|s| s.0).partial_cmp(&x.map(|s| s.0)).unwrap_or(std::cmp::Ordering::Equal));
    ranked
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.0}"))
}

/// The ranking as a table; statuses other than `timed` as numbered notes under it, each text
/// once.
fn table(ranked: &[(Arm, Slowdown)], counters: bool) -> String {
    let mut columns = vec![
        Column::right("rank"),
        Column::left("pathology"),
        Column::left("change").wraps(),
        Column::right("median\nµs"),
        Column::right("slowdown\n[95% CI]"),
    ];
    if counters {
        columns.extend(["tensor\n%", "sm\n%", "dram\n%", "barrier\nstalls", "regs"].map(Column::right));
    }
    columns.push(Column::left("notes").optional());
    let mut t = Table::new(columns);
    let mut notes = Notes::default();
    for (i, (arm, s)) in ranked.iter().enumerate() {
        let mut row = vec![
            if i == 0 { "-".into() } else { i.to_string() },
            arm.name.clone(),
            arm.change.clone(),
            summarize(&arm.samples_us).map_or("-".into(), |s| format!("{:.2}", s.median)),
            s.map_or("-".into(), |(x, [lo, hi])| format!("{x:.2}× [{lo:.2}, {hi:.2}]")),
        ];
        if counters {
            let c = arm.counters.unwrap_or_default();
            row.extend([
                pct(c.tensor_pct),
                pct(c.sm_pct),
                pct(c.dram_pct),
                c.barrier_stalls.map_or("n/a".into(), |v| format!("{v:.2}")),
                pct(c.registers),
            ]);
        }
        row.push(if arm.status == TIMED { String::new() } else { notes.refer(&arm.status).to_string() });
        t.row(row);
    }
    t.render() + &notes.render("notes:")
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    for (flag, path) in [("--json", &args.json), ("--svg", &args.svg)] {
        if let Some(p) = path {
            crate::stores::output::check_writable(flag, p)?;
        }
    }
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let profiler = if args.counters { Some(Profiler::find(args.ncu.as_deref(), args.ncu_timeout)?) } else { None };
    let pathologies = if args.pathology.is_empty() { Pathology::ALL.to_vec() } else { args.pathology.clone() };
    let mut backend = crate::lab::open::open()?;
    let info = backend.info();
    let arch = Arch::parse(&info.arch).with_context(|| format!("unknown arch {}", info.arch))?;
    let tuned = crate::tune::tuned::source(&info, args.kernel.no_tuned);
    let scratch = crate::lab::scratch::Scratch::new("invert")?;
    let mut problems_json = Vec::new();
    let mut bars = Vec::new();
    let mut out = String::new();
    for (i, (problem, layout)) in args.problems.expand()?.into_iter().enumerate() {
        let problem = problem.with_lse(false);
        let (plan, _) = args.kernel.plan(args.kernel.request()?, (arch, info.sm_count), &problem, tuned.as_ref())?;
        crate::out::errln!(
            "invert: {} {} {} {}: {} and {} pathologies",
            problem.shape,
            problem.dtype,
            problem.causal,
            plan.spec.imp(),
            plan.spec.name(),
            pathologies.len()
        );
        let mut arms = arms(&plan, (arch, info.sm_count), &pathologies);
        check(backend.as_mut(), &problem, layout, &mut arms);
        if arms[0].kernel.is_none() {
            bail!("{} {}: the original kernel {}: {}", problem.shape, problem.dtype, plan.spec.name(), arms[0].status);
        }
        let seed = args.seed + i as u64;
        time(args, backend.as_mut(), &problem, seed, &mut arms);
        if let Some(p) = &profiler {
            read_counters(p, &problem, scratch.path(), &mut arms);
        }
        let ranked = rank(arms, args.block.max(1), seed);
        out.push_str(&text::paragraph(&format!(
            "{} {} {} on {}: {} ({} samples an arm)",
            problem.shape,
            problem.dtype,
            problem.causal,
            info.gpu,
            plan.spec.config.short_name(&evoattn::defaults::config(
                plan.spec.imp(),
                arch,
                problem.dtype,
                problem.shape.d
            )),
            args.reps
        )));
        out.push_str(&table(&ranked, args.counters));
        let label = format!("{} {} {}", problem.shape, problem.dtype, problem.causal);
        for (arm, s) in ranked.iter().skip(1) {
            if let Some((x, _)) = s {
                bars.push((format!("{label}: {}", arm.name), *x));
            }
        }
        problems_json.push((problem, plan.spec.name(), ranked));
    }
    out.push_str(&text::paragraph(
        "slowdown = the arm's median / the original's (above 1 slower), with the 95% bootstrap interval of that ratio; \
         change = the levers that differ from the original and the define compiled in; arms take turns a block at a \
         time in one run",
    ));
    if let Some(path) = &args.json {
        let records: Vec<ProblemJson> = problems_json
            .iter()
            .map(|(problem, kernel, ranked)| ProblemJson {
                shape: problem.shape.to_string(),
                dtype: problem.dtype.name(),
                causal: problem.causal.name(),
                kernel: kernel.clone(),
                gpu: &info.gpu,
                arms: ranked
                    .iter()
                    .map(|(arm, s)| ArmJson {
                        pathology: &arm.name,
                        change: &arm.change,
                        status: &arm.status,
                        median_us: summarize(&arm.samples_us).map(|s| s.median),
                        slowdown: s.map(|s| s.0),
                        slowdown_ci: s.map(|s| s.1),
                        counters: arm.counters,
                        samples_us: &arm.samples_us,
                    })
                    .collect(),
            })
            .collect();
        std::fs::write(path, serde_json::to_string_pretty(&records)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        out.push_str(&text::paragraph(&format!("arms written to {}", path.display())));
    }
    if let Some(path) = &args.svg {
        use crate::exporters::svg::{bars_svg, FASTER_COLOR, SLOWER_COLOR};
        let svg = bars_svg(
            &format!("evoattn invert on {}", info.gpu),
            "slowdown (the pathology's median / the original's)",
            "problem: pathology",
            &bars,
            [("slower (≥ 1)", SLOWER_COLOR), ("faster (< 1)", FASTER_COLOR)],
        )?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
        out.push_str(&text::paragraph(&format!("bar chart written to {}", path.display())));
    }
    crate::out::text(&out)?;
    Ok(ExitCode::SUCCESS)
}
