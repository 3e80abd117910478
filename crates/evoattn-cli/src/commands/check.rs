//! `evoattn check`: correctness of a kernel on fresh random inputs, against float64 on the CPU
//! for small problems and the `reference` kernel (itself checked against float64) for large.

use crate::lab::backend::Kernel;
use crate::lab::correctness::{
    check_case, row, CaseResult, CheckOptions, ExpectedCache, CPU_REFERENCE_LIMIT, DEFAULT_SEEDS, ORACLE_CPU,
};
use crate::lab::kernel_args::KernelArgs;
use crate::lab::open::open;
use crate::lab::presets::ProblemArgs;
use crate::out::outln;
use anyhow::{bail, Context};
use evoattn::reference::tolerance;
use evoattn::Dtype;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Exit 0 when every case passes, 1 when one fails (a wrong output, NaN, or no kernel for it), 2
when nothing could run.

Examples:
  evoattn check --preset small                                              # every head dim, dtype and mask
  evoattn check --shape 2,32,1000,128,8 --dtype bf16 --causal bottom-right  # GQA 32:8, the KV-cache mask
  evoattn check --preset sanitize --impl wgmma --scale -0.3                 # one family, a negative scale")]
pub struct Args {
    #[command(flatten)]
    problems: ProblemArgs,
    #[command(flatten)]
    kernel: KernelArgs,
    /// Random input sets per case; even seeds draw values of mean 0 and std 1, odd seeds wide ones
    /// that push the softmax towards one-hot rows.
    #[arg(long, default_value_t = DEFAULT_SEEDS)]
    seeds: u64,
    /// First seed, for reproducing a failure.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Largest B·H·Sq·Sk·D checked against float64 on the CPU (problems of at most 2^24 input
    /// elements, which the host draws); larger use the reference kernel, on inputs drawn on the GPU.
    #[arg(long, default_value_t = CPU_REFERENCE_LIMIT)]
    cpu_limit: u64,
    /// Softmax scale for every case [default: 1/sqrt(D)]. Any finite non-zero value; a negative
    /// one checks the kernels' reductions over raw scores, which flip from max to min.
    #[arg(long, allow_hyphen_values = true)]
    scale: Option<f32>,
    /// Print only the failing rows (with the header and the summary).
    #[arg(long)]
    quiet: bool,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let request = args.kernel.request()?;
    if args.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let mut cases = args.problems.expand()?;
    if args.scale.is_some() {
        for (problem, _) in &mut cases {
            problem.scale = args.scale;
            problem.validate().context("--scale")?;
        }
    }
    let options = CheckOptions { seeds: args.seeds, seed: args.seed, cpu_limit: args.cpu_limit };
    let mut backend = open()?;
    let info = backend.info();
    let arch =
        evoattn::Arch::parse(&info.arch).with_context(|| format!("backend reports unknown arch {}", info.arch))?;
    let tuned = crate::tune::tuned::source(&info, args.kernel.no_tuned);
    outln!(
        "check: {} cases x {} seeds on {} ({}), impl {request}, tolerances per dtype in evoattn::reference::tolerance",
        cases.len(),
        args.seeds,
        info.gpu,
        info.arch
    )?;
    outln!(
        "{:<22} {:<5} {:<12} {:<5} {:<44} {:<13} {:>9} {:>9} {:>9} {:>5} result",
        "shape B,H,Sq,D[,Hkv,Sk]",
        "dtype",
        "mask",
        "lay",
        "kernel",
        "oracle",
        "max_abs",
        "rel_l2",
        "lse_abs",
        "nan"
    )?;
    let bar = indicatif::ProgressBar::new(cases.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} cases, {elapsed} elapsed, eta {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut results = Vec::with_capacity(cases.len());
    for (problem, layout) in &cases {
        // A fresh cache per case: `check` meets each problem once, and keeping its inputs would only
        // hold memory.
        let mut cache = ExpectedCache::default();
        let r = match args.kernel.plan(request, (arch, info.sm_count), problem, tuned.as_ref()) {
            Ok((plan, _)) => {
                check_case(backend.as_mut(), &options, Kernel::Planned(&plan), problem, *layout, &mut cache)
            }
            Err(e) => CaseResult::unplanned(problem, *layout, format!("{e:#}")),
        };
        if !args.quiet || !r.passed {
            bar.suspend(|| outln!("{}", row(&r)))?;
        }
        bar.inc(1);
        results.push(r);
    }
    bar.finish_and_clear();
    let failed = results.iter().filter(|r| !r.passed).count();
    for dtype in Dtype::ALL {
        let of_dtype: Vec<&CaseResult> = results.iter().filter(|r| r.problem.dtype == dtype).collect();
        let worst = of_dtype.iter().filter_map(|r| r.worst.as_ref()).map(|c| c.max_abs).fold(0.0, f64::max);
        let worst_rel = of_dtype.iter().filter_map(|r| r.worst.as_ref()).map(|c| c.rel_l2).fold(0.0, f64::max);
        if !of_dtype.is_empty() {
            let tol = tolerance(dtype);
            outln!(
                "{dtype}: {} cases, worst max_abs {worst:.3e}, worst rel_l2 {worst_rel:.3e} (tolerance: max_abs {:.1e} x max(1, |ref|), rel_l2 {:.1e})",
                of_dtype.len(),
                tol.max_abs,
                tol.rel_l2
            )?;
        }
    }
    let on_cpu = results.iter().filter(|r| r.oracle == ORACLE_CPU).count();
    outln!(
        "oracles: {on_cpu} cases against float64 on the CPU, {} against the reference kernel",
        results.len() - on_cpu
    )?;
    outln!("{} passed, {} failed", results.len() - failed, failed)?;
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
