//! `evoattn`: run, check, compile and inspect fused attention kernels.
//!
//! Exit codes: 0 success; 1 a check or gate failed; 2 could not run (bad input, no GPU,
//! no driver, no NVRTC), with a one-line reason on stderr.

// Output goes through `out` (outln!, errln!), which survives a closed pipe; println! panics.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod commands;
mod exporters;
#[cfg(test)]
mod kernel_invariant;
mod lab;
mod out;
mod stores;
mod tune;
mod verdicts;

use crate::out::errln;
use clap::{Parser, Subcommand};
use commands as cmd;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "evoattn",
    version,
    about = "Fused attention forward kernels for NVIDIA GPUs, compiled at run time with NVRTC",
    long_about = "Fused scaled-dot-product attention (softmax(Q·Kᵀ·scale + mask)·V) for NVIDIA GPUs.\n\
Kernels are compiled at run time by NVRTC and cached on disk; every kernel is checked against a\n\
float64 reference.\n\n\
Exit codes: 0 success, 1 a check failed, 2 could not run (bad input, no GPU, no driver, no NVRTC).\n\
Environment: EVOATTN_IMPL overrides --impl auto; EVOATTN_NVRTC points at libnvrtc;\n\
EVOATTN_CACHE_DIR moves the kernel cache, the run history and the tuner's store; EVOATTN_NO_TUNED=1\n\
plans with the hand defaults instead of the tuned store."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// GPU, compute capability, driver, NVRTC version, kernels available, cache dir.
    Info(cmd::info::Args),
    /// Attention on tensors q, k, v from a safetensors file; writes o (and lse) to another.
    Run(cmd::run::Args),
    /// Correctness against the float64 / reference-kernel oracle on fresh random inputs.
    Check(cmd::check::Args),
    /// Time kernels with device events (median, p10, p90, TFLOP/s) on random inputs.
    Bench(cmd::bench::Args),
    /// Compile kernel variants for an arch (no GPU needed) and print their resource use.
    Compile(cmd::compile::Args),
    /// Pass/fail of ours against a peer, or the history, per case (exit 0 pass, 1 fail, 2 could
    /// not run); measures, or re-gates a recorded bench record with --samples (no GPU needed).
    Gate(cmd::gate::Args),
    /// Nsight Compute counters of our kernel, and whether it is compute-, memory- or
    /// latency-bound or under-occupied (needs ncu and counter access).
    Profile(cmd::profile::Args),
    /// Per-warp timeline of one launch of the warp-specialised wgmma kernel built with trace=1:
    /// cycles between its marks (data, turn, S, softmax, P·V, tile boundary, the producer's loads).
    Trace(cmd::trace::Args),
    /// Markdown tables, a CSV and SVG plots from bench records and the run history (no GPU needed).
    Report(cmd::report::Args),
    /// Search a kernel's levers on GPU workers (compile -> resources -> correctness ->
    /// timing); the planner then uses the best config per GPU and bucket. `--show` lists the store.
    Tune(cmd::tune::Args),
    /// One GPU's tuning worker (started by `tune`; JSON lines on stdin/stdout).
    #[command(name = "tune-worker", hide = true)]
    TuneWorker(tune::worker::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Info(args) => cmd::info::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Check(args) => cmd::check::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Compile(args) => cmd::compile::run(args),
        Command::Gate(args) => cmd::gate::run(args),
        Command::Profile(args) => cmd::profile::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Trace(args) => cmd::trace::run(args),
        Command::Tune(args) => cmd::tune::run(args),
        Command::TuneWorker(args) => tune::worker::run(args),
    };
    match result {
        Ok(code) => code,
        // The reader has what it wanted (`| head -1`): no more output, and nothing went wrong.
        Err(err) if out::is_closed(&err) => ExitCode::SUCCESS,
        Err(err) => {
            let text = format!("{err:#}");
            errln!("evoattn: {}", text.lines().next().unwrap_or("unknown error"));
            let rest: Vec<&str> = text.lines().skip(1).collect();
            if !rest.is_empty() {
                errln!("{}", rest.join("\n"));
            }
            ExitCode::from(2)
        }
    }
}
