//! The library paths of #38 (`cublas`, and the two hybrids after it): attention as the
//! unfused algorithm a user writes with cuBLAS, materialised scores and all, for the lab to
//! measure our fused kernels against on the same terms (docs/design/cublas-plan.md).
//! `geometry`: the GEMMs, chunks and score layout of a problem; `rows.cu`: the row kernel
//! between the two GEMMs, the family's NVRTC kernel (`CublasConfig`).

pub mod geometry;

use crate::arch::Arch;
use crate::config::lever::{axis, Family, Lever, Variant};
use crate::config::Impl;
use crate::kernels::SourceFile;
use crate::problem::{Dtype, Shape};

/// What the materialised scores S hold: cuBLASLt writes them so, the row kernel reads them so
/// (`EVOATTN_SCORES_F32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scores {
    /// float32: no rounding of the scores before the softmax (twice the bytes).
    F32,
    /// The inputs' 16-bit dtype, as PyTorch's unfused `softmax(q @ k.T) @ v` holds them.
    Input,
}

impl Scores {
    pub const ALL: [Scores; 2] = [Scores::F32, Scores::Input];
    pub(crate) const VARIANTS: [Variant; 2] = [
        Variant { name: "f32", key: "f", about: "float32 scores", defines: &[("scores_f32", 1)] },
        Variant { name: "input", key: "in", about: "scores in the inputs' dtype", defines: &[("scores_f32", 0)] },
    ];

    /// Bytes of one score.
    pub fn bytes(self) -> usize {
        match self {
            Scores::F32 => 4,
            Scores::Input => 2,
        }
    }

    /// As `--config` writes it.
    pub fn name(self) -> &'static str {
        Self::VARIANTS[self as usize].name
    }
}

/// Levers of the `cublas` path: its NVRTC kernel is the row kernel between the two GEMMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CublasConfig {
    pub scores: Scores,
}

/// float32 scores: the unfused reference grade (no rounding before the softmax).
/// Evidence: docs/decisions/cublas.md#scores
pub const DEFAULT: CublasConfig = CublasConfig { scores: Scores::F32 };
/// Threads of a row kernel block (one block a row).
pub const ROWS_THREADS: u32 = 256;

impl Family for CublasConfig {
    const IMPL: Impl = Impl::Cublas;
    const ABOUT: &'static str =
        "unfused: cuBLASLt Q·Kᵀ into materialised scores, a row kernel (softmax, LSE), cuBLASLt P·V";
    const HEAD_DIMS: &'static [usize] = &[64, 128, 256];
    const ARCHS: &'static [Arch] = &Arch::ALL;
    const SOURCE: SourceFile = SourceFile { name: "rows.cu", text: include_str!("rows.cu") };

    fn default_for(_arch: Arch, _dtype: Dtype, _head_dim: usize) -> Self {
        DEFAULT
    }

    fn into_config(self) -> crate::config::KernelConfig {
        crate::config::KernelConfig::Cublas(self)
    }

    const LEVERS: &'static [Lever<Self>] =
        &[axis!("scores", "sc", scores, Scores, "what the materialised scores hold between the two GEMMs")];

    fn threads(&self) -> u32 {
        ROWS_THREADS
    }

    /// The row kernel's grid when the whole problem is one chunk: one block a query row.
    fn grid(&self, shape: &Shape, _splits: usize, _sm_count: u32) -> [usize; 3] {
        [shape.b * shape.h * shape.sq, 1, 1]
    }

    fn dynamic_smem_bytes(&self, _dtype: Dtype, _head_dim: usize) -> usize {
        0
    }

    fn validate(&self, _dtype: Dtype, _head_dim: usize, _arch: Arch) -> Result<(), String> {
        Ok(())
    }

    fn space(_head_dim: usize) -> Box<dyn Iterator<Item = Self>> {
        Box::new(Scores::ALL.into_iter().map(|scores| CublasConfig { scores }))
    }
}
