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
/// The kernel-invariant test's switch, named here so that `--help` lists it in every build.
mod kernel_invariant_env {
    pub const WRITE_ENV: &str = "EVOATTN_WRITE_INVARIANT";
}
mod lab;
mod out;
mod stores;
mod text;
mod tune;
mod verdicts;

use crate::out::errln;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
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
Exit codes: 0 success, 1 a check failed, 2 could not run (bad input, no GPU, no driver, no NVRTC)."
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
    /// Time kernels with device events on random inputs, against peers in the same run (medians
    /// and TFLOP/s in the table; every sample, p10 and p90 in --json).
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

/// Every environment variable evoattn reads, and what it does: `--help` prints this table, and a
/// test keeps it equal to the code's `*_ENV` constants and to the README's list.
const ENVIRONMENT: [(&str, &str); 11] = [
    (evoattn::plan::IMPL_ENV, "a family for --impl auto to run (mma, wgmma, splitkv, reference)"),
    (evoattn::runtime::nvrtc::NVRTC_ENV, "libnvrtc (a file or its directory), before the usual places"),
    (evoattn::runtime::cache::CACHE_DIR_ENV, "moves the kernel cache, the run history and the tuner's store"),
    (tune::tuned::NO_TUNED_ENV, "=1: plan with the hand defaults, not the tuned store"),
    (lab::oracle::PYTHON_ENV, "the Python that runs the peers (default python3; needs PyTorch with CUDA)"),
    (lab::oracle::PATH_ENV, "the directory holding evoattn_oracle (default: python/ above the binary or here)"),
    (lab::oracle::TIMEOUT_ENV, "seconds an oracle request may take (default 300)"),
    (lab::oracle::FAKE_ENV, "=1: synthetic peers without PyTorch or a GPU (tests)"),
    (lab::open::BACKEND_ENV, "=mock: a CPU backend with synthetic timings (tests)"),
    (lab::mock::FAULT_ENV, "the mock misbehaves: unwritten, wrong or warming (tests)"),
    (kernel_invariant_env::WRITE_ENV, "=1: the kernel-invariant test rewrites its lists (development)"),
];

/// The long help: what the tool is, then the environment table.
fn long_about() -> String {
    let about = Cli::command().get_long_about().map(|a| a.to_string()).unwrap_or_default();
    let width = ENVIRONMENT.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let rows: Vec<String> = ENVIRONMENT.iter().map(|(name, what)| format!("  {name:<width$}  {what}")).collect();
    format!("{about}\n\nEnvironment:\n{}", rows.join("\n"))
}

fn main() -> ExitCode {
    let matches = Cli::command().long_about(long_about()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `*_ENV` constant naming an `EVOATTN_` variable in the sources (library and CLI).
    fn env_constants_in_sources() -> Vec<String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = Vec::new();
        let mut dirs = vec![root.join("evoattn/src"), root.join("evoattn-cli/src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("a source dir").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).expect("a source file");
                    for line in text.lines().filter(|l| l.contains("_ENV: &str = \"EVOATTN_")) {
                        found.push(line.split('"').nth(1).expect("a quoted name").to_string());
                    }
                }
            }
        }
        found.sort();
        found.dedup();
        found
    }

    #[test]
    fn help_lists_every_environment_variable_the_code_reads_and_no_other() {
        let mut documented: Vec<String> = ENVIRONMENT.iter().map(|(name, _)| name.to_string()).collect();
        documented.sort();
        assert_eq!(documented, env_constants_in_sources());
        let help = long_about();
        assert!(ENVIRONMENT.iter().all(|(name, what)| help.contains(name) && help.contains(what)), "{help}");
    }

    #[test]
    fn the_readme_names_every_environment_variable_and_preset() {
        let readme = include_str!("../../../README.md");
        for (name, _) in ENVIRONMENT {
            assert!(readme.contains(&format!("`{name}")), "README does not mention {name}");
        }
        let presets = readme.lines().find(|l| l.starts_with("- Presets:")).expect("the README's preset list");
        let list = readme[readme.find(presets).expect("found")..].split("\n- ").next().expect("the item");
        for name in lab::presets::NAMES {
            assert!(list.contains(&format!("`{name}`")), "the README's preset list lacks {name}");
        }
    }

    #[test]
    fn run_help_names_the_head_dims_the_kernels_are_built_for() {
        let mut dims: Vec<usize> = evoattn::Impl::ALL.iter().flat_map(|i| i.head_dims().iter().copied()).collect();
        dims.sort_unstable();
        dims.dedup();
        let run = Cli::command().find_subcommand("run").expect("run").clone();
        let input = run.get_arguments().find(|a| a.get_id() == "input").expect("--input");
        let help = input.get_help().expect("--input has help").to_string().replace('\n', " ");
        let named: Vec<String> = dims.iter().map(usize::to_string).collect();
        let [init @ .., last] = named.as_slice() else { panic!("no head dims") };
        let phrase = format!("D {} or {last}", init.join(", "));
        assert!(help.contains(&phrase), "--input's help should say '{phrase}': {help}");
    }
}
