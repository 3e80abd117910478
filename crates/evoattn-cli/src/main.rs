//! `evoattn`: run, check, compile and inspect fused attention kernels.
//!
//! Exit codes: 0 success; 1 a verdict failed (a check, a gate, our output in a bench, a compile);
//! 2 could not run (bad input, no GPU, no driver, no NVRTC), with a one-line reason on stderr.

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
#[cfg(test)]
mod properties;
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
Kernels are compiled at run time by NVRTC and cached on disk. check, bench, gate and tune test a\n\
kernel's output against float64 on the CPU (or, for problems too large for it, the reference\n\
kernel, itself checked against float64) before trusting it; run does not.\n\n\
Exit codes: 0 success; 1 a verdict failed (check: a wrong output; gate: a case; bench: our\n\
output; compile: a variant); 2 could not run (bad input, no GPU, no driver, no NVRTC).",
    after_help = "Examples:\n  \
    evoattn info                                  # what this machine can run\n  \
    evoattn check --preset small                  # correctness: every head dim, dtype and mask\n  \
    evoattn bench --preset seed --json run.json   # time ours against SDPA, keep the record"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// GPU, driver, NVRTC, the oracle's peers, the GPU's ceilings, the kernels and their defaults,
    /// the cache dir and the tuned store.
    Info(cmd::info::Args),
    /// Attention on tensors q, k, v from a safetensors file; writes o (and lse) to another.
    Run(cmd::run::Args),
    /// q, k, v from a safetensors file to FP8 E4M3 with one descale per (batch, KV head) (no GPU
    /// needed).
    Quantize(cmd::quantize::Args),
    /// Correctness against the float64 / reference-kernel oracle on fresh random inputs.
    Check(cmd::check::Args),
    /// Time kernels with device events on random inputs, against peers in the same run (medians
    /// and TFLOP/s in the table; every raw sample in --json).
    Bench(cmd::bench::Args),
    /// Compile kernel variants for an arch (no GPU needed) and print their resource use.
    Compile(cmd::compile::Args),
    /// Pass/fail of ours against a peer, or the history, per case (exit 0 pass, 1 fail, 2 could
    /// not run); measures, or re-gates a recorded bench record with --samples (no GPU needed).
    Gate(cmd::gate::Args),
    /// Nsight Compute counters of our kernel, and whether it is compute-, memory- or
    /// latency-bound or under-occupied (needs ncu and counter access).
    Profile(cmd::profile::Args),
    /// Per-warp timeline of one launch (per problem) of the warp-specialised wgmma kernel built
    /// with trace=1: cycles between its marks (data, turn, S, softmax, P·V, tile boundary, the
    /// producer's loads).
    Trace(cmd::trace::Args),
    /// Inversion thinking: the planner's kernel with one pathology at a time (uncoalesced loads,
    /// bank conflicts, an extra barrier, a divergent softmax, one stage, a tiny grid), each
    /// checked and timed against the original in the same run, ranked by slowdown.
    Invert(cmd::invert::Args),
    /// Markdown tables, a CSV and SVG plots from bench records and the run history (no GPU needed).
    Report(cmd::report::Args),
    /// Search a kernel's levers on GPU workers (compile -> resources -> correctness -> timing ->
    /// integrity); the planner then uses the best config per GPU and bucket. `--show` lists the store.
    Tune(cmd::tune::Args),
    /// One GPU's tuning worker (started by `tune`; JSON lines on stdin/stdout).
    #[command(name = "tune-worker", hide = true)]
    TuneWorker(tune::worker::Args),
}

