//! `evoattn profile`: runs `evoattn bench` under Nsight Compute, parses the counters and
//! says what bounds each kernel (see `ncu::classify`).

use crate::lab::kernel_args::KernelArgs;
use crate::lab::ncu::{classify, ncu_terms, parse_metrics_csv, KernelProfile, METRICS};
use crate::lab::presets::{ProblemArgs, VLayout};
use crate::out::outln;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where CUDA installs ncu when it is not on PATH.
const CUDA_NCU: &str = "/usr/local/cuda/bin/ncu";
/// ncu's kernel filter for `--impl NAME`: our kernels of that family (for `auto`, every family
/// it plans: not the reference, not the library paths), not the L2 flush, the peers, or the
/// `reference` kernel the correctness check runs on large shapes before the timed launches. For
/// a library path: its row kernel, a hybrid's own GEMM (`<name>_gemm`) and cuBLAS's GEMMs.
fn kernel_filter(imp: &str) -> String {
    use evoattn::Impl;
    let families: Vec<String> = match Impl::parse(imp) {
        Some(named) if named.is_library() => {
            return format!("regex:^(evoattn_{}_|{CUBLAS_GEMM_KERNELS})", named.symbol());
        }
        Some(named) => vec![named.symbol()],
        None => {
            Impl::FORWARD.iter().filter(|i| **i != Impl::Reference && !i.is_library()).map(|i| i.symbol()).collect()
        }
    };
    format!("regex:^evoattn_({})_", families.join("|"))
}

/// The names of the libraries' GEMM kernels, which a library path's call launches beside ours
/// (`profile --impl cublas` on the H200: `nvjet_sm90_tss_...`, `nvjet_sm90_tst_...`; older
/// GPUs' cuBLAS names its kernels after cutlass or `..._gemm_...`; cuTENSOR's, for
/// `gemm=cutensor`, are `gemm_device`, `gett*` and `*contraction*` in its internal namespace).
/// A bench under `profile` runs no peers, so no other library call is in the process.
const CUBLAS_GEMM_KERNELS: &str = "nvjet_|cutlass|.*gemm|.*gett|.*contraction";
/// Few launches: ncu replays each profiled kernel many times, and the counters do not need
/// statistics.
const BENCH_REPS: &str = "2";
const BENCH_WARMUP: &str = "1";

#[derive(clap::Args)]
#[command(after_help = "Runs `evoattn bench` on the same problems and kernel under ncu (no peers, 2 timed launches, no
history) and reads the counters of our kernel's launches. Needs a GPU, ncu and access to the
counters.

Examples:
  evoattn profile --shape 4,16,4096,128 --dtype bf16 --out prof/   # counters, and what bounds the kernel
  evoattn profile --preset seed --impl mma --launches 4            # the first 4 launches of mma kernels")]
pub struct Args {
    #[command(flatten)]
    problems: ProblemArgs,
    #[command(flatten)]
    kernel: KernelArgs,
    /// Kernel launches to profile: the first N of our kernel's family (names evoattn_FAMILY_...;
    /// with auto, any family but the reference kernel the correctness check may launch). An
    /// E4M3 `wgmma` call that transposes V in a kernel of its own (past 4k keys, and at hd256)
    /// is two kernels, the V transpose (`..._vt`) and then the attention kernel: 2 covers both.
    /// A library path's call is three a chunk of S (Q·Kᵀ, the row kernel, P·V, cuBLAS's GEMMs
    /// counted too): 3 covers a problem of one chunk.
    #[arg(long, default_value_t = 1)]
    launches: u32,
    /// Write profile.csv (ncu's raw output) and profile.json (parsed and classified) to this
    /// directory (created if absent).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The ncu binary. Default: ncu on PATH, else /usr/local/cuda/bin/ncu.
    #[arg(long, value_name = "PATH")]
    ncu: Option<PathBuf>,
}

pub fn find_ncu() -> anyhow::Result<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).map(|dir| dir.join("ncu")).find(|p| p.is_file()));
    match on_path.flatten() {
        Some(path) => Ok(path),
        None if Path::new(CUDA_NCU).is_file() => Ok(PathBuf::from(CUDA_NCU)),
        None => bail!("ncu (Nsight Compute) is not on PATH nor at {CUDA_NCU}; install it or pass --ncu PATH"),
    }
}

