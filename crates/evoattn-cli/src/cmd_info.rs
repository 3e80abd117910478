//! `evoattn info`: what this machine can run.

use evoattn::runtime::cache::CubinCache;
use evoattn::runtime::nvrtc::Nvrtc;
use evoattn::{Arch, Impl};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: &Args) -> anyhow::Result<ExitCode> {
    println!("evoattn {}", env!("CARGO_PKG_VERSION"));
    let backend = crate::backend::open();
    let arch = match &backend {
        Ok(b) => {
            let info = b.info();
            let mock = if info.mock { " [mock backend: CPU float64, for tests]" } else { "" };
            println!("GPU:        {}{mock}", info.gpu);
            println!(
                "capability: {}.{} ({}), {} SMs",
                info.compute_capability.0, info.compute_capability.1, info.arch, info.sm_count
            );
            println!("driver:     CUDA {}", info.driver);
            println!("NVRTC:      {}", info.nvrtc);
            Arch::parse(&info.arch)
        }
        Err(e) => {
            println!("GPU:        none ({e:#})");
            None
        }
    };
    if backend.is_err() {
        match Nvrtc::get() {
            Ok(n) => println!("NVRTC:      {}.{} ({})", n.version().0, n.version().1, n.library()),
            Err(e) => println!("NVRTC:      not found ({e})"),
        }
    }
    println!("cache:      {}", CubinCache::default_dir().display());
    println!("kernels (--impl; `auto` lets the planner choose, EVOATTN_IMPL overrides it):");
    for imp in Impl::ALL {
        let archs: Vec<&str> = imp.archs().iter().map(|a| a.name()).collect();
        println!("  {:<10} {}", imp.name(), imp.describe());
        println!("  {:<10} head dims {:?}; archs {}", "", imp.head_dims(), archs.join(", "));
        if let Some(arch) = arch {
            for &d in imp.head_dims() {
                println!("  {:<10} default on {arch}, D={d}: {}", "", evoattn::defaults::config(imp, arch, d));
            }
        }
    }
    backend?;
    Nvrtc::get()?;
    Ok(ExitCode::SUCCESS)
}
