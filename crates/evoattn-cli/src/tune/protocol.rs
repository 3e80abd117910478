//! The JSON-lines protocol between the tuner and its worker processes (`evoattn tune-worker`):
//! one request per line on the worker's stdin, replies on its stdout. A worker answers
//! `Ready` once, then for each request a `Gate` line as each gate starts (so a hang or crash
//! is charged to the right gate) and one `Passed` or `Failed`.

use evoattn::runtime::compile::CompiledKernel;
use evoattn::{Causal, KernelSpec, Shape};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One candidate to check and time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    pub imp: String,
    /// Levers in `--config` syntax.
    pub config: String,
    pub dtype: String,
    pub head_dim: usize,
    pub causal: String,
    /// Tuning shapes in `B,H,S,D,HKV,SK` syntax.
    pub shapes: Vec<String>,
    pub warmup: usize,
    pub samples: usize,
    /// A proposed source, compiled by the tuner: its text and its CUBIN file.
    pub variant: Option<VariantFile>,
    /// Per shape (µs, in `shapes`' order), the time below which a median cannot have measured
    /// its work ([`crate::lab::roofline::impossible_below_us`] of the GPU's measured ceilings):
    /// one below it fails the integrity gate. None when no ceilings are known.
    #[serde(default)]
    pub roofline_us: Option<Vec<f64>>,
}

impl Request {
    /// `spec` on `shapes` under `causal`, from its embedded source, with no timing asked for
    /// (warmup and samples 0) and no roofline: callers set what their use needs.
    pub fn new(id: u64, spec: &KernelSpec, causal: Causal, shapes: &[Shape]) -> Self {
        Request {
            id,
            imp: spec.imp().name().to_string(),
            config: spec.config.to_string(),
            dtype: spec.dtype.name().to_string(),
            head_dim: spec.head_dim,
            causal: causal.name().to_string(),
            shapes: shapes.iter().map(super::store::shape_text).collect(),
            warmup: 0,
            samples: 0,
            variant: None,
            roofline_us: None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VariantFile {
    pub source: String,
    pub cubin: PathBuf,
    pub arch: String,
}

impl VariantFile {
    /// `compiled` (of `source`) handed to a worker: its CUBIN written to `cubin`.
    pub fn write(cubin: PathBuf, source: &str, compiled: &CompiledKernel) -> Result<Self, String> {
        std::fs::write(&cubin, &compiled.cubin).map_err(|e| format!("writing {}: {e}", cubin.display()))?;
        Ok(VariantFile { source: source.to_string(), cubin, arch: compiled.arch.name().to_string() })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// `gpu` is the store's machine key (name and compute capability).
    Ready {
        gpu: String,
        /// The GPU's name as its backend reports it: the key of its measured ceilings.
        device: String,
        driver: String,
        arch: String,
        /// SMs of the worker's GPU, which the planner needs (split counts, persistent grids).
        sm_count: u32,
    },
    Gate {
        id: u64,
        gate: String,
    },
    Passed {
        id: u64,
        medians_us: Vec<f64>,
    },
    Failed {
        id: u64,
        gate: String,
        error: String,
    },
}
