//! `mma-bwd`: attention's backward pass (`bwd.cu`), FlashAttention-2's algorithm on `mma.sync`
//! m16n8k16 (sm_80+). A module of three kernels launched in order (`runtime::backward`): the
//! row dot products delta = rowsum(dO ∘ O), the main kernel (one block per `block_n` keys of a
//! KV head: dK and dV in registers, dQ by float32 atomics), and dQ's conversion.

use crate::arch::Arch;
use crate::config::lever::{num, one_of, Family, Lever};
use crate::config::Impl;
use crate::kernels::SourceFile;
use crate::problem::{Dtype, Shape};
use crate::runtime::scratch::ScratchNeed;

/// Levers of the `mma-bwd` kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BwdConfig {
    /// Query rows per step of the sweep over queries.
    pub block_m: u32,
    /// Keys per block; one warp owns 16, so warps = block_n / 16.
    pub block_n: u32,
    /// Q/dO buffers: 2 loads the next step while this one computes.
    pub stages: u32,
}

/// Keys each warp owns.
pub const KEYS_PER_WARP: u32 = 16;
/// Padding, in elements, after each shared-memory row (8 rows one `ldmatrix` reads land on
/// distinct banks).
const ROW_PAD: usize = 8;
/// Threads of the dot and conversion kernels' blocks.
pub const AUX_THREADS: u32 = 256;
/// Query rows of one dot-kernel block (a warp each).
pub const DOT_ROWS: u32 = AUX_THREADS / 32;
/// Elements one conversion-kernel thread writes (16 bytes).
pub const DQ_CHUNK: usize = 8;

impl BwdConfig {
    pub const BLOCK_M: [u32; 3] = [32, 64, 128];
    pub const BLOCK_N: [u32; 2] = [64, 128];
    pub const STAGES: [u32; 2] = [1, 2];

    pub fn warps(&self) -> u32 {
        self.block_n / KEYS_PER_WARP
    }

    /// Columns of one dQ job (16 query rows): the warps split the step's rows, and when there
    /// are more warps than 16-row groups, the columns too.
    fn dq_cols(&self, head_dim: usize) -> usize {
        let (warps, groups) = (self.warps(), self.block_m / 16);
        head_dim / (if warps >= groups { (warps / groups) as usize } else { 1 })
    }
}

/// The default for a head dim on an arch: 128 keys a block (8 warps); 64 query rows a step at
/// hd64, 32 at hd128 (64 spills: dK and dV hold 128 registers a thread); double-buffered where
/// the arch's shared memory holds it.
/// Evidence: docs/decisions/bwd.md#default
pub fn default(arch: Arch, head_dim: usize) -> BwdConfig {
    let block_m = if head_dim <= 64 { 64 } else { 32 };
    let double = BwdConfig { block_m, block_n: 128, stages: 2 };
    if double.dynamic_smem_bytes(Dtype::Bf16, head_dim) <= arch.max_smem_per_block() {
        double
    } else {
        BwdConfig { stages: 1, ..double }
    }
}

/// Scratch of a launch on `shape`: the dQ accumulator (B·H·Sq·D floats), then delta (B·H·Sq).
pub fn scratch(shape: &Shape) -> ScratchNeed {
    let rows = shape.b * shape.h * shape.sq;
    ScratchNeed { counters: 0, floats: rows + rows * shape.d }
}

impl Family for BwdConfig {
    const IMPL: Impl = Impl::MmaBwd;
    const ABOUT: &'static str =
        "backward pass, FlashAttention-2 style: mma.sync m16n8k16, dK/dV per key block, dQ by atomics (sm_80+)";
    const HEAD_DIMS: &'static [usize] = &[64, 128];
    const ARCHS: &'static [Arch] = &Arch::ALL;
    const SOURCE: SourceFile = SourceFile { name: "bwd.cu", text: include_str!("bwd.cu") };

    fn default_for(arch: Arch, _dtype: Dtype, head_dim: usize) -> Self {
        default(arch, head_dim)
    }

    fn into_config(self) -> crate::config::KernelConfig {
        crate::config::KernelConfig::MmaBwd(self)
    }

