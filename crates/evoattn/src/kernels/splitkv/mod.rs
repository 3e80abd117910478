//! `splitkv`: the keys of a tile split across blocks, the query heads of a KV head packed into
//! one tile's rows, the partials merged by the last split or a second kernel (`splitkv.cu`, on
//! the `mma` main loop); sm_80 and later, TMA loads on sm_90.

pub mod plan;

use crate::arch::Arch;
use crate::config::lever::{choice, flag, num, one_of, Family, LaunchNeeds, Lever};
use crate::config::{Impl, Loads, TensorMapRows, SWIZZLE_ATOM_BYTES};
use crate::kernels::mma::{kv_ring_bytes, q_tile_bytes, MmaConfig, MMA_K, MMA_ROWS_PER_WARP};
use crate::kernels::SourceFile;
use crate::problem::{Dtype, Problem, Shape};
use crate::runtime::scratch::ScratchNeed;

/// Floats in 256 bytes: the LSE partials start at a 256-byte boundary after the O partials.
const FLOATS_PER_256_BYTES: usize = 64;

/// Levers of the `splitkv` kernel: the `mma` main loop's tile levers plus the split count.
/// Block rows are packed: (query, head of the KV head's group) pairs, query-major.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SplitkvConfig {
    /// Packed rows per block (16 per warp).
    pub block_m: u32,
    /// Keys per main-loop iteration.
    pub block_n: u32,
    /// K/V shared-memory ring depth.
    pub stages: u32,
    /// Keep Q fragments in registers (else re-read from shared memory each k-step).
    pub q_in_regs: bool,
    /// Warps that share each 16 packed rows, each taking `block_n / key_warps` keys of every
    /// key tile; their softmax states merge at the end. Threads = block_m / 16 × key_warps × 32.
    pub key_warps: u32,
    /// Blocks the keys of one tile are split over; 0 lets the planner choose from the problem
    /// and the SM count (`plan::splits`). A launch-time value: the kernel reads it from its
    /// parameters.
    pub splits: u32,
    /// How the partials are merged: by the last split of each tile, or by a second kernel.
    pub combine: SplitkvCombine,
    /// K/V tiles by `cp_async` (every thread, padded rows) or `tma` (one thread, 2-D boxes of
    /// up to 16 KiB into swizzled tiles; sm_90): a bandwidth-bound split's copies per SM are
    /// capped by how many 16-byte requests its threads keep in flight, a TMA box is one request.
    pub loads: Loads,
}

/// Where `splitkv` merges the splits' partial outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SplitkvCombine {
    /// The last split of a tile to finish (an atomic counter per tile says which) merges them:
    /// one launch.
    Fused,
    /// A second, small kernel launched after the split grid merges them: two launches, no
    /// atomics, every split block exits as soon as its partial is written.
    Kernel,
}

impl SplitkvCombine {
    pub const ALL: [SplitkvCombine; 2] = [SplitkvCombine::Fused, SplitkvCombine::Kernel];
    pub(crate) const NAMES: [&'static str; 2] = ["fused", "kernel"];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn parse(s: &str) -> Option<Self> {
        SplitkvCombine::ALL.into_iter().find(|c| c.name() == s.to_ascii_lowercase())
    }
}

impl SplitkvConfig {
    pub const BLOCK_M: [u32; 4] = [16, 32, 64, 128];
    pub const BLOCK_N: [u32; 3] = MmaConfig::BLOCK_N;
    /// Deeper than `mma`'s: a bandwidth-bound split wants bytes in flight, and decoding's
    /// small Q tile leaves the shared memory for them. One stage (no overlap) is left out.
    pub const STAGES: [u32; 4] = [2, 3, 4, 6];
    pub const KEY_WARPS: [u32; 3] = [1, 2, 4];
    /// Split counts the tuner tries (0: the planner's choice).
    pub const SPLITS: [u32; 6] = [0, 1, 2, 4, 8, 16];
    /// Most splits a launch uses: bounds the workspace and the combine loop.
    pub const MAX_SPLITS: u32 = 128;

