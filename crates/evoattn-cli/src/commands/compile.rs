//! `evoattn compile`: compiles kernel variants with NVRTC (no GPU needed), in parallel over CPU
//! threads, and prints each one's resource use and the resource gate's verdict.
//!
//! Exit codes: 0 when every variant that passed `validate` compiled and (without `--space`)
//! every default or `--config` variant passes the gate and none was rejected; 1 otherwise;
//! 2 on bad arguments or without NVRTC. With `--space`, rejections and gate failures are the
//! point of the exercise: they are reported, not fatal.

use crate::out::{errln, outln};
use anyhow::{anyhow, bail, Context};
use evoattn::runtime::cache::CubinCache;
use evoattn::runtime::compile::{compile_parallel, CompiledKernel};
use evoattn::runtime::nvrtc::Nvrtc;
use evoattn::{defaults, Arch, Dtype, Impl, KernelSpec};
use indicatif::ProgressBar;
use std::process::ExitCode;
use std::time::Instant;

/// The word that selects every value of a flag.
const ALL: &str = "all";

#[derive(clap::Args)]
pub struct Args {
    /// Kernel family (reference, mma, wgmma, splitkv), or `all`.
    #[arg(long = "impl", default_value = ALL)]
    imp: String,
    /// Target arch (sm_80, sm_86, sm_89, sm_90, sm_90a), or `all`: every arch each kernel runs on.
    #[arg(long, default_value = ALL)]
    arch: String,
    /// Element type (f16, bf16), or `all`.
    #[arg(long, default_value = ALL)]
    dtype: String,
    /// Head dim (64, 128, 256), or `all`: every head dim the kernel supports.
    #[arg(long = "head-dim", default_value = ALL)]
    head_dim: String,
    /// Lever overrides on the default configuration, e.g. block_m=64,stages=3 (needs one --impl).
    #[arg(long, conflicts_with = "space")]
    config: Option<String>,
    /// Compile every lever combination of the kernel's search space, not just the default.
    #[arg(long)]
    space: bool,
    /// Neither read nor write the kernel cache: every variant is a cold compile.
    #[arg(long)]
    no_cache: bool,
    /// Print each compiled variant's NVRTC log after the table (ptxas's resource lines and
    /// warnings, e.g. wgmma serialisation, where this NVRTC reports them).
    #[arg(long)]
    log: bool,
    /// Write each compiled variant's CUBIN to DIR as KERNEL_ARCH.cubin, for `cuobjdump --dump-sass`.
    #[arg(long, value_name = "DIR")]
    cubin_dir: Option<std::path::PathBuf>,
    /// Print each selected family's levers (the names `--config` takes) and what each does,
    /// then exit without compiling.
    #[arg(long)]
    levers: bool,
}

