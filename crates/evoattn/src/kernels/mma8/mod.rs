//! `mma8`: FP8 E4M3 attention on `mma.sync` m16n8k32 (`mma8.cu`), the portable FP8 path for
//! sm_89 and later: the `mma` kernel's structure (warps of 16 query rows, a `cp.async` K/V ring)
//! on byte rows, with P converted to E4M3 in registers and V's keys permuted to match it.

use crate::arch::Arch;
use crate::config::lever::{flag, num, one_of, Family, Lever};
use crate::config::Impl;
use crate::kernels::SourceFile;
use crate::problem::{Dtype, Shape};

/// Levers of the `mma8` kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mma8Config {
    /// Query rows per block; one warp owns 16 rows, so warps = block_m / 16.
    pub block_m: u32,
    /// Keys per main-loop iteration (whole k32 steps of P·V).
    pub block_n: u32,
    /// K/V shared-memory ring depth (`cp.async` groups in flight + 1).
    pub stages: u32,
    /// Keep the warp's Q fragments in registers for the whole loop (else re-read with
    /// `ldmatrix` every iteration).
    pub q_in_regs: bool,
    /// Warps that share 16 query rows, each accumulating 1/d_split of O's columns (each
    /// computes the rows' whole S): fewer registers a thread for O, more Q·Kᵀ work.
    pub d_split: u32,
}

/// Bytes of padding after each shared-memory row (one 16-byte chunk, so that the 8 rows one
/// `ldmatrix` reads fall in distinct banks).
const ROW_PAD_BYTES: usize = 16;

impl Mma8Config {
    pub const BLOCK_M: [u32; 2] = [64, 128];
    pub const BLOCK_N: [u32; 3] = [32, 64, 128];
    pub const STAGES: [u32; 3] = [1, 2, 3];
    pub const D_SPLIT: [u32; 2] = [1, 2];

    pub fn warps(&self) -> u32 {
        self.block_m / 16 * self.d_split
    }
}

/// The `mma8` default for a head dim on an arch: `mma`'s choices on byte rows (half its
/// shared memory), so every tile fits the 99 KiB parts; at hd256 on Hopper, where the FP8
/// `mma.sync` needs more registers, two warps split O's columns over 32-key tiles (the only
/// arrangement that does not spill there).
/// Evidence: docs/decisions/mma8.md#default
pub fn default(arch: Arch, head_dim: usize) -> Mma8Config {
    let hopper = matches!(arch, Arch::Sm90 | Arch::Sm90a);
    match head_dim {
        d if d <= 128 => Mma8Config { block_m: 128, block_n: 64, stages: 2, q_in_regs: true, d_split: 1 },
        _ if hopper => Mma8Config { block_m: 64, block_n: 32, stages: 2, q_in_regs: false, d_split: 2 },
        _ => Mma8Config { block_m: 64, block_n: 64, stages: 2, q_in_regs: false, d_split: 1 },
    }
}

impl Family for Mma8Config {
    const IMPL: Impl = Impl::Mma8;
    const ABOUT: &'static str = "FP8 E4M3: mma.sync m16n8k32, ldmatrix, cp.async pipeline, O in bf16 (sm_89+)";
    const HEAD_DIMS: &'static [usize] = &[64, 128, 256];
    const ARCHS: &'static [Arch] = &[Arch::Sm89, Arch::Sm90, Arch::Sm90a];
    const DTYPES: &'static [Dtype] = &[Dtype::E4m3, Dtype::E4m3F16];
    const SOURCE: SourceFile = SourceFile { name: "mma8.cu", text: include_str!("mma8.cu") };

    fn default_for(arch: Arch, _dtype: Dtype, head_dim: usize) -> Self {
        default(arch, head_dim)
    }

    fn into_config(self) -> crate::config::KernelConfig {
        crate::config::KernelConfig::Mma8(self)
    }
    const LEVERS: &'static [Lever<Self>] = &[
        num!("block_m", "bm", block_m, &Mma8Config::BLOCK_M, "query rows per block (16 per warp)"),
        num!("block_n", "bn", block_n, &Mma8Config::BLOCK_N, "keys per main-loop iteration"),
        num!("stages", "s", stages, &Mma8Config::STAGES, "K/V shared-memory ring depth"),
        flag!("q_in_regs", "qr", q_in_regs, "keep Q's fragments in registers for the whole loop"),
        num!("d_split", "ds", d_split, &Mma8Config::D_SPLIT, "warps sharing 16 query rows, each with part of O"),
    ];

    fn threads(&self) -> u32 {
        self.warps() * 32
    }

    fn grid(&self, shape: &Shape, _splits: usize, _sm_count: u32) -> [usize; 3] {
        [shape.sq.div_ceil(self.block_m as usize), shape.h, shape.b]
    }

    /// Q and the K/V ring (padded byte rows) during the loop, or O's 16-bit staged rows after
    /// it, whichever is larger: the epilogue reuses the same memory.
    fn dynamic_smem_bytes(&self, dtype: Dtype, head_dim: usize) -> usize {
        let row = head_dim * dtype.size_bytes() + ROW_PAD_BYTES;
        let main_loop = (self.block_m + 2 * self.stages * self.block_n) as usize * row;
        let o_row = head_dim * dtype.output().size_bytes() + ROW_PAD_BYTES;
        main_loop.max(self.block_m as usize * o_row)
    }

    fn validate(&self, _dtype: Dtype, _head_dim: usize, _arch: Arch) -> Result<(), String> {
        one_of("block_m", self.block_m, &Mma8Config::BLOCK_M)?;
        one_of("block_n", self.block_n, &Mma8Config::BLOCK_N)?;
        one_of("stages", self.stages, &Mma8Config::STAGES)?;
        one_of("d_split", self.d_split, &Mma8Config::D_SPLIT)
    }

    fn space(_head_dim: usize) -> Box<dyn Iterator<Item = Self>> {
        Box::new(Mma8Config::BLOCK_M.into_iter().flat_map(|block_m| {
            Mma8Config::BLOCK_N.into_iter().flat_map(move |block_n| {
                Mma8Config::STAGES.into_iter().flat_map(move |stages| {
                    [true, false].into_iter().flat_map(move |q_in_regs| {
                        Mma8Config::D_SPLIT.into_iter().map(move |d_split| Mma8Config {
                            block_m,
                            block_n,
                            stages,
                            q_in_regs,
                            d_split,
                        })
                    })
                })
            })
        }))
    }
}
