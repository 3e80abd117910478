//! `evoattn compile`: compiles kernel variants with NVRTC (no GPU needed), in parallel over CPU
//! threads, and prints each one's resource use and the resource gate's verdict.
//!
//! Exit codes: 0 when every variant that passed `validate` compiled and (without `--space`)
//! every default or `--config` variant passes the gate and none was rejected; 1 otherwise;
//! 2 on bad arguments or without NVRTC. With `--space`, rejections and gate failures are the
//! point of the exercise: they are reported, not fatal.

use crate::out::{errln, outln};
use crate::text::{self, Column, Layout};
use anyhow::{anyhow, bail, Context};
use evoattn::runtime::cache::CubinCache;
use evoattn::runtime::compile::{compile_parallel, CompiledKernel};
use evoattn::runtime::nvrtc::Nvrtc;
use evoattn::{defaults, Arch, Dtype, Impl, KernelSpec};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Instant;

/// The word that selects every value of a flag.
const ALL: &str = "all";

#[derive(clap::Args)]
#[command(after_help = "Needs NVRTC, not a GPU. Exit 0 when every variant compiled and (without --space) passes the
resource gate and none was rejected, 1 otherwise, 2 on bad arguments or without NVRTC.

Examples:
  evoattn compile --impl mma --arch sm_90a   # the defaults' registers, spills and shared memory
  evoattn compile --impl wgmma --levers      # the levers --config takes, and what each does
  evoattn compile --impl mma --arch sm_89 --dtype bf16 --head-dim 128 --config block_n=32,stages=3 --cubin-dir sass/")]
pub struct Args {
    /// Kernel family (reference, mma, wgmma, splitkv, resident, mma8, cublas, hybrid-qk, hybrid-pv, mma-bwd: the backward pass), or `all`.
    #[arg(long = "impl", default_value = ALL)]
    imp: String,
    /// Target arch (sm_80, sm_86, sm_89, sm_90, sm_90a), or `all`: every arch each kernel runs on.
    #[arg(long, default_value = ALL)]
    arch: String,
    /// Input element type (f16, bf16, e4m3, e4m3f16), or `all`: every dtype the kernel takes
    /// (e4m3f16: E4M3 inputs with O in f16).
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
    /// Write each compiled variant's CUBIN to DIR (created if absent) as KERNEL_ARCH.cubin, for
    /// `cuobjdump --dump-sass`.
    #[arg(long, value_name = "DIR")]
    cubin_dir: Option<std::path::PathBuf>,
    /// Print each selected family's levers (the names `--config` takes) and what each does,
    /// then exit without compiling.
    #[arg(long)]
    levers: bool,
    /// Also print each variant's full symbol name under its row (the table names kernels by
    /// family and the levers that differ from the family's default for the head dim and arch).
    #[arg(short, long)]
    verbose: bool,
}

/// A variant to compile, with `validate`'s verdict on it.
type Variant = (KernelSpec, Arch, Result<(), String>);

