//! The GPU's measured ceilings (dense bf16 matmul rate, device copy bandwidth), measured once
//! through the oracle and cached per GPU and driver in the kernel cache directory, so `info`
//! and `bench` can state "% of peak" without re-measuring.

use crate::lab::oracle::Oracle;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The matmul that defines "peak" (docs/anchors.md: an 8192³ bf16 product).
pub const MATMUL_N: usize = 8192;
/// Bytes copied to measure bandwidth: 4 GB, far beyond any L2.
pub const COPY_BYTES: usize = 4 << 30;
const FILE: &str = "ceilings.json";

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    pub matmul_tflops: f64,
    pub copy_gbps: f64,
}

fn path() -> PathBuf {
    evoattn::runtime::cache::CubinCache::default_dir().join(FILE)
}

fn key(gpu: &str, driver: &str) -> String {
    format!("{gpu} / driver {driver}")
}

fn read_all() -> BTreeMap<String, Ceilings> {
    std::fs::read_to_string(path()).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
}

/// The cached ceilings of this GPU, if measured before.
pub fn cached(gpu: &str, driver: &str) -> Option<Ceilings> {
    read_all().get(&key(gpu, driver)).copied()
}

/// Measures the ceilings through `oracle` and caches them.
pub fn measure(oracle: &mut Oracle, gpu: &str, driver: &str) -> anyhow::Result<Ceilings> {
    let ceilings = Ceilings {
        matmul_tflops: oracle.matmul_peak(MATMUL_N, "bf16").context("measuring the matmul peak")?,
        copy_gbps: oracle.copy_bandwidth(COPY_BYTES).context("measuring copy bandwidth")?,
    };
    let mut all = read_all();
    all.insert(key(gpu, driver), ceilings);
    let path = path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // Write then rename, so a concurrent reader never sees half a file.
    let tmp = path.with_extension(format!("json.{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_string_pretty(&all)?).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(ceilings)
}
