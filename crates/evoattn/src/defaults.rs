//! Default kernel configurations, each with the reason it was chosen. The planner starts from
//! these; the tuner's store overrides them per GPU and problem bucket.

use crate::arch::Arch;
use crate::config::{KernelConfig, MmaConfig, ReferenceConfig, SplitkvCombine, SplitkvConfig, WgmmaConfig, WgmmaLoads};
use crate::problem::Causal;

/// 128 threads: four warps give each block enough loads in flight to cover a key row's
/// latency, and D <= 256 means at most two output columns per thread.
pub const REFERENCE: ReferenceConfig = ReferenceConfig { threads: 128 };

/// The `mma` default for a head dim on an arch.
///
/// - D=64: 128 query rows (8 warps) amortise each K/V tile over more rows; a 3-stage ring of
///   64-key tiles is 72 KiB, which fits every arch, and hides load latency better than 2.
/// - D=128: 128 rows and 64 keys with 2 stages is 102 KiB: fine on A100/H100; on the 99 KiB
///   parts (sm_86/89) drop to 64 rows (85 KiB).
/// - D=256: the output accumulator alone is 128 registers a thread, so Q is re-read from
///   shared memory instead of held in registers (else it spills); 64 rows. 64-key tiles with
///   2 stages need 165 KiB (Hopper only); A100 and the 99 KiB parts take 32-key tiles (99 KiB).
pub fn mma(arch: Arch, head_dim: usize) -> MmaConfig {
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

/// The `wgmma` default for a head dim (sm_90a only, so the arch does not enter).
///
/// The warp-specialised pipeline: a producer warpgroup issuing TMA loads into separate K and V
/// rings (two stages), two consumer warpgroups (128 query rows) that overlap each block's
/// softmax with the GEMMs and take turns at the tensor cores (ping-pong), one tile per block.
/// Measured on the H100 (2026-11-22, graph mode, bf16, same runs as cuDNN; docs/perf-log.md,
/// "wgmma step 3"): at hd128 S=16k, 545 TFLOP/s with step 2's loop, 588 with the producer
/// warpgroup, 604 with overlap, 672 with ping-pong. Persistent blocks: see [`for_problem`].
/// - D=64: 176-key tiles (S 88 registers, O 32): 472 against 463 TFLOP/s for 128 at 16k.
/// - D=128: 176-key tiles, as FlashAttention-3: 688 against 666 for 128 at 16k (S 88 + P 44
///   + O 64 registers of the consumers' 240); shared memory 208 KiB.
/// - D=256: 80-key tiles (O alone is 128 registers): 724 against 667 for 64 at 16k; 224 KiB.
pub fn wgmma(head_dim: usize) -> WgmmaConfig {
    let block_n = match head_dim {
        d if d <= 128 => 176,
        _ => 80,
    };
    WgmmaConfig {
        block_n,
        stages: 2,
        consumer_warpgroups: 2,
        loads: WgmmaLoads::Tma,
        warp_specialized: true,
        overlap: true,
        pingpong: true,
        persistent: false,
    }
}

/// Most keys for which `wgmma` runs persistent blocks: the next tile's loads hide under the
/// current one's last GEMM and epilogue, which matters while a tile has few key blocks.
pub const PERSISTENT_MAX_KEYS: usize = 4096;
/// Largest head dim for which `wgmma` runs persistent blocks.
pub const PERSISTENT_MAX_HEAD_DIM: usize = 128;

/// The default configuration of `imp` for one problem: [`config`], with `wgmma`'s persistent
/// scheduler on where it measured faster (H100, 2026-11-22, graph mode, same runs, persistent
/// against one tile per block; `bench/results/2026-11-22-wgmma-step3-*`):
/// - no mask, hd <= 128, Sk <= 4k: faster at every S measured (hd64: +29% at S=512, +14% at 1k,
///   +4% at 4k; hd128: +15%, +8%, +1.5%), but 2% slower at 16k;
/// - hd256: slower at S <= 1k (-7%, -4%), even at 4k;
/// - causal: slower (hd128 S=16k: 448 against 687 TFLOP/s with a head's tiles in order, 591
///   with every head's longest first), so causal problems keep one tile per block, longest
///   first from the grid.
pub fn for_problem(imp: crate::config::Impl, arch: Arch, problem: &crate::problem::Problem) -> KernelConfig {
    match config(imp, arch, problem.shape.d) {
        KernelConfig::Wgmma(c) => {
            let persistent = problem.causal == Causal::None
                && problem.shape.d <= PERSISTENT_MAX_HEAD_DIM
                && problem.shape.sk <= PERSISTENT_MAX_KEYS;
            KernelConfig::Wgmma(WgmmaConfig { persistent, ..c })
        }
        other => other,
    }
}

/// The `splitkv` default for a head dim on an arch.
///
/// - 64 packed rows (4 warps): decoding has few rows (Sq × group, 8 for GQA 8:1 at Sq = 1),
///   but the block's K/V loads are spread over more threads, and the MMA work of 64 rows
///   still hides under the loads of a bandwidth-bound split (a 64-key tile at D=128 is 32 KiB
///   of K/V for 2 MFLOP).
/// - Key tiles, stages and Q in registers follow the `mma` default of the head dim on the
///   arch (`mma` above): the same main loop with at most as many rows, so the same shared
///   memory and register budget holds.
/// - splits = 0: the planner chooses from the problem and the SM count.
/// - combine fused into the last split of each tile: one launch per call instead of two (one
///   `cuLaunchKernel` of host time, and no gap between two grids on the GPU), and the merge
///   of one tile overlaps the other tiles' splits. Unmeasured against `kernel` so far.
pub fn splitkv(arch: Arch, head_dim: usize) -> SplitkvConfig {
    let MmaConfig { block_n, stages, q_in_regs, .. } = mma(arch, head_dim);
    SplitkvConfig { block_m: 64, block_n, stages, q_in_regs, splits: 0, combine: SplitkvCombine::Fused }
}

/// The default configuration of `imp` for a head dim on an arch.
pub fn config(imp: crate::config::Impl, arch: Arch, head_dim: usize) -> KernelConfig {
    match imp {
        crate::config::Impl::Reference => KernelConfig::Reference(REFERENCE),
        crate::config::Impl::Mma => KernelConfig::Mma(mma(arch, head_dim)),
        crate::config::Impl::Wgmma => KernelConfig::Wgmma(wgmma(head_dim)),
        crate::config::Impl::Splitkv => KernelConfig::Splitkv(splitkv(arch, head_dim)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Impl, KernelSpec};
    use crate::problem::Dtype;

    #[test]
    fn wgmma_is_persistent_only_without_a_mask_on_short_keys_up_to_hd128() {
        use crate::problem::{Layout, Problem, Shape};
        let p = Problem::dense(Shape::new(2, 16, 512, 128), Dtype::Bf16, Layout::Bhsd);
        let persistent = |p: &Problem| match for_problem(Impl::Wgmma, Arch::Sm90a, p) {
            KernelConfig::Wgmma(c) => c.persistent,
            _ => unreachable!(),
        };
        assert!(persistent(&p));
        assert!(persistent(&Problem::dense(Shape::new(4, 32, 4096, 64), Dtype::Bf16, Layout::Bhsd)));
        assert!(!persistent(&Problem::dense(Shape::new(1, 16, 16384, 128), Dtype::Bf16, Layout::Bhsd)));
        assert!(!persistent(&Problem::dense(Shape::new(32, 8, 512, 256), Dtype::Bf16, Layout::Bhsd)));
        assert!(!persistent(&p.clone().with_causal(Causal::TopLeft)));
        assert!(!persistent(&p.clone().with_causal(Causal::BottomRight)));
        assert_eq!(for_problem(Impl::Mma, Arch::Sm80, &p), config(Impl::Mma, Arch::Sm80, 128));
    }

    #[test]
    fn every_default_passes_validate_on_its_arch() {
        for imp in Impl::ALL {
            for &arch in imp.archs() {
                for &head_dim in imp.head_dims() {
                    let spec = KernelSpec { config: config(imp, arch, head_dim), dtype: Dtype::F16, head_dim };
                    spec.validate(arch).unwrap_or_else(|e| panic!("{} on {arch}: {e}", spec.name()));
                }
            }
        }
    }
}
