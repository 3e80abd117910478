//! `evoattn trace`: the per-warp timeline of one launch of the warp-specialised `wgmma` kernel,
//! built with `trace=1` (kernels/wgmma/trace.cuh): where a consumer warp's key block goes (waiting for
//! data, for its ping-pong turn, for S, the softmax, for P·V), the tile boundary, and the
//! producer's loads, as cycles of the SM's clock between consecutive marks.

use crate::lab::backend::TraceRun;
use crate::lab::inputs::{Distribution, Draw, Inputs};
use crate::lab::kernel_args::KernelArgs;
use crate::lab::presets::ProblemArgs;
use crate::out::outln;
use crate::verdicts::stats::summarize;
use anyhow::{bail, Context};
use evoattn::plan::ConfigSource;
use evoattn::trace::{periods, steps, Tag, WarpTrace};
use evoattn::{Arch, KernelConfig, Plan, Problem, Request};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Only the warp-specialised wgmma kernel has marks: the problem must plan to it (or pass --impl
wgmma), on an sm_90a GPU (H100, H200). One traced launch per problem.

Examples:
  evoattn trace --shape 32,32,512,64 --dtype bf16 --out t.json          # the planner's wgmma kernel
  evoattn trace --shape 1,16,4096,128 --impl wgmma --config block_n=128  # one lever's effect on the timeline")]
pub struct Args {
    #[command(flatten)]
    problems: ProblemArgs,
    #[command(flatten)]
    kernel: KernelArgs,
    /// Launches before the traced one (the first compiles, loads and warms the caches).
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write every traced warp's marks (tag, SM clock) to this JSON file (its directory must
    /// exist; checked before tracing).
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
}

/// The `trace=1` variant of the kernel `problem` runs as `bench` plans it (`--config` levers,
/// the tuned store's best, or the planner's default), which must be `wgmma` with its
/// warp-specialised pipeline (the only one with marks).
fn traced_plan(
    args: &KernelArgs,
    target: (Arch, u32),
    problem: &Problem,
    tuned: &dyn ConfigSource,
) -> anyhow::Result<Plan> {
    let (plan, _) = args.plan(args.request()?, target, problem, tuned)?;
    match plan.spec.config {
        config @ KernelConfig::Wgmma(c) if c.pipeline.warp_specialized() => {
            let traced = config.with_overrides("trace=1").map_err(anyhow::Error::msg)?;
            Ok(evoattn::plan::plan(problem, target.0, target.1, Request::Config(traced)))
        }
        other => bail!(
            "trace instruments the warp-specialised wgmma kernel; {} runs {} ({other}): pass --impl wgmma",
            problem.shape,
            other.imp()
        ),
    }
}

/// One row per pair of consecutive marks: count, median, p10, p90 (cycles) and the pair's
/// share of all the cycles between the warps' marks.
fn print_steps(title: &str, warps: &[&WarpTrace]) -> anyhow::Result<()> {
    let all = steps(warps.iter().copied());
    let total: u64 = all.values().flatten().sum();
    if total == 0 {
        return Ok(());
    }
    outln!("{title}, cycles between consecutive marks:")?;
    outln!("  {:<18} {:<18} {:>7} {:>8} {:>8} {:>8} {:>7}", "from", "to", "n", "median", "p10", "p90", "share")?;
    for ((from, to), cycles) in &all {
        let samples: Vec<f64> = cycles.iter().map(|&c| c as f64).collect();
        let Some(s) = summarize(&samples) else { continue };
        let share = 100.0 * cycles.iter().sum::<u64>() as f64 / total as f64;
        outln!(
            "  {:<18} {:<18} {:>7} {:>8.0} {:>8.0} {:>8.0} {:>6.1}%",
            from.name(),
            to.name(),
            s.n,
            s.median,
            s.p10,
            s.p90,
            share
        )?;
    }
    Ok(())
}

fn print_period(what: &str, warps: &[&WarpTrace], tag: Tag) -> anyhow::Result<()> {
    let samples: Vec<f64> = periods(warps.iter().copied(), tag).into_iter().map(|c| c as f64).collect();
    if let Some(s) = summarize(&samples) {
        outln!("{what}: median {:.0} cycles (p10 {:.0}, p90 {:.0}; {} periods)", s.median, s.p10, s.p90, s.n)?;
    }
    Ok(())
}

fn print_run(problem: &Problem, run: &TraceRun) -> anyhow::Result<()> {
    let (producers, consumers): (Vec<&WarpTrace>, Vec<&WarpTrace>) =
        run.warps.iter().filter(|w| !w.events.is_empty()).partition(|w| w.is_producer());
    let blocks = run.warps.iter().map(|w| w.block).collect::<std::collections::BTreeSet<_>>().len();
    let full = run.warps.iter().filter(|w| w.full).count();
    crate::out::text(&crate::text::paragraph(&format!(
        "{} on {} {} {}: {blocks} blocks traced, {} consumer and {} producer warps with marks; {full} warps kept only \
         their first {} marks",
        run.kernel,
        problem.shape,
        problem.dtype,
        problem.causal,
        consumers.len(),
        producers.len(),
        evoattn::config::TRACE_EVENTS
    )))?;
    print_period("consumer key block (turn to turn)", &consumers, Tag::Turn)?;
    print_period("consumer tile (Q landed to Q landed)", &consumers, Tag::Tile)?;
    print_steps("consumer warps", &consumers)?;
    print_steps("producer warp", &producers)?;
    Ok(())
}

fn write_json(path: &PathBuf, runs: &[(Problem, TraceRun)]) -> anyhow::Result<()> {
    let records: Vec<serde_json::Value> = runs
        .iter()
        .map(|(problem, run)| {
            let warps: Vec<serde_json::Value> = run
                .warps
                .iter()
                .map(|w| {
                    let events: Vec<(String, u64)> = w.events.iter().map(|(t, c)| (format!("{t:?}"), *c)).collect();
                    serde_json::json!({"block": w.block, "warp": w.warp, "sm": w.sm, "full": w.full, "events": events})
                })
                .collect();
            serde_json::json!({
                "shape": problem.shape.to_string(),
                "dtype": problem.dtype.to_string(),
                "causal": problem.causal.to_string(),
                "kernel": run.kernel,
                "warps": warps,
            })
        })
        .collect();
    std::fs::write(path, serde_json::to_string(&records)?).with_context(|| format!("cannot write {}", path.display()))
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.out {
        crate::stores::output::check_writable("--out", path)?;
    }
    let mut backend = crate::lab::open::open()?;
    let info = backend.info();
    let arch = Arch::parse(&info.arch).ok_or_else(|| anyhow::anyhow!("unknown arch {}", info.arch))?;
    let tuned = crate::tune::tuned::source(&info, args.kernel.no_tuned);
    let mut runs = Vec::new();
    for (i, (problem, _)) in args.problems.expand()?.into_iter().enumerate() {
        let problem = problem.with_lse(false);
        let plan = traced_plan(&args.kernel, (arch, info.sm_count), &problem, tuned.as_ref())?;
        let inputs = Inputs::Drawn(Draw::new(Distribution::Normal, args.seed + i as u64));
        let run = backend.trace(&plan, inputs, args.warmup)?;
        print_run(&problem, &run)?;
        runs.push((problem, run));
    }
    if let Some(path) = &args.out {
        write_json(path, &runs)?;
    }
    Ok(ExitCode::SUCCESS)
}
