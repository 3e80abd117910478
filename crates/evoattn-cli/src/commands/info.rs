//! `evoattn info`: what this machine can run.

/// `outln!` for a `label:   value` line, wrapped to the terminal's width under its value.
macro_rules! outln {
    ($($arg:tt)*) => {
        crate::out::text(&crate::text::hanging(&format!($($arg)*)))
    };
}
use evoattn::runtime::cache::CubinCache;
use evoattn::runtime::nvrtc::Nvrtc;
use evoattn::{Arch, Impl};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Exit 0 when a GPU and NVRTC are usable, 2 when either is missing (the rest is printed all the
same).

Examples:
  evoattn info                # this machine: GPU, NVRTC, cuBLAS/cuTENSOR, the peers, the kernels and defaults
  evoattn info --remeasure    # measure the matmul and copy ceilings again")]
pub struct Args {
    /// Measure the GPU's ceilings (bf16 matmul peak, copy bandwidth) again instead of reading
    /// them from the cache (they are measured through the PyTorch oracle on first use).
    #[arg(long)]
    remeasure: bool,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    outln!("evoattn {}", env!("CARGO_PKG_VERSION"))?;
    let backend = crate::lab::open::open();
    let arch = match &backend {
        Ok(b) => {
            let info = b.info();
            let mock = if info.mock { " [mock backend: CPU float64, for tests]" } else { "" };
            outln!("GPU:        {}{mock}", info.gpu)?;
            outln!(
                "capability: {}.{} ({}), {} SMs",
                info.compute_capability.0,
                info.compute_capability.1,
                info.arch,
                info.sm_count
            )?;
            outln!("driver:     CUDA {}", info.driver)?;
            outln!("NVRTC:      {}", info.nvrtc)?;
            if info.mock {
                outln!("libraries:  none (mock backend)")?;
            } else {
                print_libraries()?;
            }
            if info.mock {
                outln!("ceilings:   not measured (mock backend)")?;
            } else {
                print_ceilings(&info.gpu, &info.driver, args.remeasure)?;
            }
            Arch::parse(&info.arch)
        }
        Err(e) => {
            outln!("GPU:        none ({e:#})")?;
            None
        }
    };
    if backend.is_err() {
        match Nvrtc::get() {
            Ok(n) => outln!("NVRTC:      {}.{} ({})", n.version().0, n.version().1, n.library()),
            Err(e) => outln!("NVRTC:      not found ({e})"),
        }?;
        print_libraries()?;
    }
    outln!("cache:      {}", CubinCache::default_dir().display())?;
    if let Ok(b) = &backend {
        outln!("configs:    {}", crate::tune::tuned::describe(&b.info()))?;
    }
    outln!("kernels (--impl; `auto` lets the planner choose, EVOATTN_IMPL overrides it):")?;
    for imp in Impl::ALL {
        let archs: Vec<&str> = imp.archs().iter().map(|a| a.name()).collect();
        outln!("  {:<10} {}", imp.name(), imp.describe())?;
        outln!("  {:<10} head dims {:?}; archs {}", "", imp.head_dims(), archs.join(", "))?;
        if let Some(arch) = arch {
            // The first dtype's default, and each other dtype's where it differs (wgmma's E4M3).
            let (first, others) = imp.dtypes().split_first().expect("every family takes a dtype");
            for &d in imp.head_dims() {
                let base = evoattn::defaults::config(imp, arch, *first, d);
                outln!("  {:<10} default on {arch}, D={d}: {base}", "")?;
                for (i, &dtype) in others.iter().enumerate() {
                    let config = evoattn::defaults::config(imp, arch, dtype, d);
                    // Listed once per distinct default (e4m3f16 shares e4m3's).
                    let listed = std::iter::once(*first).chain(others[..i].iter().copied());
                    if !listed.into_iter().any(|l| evoattn::defaults::config(imp, arch, l, d) == config) {
                        outln!("  {:<10} default on {arch}, D={d}, {dtype}: {config}", "")?;
                    }
                }
            }
        }
    }
    backend?;
    Nvrtc::get()?;
    Ok(ExitCode::SUCCESS)
}

/// Prints what the oracle offers (versions, peers) and the GPU's measured ceilings, measuring
/// (and caching) the ceilings when not cached or when asked.
fn print_ceilings(gpu: &str, driver: &str, remeasure: bool) -> anyhow::Result<()> {
    let mut oracle = match crate::lab::oracle::Oracle::start() {
        Ok(o) => {
            let h = o.hello();
            let v = |x: &Option<String>| x.clone().unwrap_or_else(|| "none".into());
            outln!("oracle:     torch {}, CUDA {}, cuDNN {}, FA4 {}", v(&h.torch), v(&h.cuda), v(&h.cudnn), v(&h.fa4))?;
            for (peer, state) in &h.peers {
                let mark = if h.peer_available(peer) { "yes" } else { "no " };
                outln!("  peer {peer:<15} {mark} {}", if h.peer_available(peer) { "" } else { state })?;
            }
            Some(o)
        }
        Err(e) => {
            outln!("oracle:     not available ({e:#}); peers cannot be measured")?;
            None
        }
    };
    let found = match (crate::lab::ceilings::cached(gpu, driver).filter(|_| !remeasure), oracle.as_mut()) {
        (Some(c), _) => Ok((c, "cached")),
        (None, Some(o)) => crate::lab::ceilings::measure(o, gpu, driver).map(|c| (c, "measured now")),
        (None, None) => Err(anyhow::anyhow!("the oracle is needed to measure them")),
    };
    match found {
        Ok((c, how)) => outln!(
            "ceilings:   bf16 matmul {:.0} TFLOP/s ({n}^3), device copy {:.0} GB/s read+write ({how})",
            c.matmul_tflops,
            c.copy_gbps,
            n = crate::lab::ceilings::MATMUL_N
        ),
        Err(e) => outln!("ceilings:   not measured ({e:#})"),
    }
}

/// The libraries the library paths (`cublas`, `hybrid-qk`, `hybrid-pv`) need, found or why not:
/// cuBLAS for them all, cuTENSOR for their `gemm=cutensor`. Neither is needed by the fused
/// kernels, so neither changes the exit code.
fn print_libraries() -> anyhow::Result<()> {
    match evoattn::runtime::cublas::Cublas::get() {
        Ok(c) => outln!("cuBLAS:     {}.{}.{} ({})", c.version().0, c.version().1, c.version().2, c.lt_library()),
        Err(e) => outln!("cuBLAS:     not found, the library paths cannot run ({e})"),
    }?;
    match evoattn::runtime::cutensor::Cutensor::get() {
        Ok(c) => outln!("cuTENSOR:   {}.{}.{} ({})", c.version().0, c.version().1, c.version().2, c.library()),
        Err(e) => outln!("cuTENSOR:   not found, gemm=cutensor cannot run ({e})"),
    }
}
