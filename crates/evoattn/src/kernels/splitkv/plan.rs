//! The `splitkv` planner: the default tile that decoding's few packed rows want, and how many
//! splits a launch uses.

use super::{SplitkvCombine, SplitkvConfig};
use crate::arch::Arch;
use crate::config::{KernelConfig, KernelSpec, Loads};
use crate::kernels::mma::{MmaConfig, MMA_K, MMA_ROWS_PER_WARP};
use crate::problem::Problem;

/// Deepest K/V ring the `splitkv` default takes with the `mma` default's key tiles (a cap, not a
/// measured optimum).
/// Evidence: docs/decisions/splitkv.md#default-stages
pub const SPLITKV_MAX_DEFAULT_STAGES: u32 = 4;
/// The `splitkv` default's key tile where two stages of it fit: 32 keys per key warp.
pub const SPLITKV_WIDE_BLOCK_N: u32 = 128;
/// Warps of a default `splitkv` block: as many as the 64-row `mma` tile has, spent on key
/// slices of one 16-row tile.
const SPLITKV_WARPS: u32 = 4;

/// The `splitkv` default for a head dim on an arch, for decoding: 16 packed rows with 4 key warps,
/// 128-key tiles where they fit, the combine fused, TMA loads on Hopper.
/// Evidence: docs/decisions/splitkv.md#default
pub fn default(arch: Arch, head_dim: usize) -> SplitkvConfig {
    let MmaConfig { block_n: mma_block_n, q_in_regs, .. } = crate::kernels::mma::default(arch, head_dim);
    let with = |block_n: u32, stages| SplitkvConfig {
        block_m: MMA_ROWS_PER_WARP,
        block_n,
        stages,
        q_in_regs,
        key_warps: SPLITKV_WARPS.min(block_n / MMA_K),
        splits: 0,
        combine: SplitkvCombine::Fused,
        loads: if matches!(arch, Arch::Sm90 | Arch::Sm90a) { Loads::Tma } else { Loads::CpAsync },
    };
    let fits = |c: &SplitkvConfig| {
        // Element size is what matters here; f16 and bf16 are both 2 bytes.
        let spec = KernelSpec { config: KernelConfig::Splitkv(*c), dtype: crate::problem::Dtype::F16, head_dim };
        spec.validate(arch).is_ok()
    };
    let narrow = SplitkvConfig::STAGES.iter().rev().filter(|&&s| s <= SPLITKV_MAX_DEFAULT_STAGES);
    std::iter::once(with(SPLITKV_WIDE_BLOCK_N, SplitkvConfig::STAGES[0]))
        .chain(narrow.map(|&stages| with(mma_block_n, stages)))
        .find(fits)
        .unwrap_or_else(|| with(mma_block_n, SplitkvConfig::STAGES[0]))
}

/// Fewest key tiles one split walks: fewer, and the split's Q load, partial write and share of
/// the combine outweigh its keys.
pub const SPLITKV_MIN_TILES_PER_SPLIT: usize = 2;

/// How many splits a `splitkv` launch of `problem` uses on `sm_count` SMs that each hold
/// `resident_per_sm` of its blocks: the config's `splits` when set, else as many as fit every
/// tile's splits in one wave, no split shorter than [`SPLITKV_MIN_TILES_PER_SPLIT`] key tiles;
/// within 1 ..= the key tiles and [`SplitkvConfig::MAX_SPLITS`].
/// Evidence: docs/decisions/splitkv.md#splits
pub fn splits(problem: &Problem, config: &SplitkvConfig, sm_count: u32, resident_per_sm: u32) -> usize {
    let key_tiles = problem.shape.sk.div_ceil(config.block_n as usize).max(1);
    let wanted = if config.splits > 0 {
        config.splits as usize
    } else {
        let spec =
            KernelSpec { config: KernelConfig::Splitkv(*config), dtype: problem.dtype, head_dim: problem.shape.d };
        let tiles: usize = spec.grid(&problem.shape, 1, sm_count).iter().product();
        let slots = sm_count as usize * resident_per_sm.max(1) as usize;
        (slots / tiles.max(1)).min(key_tiles / SPLITKV_MIN_TILES_PER_SPLIT)
    };
    wanted.clamp(1, key_tiles.min(SplitkvConfig::MAX_SPLITS as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitkv_loads_by_tma_on_hopper_only() {
        for arch in Arch::ALL {
            let hopper = matches!(arch, Arch::Sm90 | Arch::Sm90a);
            for d in [64, 128, 256] {
                let c = default(arch, d);
                assert_eq!(c.loads == Loads::Tma, hopper, "{arch} d{d}");
            }
        }
        // hd128 on Hopper: 128-key tiles, two stages, four key warps of 32 keys.
        let c = default(Arch::Sm90a, 128);
        assert_eq!((c.block_m, c.block_n, c.stages, c.key_warps), (16, 128, 2, 4));
        // hd256: two 128-key stages of unpadded K and V (256 KiB) do not fit; 64-key tiles do.
        let c = default(Arch::Sm90a, 256);
        assert_eq!((c.block_n, c.stages), (64, 3));
    }
}