/// Every environment variable evoattn reads, and what it does: `--help` prints this table, and a
/// test keeps it equal to the code's `*_ENV` constants and to the README's list.
const ENVIRONMENT: [(&str, &str); 13] = [
    (
        evoattn::plan::IMPL_ENV,
        "a family for --impl auto to run (mma, wgmma, splitkv, resident, mma8, cublas, hybrid-qk, hybrid-pv, reference)",
    ),
    (evoattn::runtime::nvrtc::NVRTC_ENV, "libnvrtc (a file or its directory), before the usual places"),
    (
        evoattn::runtime::cublas::CUBLAS_ENV,
        "libcublas and libcublasLt (their directory or one file), before the usual places",
    ),
    (
        evoattn::runtime::cutensor::CUTENSOR_ENV,
        "libcutensor (its directory or the file) for the library paths' gemm=cutensor, before the usual places",
    ),
    (evoattn::runtime::cache::CACHE_DIR_ENV, "moves the kernel cache, the run history and the tuner's store"),
    (tune::tuned::NO_TUNED_ENV, "=1: plan with the hand defaults, not the tuned store"),
    (lab::oracle::PYTHON_ENV, "the Python that runs the peers (default python3; needs PyTorch with CUDA)"),
    (lab::oracle::PATH_ENV, "the directory holding evoattn_oracle (default: python/ above the binary or here)"),
    (lab::oracle::TIMEOUT_ENV, "seconds an oracle request may take (default 300)"),
    (lab::oracle::FAKE_ENV, "=1: synthetic peers without PyTorch or a GPU (tests)"),
    (lab::open::BACKEND_ENV, "=mock: a CPU backend with synthetic timings (tests)"),
    (lab::mock::FAULT_ENV, "the mock misbehaves: unwritten, wrong, warming or power-cap (tests)"),
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
        Command::Quantize(args) => cmd::quantize::run(args),
        Command::Check(args) => cmd::check::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Compile(args) => cmd::compile::run(args),
        Command::Gate(args) => cmd::gate::run(args),
        Command::Profile(args) => cmd::profile::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Trace(args) => cmd::trace::run(args),
        Command::Invert(args) => cmd::invert::run(args),
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

    // Every value list `--help` prints, against the code's own list. Lists clap derives itself
    // (`--format`, `--mode`: value enums; defaults) need no test.

    /// The help of `command`'s argument `id` (the long one where there is one), on one line.
    fn arg_help(command: &str, id: &str) -> String {
        let cli = Cli::command();
        let sub = cli.find_subcommand(command).unwrap_or_else(|| panic!("no command {command}"));
        let arg = sub.get_arguments().find(|a| a.get_id() == id).unwrap_or_else(|| panic!("{command} has no {id}"));
        let help = arg.get_long_help().or(arg.get_help()).unwrap_or_else(|| panic!("{command} {id} has no help"));
        help.to_string().replace('\n', " ")
    }

    /// Every command that has the argument `id`.
    fn commands_with(id: &str) -> Vec<String> {
        let cli = Cli::command();
        let with: Vec<String> = cli
            .get_subcommands()
            .filter(|c| c.get_arguments().any(|a| a.get_id() == id))
            .map(|c| c.get_name().to_string())
            .collect();
        assert!(!with.is_empty(), "no command has {id}");
        with
    }

    /// The items of a list like `a, b or c` (backticks dropped).
    fn items(list: &str) -> Vec<String> {
        list.split(',')
            .flat_map(|item| item.split(" or "))
            .map(|item| item.trim().trim_start_matches("or ").trim().trim_matches('`').to_string())
            .filter(|item| !item.is_empty())
            .collect()
    }

    /// The names `help` lists after `marker`, to the end of the sentence, with parenthesised and
    /// bracketed asides dropped: `Our kernel: auto (the planner's), mma, wgmma` gives auto, mma,
    /// wgmma.
    fn listed(help: &str, marker: &str) -> Vec<String> {
        let start = help.find(marker).unwrap_or_else(|| panic!("'{marker}' is not in: {help}")) + marker.len();
        let mut depth = 0usize;
        let mut plain = String::new();
        for c in help[start..].chars() {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth = depth.saturating_sub(1),
                _ if depth == 0 => plain.push(c),
                _ => {}
            }
        }
        items(plain.split(['.', ';']).next().unwrap_or_default())
    }

    /// The names `help` lists in the parentheses that `marker` opens, up to `)` or `:`.
    fn listed_in_parens(help: &str, marker: &str) -> Vec<String> {
        let start = help.find(marker).unwrap_or_else(|| panic!("'{marker}' is not in: {help}")) + marker.len();
        items(help[start..].split([')', ':']).next().unwrap_or_default())
    }

    fn sorted(mut names: Vec<String>) -> Vec<String> {
        names.sort();
        names
    }

    fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> Vec<String> {
        sorted(all.iter().map(|&x| name(x).to_string()).collect())
    }

    fn plus_all(mut names: Vec<String>) -> Vec<String> {
        names.push("all".into());
        sorted(names)
    }

    #[test]
    fn help_lists_the_presets_the_code_has_in_its_order() {
        for command in commands_with("presets") {
            let help = arg_help(&command, "presets");
            assert_eq!(listed(&help, "(repeatable): "), lab::presets::NAMES, "{command} --preset: {help}");
        }
    }

    #[test]
    fn help_lists_the_dtypes_masks_and_layouts_the_code_parses() {
        use evoattn::{Causal, Dtype, Layout};
        let dtypes = names(&Dtype::ALL, Dtype::name);
        let masks = names(&Causal::ALL, Causal::name);
        let layouts = names(&Layout::ALL, Layout::name);
        for command in commands_with("presets") {
            for (id, want) in [("dtype", &dtypes), ("causal", &masks), ("layout", &layouts)] {
                let help = arg_help(&command, id);
                assert_eq!(
                    sorted(listed(&help, "comma-separated: ")),
                    plus_all(want.clone()),
                    "{command} --{id}: {help}"
                );
            }
        }
        let input = arg_help("run", "input");
        // A file holds element types: e4m3f16 is e4m3 tensors with O in f16 (`run --o-dtype`).
        let stored: Vec<String> =
            Dtype::ALL.iter().filter(|d| d.element() == **d).map(|d| format!("all {d}")).collect();
        let phrase = lab::presets::one_of(&stored.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(input.contains(&phrase), "run --input should say '{phrase}': {input}");
        assert_eq!(sorted(listed(&arg_help("run", "causal"), "Causal mask: ")), masks);
        assert_eq!(sorted(listed(&arg_help("run", "layout"), "q, k, v and o: ")), layouts);
        let every_dtype = names(&Dtype::ALL, Dtype::name);
        assert_eq!(sorted(listed_in_parens(&arg_help("compile", "dtype"), "Input element type (")), every_dtype);
    }

    #[test]
    fn help_lists_the_kernel_families_the_code_has() {
        use evoattn::Impl;
        // The forward commands' --impl takes the forward families; compile takes every family.
        let families = names(&Impl::FORWARD, Impl::name);
        let with_auto = {
            let mut n = families.clone();
            n.push("auto".into());
            sorted(n)
        };
        for command in commands_with("config_on_plan") {
            let help = arg_help(&command, "imp");
            assert_eq!(sorted(listed(&help, "Our kernel: ")), with_auto, "{command} --impl: {help}");
        }
        assert_eq!(sorted(listed(&arg_help("run", "imp"), "Kernel family: ")), with_auto);
        assert_eq!(
            sorted(listed_in_parens(&arg_help("compile", "imp"), "Kernel family (")),
            names(&Impl::ALL, Impl::name)
        );
        let tunable =
            names(&Impl::ALL.into_iter().filter(|&i| commands::tune::tunable(i)).collect::<Vec<_>>(), Impl::name);
        assert_eq!(sorted(listed(&arg_help("tune", "imp"), "levers are searched: ")), tunable);
        let (_, impl_env) = ENVIRONMENT.iter().find(|(name, _)| *name == evoattn::plan::IMPL_ENV).expect("listed");
        assert_eq!(sorted(listed_in_parens(impl_env, "to run (")), families, "{impl_env}");
    }

    #[test]
    fn help_lists_the_archs_and_head_dims_the_kernels_are_built_for() {
        use evoattn::{Arch, Impl};
        assert_eq!(
            sorted(listed_in_parens(&arg_help("compile", "arch"), "Target arch (")),
            names(&Arch::ALL, Arch::name)
        );
        let mut dims: Vec<usize> = Impl::ALL.iter().flat_map(|i| i.head_dims().iter().copied()).collect();
        dims.sort_unstable();
        dims.dedup();
        let listed: Vec<usize> = listed_in_parens(&arg_help("compile", "head_dim"), "Head dim (")
            .iter()
            .map(|d| d.parse().expect("a number"))
            .collect();
        assert_eq!(listed, dims);
    }

    #[test]
    fn help_lists_the_peers_and_controls_the_lab_runs() {
        use crate::stores::record::{is_control, Timer, PYTHON_PEER, SELF_PEER};
        let timers = Timer::ALL.map(|t| t.peer().to_string());
        let controls = sorted([SELF_PEER.to_string(), PYTHON_PEER.to_string()].into_iter().chain(timers).collect());
        let peers: Vec<String> = lab::oracle::PEERS.iter().filter(|p| !is_control(p)).map(|p| p.to_string()).collect();
        for command in commands_with("peers") {
            let help = arg_help(&command, "peers");
            assert_eq!(sorted(listed(&help, "comma-separated: ")), sorted(peers.clone()), "{command} --peers: {help}");
            // The controls and `none`, each in backticks.
            let quoted: Vec<String> =
                help.split('`').skip(1).step_by(2).map(str::to_string).filter(|w| !w.contains(' ')).collect();
            let mut want = controls.clone();
            want.push("none".into());
            assert_eq!(sorted(quoted), sorted(want), "{command} --peers: {help}");
            let cli = Cli::command();
            let sub = cli.find_subcommand(&command).expect("a command");
            let arg = sub.get_arguments().find(|a| a.get_id() == "peers").expect("--peers");
            for default in arg.get_default_values() {
                for peer in default.to_string_lossy().split(',') {
                    assert!(peers.iter().any(|p| p == peer), "default peer {peer} is not a peer");
                }
            }
        }
        let against = arg_help("gate", "against");
        assert_eq!(sorted(listed_in_parens(&against, "never a control (")), controls, "{against}");
        for peer in listed_in_parens(&against, "a peer name (").iter().filter(|p| *p != "...") {
            assert!(peers.contains(peer), "gate --against names {peer}, no peer");
        }
    }

    #[test]
    fn help_lists_the_mock_faults_the_mock_has() {
        let (_, faults) = ENVIRONMENT.iter().find(|(name, _)| *name == lab::mock::FAULT_ENV).expect("listed");
        let want: Vec<String> = lab::mock::fault_names().iter().map(|f| f.to_string()).collect();
        assert_eq!(listed(faults, "misbehaves: "), want, "{faults}");
    }

    #[test]
    fn the_readme_lists_the_families_faults_and_controls_the_code_has() {
        use evoattn::Impl;
        let readme = include_str!("../../../README.md");
        let bar_list = |marker: &str| -> Vec<String> {
            let start = readme.find(marker).unwrap_or_else(|| panic!("README lacks '{marker}'")) + marker.len();
            sorted(
                readme[start..]
                    .split(['`', ',', ' '])
                    .next()
                    .unwrap_or_default()
                    .split('|')
                    .map(str::to_string)
                    .collect(),
            )
        };
        let mut with_auto = names(&Impl::FORWARD, Impl::name);
        with_auto.push("auto".into());
        assert_eq!(bar_list("`--impl "), sorted(with_auto));
        let tunable =
            names(&Impl::ALL.into_iter().filter(|&i| commands::tune::tunable(i)).collect::<Vec<_>>(), Impl::name);
        assert_eq!(bar_list("one kernel's levers (`--impl "), tunable);
        for fault in lab::mock::fault_names() {
            assert!(readme.contains(&format!("`{fault}`")), "README does not name the mock fault {fault}");
        }
        let timers = crate::stores::record::Timer::ALL.map(|t| t.peer());
        for control in [crate::stores::record::SELF_PEER, crate::stores::record::PYTHON_PEER].into_iter().chain(timers)
        {
            assert!(readme.contains(&format!("`{control}`")), "README does not name the control {control}");
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
