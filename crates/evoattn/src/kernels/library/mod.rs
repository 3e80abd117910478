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

/// Which of the two products our GEMM (gemm.cuh) computes in a library path; cuBLASLt the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OurGemm {
    /// None: both by cuBLASLt (`cublas`).
    Neither,
    /// P·V (`hybrid-qk`: cuBLASLt Q·Kᵀ).
    Pv,
    /// Q·Kᵀ (`hybrid-pv`: cuBLASLt P·V).
    Qk,
}

/// float32 scores: the unfused reference grade (no rounding before the softmax); the
/// hybrids' default too, so that they differ from `cublas` by the GEMM alone.
/// Evidence: docs/decisions/cublas.md#scores
pub const DEFAULT_SCORES: Scores = Scores::F32;
/// Threads of a row kernel block (one block a row).
pub const ROWS_THREADS: u32 = 256;
/// Threads of a block of our GEMM (kernels/library/gemm.cuh, `EVOATTN_GEMM_THREADS`): four
/// warps, each 32 rows of the tile.
pub const GEMM_THREADS: u32 = 128;
/// The tile of Cᵀ one block of our GEMM computes: rows of C's n by columns of its m
/// (`EVOATTN_GEMM_BM`, `EVOATTN_GEMM_BN`; gemm.cuh asserts its warp layout covers them).
pub const GEMM_TILE: (usize, usize) = (128, 64);

/// One library family: its config holds what S holds; its module the row kernel (and, for the
/// hybrids, our GEMM). `$source` is the family's translation unit.
macro_rules! library_family {
    ($(#[$doc:meta])* $config:ident, $imp:ident, $ours:expr, $about:literal, $source:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $config {
            pub scores: Scores,
        }

        impl $config {
            /// Which product our GEMM computes.
            pub const OURS: OurGemm = $ours;
        }

        impl Family for $config {
            const IMPL: Impl = Impl::$imp;
            const ABOUT: &'static str = $about;
            const HEAD_DIMS: &'static [usize] = &[64, 128, 256];
            const ARCHS: &'static [Arch] = &Arch::ALL;
            const SOURCE: SourceFile = SourceFile { name: $source, text: include_str!($source) };

            fn default_for(_arch: Arch, _dtype: Dtype, _head_dim: usize) -> Self {
                $config { scores: DEFAULT_SCORES }
            }

            fn into_config(self) -> crate::config::KernelConfig {
                crate::config::KernelConfig::$imp(self)
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

            fn extra_defines(&self, _dtype: Dtype, _head_dim: usize) -> Vec<(String, String)> {
                gemm_defines(Self::OURS, self.scores)
            }

            fn space(_head_dim: usize) -> Box<dyn Iterator<Item = Self>> {
                Box::new(Scores::ALL.into_iter().map(|scores| $config { scores }))
            }
        }
    };
}

library_family!(
    /// Levers of the `cublas` path: its NVRTC kernel is the row kernel between the two GEMMs.
    CublasConfig,
    Cublas,
    OurGemm::Neither,
    "unfused: cuBLASLt Q·Kᵀ into materialised scores, a row kernel (softmax, LSE), cuBLASLt P·V",
    "rows.cu"
);
library_family!(
    /// Levers of `hybrid-qk`: cuBLASLt Q·Kᵀ, the row kernel, our P·V.
    HybridQkConfig,
    HybridQk,
    OurGemm::Pv,
    "cuBLASLt Q·Kᵀ into materialised scores, our row kernel and our mma.sync P·V",
    "hybrid.cu"
);
library_family!(
    /// Levers of `hybrid-pv`: our Q·Kᵀ, the row kernel, cuBLASLt P·V.
    HybridPvConfig,
    HybridPv,
    OurGemm::Qk,
    "our mma.sync Q·Kᵀ into materialised scores, our row kernel, cuBLASLt P·V",
    "hybrid.cu"
);

/// The defines of our GEMM in a hybrid's module (gemm.cuh): which operand it reads transposed
/// and what it writes; none for `cublas`, whose module is the row kernel alone (and whose
/// CUBINs stay as they were).
fn gemm_defines(ours: OurGemm, scores: Scores) -> Vec<(String, String)> {
    let (a_t, c_f32) = match ours {
        OurGemm::Neither => return Vec::new(),
        OurGemm::Pv => (false, false),
        OurGemm::Qk => (true, scores == Scores::F32),
    };
    let (bm, bn) = GEMM_TILE;
    vec![
        ("EVOATTN_GEMM_A_T".to_string(), u32::from(a_t).to_string()),
        ("EVOATTN_GEMM_C_F32".to_string(), u32::from(c_f32).to_string()),
        ("EVOATTN_GEMM_THREADS".to_string(), GEMM_THREADS.to_string()),
        ("EVOATTN_GEMM_BM".to_string(), bm.to_string()),
        ("EVOATTN_GEMM_BN".to_string(), bn.to_string()),
    ]
}