    fn tma(&self) -> bool {
        self.loads == Loads::Tma
    }
}

impl Family for SplitkvConfig {
    const IMPL: Impl = Impl::Splitkv;
    const ABOUT: &'static str =
        "keys split across blocks, query heads of a KV head packed into one tile, last block combines (sm_80+)";
    const HEAD_DIMS: &'static [usize] = &[64, 128, 256];
    const ARCHS: &'static [Arch] = &Arch::ALL;
    const SOURCE: SourceFile = SourceFile { name: "splitkv.cu", text: include_str!("splitkv.cu") };

    fn default_for(arch: Arch, _dtype: Dtype, head_dim: usize) -> Self {
        plan::default(arch, head_dim)
    }

    fn into_config(self) -> crate::config::KernelConfig {
        crate::config::KernelConfig::Splitkv(self)
    }
    const LEVERS: &'static [Lever<Self>] = &[
        num!("block_m", "bm", block_m, &SplitkvConfig::BLOCK_M, "packed (query, head) rows per block (16 per warp)"),
        num!("block_n", "bn", block_n, &SplitkvConfig::BLOCK_N, "keys per main-loop iteration"),
        num!("stages", "s", stages, &SplitkvConfig::STAGES, "K/V shared-memory ring depth"),
        flag!("q_in_regs", "qr", q_in_regs, "keep Q's fragments in registers"),
        num!(
            "key_warps",
            "kw",
            key_warps,
            &SplitkvConfig::KEY_WARPS,
            "warps sharing each 16 rows, each taking a slice of every key tile"
        ),
        num!(
            "splits",
            "sp",
            splits,
            &SplitkvConfig::SPLITS,
            "blocks the keys are split over (0: the planner's choice; launch time)"
        ),
        choice!(
            "combine",
            "cb",
            combine,
            SplitkvCombine,
            "combine_kernel",
            "who merges the partials: the last split (fused) or a second kernel"
        ),
        choice!(
            "loads",
            "ld",
            loads,
            Loads,
            "loads_tma",
            "K/V tiles by cp_async (every thread) or tma (one thread, 2-D boxes; sm_90)"
        ),
    ];

    fn threads(&self) -> u32 {
        self.block_m / MMA_ROWS_PER_WARP * self.key_warps * 32
    }

    /// x walks (packed-row tile, split) pairs, y KV heads.
    fn grid(&self, shape: &Shape, splits: usize, _sm_count: u32) -> [usize; 3] {
        let packed_rows = shape.sq * shape.group();
        [packed_rows.div_ceil(self.block_m as usize) * splits, shape.hkv, shape.b]
    }

    /// Q (padded rows) and the K/V ring, plus for TMA the slack that lets the kernel align the
    /// ring to the swizzle atom.
    fn dynamic_smem_bytes(&self, dtype: Dtype, head_dim: usize) -> usize {
        let slack = if self.tma() { SWIZZLE_ATOM_BYTES } else { 0 };
        q_tile_bytes(self.block_m, dtype, head_dim)
            + kv_ring_bytes(self.tma(), self.stages, self.block_n, dtype, head_dim)
            + slack
    }

    fn tensor_map_rows(&self) -> Option<TensorMapRows> {
        self.tma().then_some(TensorMapRows { q: None, kv: self.block_n, o: None })
    }

    fn validate(&self, dtype: Dtype, head_dim: usize, arch: Arch) -> Result<(), String> {
        one_of("block_m", self.block_m, &SplitkvConfig::BLOCK_M)?;
        one_of("block_n", self.block_n, &SplitkvConfig::BLOCK_N)?;
        one_of("stages", self.stages, &SplitkvConfig::STAGES)?;
        one_of("key_warps", self.key_warps, &SplitkvConfig::KEY_WARPS)?;
        let warp_keys = self.block_n / self.key_warps;
        if !warp_keys.is_multiple_of(MMA_K) {
            return Err(format!(
                "block_n={} over key_warps={} gives each warp {warp_keys} keys a tile, not a multiple of {MMA_K}",
                self.block_n, self.key_warps
            ));
        }
        if self.tma() && !matches!(arch, Arch::Sm90 | Arch::Sm90a) {
            return Err(format!("loads=tma needs the tensor memory accelerator of sm_90, not {arch}"));
        }
        // The key warps merge through the drained K/V ring (kernel: MERGE_FLOATS).
        let merge_bytes = (self.block_m / MMA_ROWS_PER_WARP) as usize * (head_dim / 2 + 4) * 32 * 4;
        let ring_bytes = kv_ring_bytes(self.tma(), self.stages, self.block_n, dtype, head_dim);
        if self.key_warps > 1 && merge_bytes > ring_bytes {
            return Err(format!(
                "key_warps={} merges {merge_bytes} bytes of softmax state through a {ring_bytes}-byte K/V ring",
                self.key_warps
            ));
        }
        if self.splits > SplitkvConfig::MAX_SPLITS {
            return Err(format!("splits={} must be at most {}", self.splits, SplitkvConfig::MAX_SPLITS));
        }
        Ok(())
    }

    fn extra_defines(&self, dtype: Dtype, head_dim: usize) -> Vec<(String, String)> {
        // The kernel checks its own shared-memory layout against what the host reserves.
        match self.tma() {
            true => vec![("EVOATTN_DYNAMIC_SMEM".into(), self.dynamic_smem_bytes(dtype, head_dim).to_string())],
            false => Vec::new(),
        }
    }

    /// The split count is a launch-time value (0 here): one compile serves all.
    /// The split count `plan::splits` chooses on this GPU, and the merge's scratch: every split's
    /// partial output rows and LSEs (floats, the LSEs starting 256-byte aligned after the rows)
    /// and one arrival counter per tile.
    fn launch_needs(&self, problem: &Problem, sm_count: u32, resident_per_sm: u32) -> Result<LaunchNeeds, String> {
        let splits = plan::splits(problem, self, sm_count, resident_per_sm);
        let m_blocks = self.grid(&problem.shape, 1, sm_count)[0];
        let s = problem.shape;
        // Counted in checked arithmetic: a validated problem's rows are at most 2^31, its splits few.
        let rows = problem.elements(crate::problem::TensorName::Lse);
        let counted = || -> Option<(ScratchNeed, usize)> {
            let o_part = splits.checked_mul(rows)?.checked_mul(s.d)?.checked_next_multiple_of(FLOATS_PER_256_BYTES)?;
            let counters = s.b.checked_mul(s.hkv)?.checked_mul(m_blocks)?;
            Some((ScratchNeed { counters, floats: o_part.checked_add(splits.checked_mul(rows)?)? }, o_part))
        };
        let (scratch, o_part) = counted().ok_or("its scratch is too large to count")?;
        Ok(LaunchNeeds { splits, scratch, merge: Some((m_blocks, o_part)) })
    }

    fn space(_head_dim: usize) -> Box<dyn Iterator<Item = Self>> {
        let tiles = SplitkvConfig::BLOCK_M.into_iter().flat_map(|block_m| {
            SplitkvConfig::BLOCK_N.into_iter().flat_map(move |block_n| {
                SplitkvConfig::STAGES.into_iter().flat_map(move |stages| {
                    [true, false].into_iter().map(move |q_in_regs| (block_m, block_n, stages, q_in_regs))
                })
            })
        });
        Box::new(tiles.flat_map(|(block_m, block_n, stages, q_in_regs)| {
            SplitkvCombine::ALL.into_iter().flat_map(move |combine| {
                SplitkvConfig::KEY_WARPS.into_iter().flat_map(move |key_warps| {
                    Loads::ALL.into_iter().map(move |loads| SplitkvConfig {
                        block_m,
                        block_n,
                        stages,
                        q_in_regs,
                        key_warps,
                        splits: 0,
                        combine,
                        loads,
                    })
                })
            })
        }))
    }
}
