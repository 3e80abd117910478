//! `evoattn bench`: time kernels with device events on fresh random inputs.

use crate::backend::{open, TimingOptions};
use crate::inputs::{random_inputs, Distribution};
use crate::presets::ProblemArgs;
use crate::stats::summarize;
use anyhow::{bail, Context};
use evoattn::plan::ImplChoice;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    problems: ProblemArgs,
    /// Kernel to time: auto (the planner's choice; EVOATTN_IMPL overrides), mma, reference.
    #[arg(long = "impl", default_value = "auto")]
    imp: String,
    /// Lever overrides for a named --impl, e.g. block_m=64,stages=3.
    #[arg(long)]
    config: Option<String>,
    /// Timed launches per kernel (each after an L2 flush).
    #[arg(long, default_value_t = 100)]
    samples: usize,
    /// Untimed launches first (compile, module load, clocks up).
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Seed of the random inputs (standard normal).
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let choice =
        ImplChoice::parse(&args.imp).map_err(anyhow::Error::msg)?.with_env_override().map_err(anyhow::Error::msg)?;
    if args.samples == 0 {
        bail!("--samples must be at least 1");
    }
    let cases = args.problems.expand()?;
    let mut backend = open()?;
    let info = backend.info();
    let arch =
        evoattn::Arch::parse(&info.arch).with_context(|| format!("backend reports unknown arch {}", info.arch))?;
    println!(
        "bench: {} on {} ({}, driver CUDA {}), eager launches, {} samples after {} warm-up, L2 flushed before each",
        choice, info.gpu, info.arch, info.driver, args.samples, args.warmup
    );
    println!(
        "{:<22} {:<5} {:<12} {:<5} {:<44} {:>10} {:>10} {:>10} {:>9}",
        "shape B,H,Sq,D[,Hkv,Sk]", "dtype", "mask", "lay", "kernel", "median_us", "p10_us", "p90_us", "TFLOP/s"
    );
    let options = TimingOptions { warmup: args.warmup, samples: args.samples };
    for (problem, layout) in cases {
        let problem = problem.with_lse(false);
        let config = match (&args.config, choice) {
            (Some(text), ImplChoice::Fixed(imp)) => Some(
                evoattn::defaults::config(imp, arch, problem.shape.d)
                    .with_overrides(text)
                    .map_err(anyhow::Error::msg)?,
            ),
            (Some(_), ImplChoice::Auto) => bail!("--config needs a named --impl (the levers belong to one kernel)"),
            (None, _) => None,
        };
        let inputs = random_inputs(&problem, Distribution::Normal, args.seed);
        let timing = backend.time(&problem, choice, config, &inputs.q, &inputs.k, &inputs.v, options)?;
        let s = summarize(&timing.samples_us).context("no samples")?;
        println!(
            "{:<22} {:<5} {:<12} {:<5} {:<44} {:>10.2} {:>10.2} {:>10.2} {:>9.1}",
            problem.shape.to_string(),
            problem.dtype.name(),
            problem.causal.name(),
            layout.name(),
            timing.kernel,
            s.median,
            s.p10,
            s.p90,
            problem.flops() / (s.median * 1e-6) / 1e12
        );
    }
    Ok(ExitCode::SUCCESS)
}