/// What became of one variant.
enum Outcome<'a> {
    /// `validate` refused it, so it was not compiled.
    Rejected(&'a str),
    Failed(&'a evoattn::Error),
    Compiled(&'a CompiledKernel),
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let imps = select("--impl", &args.imp, &Impl::ALL, Impl::name, Impl::parse)?;
    if args.levers {
        for imp in imps {
            outln!("{imp}: {}", imp.describe())?;
            for (name, about) in imp.lever_docs() {
                outln!("  {name:<20} {about}")?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let archs = select("--arch", &args.arch, &Arch::ALL, Arch::name, Arch::parse)?;
    let dtypes = select("--dtype", &args.dtype, &Dtype::ALL, Dtype::name, Dtype::parse)?;
    let head_dim: Option<usize> = match args.head_dim.as_str() {
        ALL => None,
        d => Some(d.parse().map_err(|_| anyhow!("--head-dim {d}: expected a number or {ALL}"))?),
    };
    if args.config.is_some() && imps.len() != 1 {
        bail!("--config needs a single --impl: each kernel has its own levers");
    }

    // Every variant with `validate`'s verdict on it.
    let mut variants: Vec<(KernelSpec, Arch, Result<(), String>)> = Vec::new();
    for &arch in &archs {
        // `--arch all` means every arch the kernel runs on; a named arch it does not run on is
        // shown as rejected by `validate`.
        for imp in imps.iter().copied().filter(|imp| args.arch != ALL || imp.archs().contains(&arch)) {
            for &dtype in &dtypes {
                let dims = head_dim.map_or_else(|| imp.head_dims().to_vec(), |d| vec![d]);
                for head_dim in dims {
                    let specs: Vec<KernelSpec> = if args.space {
                        KernelSpec::space(imp, dtype, head_dim).collect()
                    } else {
                        let mut config = defaults::config(imp, arch, head_dim);
                        if let Some(text) = &args.config {
                            config = config.with_overrides(text).map_err(|e| anyhow!("--config {text}: {e}"))?;
                        }
                        vec![KernelSpec { config, dtype, head_dim }]
                    };
                    variants.extend(specs.into_iter().map(|spec| (spec, arch, spec.validate(arch))));
                }
            }
        }
    }

    let jobs: Vec<(KernelSpec, Arch)> =
        variants.iter().filter(|(_, _, valid)| valid.is_ok()).map(|&(spec, arch, _)| (spec, arch)).collect();
    let nvrtc = if jobs.is_empty() { None } else { Some(Nvrtc::get()?) };
    let cache = if args.no_cache { None } else { Some(CubinCache::open(CubinCache::default_dir())?) };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let bar = ProgressBar::new(jobs.len() as u64);
    let results = compile_parallel(&jobs, cache.as_ref(), threads, || bar.inc(1));
    bar.finish_and_clear();

    let mut table = vec![HEADER.map(str::to_string)];
    let mut tally = Tally::default();
    let mut errors = Vec::new();
    let mut compiled = results.iter();
    for (spec, arch, valid) in &variants {
        let outcome = match valid {
            Err(reason) => Outcome::Rejected(reason),
            Ok(()) => match compiled.next().ok_or_else(|| anyhow!("a compile result is missing"))? {
                Ok(kernel) => Outcome::Compiled(kernel),
                Err(err) => {
                    errors.push(err);
                    Outcome::Failed(err)
                }
            },
        };
        table.push(row(*arch, spec, outcome, &mut tally));
    }
    print_table(&table)?;
    if let Some(dir) = &args.cubin_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for kernel in results.iter().flatten() {
            let path = dir.join(format!("{}_{}.cubin", kernel.spec.name(), kernel.arch));
            std::fs::write(&path, &kernel.cubin).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    if args.log {
        for kernel in results.iter().flatten() {
            outln!("\n== {} ({})\n{}", kernel.spec.name(), kernel.arch, kernel.log.trim_end())?;
        }
    }
    for err in errors {
        errln!("\n{err}");
    }
    let nvrtc_text = nvrtc.map(|n| format!("; NVRTC {}.{}", n.version().0, n.version().1)).unwrap_or_default();
    outln!(
        "{} variants: {} compiled ({} from cache), {} pass the gate, {} fail it, {} compile errors, {} rejected{nvrtc_text}; {:.1} s",
        variants.len(),
        tally.pass + tally.fail,
        tally.cached,
        tally.pass,
        tally.fail,
        tally.errors,
        tally.rejected,
        start.elapsed().as_secs_f64()
    )?;
    let failed = tally.errors > 0 || (!args.space && (tally.fail > 0 || tally.rejected > 0));
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// `all`, or one value parsed by `parse`.
fn select<T: Copy>(
    flag: &str,
    value: &str,
    all: &[T],
    name: fn(T) -> &'static str,
    parse: fn(&str) -> Option<T>,
) -> anyhow::Result<Vec<T>> {
    if value == ALL {
        return Ok(all.to_vec());
    }
    parse(value).map(|v| vec![v]).ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|&v| name(v)).collect();
        anyhow!("{flag} {value}: expected {ALL} or one of {}", names.join(", "))
    })
}

#[derive(Default)]
struct Tally {
    pass: usize,
    fail: usize,
    cached: usize,
    errors: usize,
    rejected: usize,
}

const HEADER: [&str; 8] = ["arch", "kernel", "regs", "spill st/ld", "stack", "smem st+dyn", "compile", "gate"];
/// Columns of [`HEADER`] that hold numbers, right-aligned.
const NUMERIC: [bool; 8] = [false, false, true, true, true, true, true, false];

fn row(arch: Arch, spec: &KernelSpec, outcome: Outcome, tally: &mut Tally) -> [String; 8] {
    let dashes = || ["-", "-", "-", "-", "-"].map(str::to_string);
    let (metrics, verdict) = match outcome {
        Outcome::Rejected(reason) => {
            tally.rejected += 1;
            (dashes(), format!("rejected: {reason}"))
        }
        Outcome::Failed(err) => {
            tally.errors += 1;
            let text = err.to_string();
            let first = text.lines().next().unwrap_or_default();
            let detail = text.lines().find(|l| l.contains("error")).unwrap_or(first);
            (dashes(), format!("COMPILE ERROR: {}", detail.trim()))
        }
        Outcome::Compiled(k) => {
            let r = &k.resources;
            tally.cached += usize::from(k.from_cache);
            let verdict = match k.gate_verdict() {
                Ok(()) => {
                    tally.pass += 1;
                    "PASS".to_string()
                }
                Err(reason) => {
                    tally.fail += 1;
                    format!("FAIL: {reason}")
                }
            };
            let time = if k.from_cache {
                format!("{:.2} ms cached", k.elapsed.as_secs_f64() * 1e3)
            } else {
                format!("{:.0} ms", k.elapsed.as_secs_f64() * 1e3)
            };
            let metrics = [
                r.registers.to_string(),
                format!("{}/{}", r.spill_store_bytes, r.spill_load_bytes),
                r.stack_frame_bytes.to_string(),
                format!("{}+{}", r.static_smem_bytes, r.dynamic_smem_bytes),
                time,
            ];
            (metrics, verdict)
        }
    };
    let [regs, spill, stack, smem, time] = metrics;
    [arch.name().to_string(), spec.name(), regs, spill, stack, smem, time, verdict]
}

fn print_table(rows: &[[String; 8]]) -> anyhow::Result<()> {
    let mut widths = [0usize; 8];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .zip(NUMERIC)
            .map(|((cell, w), numeric)| if numeric { format!("{cell:>w$}") } else { format!("{cell:<w$}") })
            .collect();
        outln!("{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}
