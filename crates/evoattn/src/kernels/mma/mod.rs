//! `mma`: the FlashAttention-2 class kernel (`mma.cu`): `mma.sync` m16n8k16, `ldmatrix`, a
//! `cp.async` K/V ring; sm_80 and later. `splitkv` runs on its main loop.

use crate::arch::Arch;
use crate::config::lever::{flag, num, one_of, Family, Lever};
use crate::config::Impl;
use crate::kernels::SourceFile;
use crate::problem::{Dtype, Shape};

/// Levers of the `mma` kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaConfig {
    /// Query rows per block; one warp owns 16 rows, so warps = block_m / 16.
    pub block_m: u32,
    /// Keys per main-loop iteration.
    pub block_n: u32,
    /// K/V shared-memory ring depth (`cp.async` groups in flight + 1).
    pub stages: u32,
    /// Keep the warp's Q fragments in registers for the whole loop (else re-read with
    /// `ldmatrix` every iteration: fewer registers, more shared-memory traffic).
    pub q_in_regs: bool,
}

/// Rows of one `mma.sync` tile: each warp owns this many query rows.
pub const MMA_ROWS_PER_WARP: u32 = 16;
/// The K of one `mma.sync` m16n8k16: P·V consumes keys in steps of this many.
pub const MMA_K: u32 = 16;
/// Padding, in elements, added to each shared-memory row so that 8 rows read by one
/// `ldmatrix` fall in different banks (16 bytes shift per row).
pub const SMEM_ROW_PAD: usize = 8;

impl MmaConfig {
    pub const BLOCK_M: [u32; 2] = [64, 128];
    pub const BLOCK_N: [u32; 3] = [32, 64, 128];
    pub const STAGES: [u32; 3] = [1, 2, 3];

    pub fn warps(&self) -> u32 {
        self.block_m / MMA_ROWS_PER_WARP
    }
}

/// Bytes of a Q tile of `block_m` padded rows: the `mma` main loop's (also `splitkv`'s).
pub(crate) fn q_tile_bytes(block_m: u32, dtype: Dtype, head_dim: usize) -> usize {
    block_m as usize * (head_dim + SMEM_ROW_PAD) * dtype.size_bytes()
}

/// Bytes of a K/V ring of `stages` stages of `block_n` keys (K and V): padded rows for
/// `cp.async`, unpadded swizzled tiles for TMA.
pub(crate) fn kv_ring_bytes(tma: bool, stages: u32, block_n: u32, dtype: Dtype, head_dim: usize) -> usize {
    let row = if tma { head_dim } else { head_dim + SMEM_ROW_PAD };
    2 * (stages * block_n) as usize * row * dtype.size_bytes()
}

/// The `mma` default for a head dim on an arch: the widest tile and deepest ring that fit the
/// arch's shared memory, Q in registers below hd256.
/// Evidence: docs/decisions/mma.md#default
pub fn default(arch: Arch, head_dim: usize) -> MmaConfig {
    let big_smem = arch.max_smem_per_block() >= 160 * 1024;
    let hopper = matches!(arch, Arch::Sm90 | Arch::Sm90a);
    match head_dim {
        d if d <= 64 => MmaConfig { block_m: 128, block_n: 64, stages: 3, q_in_regs: true },
        d if d <= 128 && big_smem => MmaConfig { block_m: 128, block_n: 64, stages: 2, q_in_regs: true },
        d if d <= 128 => MmaConfig { block_m: 64, block_n: 64, stages: 2, q_in_regs: true },
        _ if hopper => MmaConfig { block_m: 64, block_n: 64, stages: 2, q_in_regs: false },
        _ => MmaConfig { block_m: 64, block_n: 32, stages: 2, q_in_regs: false },
    }
}

impl Family for MmaConfig {
    const IMPL: Impl = Impl::Mma;
    const ABOUT: &'static str = "FlashAttention-2 style: mma.sync m16n8k16, ldmatrix, cp.async pipeline (sm_80+)";
    const HEAD_DIMS: &'static [usize] = &[64, 128, 256];
    const ARCHS: &'static [Arch] = &Arch::ALL;
    const SOURCE: SourceFile = SourceFile { name: "mma.cu", text: include_str!("mma.cu") };

    fn default_for(arch: Arch, _dtype: Dtype, head_dim: usize) -> Self {
        default(arch, head_dim)
    }

    fn into_config(self) -> crate::config::KernelConfig {
        crate::config::KernelConfig::Mma(self)
    }
    const LEVERS: &'static [Lever<Self>] = &[
        num!("block_m", "bm", block_m, &MmaConfig::BLOCK_M, "query rows per block (16 per warp)"),
        num!("block_n", "bn", block_n, &MmaConfig::BLOCK_N, "keys per main-loop iteration"),
        num!("stages", "s", stages, &MmaConfig::STAGES, "K/V shared-memory ring depth"),
        flag!("q_in_regs", "qr", q_in_regs, "keep Q's fragments in registers for the whole loop"),
    ];

    fn threads(&self) -> u32 {
        self.warps() * 32
    }

    fn grid(&self, shape: &Shape, _splits: usize, _sm_count: u32) -> [usize; 3] {
        [shape.sq.div_ceil(self.block_m as usize), shape.h, shape.b]
    }

    /// Q (padded rows) and the K/V ring.
    fn dynamic_smem_bytes(&self, dtype: Dtype, head_dim: usize) -> usize {
        q_tile_bytes(self.block_m, dtype, head_dim) + kv_ring_bytes(false, self.stages, self.block_n, dtype, head_dim)
    }

    fn validate(&self, _dtype: Dtype, _head_dim: usize, _arch: Arch) -> Result<(), String> {
        one_of("block_m", self.block_m, &MmaConfig::BLOCK_M)?;
        one_of("block_n", self.block_n, &MmaConfig::BLOCK_N)?;
        one_of("stages", self.stages, &MmaConfig::STAGES)
    }

    fn space(_head_dim: usize) -> Box<dyn Iterator<Item = Self>> {
        Box::new(MmaConfig::BLOCK_M.into_iter().flat_map(|block_m| {
            MmaConfig::BLOCK_N.into_iter().flat_map(move |block_n| {
                MmaConfig::STAGES.into_iter().flat_map(move |stages| {
                    [true, false].into_iter().map(move |q_in_regs| MmaConfig { block_m, block_n, stages, q_in_regs })
                })
            })
        }))
    }
}