/// Variants compiled and printed per batch with `--space`: rows stream out as they are done,
/// and memory holds one batch of CUBINs (a batch is a few seconds of NVRTC on a few cores).
const SPACE_BATCH: usize = 64;

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
            let keys = imp.short_keys();
            for (name, about) in imp.lever_docs() {
                // The key tables' short kernel names write the lever by (`bn=64`).
                let key = keys.iter().find(|(n, _)| *n == name).map_or(String::new(), |(_, k)| format!("{k}="));
                outln!("  {name:<21} {key:<4} {about}")?;
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

    // Every variant, lazily (a family's whole space with --space), with `validate`'s verdict.
    let variants = || -> anyhow::Result<Box<dyn Iterator<Item = Variant> + '_>> {
        let mut lists: Vec<Box<dyn Iterator<Item = Variant> + '_>> = Vec::new();
        for &arch in &archs {
            // `--arch all` means every arch the kernel runs on; a named arch it does not run on
            // is shown as rejected by `validate`.
            for imp in imps.iter().copied().filter(|imp| args.arch != ALL || imp.archs().contains(&arch)) {
                // Likewise `--dtype all`: the dtypes the kernel takes.
                for &dtype in dtypes.iter().filter(|d| args.dtype != ALL || imp.dtypes().contains(d)) {
                    for head_dim in head_dim.map_or_else(|| imp.head_dims().to_vec(), |d| vec![d]) {
                        if args.space {
                            let specs = KernelSpec::space(imp, dtype, head_dim);
                            lists.push(Box::new(specs.map(move |spec| (spec, arch, spec.validate(arch)))));
                        } else {
                            let mut config = defaults::config(imp, arch, dtype, head_dim);
                            if let Some(text) = &args.config {
                                config = config.with_overrides(text).map_err(|e| anyhow!("--config {text}: {e}"))?;
                            }
                            let spec = KernelSpec { config, dtype, head_dim };
                            lists.push(Box::new(std::iter::once((spec, arch, spec.validate(arch)))));
                        }
                    }
                }
            }
        }
        Ok(Box::new(lists.into_iter().flatten()))
    };
    // A first walk counts what will compile, for the progress bar's ETA; the second compiles
    // and prints batch by batch, so rows appear as they are done and memory holds one batch.
    let (total, to_compile) = variants()?.fold((0, 0), |(n, ok), v| (n + 1, ok + usize::from(v.2.is_ok())));
    let nvrtc = if to_compile == 0 { None } else { Some(Nvrtc::get()?) };
    let cache = if args.no_cache { None } else { Some(CubinCache::open(CubinCache::default_dir())?) };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let bar = ProgressBar::new(to_compile as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} compiled, {elapsed} elapsed, eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if let Some(dir) = &args.cubin_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let batch = if args.space { SPACE_BATCH } else { usize::MAX };
    // Sized by the first batch; later rows wrap where they are wider.
    let mut layout: Option<Layout> = None;
    let mut tally = Tally::default();
    let mut errors = Vec::new();
    let mut logs = Vec::new();
    let mut all = variants()?.peekable();
    while all.peek().is_some() {
        let chunk: Vec<Variant> = all.by_ref().take(batch).collect();
        let jobs: Vec<(KernelSpec, Arch)> =
            chunk.iter().filter(|(_, _, valid)| valid.is_ok()).map(|&(spec, arch, _)| (spec, arch)).collect();
        let results = compile_parallel(&jobs, cache.as_ref(), threads, || bar.inc(1));
        let mut compiled = results.iter();
        let mut rows: Vec<Row> = Vec::new();
        for (spec, arch, valid) in &chunk {
            let outcome = match valid {
                Err(reason) => Outcome::Rejected(reason),
                Ok(()) => match compiled.next().ok_or_else(|| anyhow!("a compile result is missing"))? {
                    Ok(kernel) => Outcome::Compiled(kernel),
                    Err(err) => {
                        errors.push(err.to_string());
                        Outcome::Failed(err)
                    }
                },
            };
            rows.push(row(*arch, spec, outcome, &mut tally));
        }
        let header = layout.is_none();
        let layout = layout.get_or_insert_with(|| {
            let cells: Vec<Vec<String>> = rows.iter().map(|r| r.cells.clone()).collect();
            Layout::for_rows(columns(), &cells)
        });
        bar.suspend(|| print_rows(&rows, layout, header, args.verbose))?;
        if args.space && !std::io::stderr().is_terminal() {
            // No bar off a terminal (a log, CI): a progress line per batch instead.
            let done = bar.position();
            let elapsed = start.elapsed().as_secs_f64();
            let eta = elapsed / done.max(1) as f64 * (to_compile as u64 - done) as f64;
            errln!("compile: {done}/{to_compile} variants compiled, {elapsed:.0} s elapsed, eta {eta:.0} s");
        }
        for kernel in results.iter().flatten() {
            if let Some(dir) = &args.cubin_dir {
                let path = dir.join(format!("{}_{}.cubin", kernel.spec.name(), kernel.arch));
                std::fs::write(&path, &kernel.cubin).with_context(|| format!("writing {}", path.display()))?;
            }
            if args.log {
                logs.push(format!("\n== {} ({})\n{}", kernel.spec.name(), kernel.arch, kernel.log.trim_end()));
            }
        }
    }
    bar.finish_and_clear();
    for log in logs {
        outln!("{log}")?;
    }
    for err in errors {
        errln!("\n{err}");
    }
    let nvrtc_text = nvrtc.map(|n| format!("; NVRTC {}.{}", n.version().0, n.version().1)).unwrap_or_default();
    outln!(
        "{total} variants: {} compiled ({} from cache), {} pass the gate, {} fail it, {} compile errors, {} rejected{nvrtc_text}; {:.1} s",
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

/// The table's columns: the variant, its resources, the compile time and the gate's verdict.
fn columns() -> Vec<Column> {
    vec![
        Column::left("arch"),
        Column::left("kernel").wraps(),
        Column::left("dtype"),
        Column::right("D"),
        Column::right("regs"),
        Column::right("spill\nst/ld"),
        Column::right("stack"),
        Column::right("smem\nst+dyn"),
        Column::right("compile"),
        Column::left("gate").wraps(),
    ]
}

/// One variant's row: its cells, and its symbol name (`-v`).
struct Row {
    cells: Vec<String>,
    symbol: String,
}

fn row(arch: Arch, spec: &KernelSpec, outcome: Outcome, tally: &mut Tally) -> Row {
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
    let short = spec.config.short_name(&defaults::config(spec.imp(), arch, spec.dtype, spec.head_dim));
    let cells = vec![
        arch.name().to_string(),
        short,
        spec.dtype.name().to_string(),
        spec.head_dim.to_string(),
        regs,
        spill,
        stack,
        smem,
        time,
        verdict,
    ];
    Row { cells, symbol: spec.name() }
}

/// Prints `rows` in `layout`'s columns (the header before the first batch), each variant's
/// symbol under its row with `verbose`.
fn print_rows(rows: &[Row], layout: &Layout, header: bool, verbose: bool) -> anyhow::Result<()> {
    let mut lines = if header { layout.header() } else { Vec::new() };
    for row in rows {
        lines.extend(layout.row(&row.cells));
        if verbose {
            lines.extend(text::wrap(&row.symbol, text::WIDTH, "    ", "    "));
        }
    }
    lines.iter().try_for_each(|line| outln!("{line}"))
}