/// The `bench` command line that reproduces this profile's problems and kernel.
fn bench_args(args: &Args) -> Vec<String> {
    let p = &args.problems;
    let mut out = vec!["bench".to_string()];
    let mut push = |flag: &str, value: String| out.push(format!("--{flag}={value}"));
    p.presets.iter().for_each(|v| push("preset", v.clone()));
    p.workloads.iter().for_each(|v| push("workload", v.display().to_string()));
    p.shapes.iter().for_each(|v| push("shape", v.clone()));
    for (flag, values) in [("dtype", &p.dtype), ("causal", &p.causal), ("layout", &p.layout)] {
        if !values.is_empty() {
            push(flag, values.join(","));
        }
    }
    if p.v_layout == VLayout::Bhds {
        push("v-layout", "bhds".into());
    }
    push("impl", args.kernel.imp.clone());
    if let Some(config) = &args.kernel.config {
        push("config", config.clone());
    }
    push("peers", "none".into());
    push("reps", BENCH_REPS.into());
    push("warmup", BENCH_WARMUP.into());
    // Times taken under ncu's replay are no run to keep.
    out.push("--no-history".into());
    if args.kernel.config_on_plan {
        out.push("--config-on-plan".into());
    }
    if args.kernel.no_tuned {
        out.push("--no-tuned".into());
    }
    out
}

/// One sentence for the ways ncu says it cannot read counters.
pub fn counter_error(output: &str) -> Option<&'static str> {
    if output.contains("ERR_NVGPUCTRPERM") {
        Some("ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run it as root or set NVreg_RestrictProfilingToAdminUsers=0")
    } else if output.contains("LibraryNotLoaded") {
        Some("ncu could not load its profiling library (LibraryNotLoaded), so it cannot read the GPU counters here")
    } else {
        None
    }
}

fn show(value: Option<f64>, decimals: usize, unit: &str) -> String {
    value.map_or_else(|| "n/a".to_string(), |v| format!("{v:.decimals$}{unit}"))
}

fn print_profile(p: &KernelProfile) -> anyhow::Result<()> {
    let (bound, reason) = classify(p);
    outln!("{} (launch {})", p.kernel, p.launch_id)?;
    outln!("  tensor pipe active   {:>12}", show(p.tensor_pct(), 2, " %"))?;
    outln!("  XU pipe (MUFU)       {:>12}", show(p.xu_pct(), 2, " %"))?;
    outln!("  issue slots active   {:>12}", show(p.issue_pct(), 2, " %"))?;
    outln!("  DRAM throughput      {:>12}", show(p.dram_pct(), 2, " %"))?;
    outln!("  SM throughput        {:>12}", show(p.sm_pct(), 2, " %"))?;
    outln!("  warps active         {:>12}", show(p.warps_active_pct(), 2, " %"))?;
    outln!("  smem bank conflicts  {:>12}", show(p.bank_conflicts(), 0, ""))?;
    outln!("  registers/thread     {:>12}", show(p.registers(), 0, ""))?;
    outln!(
        "  local ld / st        {:>12}",
        format!("{} / {}", show(p.local_loads(), 0, ""), show(p.local_stores(), 0, ""))
    )?;
    outln!("  duration             {:>12}", show(p.duration_ns().map(|ns| ns / 1e3), 1, " us"))?;
    let verdict = crate::text::wrap(&format!("{}: {reason}", bound.name()), crate::text::WIDTH, "  ", "    ");
    verdict.iter().try_for_each(|line| outln!("{line}"))?;
    Ok(())
}

