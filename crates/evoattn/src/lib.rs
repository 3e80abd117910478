//! evoattn: fused scaled-dot-product attention (forward, and its backward pass) for NVIDIA GPUs.
//!
//! Kernels are CUDA C++ sources embedded in the crate, compiled at run time by NVRTC to CUBIN
//! for the device's arch and cached on disk. Layers, bottom up:
//! - [`runtime`]: NVRTC loading and compilation, resource reports, the CUBIN cache, and the
//!   only `unsafe` code (driver launches), wrapped in RAII types;
//! - [`problem`], [`config`], [`plan`]: what to compute and with which kernel;
//! - [`attention`]: the safe entry point a downstream crate calls (the forward pass, and the
//!   backward through `plan_backward`/`run_backward`);
//! - [`reference`]: the float64 CPU reference every kernel is checked against;
//! - [`trace`]: the per-warp timelines of instrumented (`trace=1`) kernels.

pub mod arch;
pub mod attention;
pub mod buffers;
pub mod config;
pub mod defaults;
pub mod draw;
pub mod error;
pub mod fp8;
pub mod kernels;
pub mod plan;
pub mod problem;
pub mod reference;
pub mod runtime;
pub mod trace;

pub use arch::Arch;
pub use attention::{Attention, DeviceTensors, ExternalTensors, InputViews};
pub use config::{
    BwdConfig, CublasConfig, HybridPvConfig, HybridQkConfig, Impl, KernelConfig, KernelSpec, Loads, MmaConfig,
    OStaging, Pass, Pipeline, Provider, ReferenceConfig, Schedule, Scores, SplitkvCombine, SplitkvConfig, WgmmaConfig,
};
pub use error::{Error, ProblemError, Result};
pub use plan::{Plan, Request};
pub use problem::{Causal, Dtype, Layout, Problem, Shape, StridedTensor, Strides, TensorName};
pub use runtime::backward::{BackwardBuffers, BackwardLaunch, BackwardTensors};

/// The CUDA bindings evoattn is built on: `DeviceTensors` holds their views.
pub use cudarc;

/// Largest head dim any kernel supports.
pub const MAX_HEAD_DIM: usize = 256;
