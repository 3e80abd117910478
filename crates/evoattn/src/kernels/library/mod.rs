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

/// Which library computes a library path's products that are not ours (the `gemm` lever):
/// the founding documents' CUBLAS and CUTENSOR candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Provider {
    /// cuBLASLt's strided-batched GEMM.
    CublasLt,
    /// cuTENSOR's contraction, where its library is installed (`runtime::cutensor`).
    Cutensor,
}

impl Provider {
    pub const ALL: [Provider; 2] = [Provider::CublasLt, Provider::Cutensor];
    // The module is the same for both: the provider runs on the host.
    pub(crate) const VARIANTS: [Variant; 2] = [
        Variant { name: "cublaslt", key: "lt", about: "cuBLASLt's strided-batched GEMM", defines: &[] },
        Variant { name: "cutensor", key: "ct", about: "cuTENSOR's contraction (where it is installed)", defines: &[] },
    ];

    /// As `--config` writes it.
    pub fn name(self) -> &'static str {
        Self::VARIANTS[self as usize].name
    }
}

/// What a library path's config says of its three steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LibraryPath {
    pub scores: Scores,
    pub ours: OurGemm,
    pub gemm: Provider,
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
/// cuBLASLt: the unfused path as users write it (PyTorch's matmuls call cuBLAS), and the
/// provider that takes f32 scores from 16-bit inputs.
/// Evidence: docs/decisions/cublas.md#cutensor
pub const DEFAULT_PROVIDER: Provider = Provider::CublasLt;
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
            pub gemm: Provider,
        }

        impl $config {
            /// Which product our GEMM computes.
            pub const OURS: OurGemm = $ours;

            /// What the config says of the path's three steps.
            pub fn path(&self) -> LibraryPath {
                LibraryPath { scores: self.scores, ours: Self::OURS, gemm: self.gemm }
            }
        }

        impl Family for $config {
            const IMPL: Impl = Impl::$imp;
            const ABOUT: &'static str = $about;
            const HEAD_DIMS: &'static [usize] = &[64, 128, 256];
            const ARCHS: &'static [Arch] = &Arch::ALL;
            const SOURCE: SourceFile = SourceFile { name: $source, text: include_str!($source) };

            fn default_for(_arch: Arch, _dtype: Dtype, _head_dim: usize) -> Self {
                $config { scores: DEFAULT_SCORES, gemm: DEFAULT_PROVIDER }
            }

            fn into_config(self) -> crate::config::KernelConfig {
                crate::config::KernelConfig::$imp(self)
            }

            const LEVERS: &'static [Lever<Self>] = &[
                axis!("scores", "sc", scores, Scores, "what the materialised scores hold between the two GEMMs"),
                axis!(
                    "gemm",
                    "gm",
                    gemm,
                    Provider,
                    "the library that computes the products that are not ours",
                    shown_when_not_first
                ),
            ];

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
                validate_path(self.path())
            }

            fn extra_defines(&self, _dtype: Dtype, _head_dim: usize) -> Vec<(String, String)> {
                gemm_defines(Self::OURS, self.scores)
            }

            fn space(_head_dim: usize) -> Box<dyn Iterator<Item = Self>> {
                let all = Scores::ALL.into_iter().flat_map(|scores| Provider::ALL.map(|gemm| $config { scores, gemm }));
                Box::new(all.filter(|c| validate_path(c.path()).is_ok()))
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

/// Why cuTENSOR cannot write f32 scores.
pub const CUTENSOR_NO_F32_SCORES: &str = "gemm=cutensor writes Q·Kᵀ's scores in the inputs' dtype (cuTENSOR contracts \
     16-bit inputs into 16-bit results only): set scores=input, or use hybrid-pv, whose Q·Kᵀ is ours";

/// Whether the library can compute what `path` asks of it: cuTENSOR contracts 16-bit inputs into
/// 16-bit results only, so with it f32 scores need our Q·Kᵀ (`hybrid-pv`).
pub fn validate_path(path: LibraryPath) -> Result<(), String> {
    if path.gemm == Provider::Cutensor && path.scores == Scores::F32 && path.ours != OurGemm::Qk {
        return Err(CUTENSOR_NO_F32_SCORES.into());
    }
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{KernelConfig, KernelSpec};

    fn spec(config: KernelConfig) -> KernelSpec {
        KernelSpec { config, dtype: Dtype::Bf16, head_dim: 64 }
    }

    #[test]
    fn the_gemm_lever_leaves_cublaslt_kernels_their_names_and_names_cutensor() {
        let lt = spec(KernelConfig::Cublas(CublasConfig { scores: Scores::Input, gemm: Provider::CublasLt }));
        let ct = spec(KernelConfig::Cublas(CublasConfig { scores: Scores::Input, gemm: Provider::Cutensor }));
        // The names recorded before the lever existed, and the config text without it.
        assert_eq!(lt.name(), "evoattn_cublas_bf16_d64_scin");
        assert_eq!(lt.config.to_string(), "scores=input");
        assert_eq!(ct.name(), "evoattn_cublas_bf16_d64_scin_gmct");
        assert_eq!(ct.config.to_string(), "scores=input,gemm=cutensor");
        // Both read back from their names and their text.
        for s in [lt, ct] {
            assert_eq!(KernelSpec::from_name(&s.name()), Some(s));
            assert_eq!(lt.config.with_overrides(&s.config.to_string()), Ok(s.config));
        }
        // The module is the same but its symbol: the provider runs on the host.
        let other =
            |s: KernelSpec| s.defines().into_iter().filter(|(k, _)| k != "EVOATTN_KERNEL_NAME").collect::<Vec<_>>();
        assert_eq!(other(lt), other(ct));
    }

    #[test]
    fn cutensor_takes_f32_scores_only_where_q_kt_is_ours() {
        let path = |ours, scores| LibraryPath { scores, ours, gemm: Provider::Cutensor };
        for ours in [OurGemm::Neither, OurGemm::Pv] {
            assert_eq!(validate_path(path(ours, Scores::F32)), Err(CUTENSOR_NO_F32_SCORES.to_string()));
            assert_eq!(validate_path(path(ours, Scores::Input)), Ok(()));
        }
        assert_eq!(validate_path(path(OurGemm::Qk, Scores::F32)), Ok(()));
        // cuBLASLt writes either.
        for ours in [OurGemm::Neither, OurGemm::Pv, OurGemm::Qk] {
            for scores in Scores::ALL {
                assert_eq!(validate_path(LibraryPath { scores, ours, gemm: Provider::CublasLt }), Ok(()));
            }
        }
        // The tuner's space holds the valid combinations only: three for cublas, four for hybrid-pv.
        assert_eq!(CublasConfig::space(64).count(), 3);
        assert_eq!(HybridQkConfig::space(64).count(), 3);
        assert_eq!(HybridPvConfig::space(64).count(), 4);
        let refused = CublasConfig { scores: Scores::F32, gemm: Provider::Cutensor };
        assert!(refused.validate(Dtype::Bf16, 64, Arch::Sm90a).is_err());
    }
}
