//! The library paths of #38 (`cublas`, and the two hybrids after it): attention as the
//! unfused algorithm a user writes with cuBLAS, materialised scores and all, for the lab to
//! measure our fused kernels against on the same terms (docs/design/cublas-plan.md).
//! `geometry`: the GEMMs, chunks and score layout of a problem; `rows.cu`: the row kernel
//! between the two GEMMs.

pub mod geometry;

use super::SourceFile;
use crate::problem::Dtype;

/// The row kernel's translation unit (it includes `common.cuh`).
pub const ROWS: SourceFile = SourceFile { name: "rows.cu", text: include_str!("rows.cu") };
/// Threads of a row kernel block (one block a row).
pub const ROWS_THREADS: u32 = 256;

/// What the materialised scores S hold: cuBLASLt writes them so, the row kernel reads them so.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scores {
    /// float32: no rounding of the scores before the softmax (twice the bytes).
    F32,
    /// The inputs' 16-bit dtype, as PyTorch's unfused `softmax(q @ k.T) @ v` holds them.
    Input,
}

impl Scores {
    pub const ALL: [Scores; 2] = [Scores::F32, Scores::Input];

    /// Bytes of one score.
    pub fn bytes(self) -> usize {
        match self {
            Scores::F32 => 4,
            Scores::Input => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scores::F32 => "f32",
            Scores::Input => "input",
        }
    }
}

/// The row kernel's symbol for inputs of `dtype` (16-bit) and scores held as `scores`, and the
/// defines that build it (`common.cuh`'s head dim is unused by it: 64 satisfies the check).
pub fn rows_kernel(dtype: Dtype, scores: Scores) -> (String, Vec<(String, String)>) {
    let name = format!("evoattn_rows_{}_s{}", dtype.name(), scores.name());
    let defines = [
        ("EVOATTN_KERNEL_NAME", name.clone()),
        ("EVOATTN_BF16", u8::from(dtype == Dtype::Bf16).to_string()),
        ("EVOATTN_HEAD_DIM", "64".to_string()),
        ("EVOATTN_ROWS_THREADS", ROWS_THREADS.to_string()),
        ("EVOATTN_SCORES_F32", u8::from(scores == Scores::F32).to_string()),
    ];
    (name, defines.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