    const LEVERS: &'static [Lever<Self>] = &[
        num!("block_m", "bm", block_m, &BwdConfig::BLOCK_M, "query rows per step of the sweep"),
        num!("block_n", "bn", block_n, &BwdConfig::BLOCK_N, "keys per block (16 per warp)"),
        num!("stages", "s", stages, &BwdConfig::STAGES, "Q/dO buffers (2: the next step loads during this one)"),
    ];

    fn threads(&self) -> u32 {
        self.warps() * 32
    }

    /// The main kernel's: one block per key block of each (KV head, batch).
    fn grid(&self, shape: &Shape, _splits: usize, _sm_count: u32) -> [usize; 3] {
        [shape.sk.div_ceil(self.block_n as usize), shape.hkv, shape.b]
    }

    /// K and V (the block's keys), Q and dO per buffer (padded rows), dSᵀ, LSE and delta.
    fn dynamic_smem_bytes(&self, dtype: Dtype, head_dim: usize) -> usize {
        let (bm, bn, stages) = (self.block_m as usize, self.block_n as usize, self.stages as usize);
        let row = (head_dim + ROW_PAD) * dtype.size_bytes();
        2 * bn * row + 2 * stages * bm * row + bn * (bm + ROW_PAD) * dtype.size_bytes() + 2 * stages * bm * 4
    }

    fn validate(&self, _dtype: Dtype, head_dim: usize, _arch: Arch) -> Result<(), String> {
        one_of("block_m", self.block_m, &BwdConfig::BLOCK_M)?;
        one_of("block_n", self.block_n, &BwdConfig::BLOCK_N)?;
        one_of("stages", self.stages, &BwdConfig::STAGES)?;
        if !self.dq_cols(head_dim).is_multiple_of(16) {
            return Err(format!(
                "block_m={} with block_n={} splits dQ's {head_dim} columns into pieces of {}, not whole 16-column steps",
                self.block_m,
                self.block_n,
                self.dq_cols(head_dim)
            ));
        }
        Ok(())
    }

    fn space(_head_dim: usize) -> Box<dyn Iterator<Item = Self>> {
        Box::new(BwdConfig::BLOCK_M.into_iter().flat_map(|block_m| {
            BwdConfig::BLOCK_N.into_iter().flat_map(move |block_n| {
                BwdConfig::STAGES.into_iter().map(move |stages| BwdConfig { block_m, block_n, stages })
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_fits_every_arch_and_is_double_buffered_where_room_allows() {
        for arch in Arch::ALL {
            for d in [64, 128] {
                let c = default(arch, d);
                assert!(c.dynamic_smem_bytes(Dtype::Bf16, d) <= arch.max_smem_per_block(), "{arch} d{d}");
                assert_eq!(c.validate(Dtype::Bf16, d, arch), Ok(()));
            }
        }
        assert_eq!(default(Arch::Sm90a, 64), BwdConfig { block_m: 64, block_n: 128, stages: 2 });
        assert_eq!(default(Arch::Sm90a, 128), BwdConfig { block_m: 32, block_n: 128, stages: 2 });
        assert_eq!(default(Arch::Sm89, 128), BwdConfig { block_m: 32, block_n: 128, stages: 1 });
    }

    #[test]
    fn shared_memory_counts_every_tile() {
        // hd128 bf16, 64 x 128, two buffers: K and V 2·128·136·2, Q and dO 2·2·64·136·2,
        // dSᵀ 128·72·2, LSE and delta 2·2·64·4.
        let c = BwdConfig { block_m: 64, block_n: 128, stages: 2 };
        assert_eq!(c.dynamic_smem_bytes(Dtype::Bf16, 128), 69632 + 69632 + 18432 + 1024);
    }

    #[test]
    fn every_config_of_the_space_splits_dq_into_whole_column_steps() {
        // The tightest: 8 warps over 2 row groups, 4 column pieces of 16 at hd64.
        assert_eq!(BwdConfig { block_m: 32, block_n: 128, stages: 1 }.dq_cols(64), 16);
        for d in [64, 128] {
            for c in BwdConfig::space(d) {
                assert_eq!(c.validate(Dtype::F16, d, Arch::Sm80), Ok(()), "{c:?}");
            }
        }
        let err = BwdConfig { block_m: 64, block_n: 96, stages: 1 }.validate(Dtype::F16, 64, Arch::Sm80).unwrap_err();
        assert!(err.contains("block_n=96"), "{err}");
    }

    #[test]
    fn scratch_holds_the_dq_accumulator_and_delta() {
        let need = scratch(&Shape::new(2, 4, 100, 64));
        assert_eq!(need.floats, 800 + 800 * 64);
        assert_eq!(need.counters, 0);
    }
}