fn write_outputs(dir: &Path, raw: &str, profiles: &[KernelProfile]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let csv = dir.join("profile.csv");
    std::fs::write(&csv, raw).with_context(|| format!("cannot write {}", csv.display()))?;
    let records: Vec<serde_json::Value> = profiles
        .iter()
        .map(|p| {
            let (bound, reason) = classify(p);
            serde_json::json!({
                "kernel": p.kernel,
                "launch_id": p.launch_id,
                "metrics": p.metrics,
                "bound": bound,
                "reason": reason,
                "ncu_terms": ncu_terms(p),
            })
        })
        .collect();
    let json = dir.join("profile.json");
    std::fs::write(&json, serde_json::to_string_pretty(&records)?)
        .with_context(|| format!("cannot write {}", json.display()))
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let ncu = match &args.ncu {
        Some(path) => path.clone(),
        None => find_ncu()?,
    };
    if let Some(dir) = &args.out {
        crate::stores::output::create_dir("--out", dir)?;
    }
    let exe = std::env::current_exe().context("cannot locate the evoattn executable to profile")?;
    let output = std::process::Command::new(&ncu)
        .args([
            "--clock-control",
            "none",
            "--csv",
            "--metrics",
            &METRICS.join(","),
            "-k",
            &kernel_filter(&args.kernel.imp),
        ])
        .args(["-c", &args.launches.to_string()])
        .arg(&exe)
        .args(bench_args(args))
        .output()
        .with_context(|| format!("cannot run ncu at {}", ncu.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if let Some(sentence) = counter_error(&stdout).or_else(|| counter_error(&stderr)) {
        bail!("{sentence}");
    }
    let parsed = parse_metrics_csv(&stdout);
    if let Some(dir) = &args.out {
        write_outputs(dir, &stdout, parsed.as_deref().unwrap_or_default())?;
    }
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no stderr");
    let profiles = match parsed {
        Ok(profiles) if !profiles.is_empty() => profiles,
        Ok(_) => bail!("ncu profiled no evoattn_ kernel (ncu {}; last line: {last})", output.status),
        Err(e) => bail!("cannot read ncu's CSV: {e:#} (ncu {}; last line: {last})", output.status),
    };
    profiles.iter().try_for_each(print_profile)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_takes_our_planned_family_never_the_reference_check() {
        assert_eq!(kernel_filter("wgmma"), "regex:^evoattn_(wgmma)_");
        assert_eq!(kernel_filter("auto"), "regex:^evoattn_(mma|wgmma|splitkv|resident|mma8)_");
        assert_eq!(kernel_filter("reference"), "regex:^evoattn_(reference)_");
        // The library paths: ours (the row kernel, a hybrid's GEMM) and cuBLAS's GEMMs.
        assert_eq!(kernel_filter("cublas"), "regex:^(evoattn_cublas_|nvjet_|cutlass|.*gemm|.*gett|.*contraction)");
        assert_eq!(
            kernel_filter("hybrid-qk"),
            "regex:^(evoattn_hybrid_qk_|nvjet_|cutlass|.*gemm|.*gett|.*contraction)"
        );
    }
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn bench_gets_the_same_problems_and_kernel() {
        let cli = Cli::parse_from([
            "profile",
            "--shape",
            "4,16,4096,128",
            "--dtype",
            "bf16",
            "--causal",
            "--impl",
            "mma",
            "--config",
            "stages=3",
        ]);
        assert_eq!(
            bench_args(&cli.args),
            [
                "bench",
                "--shape=4,16,4096,128",
                "--dtype=bf16",
                "--causal=top-left",
                "--impl=mma",
                "--config=stages=3",
                "--peers=none",
                "--reps=2",
                "--warmup=1",
                "--no-history"
            ]
        );
    }

    #[test]
    fn bench_gets_config_on_plan_too() {
        let cli = Cli::parse_from([
            "profile",
            "--shape",
            "1,2,64,64",
            "--impl",
            "wgmma",
            "--config",
            "block_n=64",
            "--config-on-plan",
        ]);
        let args = bench_args(&cli.args);
        assert!(
            args.contains(&"--config=block_n=64".to_string()) && args.contains(&"--config-on-plan".to_string()),
            "{args:?}"
        );
    }

    #[test]
    fn bench_gets_a_v_held_transposed_too() {
        let cli = Cli::parse_from(["profile", "--shape", "1,2,64,64", "--dtype", "e4m3", "--v-layout", "bhds"]);
        assert!(bench_args(&cli.args).contains(&"--v-layout=bhds".to_string()));
        let rows = Cli::parse_from(["profile", "--shape", "1,2,64,64", "--dtype", "e4m3"]);
        assert!(!bench_args(&rows.args).iter().any(|a| a.starts_with("--v-layout")));
    }

    #[test]
    fn counter_errors_are_one_sentence() {
        let perm =
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters";
        assert!(counter_error(perm).unwrap().starts_with("ncu may not read"));
        assert!(counter_error("==ERROR== LibraryNotLoaded").is_some());
        assert_eq!(counter_error("==PROF== Disconnected"), None);
    }
}
