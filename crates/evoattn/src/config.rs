//! Kernel configurations: each kernel's levers as a typed struct, rendered to `-D` defines by
//! one function (`KernelSpec::defines`), checked by one `validate()` that mirrors the kernel's
//! `static_assert`s, and named by one function (`KernelSpec::name`).

use crate::arch::Arch;
use crate::problem::Dtype;
use std::fmt;

/// Which kernel family (`--impl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Impl {
    /// Plain float32-accumulate kernel, independent of the fast paths.
    Reference,
    /// FlashAttention-2 class: `mma.sync`, `ldmatrix`, `cp.async`; sm_80+.
    Mma,
    /// Hopper: `wgmma` from 128-byte-swizzled shared memory; sm_90a only.
    Wgmma,
    /// Keys split across blocks plus a combine step, on the `mma` main loop; sm_80+.
    Splitkv,
}

impl Impl {
    pub const ALL: [Impl; 4] = [Impl::Reference, Impl::Mma, Impl::Wgmma, Impl::Splitkv];

    pub fn name(self) -> &'static str {
        match self {
            Impl::Reference => "reference",
            Impl::Mma => "mma",
            Impl::Wgmma => "wgmma",
            Impl::Splitkv => "splitkv",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Impl::ALL.into_iter().find(|i| i.name() == s.to_ascii_lowercase())
    }

    pub fn describe(self) -> &'static str {
        match self {
            Impl::Reference => "float32-accumulate kernel, deliberately simple; GPU oracle for large shapes",
            Impl::Mma => "FlashAttention-2 style: mma.sync m16n8k16, ldmatrix, cp.async pipeline (sm_80+)",
            Impl::Wgmma => {
                "Hopper: wgmma from 128B-swizzled shared memory, TMA producer warpgroup, ping-pong consumers (sm_90a)"
            }
            Impl::Splitkv => {
                "keys split across blocks, query heads of a KV head packed into one tile, last block combines (sm_80+)"
            }
        }
    }

    /// Head dims the kernel is instantiated for.
    pub fn head_dims(self) -> &'static [usize] {
        match self {
            Impl::Reference => &[64, 128, 256],
            Impl::Mma => &[64, 128, 256],
            Impl::Wgmma => &[64, 128, 256],
            Impl::Splitkv => &[64, 128, 256],
        }
    }

    /// Architectures the kernel compiles for.
    pub fn archs(self) -> &'static [Arch] {
        match self {
            Impl::Reference | Impl::Mma | Impl::Splitkv => &Arch::ALL,
            // `wgmma` and `setmaxnreg` exist only on the arch-specific Hopper target.
            Impl::Wgmma => &[Arch::Sm90a],
        }
    }
}

impl fmt::Display for Impl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Levers of the `reference` kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReferenceConfig {
    /// Threads per block; each block computes one query row.
    pub threads: u32,
}

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

    pub fn name(self) -> &'static str {
        match self {
            SplitkvCombine::Fused => "fused",
            SplitkvCombine::Kernel => "kernel",
        }
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
}

/// How a kernel fills its shared-memory K/V tiles (`wgmma`: and its Q tile).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Loads {
    /// Every thread issues 16-byte `cp.async` copies (`wgmma`: step 1).
    CpAsync,
    /// One thread issues `cp.async.bulk.tensor` (TMA) boxes into 128-byte-swizzled tiles that
    /// complete on per-stage mbarriers; the kernel takes tensor maps besides its `AttnParams`
    /// (`wgmma`: Q, K and V; `splitkv`: K and V). sm_90 and later.
    Tma,
}

impl Loads {
    pub const ALL: [Loads; 2] = [Loads::CpAsync, Loads::Tma];

    pub fn name(self) -> &'static str {
        match self {
            Loads::CpAsync => "cp_async",
            Loads::Tma => "tma",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Loads::ALL.into_iter().find(|l| l.name() == s.to_ascii_lowercase())
    }
}

/// Levers of the `wgmma` kernel. Query rows per block are derived: 64 per consumer warpgroup
/// (one `wgmma` m64 tile each), see [`WgmmaConfig::block_m`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgmmaConfig {
    /// Keys per main-loop iteration: the N of S = Q·Kᵀ and the K of O += P·V.
    pub block_n: u32,
    /// K/V tiles in the shared-memory ring (loads in flight while one tile is computed).
    pub stages: u32,
    /// Warpgroups (128 threads each) that compute; each owns 64 query rows.
    pub consumer_warpgroups: u32,
    /// `cp_async` (every thread) or `tma` (bulk tensor copies on an mbarrier ring).
    pub loads: Loads,
    /// A producer warpgroup issues the TMA loads and gives its registers to the consumers
    /// (`setmaxnreg`); K and V get rings of their own. Needs `loads=tma`.
    pub warp_specialized: bool,
    /// Each consumer issues S(j+1) = Q·K(j+1)ᵀ with O += P(j)·V(j) and runs the softmax of
    /// block j+1 while the latter runs. Needs `warp_specialized`.
    pub overlap: bool,
    /// The consumer warpgroups take turns at issuing GEMMs (round robin), so one's softmax
    /// hides under the others' GEMMs. Needs `overlap` and two or three consumers.
    pub pingpong: bool,
    /// At most one block per SM, each looping over tiles (a head at a time; causal: its
    /// longest first), so the next tile's loads overlap the current tile's last GEMM and
    /// epilogue. Needs `overlap`.
    pub persistent: bool,
    /// Persistent blocks claim each next tile from a counter in global memory (one atomic add
    /// a tile) instead of taking every gridDim-th: causal tiles differ in length, and a block
    /// that finishes early takes the next one. Needs `persistent`.
    pub dynamic_tiles: bool,
    /// O leaves through shared memory by TMA stores that one thread per consumer warpgroup
    /// issues, so the consumers go on to their next tile while the stores drain (persistent
    /// blocks stage O in a tile of their own, `block_m` rows more shared memory). Needs
    /// `loads=tma` (O's tensor map joins Q's, K's and V's).
    pub tma_store: bool,
    /// One score pair in this many (0: none) is exponentiated by a polynomial on the FMA pipe
    /// instead of MUFU, which at hd64 is as busy as the tensor cores (16 exponentials a cycle
    /// per SM against 128 FMAs).
    pub exp2_poly: u32,
    /// A row's running max follows its new max only when that exceeds it by 2^8 (log2 units),
    /// and a warp rescales O only when one of its rows moved: the exponentials may reach 256,
    /// and most key blocks skip the rescale's FMULs and MUFUs between P·V's completion and the
    /// next GEMM.
    pub lazy_rescale: bool,
    /// Persistent blocks cut the last round's tiles (fewer than the blocks) into runs of key
    /// blocks, one run per block, and the last piece of each tile merges the pieces' partial
    /// (O, max, sum) through global memory: without it, 4096 tiles on 132 SMs take 32 rounds
    /// for 31.03 tiles of work a block. Needs `persistent`, not `dynamic_tiles`; unmasked
    /// problems (causal tiles differ in length: `dynamic_tiles` balances those).
    pub split_tail: bool,
    /// Each consumer tests (without blocking) whether the next key block's K and V have landed
    /// once its softmax is done, and its next GEMM turn waits only on a stage whose test failed:
    /// the two waits at the turn otherwise cost two barrier round trips in series even when the
    /// data landed long ago. Needs `overlap`.
    pub ring_test: bool,
    /// Column passes in which each consumer stages and TMA-stores its rows of O, when they
    /// stage in a tile of their own (`tma_store` on persistent blocks): with 2 that tile holds
    /// half the columns, and the second pass waits until the first pass's stores have read it.
    /// At hd256 the whole tile does not fit beside a 64-key ring and the Q tile (257 KiB).
    /// Needs `tma_store` and `persistent`, and a head dim of at least two 64-column blocks.
    pub o_passes: u32,
    /// Each consumer stages O for the TMA stores in its own rows of the Q tile instead of a tile
    /// of their own, and those rows load the next tile's Q once the stores have read them (Q's
    /// barriers per consumer, Q's box one consumer's rows). Needs `tma_store` and `persistent`,
    /// whole tiles (not `split_tail`; static or claimed) and `o_passes=1`.
    pub o_in_q: bool,
    /// P·V also sums each row of P on the tensor cores: 8 more accumulator columns (N = 72)
    /// whose B operand is a constant shared-memory tile with ones in its first column, instead
    /// of a FADD per score in every consumer thread. Where the issue slots bind and the tensor
    /// pipe has room (hd64 with three consumers) that trades 64 of a key block's 480
    /// instructions per warp for 12.5% more P·V work. Needs head dim 64 (the ones tile is one
    /// 64-column block beside V's one) and `warp_specialized`.
    pub rowsum_mma: bool,
    /// A consumer whose rows see none of the second half of its tile's last key block computes
    /// only the first half of it (Q·Kᵀ, softmax and P·V at N = `block_n` / 2), still taking
    /// every ping-pong turn. Under a causal mask with tiles as tall as the key blocks that is
    /// the first consumer's diagonal block; with a key tail, every consumer's last block when
    /// the tail is at most half a block. Needs `overlap` and a `block_n` whose half is whole
    /// k16 steps (a multiple of 32).
    pub half_last: bool,
    /// Blocks run in clusters of two that take adjacent query tiles of one head, and each
    /// block's producer loads half of every K and V block and multicasts it to both, which
    /// halves the K/V bytes L2 reads (at 128-row tiles about 6 TB/s on long rows); each SM still
    /// takes in every byte (measured slower: see `defaults::wgmma`). Needs `warp_specialized`
    /// and static tiles (not `dynamic_tiles` or `split_tail`); unmasked
    /// problems whose heads have an even number of query tiles (both blocks of a cluster visit
    /// the same key blocks).
    pub multicast: bool,
    /// Each consumer loads its 64 rows of Q into registers once a tile (ldmatrix) and Q·Kᵀ
    /// reads them there (an RS wgmma) instead of from shared memory at every key block: 64 of the
    /// 64 + 2 `block_n` rows its GEMMs read a block (a fifth at 128 keys), and no A descriptors
    /// between the wgmmas, for head dim / 4 more registers a consumer thread. Needs `overlap`
    /// (the pipelined consumer).
    pub q_in_regs: bool,
    /// Instrumentation, not a tuning lever: each warp of the first [`TRACE_BLOCKS`] blocks
    /// stamps the SM's clock at fixed points of its loop (kernels/trace.cuh), read back by
    /// `runtime::trace`. Rendered (in `--config` text and the kernel's name) only when on, so
    /// every other kernel keeps its name. Needs `warp_specialized`.
    pub trace: bool,
}

/// Rows of one `wgmma` m64 tile: each consumer warpgroup owns this many query rows.
pub const WGMMA_ROWS_PER_WARPGROUP: u32 = 64;
/// Threads of one warp.
pub const WARP_THREADS: u32 = 32;
/// Threads of one warpgroup (4 consecutive warps).
pub const WARPGROUP_THREADS: u32 = 4 * WARP_THREADS;
/// Registers of one SM, shared by the threads of the one block a `wgmma` kernel runs per SM.
pub const REGISTERS_PER_SM: u32 = 65536;
/// The most registers one thread can have.
pub const MAX_REGISTERS_PER_THREAD: u32 = 255;
/// Registers a thread needs beside a wgmma's accumulators (descriptors, A fragment, addresses,
/// loop state): ptxas failed to compile a 128-accumulator wgmma under a 128-register cap and
/// asked for 158.
pub const WGMMA_OPERAND_REGISTERS: u32 = 32;
/// Blocks of a `multicast` cluster (the kernel's `__cluster_dims__`): each loads half of every
/// K and V block for both.
pub const MULTICAST_CLUSTER_BLOCKS: u32 = 2;
/// `half_last` splits a key block in two halves of whole k16 steps: block_n a multiple of 32.
pub const HALF_LAST_BLOCK_N_MULTIPLE: u32 = 32;
/// The one head dim `rowsum_mma` builds for: V is one 64-column block, the ones tile the next.
pub const ROWSUM_MMA_HEAD_DIM: usize = 64;
/// Largest head dim whose tuning space includes `exp2_poly` (see [`KernelSpec::space`]).
pub const EXP2_POLY_MAX_HEAD_DIM: usize = 64;
/// Blocks (linear block index) whose warps a `trace=1` kernel records: enough persistent blocks
/// to see their spread, few enough that the buffer stays small.
pub const TRACE_BLOCKS: usize = 16;
/// Events each warp of a traced block keeps (the first ones): at about 7 a key block, a
/// persistent hd64 block's whole S=512 launch, or some 500 key blocks of a long one.
pub const TRACE_EVENTS: usize = 4096;
/// Alignment of the 128-byte swizzle pattern (8 rows of 128 bytes) that TMA writes and `wgmma`
/// reads; the kernel rounds its dynamic shared memory base up to it, so the host reserves it.
pub const SWIZZLE_ATOM_BYTES: usize = 1024;
/// Elements of one 128-byte swizzled row of 16-bit elements: a tile is D / this column blocks.
pub const SWIZZLE_ROW_ELEMS: u32 = 64;

impl WgmmaConfig {
    pub const BLOCK_N: [u32; 6] = [64, 80, 96, 128, 176, 192];
    pub const STAGES: [u32; 4] = [1, 2, 3, 4];
    pub const CONSUMER_WARPGROUPS: [u32; 3] = [1, 2, 3];
    pub const EXP2_POLY: [u32; 4] = [0, 4, 6, 8];
    pub const O_PASSES: [u32; 2] = [1, 2];

    pub fn threads(&self) -> u32 {
        (self.consumer_warpgroups + u32::from(self.warp_specialized)) * WARPGROUP_THREADS
    }

    /// Blocks of a cluster: two with `multicast`, which each load half of every K and V block.
    pub fn cluster_blocks(&self) -> u32 {
        if self.multicast {
            MULTICAST_CLUSTER_BLOCKS
        } else {
            1
        }
    }

    /// Whether a head's query tiles (of `sq` rows) make whole clusters: a cluster's blocks take
    /// adjacent tiles of one head.
    pub fn clusters_fit(&self, sq: usize) -> bool {
        sq.div_ceil(self.block_m() as usize).is_multiple_of(self.cluster_blocks() as usize)
    }

    /// Query rows per block: 64 per consumer warpgroup.
    pub fn block_m(&self) -> u32 {
        self.consumer_warpgroups * WGMMA_ROWS_PER_WARPGROUP
    }

    /// Whether a split tail of `sk` keys over `blocks` persistent blocks stays within the
    /// kernel's 32-bit piece arithmetic (`SplitTailTiles`, kernels/wgmma_scheduler.cuh), which
    /// multiplies a tail's key blocks (at most a tile's times the blocks) by the blocks: 15.8M
    /// keys of 128-key blocks on 132 SMs.
    pub fn split_tail_fits(&self, sk: usize, blocks: usize) -> bool {
        sk.div_ceil(self.block_n as usize).saturating_mul(blocks).saturating_mul(blocks) <= i32::MAX as usize
    }
}

/// Box rows of a kernel's TMA tensor maps, which it takes in the order Q, K, V, O (those it has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMapRows {
    /// Q's box, `None` when Q is not loaded by TMA (`splitkv` packs the query heads of a KV head
    /// into its rows).
    pub q: Option<u32>,
    /// K's and V's box.
    pub kv: u32,
    /// O's box when O is stored by TMA: one consumer warpgroup's rows (`tma_store`).
    pub o: Option<u32>,
}

/// A kernel's levers, whichever kernel it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelConfig {
    Reference(ReferenceConfig),
    Mma(MmaConfig),
    Wgmma(WgmmaConfig),
    Splitkv(SplitkvConfig),
}

impl KernelConfig {
    pub fn imp(&self) -> Impl {
        match self {
            KernelConfig::Reference(_) => Impl::Reference,
            KernelConfig::Mma(_) => Impl::Mma,
            KernelConfig::Wgmma(_) => Impl::Wgmma,
            KernelConfig::Splitkv(_) => Impl::Splitkv,
        }
    }

    /// `key=value` pairs, the form `--config` takes and `compile` prints.
    pub fn levers(&self) -> Vec<(&'static str, String)> {
        match self {
            KernelConfig::Reference(c) => vec![("threads", c.threads.to_string())],
            KernelConfig::Mma(c) => vec![
                ("block_m", c.block_m.to_string()),
                ("block_n", c.block_n.to_string()),
                ("stages", c.stages.to_string()),
                ("q_in_regs", u32::from(c.q_in_regs).to_string()),
            ],
            KernelConfig::Wgmma(c) => {
                let mut levers = vec![
                    ("block_n", c.block_n.to_string()),
                    ("stages", c.stages.to_string()),
                    ("consumer_warpgroups", c.consumer_warpgroups.to_string()),
                    ("loads", c.loads.name().to_string()),
                    ("warp_specialized", u32::from(c.warp_specialized).to_string()),
                    ("overlap", u32::from(c.overlap).to_string()),
                    ("pingpong", u32::from(c.pingpong).to_string()),
                    ("persistent", u32::from(c.persistent).to_string()),
                    ("dynamic_tiles", u32::from(c.dynamic_tiles).to_string()),
                    ("tma_store", u32::from(c.tma_store).to_string()),
                    ("exp2_poly", c.exp2_poly.to_string()),
                    ("lazy_rescale", u32::from(c.lazy_rescale).to_string()),
                    ("split_tail", u32::from(c.split_tail).to_string()),
                    ("ring_test", u32::from(c.ring_test).to_string()),
                    ("o_passes", c.o_passes.to_string()),
                    ("o_in_q", u32::from(c.o_in_q).to_string()),
                    ("rowsum_mma", u32::from(c.rowsum_mma).to_string()),
                    ("half_last", u32::from(c.half_last).to_string()),
                    ("multicast", u32::from(c.multicast).to_string()),
                    ("q_in_regs", u32::from(c.q_in_regs).to_string()),
                ];
                if c.trace {
                    levers.push(("trace", "1".to_string()));
                }
                levers
            }
            KernelConfig::Splitkv(c) => vec![
                ("block_m", c.block_m.to_string()),
                ("block_n", c.block_n.to_string()),
                ("stages", c.stages.to_string()),
                ("q_in_regs", u32::from(c.q_in_regs).to_string()),
                ("key_warps", c.key_warps.to_string()),
                ("splits", c.splits.to_string()),
                ("combine", c.combine.name().to_string()),
                ("loads", c.loads.name().to_string()),
            ],
        }
    }

    /// Applies `key=value[,key=value]` overrides, e.g. `block_m=64,stages=3`.
    pub fn with_overrides(mut self, text: &str) -> Result<Self, String> {
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| format!("config item '{item}' is not key=value"))?;
            let key = key.trim();
            let loads = match &mut self {
                KernelConfig::Wgmma(WgmmaConfig { loads, .. }) | KernelConfig::Splitkv(SplitkvConfig { loads, .. })
                    if key == "loads" =>
                {
                    Some(loads)
                }
                _ => None,
            };
            if let Some(loads) = loads {
                *loads = Loads::parse(value.trim()).ok_or_else(|| {
                    format!("config item '{item}': loads is one of cp_async, tma, not '{}'", value.trim())
                })?;
                continue;
            }
            if let (KernelConfig::Splitkv(c), "combine") = (&mut self, key) {
                c.combine = SplitkvCombine::parse(value.trim()).ok_or_else(|| {
                    format!("config item '{item}': combine is one of fused, kernel, not '{}'", value.trim())
                })?;
                continue;
            }
            let num: u32 = match value.trim() {
                "true" => 1,
                "false" => 0,
                v => v.parse().map_err(|_| format!("config item '{item}': '{v}' is not a number"))?,
            };
            match &mut self {
                KernelConfig::Reference(c) => match key {
                    "threads" => c.threads = num,
                    _ => return Err(unknown_lever(key, &self)),
                },
                KernelConfig::Mma(c) => match key {
                    "block_m" => c.block_m = num,
                    "block_n" => c.block_n = num,
                    "stages" => c.stages = num,
                    "q_in_regs" => c.q_in_regs = num != 0,
                    _ => return Err(unknown_lever(key, &self)),
                },
                KernelConfig::Wgmma(c) => match key {
                    "block_n" => c.block_n = num,
                    "stages" => c.stages = num,
                    "consumer_warpgroups" => c.consumer_warpgroups = num,
                    "warp_specialized" => c.warp_specialized = num != 0,
                    "overlap" => c.overlap = num != 0,
                    "pingpong" => c.pingpong = num != 0,
                    "persistent" => c.persistent = num != 0,
                    "dynamic_tiles" => c.dynamic_tiles = num != 0,
                    "tma_store" => c.tma_store = num != 0,
                    "exp2_poly" => c.exp2_poly = num,
                    "lazy_rescale" => c.lazy_rescale = num != 0,
                    "split_tail" => c.split_tail = num != 0,
                    "ring_test" => c.ring_test = num != 0,
                    "o_passes" => c.o_passes = num,
                    "o_in_q" => c.o_in_q = num != 0,
                    "rowsum_mma" => c.rowsum_mma = num != 0,
                    "half_last" => c.half_last = num != 0,
                    "multicast" => c.multicast = num != 0,
                    "q_in_regs" => c.q_in_regs = num != 0,
                    "trace" => c.trace = num != 0,
                    _ => return Err(unknown_lever(key, &self)),
                },
                KernelConfig::Splitkv(c) => match key {
                    "block_m" => c.block_m = num,
                    "block_n" => c.block_n = num,
                    "stages" => c.stages = num,
                    "q_in_regs" => c.q_in_regs = num != 0,
                    "key_warps" => c.key_warps = num,
                    "splits" => c.splits = num,
                    _ => return Err(unknown_lever(key, &self)),
                },
            }
        }
        Ok(self)
    }
}

fn unknown_lever(key: &str, config: &KernelConfig) -> String {
    let mut known: Vec<&str> = config.levers().iter().map(|(k, _)| *k).collect();
    if matches!(config, KernelConfig::Wgmma(c) if !c.trace) {
        known.push("trace");
    }
    format!("'{key}' is not a lever of {}; levers: {}", config.imp(), known.join(", "))
}

impl fmt::Display for KernelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.levers().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&parts.join(","))
    }
}

/// Everything that selects one compiled kernel: levers plus the compile-time problem traits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelSpec {
    pub config: KernelConfig,
    pub dtype: Dtype,
    pub head_dim: usize,
}

impl KernelSpec {
    pub fn imp(&self) -> Impl {
        self.config.imp()
    }

    /// The kernel's symbol name; the only place names are built.
    pub fn name(&self) -> String {
        let mut name = format!("evoattn_{}_{}_d{}", self.imp().name(), self.dtype.name(), self.head_dim);
        for (key, value) in self.config.levers() {
            name.push_str(&format!("_{}{}", short_key(key), value));
        }
        name
    }

    /// The symbol of the second kernel of a `splitkv` variant that merges in a separate
    /// launch (`combine=kernel`), derived from [`KernelSpec::name`]; `None` for every other.
    pub fn combine_kernel_name(&self) -> Option<String> {
        match self.config {
            KernelConfig::Splitkv(c) if c.combine == SplitkvCombine::Kernel => Some(format!("{}_combine", self.name())),
            _ => None,
        }
    }

    /// Box rows of the TMA tensor maps the kernel takes after its other parameters; `None`
    /// for kernels that take no tensor maps.
    pub fn tensor_map_rows(&self) -> Option<TensorMapRows> {
        match self.config {
            KernelConfig::Wgmma(c) if c.loads == Loads::Tma => Some(TensorMapRows {
                q: Some(if c.o_in_q { WGMMA_ROWS_PER_WARPGROUP } else { c.block_m() }),
                kv: c.block_n / c.cluster_blocks(),
                o: c.tma_store.then_some(WGMMA_ROWS_PER_WARPGROUP),
            }),
            KernelConfig::Splitkv(c) if c.loads == Loads::Tma => {
                Some(TensorMapRows { q: None, kv: c.block_n, o: None })
            }
            _ => None,
        }
    }

    /// Threads per block.
    pub fn threads(&self) -> u32 {
        match self.config {
            KernelConfig::Reference(c) => c.threads,
            KernelConfig::Mma(c) => c.warps() * 32,
            KernelConfig::Wgmma(c) => c.threads(),
            KernelConfig::Splitkv(c) => c.block_m / MMA_ROWS_PER_WARP * c.key_warps * 32,
        }
    }

    /// Launch grid for a problem: x walks query tiles (or rows), y heads, z batches. For
    /// `splitkv`, x walks (packed-row tile, split) pairs for `splits` splits and y KV heads;
    /// other kernels take `splits` = 1. A persistent kernel takes one block per SM
    /// (`sm_count`), or one per tile when there are fewer tiles, in x alone.
    pub fn grid(&self, shape: &crate::problem::Shape, splits: usize, sm_count: u32) -> [usize; 3] {
        let rows_per_block = match self.config {
            KernelConfig::Reference(_) => 1,
            KernelConfig::Mma(c) => c.block_m as usize,
            KernelConfig::Wgmma(c) => c.block_m() as usize,
            KernelConfig::Splitkv(c) => {
                let packed_rows = shape.sq * shape.group();
                return [packed_rows.div_ceil(c.block_m as usize) * splits, shape.hkv, shape.b];
            }
        };
        let tiles = [shape.sq.div_ceil(rows_per_block), shape.h, shape.b];
        match self.config {
            // A split tail cuts tiles into runs of key blocks: one block per SM even with fewer
            // tiles, up to one a key block.
            KernelConfig::Wgmma(c) if c.split_tail => {
                let units = tiles.iter().product::<usize>() * shape.sk.div_ceil(c.block_n as usize);
                [units.clamp(1, sm_count as usize), 1, 1]
            }
            // A cluster's blocks take adjacent tiles: an even count of both.
            KernelConfig::Wgmma(c) if c.persistent => {
                let blocks = tiles.iter().product::<usize>().min(sm_count as usize);
                [blocks - blocks % c.cluster_blocks() as usize, 1, 1]
            }
            _ => tiles,
        }
    }

    /// Dynamic shared memory per block, in bytes.
    pub fn dynamic_smem_bytes(&self) -> usize {
        let elem = self.dtype.size_bytes();
        match self.config {
            // q row (float) + one score per thread (float)
            KernelConfig::Reference(c) => 4 * (self.head_dim + c.threads as usize),
            // Q (padded rows) + the K/V ring, plus for TMA the slack that lets the kernel align
            // the ring to the swizzle atom.
            KernelConfig::Mma(MmaConfig { block_m, block_n, stages, .. })
            | KernelConfig::Splitkv(SplitkvConfig { block_m, block_n, stages, .. }) => {
                let q = block_m as usize * (self.head_dim + SMEM_ROW_PAD) * elem;
                let slack = if self.tensor_map_rows().is_some() { SWIZZLE_ATOM_BYTES } else { 0 };
                q + self.kv_ring_bytes(stages, block_n) + slack
            }
            // Q tile + K and V rings, unpadded (the 128-byte swizzle spreads the banks), plus
            // the slack that lets the kernel align its base to the swizzle atom; persistent
            // blocks with TMA stores stage O in a tile of its own. The mbarriers are static
            // shared memory.
            KernelConfig::Wgmma(c) => {
                let row = self.head_dim * elem;
                let own_tile = c.tma_store && c.persistent && !c.o_in_q;
                let o_stage = if own_tile { c.block_m() as usize * row / c.o_passes as usize } else { 0 };
                // rowsum_mma's ones tile: one V stage's worth.
                let ones = if c.rowsum_mma { c.block_n as usize * row } else { 0 };
                SWIZZLE_ATOM_BYTES + (c.block_m() as usize + 2 * (c.stages * c.block_n) as usize) * row + o_stage + ones
            }
        }
    }

    /// Bytes of an `mma`-style K/V ring of `stages` stages of `block_n` keys (K and V): padded
    /// rows for cp.async, unpadded swizzled tiles for TMA.
    fn kv_ring_bytes(&self, stages: u32, block_n: u32) -> usize {
        let row = if self.tensor_map_rows().is_some() { self.head_dim } else { self.head_dim + SMEM_ROW_PAD };
        2 * (stages * block_n) as usize * row * self.dtype.size_bytes()
    }

    /// The `-D` defines the kernel source reads; the only place a config becomes source.
    pub fn defines(&self) -> Vec<(String, String)> {
        let mut d = vec![
            ("EVOATTN_KERNEL_NAME".to_string(), self.name()),
            ("EVOATTN_HEAD_DIM".to_string(), self.head_dim.to_string()),
            ("EVOATTN_BF16".to_string(), u32::from(self.dtype == Dtype::Bf16).to_string()),
            ("EVOATTN_THREADS".to_string(), self.threads().to_string()),
        ];
        for (key, value) in self.config.levers() {
            let (key, value) = match (self.config, key) {
                // The preprocessor compares numbers, not names.
                (
                    KernelConfig::Wgmma(WgmmaConfig { loads, .. }) | KernelConfig::Splitkv(SplitkvConfig { loads, .. }),
                    "loads",
                ) => ("loads_tma", u32::from(loads == Loads::Tma).to_string()),
                (KernelConfig::Splitkv(c), "combine") => {
                    ("combine_kernel", u32::from(c.combine == SplitkvCombine::Kernel).to_string())
                }
                _ => (key, value),
            };
            let name = format!("EVOATTN_{}", key.to_ascii_uppercase());
            // A lever may be one of the derived values above (the reference kernel's threads).
            if !d.iter().any(|(n, _)| *n == name) {
                d.push((name, value));
            }
        }
        if let Some(name) = self.combine_kernel_name() {
            d.push(("EVOATTN_COMBINE_NAME".to_string(), name));
        }
        if matches!(self.config, KernelConfig::Wgmma(c) if c.trace) {
            d.push(("EVOATTN_TRACE_BLOCKS".to_string(), TRACE_BLOCKS.to_string()));
            d.push(("EVOATTN_TRACE_EVENTS".to_string(), TRACE_EVENTS.to_string()));
        }
        if matches!(self.config, KernelConfig::Wgmma(_)) || self.tensor_map_rows().is_some() {
            // The kernel checks its own shared-memory layout against what the host reserves.
            d.push(("EVOATTN_DYNAMIC_SMEM".to_string(), self.dynamic_smem_bytes().to_string()));
        }
        d
    }

    /// Rejects impossible combinations before compiling; mirrors the kernels' `static_assert`s.
    pub fn validate(&self, arch: Arch) -> Result<(), String> {
        if !self.imp().archs().contains(&arch) {
            let archs: Vec<&str> = self.imp().archs().iter().map(|a| a.name()).collect();
            return Err(format!("{} runs on {}, not {arch}", self.imp(), archs.join(", ")));
        }
        if !self.imp().head_dims().contains(&self.head_dim) {
            return Err(format!(
                "{} supports head dims {:?}, not {}",
                self.imp(),
                self.imp().head_dims(),
                self.head_dim
            ));
        }
        match self.config {
            KernelConfig::Reference(c) => {
                if !(32..=1024).contains(&c.threads) || c.threads % 32 != 0 {
                    return Err(format!("threads={} must be a multiple of 32 in 32..=1024", c.threads));
                }
            }
            KernelConfig::Mma(c) => {
                one_of("block_m", c.block_m, &MmaConfig::BLOCK_M)?;
                one_of("block_n", c.block_n, &MmaConfig::BLOCK_N)?;
                one_of("stages", c.stages, &MmaConfig::STAGES)?;
            }
            KernelConfig::Wgmma(c) => {
                one_of("block_n", c.block_n, &WgmmaConfig::BLOCK_N)?;
                one_of("stages", c.stages, &WgmmaConfig::STAGES)?;
                one_of("consumer_warpgroups", c.consumer_warpgroups, &WgmmaConfig::CONSUMER_WARPGROUPS)?;
                one_of("exp2_poly", c.exp2_poly, &WgmmaConfig::EXP2_POLY)?;
                one_of("o_passes", c.o_passes, &WgmmaConfig::O_PASSES)?;
                if c.warp_specialized && c.loads != Loads::Tma {
                    return Err("warp_specialized=1 needs loads=tma: the producer warpgroup issues TMA loads".into());
                }
                if c.overlap && !c.warp_specialized {
                    return Err("overlap=1 needs warp_specialized=1 (separate K and V rings)".into());
                }
                if c.pingpong && !(c.overlap && c.consumer_warpgroups >= 2) {
                    return Err("pingpong=1 needs overlap=1 and consumer_warpgroups of 2 or more".into());
                }
                if c.persistent && !c.overlap {
                    return Err("persistent=1 needs overlap=1 (the pipelined consumer releases Q early)".into());
                }
                if c.tma_store && c.loads != Loads::Tma {
                    return Err("tma_store=1 needs loads=tma (O's tensor map follows those of Q, K and V)".into());
                }
                if c.split_tail && (!c.persistent || c.dynamic_tiles) {
                    return Err(
                        "split_tail=1 needs persistent=1 and dynamic_tiles=0 (it cuts the static round robin's \
                                last round)"
                            .into(),
                    );
                }
                if c.ring_test && !c.overlap {
                    return Err("ring_test=1 needs overlap=1 (the tests sit in the pipelined consumer's loop)".into());
                }
                if c.o_passes > 1 && !(c.tma_store && c.persistent) {
                    return Err(format!(
                        "o_passes={} needs tma_store=1 and persistent=1 (only O's own staging tile is cut into passes)",
                        c.o_passes
                    ));
                }
                let column_blocks = self.head_dim as u32 / SWIZZLE_ROW_ELEMS;
                if !column_blocks.is_multiple_of(c.o_passes) {
                    return Err(format!(
                        "o_passes={} must divide head dim {}'s {column_blocks} column blocks of {SWIZZLE_ROW_ELEMS}",
                        c.o_passes, self.head_dim
                    ));
                }
                if c.o_in_q && !(c.tma_store && c.persistent && !c.split_tail && c.o_passes == 1) {
                    return Err("o_in_q=1 needs tma_store=1 and persistent=1 with whole tiles (split_tail=0) and \
                                o_passes=1; or set o_in_q=0"
                        .into());
                }
                if c.rowsum_mma && !(self.head_dim == ROWSUM_MMA_HEAD_DIM && c.warp_specialized) {
                    return Err(format!(
                        "rowsum_mma=1 needs head dim {ROWSUM_MMA_HEAD_DIM} (its ones tile is one 64-column block beside \
                         V's one) and warp_specialized=1; or set rowsum_mma=0"
                    ));
                }
                if c.half_last && !(c.overlap && c.block_n.is_multiple_of(HALF_LAST_BLOCK_N_MULTIPLE)) {
                    return Err(format!(
                        "half_last=1 needs overlap=1 (the half block is the pipelined consumer's) and a block_n that is \
                         a multiple of {HALF_LAST_BLOCK_N_MULTIPLE} (half a block is whole k16 steps of P·V), not {}; or \
                         set half_last=0",
                        c.block_n
                    ));
                }
                if c.multicast && !(c.warp_specialized && !c.dynamic_tiles && !c.split_tail) {
                    return Err("multicast=1 needs warp_specialized=1 (its producer multicasts K and V) and static \
                                tiles, whole (dynamic_tiles=0, split_tail=0: a cluster's blocks take adjacent tiles \
                                and visit the same key blocks); or set multicast=0"
                        .into());
                }
                if c.q_in_regs && !c.overlap {
                    return Err("q_in_regs=1 needs overlap=1 (the pipelined consumer loads Q's fragments); or set \
                                q_in_regs=0"
                        .into());
                }
                if c.trace && !c.warp_specialized {
                    return Err("trace=1 needs warp_specialized=1 (the marks are in that pipeline)".into());
                }
                if c.dynamic_tiles && !c.persistent {
                    return Err(
                        "dynamic_tiles=1 needs persistent=1 (grid blocks take their tile from the launch)".into()
                    );
                }
                // ptxas refuses (not spills) a wgmma whose accumulators leave too few of the
                // registers a thread may have for its operands and addresses.
                let cap = (REGISTERS_PER_SM / c.threads()).min(MAX_REGISTERS_PER_THREAD);
                let accumulators = (self.head_dim as u32).max(c.block_n) / 2;
                if accumulators + WGMMA_OPERAND_REGISTERS > cap {
                    return Err(format!(
                        "a {}-wide wgmma needs {accumulators} accumulator registers a thread, too many of the {cap} \
                         that {} threads allow",
                        (self.head_dim as u32).max(c.block_n),
                        c.threads()
                    ));
                }
            }
            KernelConfig::Splitkv(c) => {
                one_of("block_m", c.block_m, &SplitkvConfig::BLOCK_M)?;
                one_of("block_n", c.block_n, &SplitkvConfig::BLOCK_N)?;
                one_of("stages", c.stages, &SplitkvConfig::STAGES)?;
                one_of("key_warps", c.key_warps, &SplitkvConfig::KEY_WARPS)?;
                let warp_keys = c.block_n / c.key_warps;
                if warp_keys % MMA_K != 0 {
                    return Err(format!(
                        "block_n={} over key_warps={} gives each warp {warp_keys} keys a tile, not a multiple of {MMA_K}",
                        c.block_n, c.key_warps
                    ));
                }
                if c.loads == Loads::Tma && !matches!(arch, Arch::Sm90 | Arch::Sm90a) {
                    return Err(format!("loads=tma needs the tensor memory accelerator of sm_90, not {arch}"));
                }
                // The key warps merge through the drained K/V ring (kernel: MERGE_FLOATS).
                let merge_bytes = (c.block_m / MMA_ROWS_PER_WARP) as usize * (self.head_dim / 2 + 4) * 32 * 4;
                let ring_bytes = self.kv_ring_bytes(c.stages, c.block_n);
                if c.key_warps > 1 && merge_bytes > ring_bytes {
                    return Err(format!(
                        "key_warps={} merges {merge_bytes} bytes of softmax state through a {ring_bytes}-byte K/V ring",
                        c.key_warps
                    ));
                }
                if c.splits > SplitkvConfig::MAX_SPLITS {
                    return Err(format!("splits={} must be at most {}", c.splits, SplitkvConfig::MAX_SPLITS));
                }
            }
        }
        let smem = self.dynamic_smem_bytes();
        if smem > arch.max_smem_per_block() {
            return Err(format!(
                "needs {smem} bytes of shared memory, over {arch}'s {} per block",
                arch.max_smem_per_block()
            ));
        }
        Ok(())
    }

    /// Every lever combination of `imp` (valid or not) for one dtype and head dim: the
    /// search space the tuner and the compile test walk.
    pub fn space(imp: Impl, dtype: Dtype, head_dim: usize) -> Vec<KernelSpec> {
        let configs: Vec<KernelConfig> = match imp {
            Impl::Reference => vec![KernelConfig::Reference(crate::defaults::REFERENCE)],
            Impl::Mma => {
                let mut v = Vec::new();
                for block_m in MmaConfig::BLOCK_M {
                    for block_n in MmaConfig::BLOCK_N {
                        for stages in MmaConfig::STAGES {
                            for q_in_regs in [true, false] {
                                v.push(KernelConfig::Mma(MmaConfig { block_m, block_n, stages, q_in_regs }));
                            }
                        }
                    }
                }
                v
            }
            Impl::Wgmma => {
                // The polynomial exponential is for the head dim whose softmax binds (hd64);
                // elsewhere MUFU keeps up with the tensor cores, and the space stays small.
                let polys: &[u32] = if head_dim <= EXP2_POLY_MAX_HEAD_DIM { &WgmmaConfig::EXP2_POLY } else { &[0] };
                // One column block (hd64) has nothing to cut into passes.
                let passes: &[u32] = if head_dim as u32 > SWIZZLE_ROW_ELEMS {
                    &WgmmaConfig::O_PASSES
                } else {
                    &WgmmaConfig::O_PASSES[..1]
                };
                // The row sums on the tensor cores exist at hd64 only.
                let rowsums: &[bool] = if head_dim == ROWSUM_MMA_HEAD_DIM { &[false, true] } else { &[false] };
                let mut v = Vec::new();
                for block_n in WgmmaConfig::BLOCK_N {
                    for stages in WgmmaConfig::STAGES {
                        for consumer_warpgroups in WgmmaConfig::CONSUMER_WARPGROUPS {
                            for loads in Loads::ALL {
                                // Every combination of the pipeline switches; `validate` rejects
                                // those whose prerequisites are off.
                                let softmax = polys.iter().flat_map(|&p| [false, true].map(move |lazy| (p, lazy)));
                                for ((bits, (exp2_poly, lazy_rescale)), &o_passes) in (0..2048u32)
                                    .flat_map(|b| softmax.clone().map(move |sm| (b, sm)))
                                    .flat_map(|x| passes.iter().map(move |p| (x, p)))
                                {
                                    let [warp_specialized, overlap, pingpong, persistent, dynamic_tiles, tma_store, split_tail, ring_test, o_in_q, multicast, q_in_regs] =
                                        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(|b| bits & (1 << b) != 0);
                                    let tails = rowsums.iter().flat_map(|&r| [false, true].map(move |h| (r, h)));
                                    v.extend(tails.map(|(rowsum_mma, half_last)| {
                                        KernelConfig::Wgmma(WgmmaConfig {
                                            block_n,
                                            stages,
                                            consumer_warpgroups,
                                            loads,
                                            warp_specialized,
                                            overlap,
                                            pingpong,
                                            persistent,
                                            dynamic_tiles,
                                            tma_store,
                                            exp2_poly,
                                            lazy_rescale,
                                            split_tail,
                                            ring_test,
                                            o_passes,
                                            o_in_q,
                                            rowsum_mma,
                                            half_last,
                                            multicast,
                                            q_in_regs,
                                            trace: false,
                                        })
                                    }));
                                }
                            }
                        }
                    }
                }
                v
            }
            Impl::Splitkv => {
                let mut v = Vec::new();
                for block_m in SplitkvConfig::BLOCK_M {
                    for block_n in SplitkvConfig::BLOCK_N {
                        for stages in SplitkvConfig::STAGES {
                            for q_in_regs in [true, false] {
                                for combine in SplitkvCombine::ALL {
                                    for key_warps in SplitkvConfig::KEY_WARPS {
                                        for loads in Loads::ALL {
                                            // The split count is a launch-time value: one
                                            // compile serves all.
                                            let c = SplitkvConfig {
                                                block_m,
                                                block_n,
                                                stages,
                                                q_in_regs,
                                                key_warps,
                                                splits: 0,
                                                combine,
                                                loads,
                                            };
                                            v.push(KernelConfig::Splitkv(c));
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                v
            }
        };
        configs.into_iter().map(|config| KernelSpec { config, dtype, head_dim }).collect()
    }
}

/// A lever's value must be one its kernel is written for.
fn one_of(lever: &str, value: u32, allowed: &[u32]) -> Result<(), String> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(format!("{lever}={value} must be one of {allowed:?}"))
    }
}

fn short_key(key: &str) -> &str {
    match key {
        "block_m" => "bm",
        "block_n" => "bn",
        "stages" => "s",
        "q_in_regs" => "qr",
        "threads" => "t",
        "consumer_warpgroups" => "wg",
        "loads" => "ld",
        "warp_specialized" => "ws",
        "overlap" => "ov",
        "pingpong" => "pp",
        "persistent" => "pe",
        "dynamic_tiles" => "dt",
        "tma_store" => "ts",
        "exp2_poly" => "xp",
        "lazy_rescale" => "lr",
        "split_tail" => "st",
        "ring_test" => "rt",
        "o_passes" => "op",
        "o_in_q" => "oq",
        "rowsum_mma" => "rs",
        "half_last" => "hl",
        "multicast" => "mc",
        "trace" => "tr",
        "splits" => "sp",
        "key_warps" => "kw",
        "combine" => "cb",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mma(block_m: u32, block_n: u32, stages: u32, q_in_regs: bool) -> KernelSpec {
        KernelSpec {
            config: KernelConfig::Mma(MmaConfig { block_m, block_n, stages, q_in_regs }),
            dtype: Dtype::Bf16,
            head_dim: 128,
        }
    }

    #[test]
    fn name_and_defines_render_every_lever() {
        let spec = mma(128, 64, 2, true);
        assert_eq!(spec.name(), "evoattn_mma_bf16_d128_bm128_bn64_s2_qr1");
        let defines = spec.defines();
        let get = |k: &str| defines.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("EVOATTN_KERNEL_NAME").unwrap(), spec.name());
        assert_eq!(get("EVOATTN_BF16").unwrap(), "1");
        assert_eq!(get("EVOATTN_BLOCK_N").unwrap(), "64");
        assert_eq!(get("EVOATTN_THREADS").unwrap(), "256");
        assert_eq!(get("EVOATTN_Q_IN_REGS").unwrap(), "1");
    }

    #[test]
    fn smem_accounts_for_padding_and_stages() {
        // (128 Q rows + 2 tensors * 2 stages * 64 rows) * (128 + 8) * 2 bytes
        assert_eq!(mma(128, 64, 2, true).dynamic_smem_bytes(), (128 + 256) * 136 * 2);
        // fits an H100 (227 KiB) but not an L4 (99 KiB)
        assert!(mma(128, 64, 2, true).validate(Arch::Sm90a).is_ok());
        let err = mma(128, 64, 2, true).validate(Arch::Sm89).unwrap_err();
        assert!(err.contains("shared memory"), "{err}");
    }

    #[test]
    fn validate_rejects_values_outside_the_space() {
        assert!(mma(96, 64, 2, true).validate(Arch::Sm90a).unwrap_err().contains("block_m"));
        assert!(mma(64, 48, 2, true).validate(Arch::Sm90a).unwrap_err().contains("block_n"));
        assert!(mma(64, 64, 4, true).validate(Arch::Sm90a).unwrap_err().contains("stages"));
        let mut spec = mma(64, 64, 2, true);
        spec.head_dim = 96;
        assert!(spec.validate(Arch::Sm90a).unwrap_err().contains("head dims"));
    }

    #[test]
    fn overrides_change_one_lever_and_reject_unknown_ones() {
        let base = mma(128, 64, 2, true).config;
        let changed = base.with_overrides("stages=3, q_in_regs=false").unwrap();
        assert_eq!(changed, KernelConfig::Mma(MmaConfig { block_m: 128, block_n: 64, stages: 3, q_in_regs: false }));
        assert!(base.with_overrides("warps=4").unwrap_err().contains("levers: block_m"));
        assert!(base.with_overrides("stages").is_err());
        assert_eq!(changed.to_string(), "block_m=128,block_n=64,stages=3,q_in_regs=0");
    }

    #[test]
    fn space_covers_every_combination() {
        assert_eq!(KernelSpec::space(Impl::Mma, Dtype::F16, 64).len(), 2 * 3 * 3 * 2);
        assert_eq!(KernelSpec::space(Impl::Reference, Dtype::F16, 64).len(), 1);
        let wgmma = KernelSpec::space(Impl::Wgmma, Dtype::Bf16, 128);
        // block_n, stages, consumers, loads, the eleven switches, lazy_rescale, half_last and
        // (hd > 64) o_passes; at hd64 exp2_poly and rowsum_mma instead of o_passes.
        assert_eq!(wgmma.len(), 6 * 4 * 3 * 2 * 2048 * 2 * 2 * 2);
        assert_eq!(KernelSpec::space(Impl::Wgmma, Dtype::Bf16, 64).len(), 6 * 4 * 3 * 2 * 2048 * 4 * 2 * 2 * 2);
        // Both load paths and every pipeline; the variants too big for shared memory, and the
        // pipelines on cp.async loads, are rejected.
        let valid: Vec<_> = wgmma.iter().filter(|s| s.validate(Arch::Sm90a).is_ok()).collect();
        assert!(valid.len() > wgmma.len() / 160 && valid.len() < wgmma.len() / 4, "{}", valid.len());
        for loads in Loads::ALL {
            assert!(valid.iter().any(|s| matches!(s.config, KernelConfig::Wgmma(c) if c.loads == loads)));
        }
        // The eight valid pipelines: each switch needs the ones before it.
        let pipelines = [
            [false, false, false, false, false],
            [true, false, false, false, false],
            [true, true, false, false, false],
            [true, true, true, false, false],
            [true, true, false, true, false],
            [true, true, true, true, false],
            [true, true, false, true, true],
            [true, true, true, true, true],
        ];
        let pipeline = |s: &&KernelSpec| match s.config {
            KernelConfig::Wgmma(c) => [c.warp_specialized, c.overlap, c.pingpong, c.persistent, c.dynamic_tiles],
            _ => unreachable!("the wgmma space"),
        };
        for p in pipelines {
            assert!(valid.iter().any(|s| pipeline(s) == p), "{p:?}");
        }
        assert!(valid.iter().all(|s| pipelines.contains(&pipeline(s))));
        // TMA stores with every pipeline on TMA loads, none on cp.async.
        let tma_store = |s: &&&KernelSpec| matches!(s.config, KernelConfig::Wgmma(c) if c.tma_store);
        for p in pipelines {
            assert!(valid.iter().filter(tma_store).any(|s| pipeline(s) == p), "{p:?}");
        }
        assert!(valid
            .iter()
            .filter(tma_store)
            .all(|s| matches!(s.config, KernelConfig::Wgmma(c) if c.loads == Loads::Tma)));
    }

    fn wgmma(block_n: u32, stages: u32, consumer_warpgroups: u32, head_dim: usize) -> KernelSpec {
        KernelSpec {
            config: KernelConfig::Wgmma(WgmmaConfig {
                block_n,
                stages,
                consumer_warpgroups,
                loads: Loads::CpAsync,
                warp_specialized: false,
                overlap: false,
                pingpong: false,
                persistent: false,
                dynamic_tiles: false,
                tma_store: false,
                exp2_poly: 0,
                lazy_rescale: false,
                split_tail: false,
                ring_test: false,
                o_passes: 1,
                o_in_q: false,
                rowsum_mma: false,
                half_last: false,
                multicast: false,
                q_in_regs: false,
                trace: false,
            }),
            dtype: Dtype::F16,
            head_dim,
        }
    }

    /// The hand default `wgmma` config of a head dim with `levers` on it, in bf16.
    fn default_wgmma_with(levers: &str, head_dim: usize) -> KernelSpec {
        KernelSpec {
            config: KernelConfig::Wgmma(crate::defaults::wgmma(head_dim)).with_overrides(levers).expect("levers"),
            dtype: Dtype::Bf16,
            head_dim,
        }
    }

    fn with_tma(mut spec: KernelSpec) -> KernelSpec {
        if let KernelConfig::Wgmma(c) = &mut spec.config {
            c.loads = Loads::Tma;
        }
        spec
    }

    #[test]
    fn exp2_poly_takes_its_listed_values_and_enters_the_space_at_hd64_only() {
        let spec = |text: &str, head_dim| KernelSpec {
            config: wgmma(128, 2, 2, head_dim).config.with_overrides(text).unwrap(),
            ..wgmma(128, 2, 2, head_dim)
        };
        assert!(spec("exp2_poly=6", 64).name().ends_with("_xp6_lr0_st0_rt0_op1_oq0_rs0_hl0_mc0_qr0"));
        assert!(spec("exp2_poly=6", 64).validate(Arch::Sm90a).is_ok());
        assert!(spec("exp2_poly=5", 64)
            .validate(Arch::Sm90a)
            .unwrap_err()
            .contains("exp2_poly=5 must be one of [0, 4, 6, 8]"));
        let polys = |head_dim| {
            let mut p: Vec<u32> = KernelSpec::space(Impl::Wgmma, Dtype::Bf16, head_dim)
                .iter()
                .map(|s| match s.config {
                    KernelConfig::Wgmma(c) => c.exp2_poly,
                    _ => unreachable!(),
                })
                .collect();
            p.sort_unstable();
            p.dedup();
            p
        };
        assert_eq!(polys(64), WgmmaConfig::EXP2_POLY);
        assert_eq!((polys(128), polys(256)), (vec![0], vec![0]));
    }

    #[test]
    fn wgmma_name_defines_and_threads() {
        let spec = wgmma(128, 2, 2, 128);
        assert_eq!(
            spec.name(),
            "evoattn_wgmma_f16_d128_bn128_s2_wg2_ldcp_async_ws0_ov0_pp0_pe0_dt0_ts0_xp0_lr0_st0_rt0_op1_oq0_rs0_hl0_mc0_qr0"
        );
        assert_eq!(
            with_tma(spec).name(),
            "evoattn_wgmma_f16_d128_bn128_s2_wg2_ldtma_ws0_ov0_pp0_pe0_dt0_ts0_xp0_lr0_st0_rt0_op1_oq0_rs0_hl0_mc0_qr0"
        );
        assert_eq!(spec.threads(), 256);
        // The producer warpgroup adds 128 threads, not rows.
        let ws = KernelSpec { config: spec.config.with_overrides("loads=tma,warp_specialized=1").unwrap(), ..spec };
        assert_eq!((ws.threads(), ws.grid(&crate::problem::Shape::new(1, 1, 256, 128), 1, 132)[0]), (384, 2));
        let defines = spec.defines();
        let get = |k: &str| defines.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("EVOATTN_BF16").unwrap(), "0");
        assert_eq!(get("EVOATTN_BLOCK_M"), None, "block_m is derived in the kernel");
        assert_eq!(get("EVOATTN_BLOCK_N").unwrap(), "128");
        assert_eq!(get("EVOATTN_STAGES").unwrap(), "2");
        assert_eq!(get("EVOATTN_CONSUMER_WARPGROUPS").unwrap(), "2");
        assert_eq!(get("EVOATTN_LOADS_TMA").unwrap(), "0");
        assert_eq!(get("EVOATTN_LOADS"), None);
        assert_eq!(get("EVOATTN_THREADS").unwrap(), "256");
        assert_eq!(get("EVOATTN_EXP2_POLY").unwrap(), "0");
        assert_eq!(get("EVOATTN_DYNAMIC_SMEM").unwrap(), spec.dynamic_smem_bytes().to_string());
        let tma = with_tma(spec).defines();
        assert!(tma.contains(&("EVOATTN_LOADS_TMA".to_string(), "1".to_string())));
        assert_eq!(spec.tensor_map_rows(), None);
        let rows = |q, kv, o| Some(TensorMapRows { q, kv, o });
        assert_eq!(with_tma(spec).tensor_map_rows(), rows(Some(128), 128, None));
        assert_eq!(with_tma(wgmma(96, 2, 1, 64)).tensor_map_rows(), rows(Some(64), 96, None));
        // O's box is one consumer warpgroup's rows, whatever the block's.
        let store = with_tma(spec).config.with_overrides("tma_store=1").unwrap();
        assert_eq!(KernelSpec { config: store, ..spec }.tensor_map_rows(), rows(Some(128), 128, Some(64)));
        assert_eq!(mma(128, 64, 2, true).tensor_map_rows(), None);
        // Each define appears once.
        let mut names: Vec<&String> = defines.iter().map(|(n, _)| n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), defines.len());
        // The mma kernel's defines are unchanged by the wgmma extras.
        assert!(!mma(128, 64, 2, true).defines().iter().any(|(n, _)| n == "EVOATTN_DYNAMIC_SMEM"));
        // Grid: 64 rows per warpgroup.
        let shape = crate::problem::Shape { b: 3, h: 5, hkv: 1, sq: 129, sk: 7, d: 128 };
        assert_eq!(spec.grid(&shape, 1, 132), [2, 5, 3]);
        assert_eq!(wgmma(64, 2, 1, 128).grid(&shape, 1, 132), [3, 5, 3]);
        // Persistent: 2 x 5 x 3 = 30 tiles take 30 blocks on 132 SMs, 8 on 8.
        let persistent = KernelSpec {
            config: with_tma(spec).config.with_overrides("warp_specialized=1,overlap=1,persistent=1").unwrap(),
            ..spec
        };
        assert_eq!((persistent.grid(&shape, 1, 132), persistent.grid(&shape, 1, 8)), ([30, 1, 1], [8, 1, 1]));
        // A split tail cuts tiles into runs of key blocks: 30 tiles of 1 key block (7 keys)
        // still take 30 blocks; with 1000 keys (8 blocks of 128) 240 runs fill the 132 SMs.
        let split = KernelSpec { config: persistent.config.with_overrides("split_tail=1").unwrap(), ..spec };
        assert_eq!(split.grid(&shape, 1, 132), [30, 1, 1]);
        assert_eq!(split.grid(&crate::problem::Shape { sk: 1000, ..shape }, 1, 132), [132, 1, 1]);
    }

    #[test]
    fn split_tail_piece_arithmetic_fits_32_bits() {
        let c = WgmmaConfig { block_n: 128, ..crate::defaults::wgmma(64) };
        // 123,248 key blocks (15.78M keys) times 132² is 2,147,473,152: fits; one more block does not.
        assert!(c.split_tail_fits(123_248 * 128, 132));
        assert!(!c.split_tail_fits(123_249 * 128, 132));
        assert!(c.split_tail_fits(1 << 24, 8));
    }

    #[test]
    fn split_tail_needs_static_persistent_blocks() {
        let base = with_tma(wgmma(128, 2, 2, 128)).config.with_overrides("warp_specialized=1,overlap=1").unwrap();
        let spec = |text: &str| KernelSpec { config: base.with_overrides(text).unwrap(), ..wgmma(128, 2, 2, 128) };
        assert!(spec("persistent=1,split_tail=1").validate(Arch::Sm90a).is_ok());
        assert!(spec("persistent=1,split_tail=1")
            .name()
            .ends_with("_pe1_dt0_ts0_xp0_lr0_st1_rt0_op1_oq0_rs0_hl0_mc0_qr0"));
        for refused in ["split_tail=1", "persistent=1,dynamic_tiles=1,split_tail=1"] {
            let err = spec(refused).validate(Arch::Sm90a).unwrap_err();
            assert!(err.contains("split_tail=1 needs persistent=1 and dynamic_tiles=0"), "{refused}: {err}");
        }
        assert!(spec("persistent=1,split_tail=1")
            .defines()
            .contains(&("EVOATTN_SPLIT_TAIL".to_string(), "1".to_string())));
    }

    #[test]
    fn ring_test_needs_the_pipelined_consumer() {
        let base = with_tma(wgmma(128, 2, 2, 64)).config.with_overrides("warp_specialized=1").unwrap();
        let spec = |text: &str| KernelSpec { config: base.with_overrides(text).unwrap(), ..wgmma(128, 2, 2, 64) };
        let err = spec("ring_test=1").validate(Arch::Sm90a).unwrap_err();
        assert!(err.contains("ring_test=1 needs overlap=1"), "{err}");
        let tested = spec("overlap=1,ring_test=1");
        assert!(tested.validate(Arch::Sm90a).is_ok());
        assert!(tested.name().ends_with("_st0_rt1_op1_oq0_rs0_hl0_mc0_qr0"));
        assert!(tested.defines().contains(&("EVOATTN_RING_TEST".to_string(), "1".to_string())));
        // The tests add no shared memory.
        assert_eq!(tested.dynamic_smem_bytes(), spec("overlap=1").dynamic_smem_bytes());
    }

    #[test]
    fn wgmma_smem_is_unpadded_tiles_plus_the_alignment_slack() {
        // 1024 + (128 Q rows + 2 tensors * 2 stages * 128 rows) * 128 elements * 2 bytes
        assert_eq!(wgmma(128, 2, 2, 128).dynamic_smem_bytes(), 1024 + (128 + 512) * 256);
        // The load path does not change the tiles.
        assert_eq!(with_tma(wgmma(128, 2, 2, 128)).dynamic_smem_bytes(), 1024 + (128 + 512) * 256);
        // D=64, one warpgroup, 3 stages of 64 keys: 1024 + (64 + 384) * 128
        assert_eq!(wgmma(64, 3, 1, 64).dynamic_smem_bytes(), 1024 + 448 * 128);
        // D=128 with 3 stages of 128 keys: 1024 + 896 * 256 = 230400, just under 227 KiB.
        assert!(wgmma(128, 3, 2, 128).validate(Arch::Sm90a).is_ok());
        // D=256 with 2 stages of 128 keys: 1024 + 640 * 512 = 328704: too much.
        let err = wgmma(128, 2, 2, 256).validate(Arch::Sm90a).unwrap_err();
        assert!(err.contains("needs 328704 bytes of shared memory"), "{err}");
        // TMA stores stage O in the Q tile, except on persistent blocks: one more 128-row tile,
        // 1024 + (128 + 512 + 128) * 256 = 197632.
        let store = |text: &str| KernelSpec {
            config: with_tma(wgmma(128, 2, 2, 128)).config.with_overrides(text).unwrap(),
            ..wgmma(128, 2, 2, 128)
        };
        assert_eq!(store("tma_store=1").dynamic_smem_bytes(), 1024 + (128 + 512) * 256);
        assert_eq!(store("tma_store=1,persistent=1").dynamic_smem_bytes(), 1024 + (128 + 512 + 128) * 256);
        // hd128's 176-key default ring leaves no room for it: 1024 + (128 + 704 + 128) * 256.
        let wide = KernelSpec {
            config: store("tma_store=1,warp_specialized=1,overlap=1,persistent=1,block_n=176").config,
            ..wgmma(128, 2, 2, 128)
        };
        assert!(wide.validate(Arch::Sm90a).unwrap_err().contains("needs 246784 bytes"));
    }

    #[test]
    fn o_passes_halve_the_persistent_staging_tile() {
        let persistent = "tma_store=1,warp_specialized=1,overlap=1,persistent=1,block_n=64";
        let spec = |d: usize, text: &str| KernelSpec {
            config: with_tma(wgmma(64, 2, 2, d)).config.with_overrides(&format!("{persistent},{text}")).unwrap(),
            ..wgmma(64, 2, 2, d)
        };
        // hd256, 64-key ring: 1024 + (128 + 256) * 512 + 128 * 512 = 263168 does not fit; half
        // the staging tile, 1024 + 384 * 512 + 32768 = 230400, does.
        assert!(spec(256, "o_passes=1").validate(Arch::Sm90a).unwrap_err().contains("needs 263168 bytes"));
        let halved = spec(256, "o_passes=2");
        assert_eq!(halved.dynamic_smem_bytes(), 230400);
        assert!(halved.validate(Arch::Sm90a).is_ok());
        assert!(halved.name().ends_with("_rt0_op2_oq0_rs0_hl0_mc0_qr0"));
        assert!(halved.defines().contains(&("EVOATTN_O_PASSES".to_string(), "2".to_string())));
        // hd64 is one column block.
        let err = spec(64, "o_passes=2").validate(Arch::Sm90a).unwrap_err();
        assert!(err.contains("must divide head dim 64's 1 column blocks"), "{err}");
        // Only the persistent blocks' own staging tile is cut.
        let grid = KernelSpec { config: halved.config.with_overrides("persistent=0").unwrap(), ..halved };
        assert!(grid.validate(Arch::Sm90a).unwrap_err().contains("o_passes=2 needs tma_store=1 and persistent=1"));
        assert!(spec(128, "o_passes=3")
            .validate(Arch::Sm90a)
            .unwrap_err()
            .contains("o_passes=3 must be one of [1, 2]"));
    }

    #[test]
    fn multicast_clusters_pair_static_tiles_and_halve_the_kv_box() {
        let spec = |levers: &str| default_wgmma_with(levers, 128);
        let on = spec("persistent=1,block_n=128,multicast=1");
        assert!(on.validate(Arch::Sm90a).is_ok());
        assert!(on.name().ends_with("_hl0_mc1_qr0"), "{}", on.name());
        assert!(on.defines().contains(&("EVOATTN_MULTICAST".to_string(), "1".to_string())));
        // Each block of the pair loads 64 of a key block's 128 rows; Q's and O's boxes stay.
        let rows = on.tensor_map_rows().expect("tma");
        assert_eq!((rows.q, rows.kv, rows.o), (Some(128), 64, Some(64)));
        assert_eq!(spec("persistent=1,block_n=128").tensor_map_rows().expect("tma").kv, 128);
        assert_eq!(on.dynamic_smem_bytes(), spec("persistent=1,block_n=128").dynamic_smem_bytes());
        // 4 tiles a head pair up; 5 do not. 1000 rows are 8 tiles of 128 (the last one partial).
        let KernelConfig::Wgmma(c) = on.config else { unreachable!() };
        assert!(c.clusters_fit(512) && c.clusters_fit(1000) && !c.clusters_fit(640) && !c.clusters_fit(128));
        // Persistent grids are whole clusters: 132 SMs, or fewer tiles.
        let grid = |sq, sm| on.grid(&crate::problem::Shape::new(1, 2, sq, 128), 1, sm)[0];
        assert_eq!((grid(16384, 132), grid(16384, 131), grid(512, 132)), (132, 130, 8));
        // Without it nothing changes: one block a cluster, any tile count.
        let KernelConfig::Wgmma(off) = spec("persistent=1,block_n=128").config else { unreachable!() };
        assert!(off.clusters_fit(640) && off.cluster_blocks() == 1);
        for refused in
            ["warp_specialized=0,overlap=0,pingpong=0,multicast=1", "persistent=1,dynamic_tiles=1,multicast=1"]
        {
            let err = spec(refused).validate(Arch::Sm90a).unwrap_err();
            assert!(err.contains("multicast=1 needs warp_specialized=1"), "{refused}: {err}");
        }
        let err = spec("persistent=1,split_tail=1,multicast=1").validate(Arch::Sm90a).unwrap_err();
        assert!(err.contains("split_tail=0"), "{err}");
    }

    #[test]
    fn q_in_regs_needs_the_pipelined_consumer_and_changes_only_the_define() {
        let spec = default_wgmma_with;
        let on = spec("persistent=1,block_n=128,q_in_regs=1", 128);
        assert!(on.validate(Arch::Sm90a).is_ok());
        assert!(on.name().ends_with("_mc0_qr1"), "{}", on.name());
        assert!(on.defines().contains(&("EVOATTN_Q_IN_REGS".to_string(), "1".to_string())));
        // Registers, not shared memory: the layout and the threads are those without it.
        let off = spec("persistent=1,block_n=128", 128);
        assert_eq!((on.dynamic_smem_bytes(), on.threads()), (off.dynamic_smem_bytes(), off.threads()));
        assert!(off.defines().contains(&("EVOATTN_Q_IN_REGS".to_string(), "0".to_string())));
        let err = spec("warp_specialized=1,overlap=0,pingpong=0,q_in_regs=1", 64).validate(Arch::Sm90a).unwrap_err();
        assert!(err.contains("q_in_regs=1 needs overlap=1"), "{err}");
    }

    #[test]
    fn half_last_needs_the_pipelined_consumer_and_whole_k16_halves() {
        let spec = |levers: &str| default_wgmma_with(levers, 128);
        // 128 keys: two halves of 64, four k16 steps each.
        let on = spec("half_last=1,block_n=128");
        assert!(on.validate(Arch::Sm90a).is_ok());
        assert!(on.name().ends_with("_rs0_hl1_mc0_qr0"), "{}", on.name());
        assert!(on.defines().contains(&("EVOATTN_HALF_LAST".to_string(), "1".to_string())));
        // No shared memory: the half is of the same stage.
        assert_eq!(on.dynamic_smem_bytes(), spec("half_last=0,block_n=128").dynamic_smem_bytes());
        assert!(spec("half_last=1,block_n=192").validate(Arch::Sm90a).is_ok());
        // 176 keys halve into 88, not whole k16 steps; 80 into 40.
        for levers in ["half_last=1,block_n=176", "half_last=1,block_n=80"] {
            let err = spec(levers).validate(Arch::Sm90a).unwrap_err();
            assert!(err.contains("a multiple of 32"), "{levers}: {err}");
        }
        let err = spec("half_last=1,block_n=128,overlap=0,pingpong=0").validate(Arch::Sm90a).unwrap_err();
        assert!(err.contains("half_last=1 needs overlap=1"), "{err}");
    }

    #[test]
    fn rowsum_mma_is_hd64_warp_specialised_with_a_ones_tile() {
        let spec = default_wgmma_with;
        let on = spec("rowsum_mma=1", 64);
        assert!(on.validate(Arch::Sm90a).is_ok());
        assert!(on.name().ends_with("_oq0_rs1_hl0_mc0_qr0"), "{}", on.name());
        assert!(on.defines().contains(&("EVOATTN_ROWSUM_MMA".to_string(), "1".to_string())));
        // The ones tile is one V stage: 128 keys x 64 columns x 2 bytes.
        assert_eq!(on.dynamic_smem_bytes() - spec("rowsum_mma=0", 64).dynamic_smem_bytes(), 128 * 64 * 2);
        for (levers, d) in
            [("rowsum_mma=1", 128), ("rowsum_mma=1", 256), ("rowsum_mma=1,warp_specialized=0,overlap=0,pingpong=0", 64)]
        {
            let err = spec(levers, d).validate(Arch::Sm90a).unwrap_err();
            assert!(err.contains("rowsum_mma=1 needs head dim 64"), "{levers} hd{d}: {err}");
        }
    }

    #[test]
    fn o_in_q_stages_in_the_q_rows_of_whole_persistent_tiles() {
        let persistent = "tma_store=1,warp_specialized=1,overlap=1,persistent=1,block_n=80";
        let spec = |text: &str| KernelSpec {
            config: with_tma(wgmma(80, 2, 2, 256)).config.with_overrides(&format!("{persistent},{text}")).unwrap(),
            ..wgmma(80, 2, 2, 256)
        };
        // hd256, 80-key ring: no staging tile, 1024 + (128 + 320) * 512 = 230400; Q's box is one
        // consumer's 64 rows.
        let in_q = spec("o_in_q=1");
        assert_eq!(in_q.dynamic_smem_bytes(), 230400);
        assert!(in_q.validate(Arch::Sm90a).is_ok());
        assert!(in_q.name().ends_with("_op1_oq1_rs0_hl0_mc0_qr0"));
        assert_eq!(in_q.tensor_map_rows().unwrap().q, Some(64));
        assert_eq!(spec("o_in_q=0").tensor_map_rows().unwrap().q, Some(128));
        assert!(in_q.defines().contains(&("EVOATTN_O_IN_Q".to_string(), "1".to_string())));
        // Whole tiles of persistent blocks with TMA stores only, static or claimed.
        assert!(spec("o_in_q=1,dynamic_tiles=1").validate(Arch::Sm90a).is_ok());
        for refused in ["split_tail=1", "o_passes=2", "tma_store=0", "persistent=0"] {
            let err = spec(&format!("o_in_q=1,{refused}")).validate(Arch::Sm90a).unwrap_err();
            assert!(err.contains("o_in_q=1 needs tma_store=1 and persistent=1"), "{refused}: {err}");
        }
    }

    #[test]
    fn wgmma_validate_mirrors_the_kernel_asserts() {
        assert!(wgmma(128, 2, 2, 64).validate(Arch::Sm90a).is_ok());
        assert!(with_tma(wgmma(128, 2, 2, 64)).validate(Arch::Sm90a).is_ok());
        assert!(wgmma(96, 4, 1, 64).validate(Arch::Sm90a).is_ok());
        // Hopper's arch-specific target only.
        for arch in [Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90] {
            let err = wgmma(128, 2, 2, 64).validate(arch).unwrap_err();
            assert_eq!(err, format!("wgmma runs on sm_90a, not {arch}"));
        }
        assert!(wgmma(72, 2, 2, 64).validate(Arch::Sm90a).unwrap_err().contains("block_n=72"));
        assert!(wgmma(64, 5, 2, 64).validate(Arch::Sm90a).unwrap_err().contains("stages=5"));
        assert!(wgmma(64, 2, 4, 64).validate(Arch::Sm90a).unwrap_err().contains("consumer_warpgroups=4"));
        assert!(wgmma(64, 2, 2, 96).validate(Arch::Sm90a).unwrap_err().contains("head dims"));
        // 512 threads (three consumers and the producer) leave 128 registers: no room for hd256's
        // 128 accumulators; 384 leave 168.
        let three = |d| KernelSpec {
            config: with_tma(wgmma(64, 1, 3, d)).config.with_overrides("warp_specialized=1").unwrap(),
            ..wgmma(64, 1, 3, d)
        };
        assert!(three(256).validate(Arch::Sm90a).unwrap_err().contains("128 accumulator registers"));
        assert!(three(128).validate(Arch::Sm90a).is_ok());
        assert!(wgmma(64, 1, 3, 256).validate(Arch::Sm90a).is_ok());
    }

    fn splitkv(block_m: u32, block_n: u32, stages: u32, splits: u32, head_dim: usize) -> KernelSpec {
        let c = SplitkvConfig {
            block_m,
            block_n,
            stages,
            q_in_regs: true,
            key_warps: 1,
            splits,
            combine: SplitkvCombine::Fused,
            loads: Loads::CpAsync,
        };
        KernelSpec { config: KernelConfig::Splitkv(c), dtype: Dtype::Bf16, head_dim }
    }

    #[test]
    fn splitkv_name_grid_smem_and_validate() {
        let spec = splitkv(64, 64, 2, 0, 128);
        assert_eq!(spec.name(), "evoattn_splitkv_bf16_d128_bm64_bn64_s2_qr1_kw1_sp0_cbfused_ldcp_async");
        assert_eq!(spec.combine_kernel_name(), None);
        assert_eq!(spec.threads(), 128);
        // The mma tile layout: (64 + 2 * 2 * 64) rows of (128 + 8) elements.
        assert_eq!(spec.dynamic_smem_bytes(), (64 + 256) * 136 * 2);
        // GQA 8:1, Sq = 3: 24 packed rows per KV head -> 1 tile of 64; x = tiles * splits.
        let shape = crate::problem::Shape { b: 2, h: 16, hkv: 2, sq: 3, sk: 1000, d: 128 };
        assert_eq!(spec.grid(&shape, 5, 132), [5, 2, 2]);
        assert_eq!(splitkv(16, 64, 2, 0, 128).grid(&shape, 5, 132), [10, 2, 2]);
        assert_eq!(splitkv(16, 64, 2, 0, 128).threads(), 32);
        for arch in Arch::ALL {
            assert!(spec.validate(arch).is_ok(), "{arch}");
        }
        assert!(splitkv(48, 64, 2, 0, 128).validate(Arch::Sm80).unwrap_err().contains("block_m=48"));
        assert!(splitkv(64, 96, 2, 0, 128).validate(Arch::Sm80).unwrap_err().contains("block_n=96"));
        assert!(splitkv(64, 64, 5, 0, 128).validate(Arch::Sm80).unwrap_err().contains("stages=5"));
        // Key warps: each warp's slice of a tile is whole k16 steps, and the merge fits the ring.
        let key_warps = |spec: KernelSpec, kw: u32| KernelSpec {
            config: spec.config.with_overrides(&format!("key_warps={kw}")).unwrap(),
            ..spec
        };
        let kw4 = key_warps(splitkv(16, 64, 4, 0, 128), 4);
        assert_eq!(kw4.threads(), 128);
        assert!(kw4.validate(Arch::Sm90a).is_ok());
        assert!(key_warps(splitkv(16, 32, 4, 0, 128), 4).validate(Arch::Sm90a).unwrap_err().contains("8 keys a tile"));
        assert!(key_warps(splitkv(16, 64, 2, 0, 128), 3).validate(Arch::Sm90a).unwrap_err().contains("key_warps=3"));
        // 128 rows of D=128 state (8 x 132 x 32 floats, 135 KiB) against a 2 x 2 x 32-row ring (35 KiB).
        assert!(key_warps(splitkv(128, 32, 2, 0, 128), 2)
            .validate(Arch::Sm90a)
            .unwrap_err()
            .contains("through a 34816-byte K/V ring"));
        assert!(splitkv(64, 64, 2, 129, 128).validate(Arch::Sm80).unwrap_err().contains("splits=129"));
        assert!(splitkv(128, 128, 3, 0, 256).validate(Arch::Sm90a).unwrap_err().contains("shared memory"));
        let changed = spec.config.with_overrides("splits=8,block_m=16").unwrap();
        assert_eq!(changed, splitkv(16, 64, 2, 8, 128).config);
        assert_eq!(
            changed.to_string(),
            "block_m=16,block_n=64,stages=2,q_in_regs=1,key_warps=1,splits=8,combine=fused,loads=cp_async"
        );
        assert!(spec.config.with_overrides("loads=bulk").unwrap_err().contains("loads is one of cp_async, tma"));
        assert!(spec.config.with_overrides("combine=atomic").unwrap_err().contains("combine is one of fused, kernel"));
        assert_eq!(KernelSpec::space(Impl::Splitkv, Dtype::F16, 64).len(), 4 * 3 * 4 * 2 * 2 * 3 * 2);
        // The second kernel's name and the defines that select it.
        let two = KernelSpec { config: spec.config.with_overrides("combine=kernel").unwrap(), ..spec };
        let name = "evoattn_splitkv_bf16_d128_bm64_bn64_s2_qr1_kw1_sp0_cbkernel_ldcp_async";
        assert_eq!(two.combine_kernel_name().as_deref(), Some(&*format!("{name}_combine")));
        let defines = two.defines();
        let get = |k: &str| defines.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("EVOATTN_COMBINE_KERNEL").as_deref(), Some("1"));
        assert_eq!(get("EVOATTN_COMBINE_NAME"), Some(format!("{name}_combine")));
        assert_eq!(get("EVOATTN_COMBINE"), None);
        assert!(spec.defines().contains(&("EVOATTN_COMBINE_KERNEL".to_string(), "0".to_string())));
    }

    #[test]
    fn splitkv_tma_loads_take_swizzled_tiles_and_two_maps_on_hopper_only() {
        let cp = splitkv(16, 128, 2, 0, 128);
        let tma = KernelSpec { config: cp.config.with_overrides("loads=tma").unwrap(), ..cp };
        assert!(tma.name().ends_with("_cbfused_ldtma"), "{}", tma.name());
        // K and V by TMA, Q not (its rows are packed query heads).
        assert_eq!(tma.tensor_map_rows(), Some(TensorMapRows { q: None, kv: 128, o: None }));
        assert_eq!(cp.tensor_map_rows(), None);
        // Q: 16 padded rows; the ring: 2 stages x (K, V) x 128 unpadded rows of 256 bytes, plus
        // the swizzle atom's alignment slack. cp.async pads the ring's rows too.
        assert_eq!(tma.dynamic_smem_bytes(), 16 * 136 * 2 + 4 * 128 * 256 + 1024);
        assert_eq!(cp.dynamic_smem_bytes(), (16 + 4 * 128) * 136 * 2);
        let defines = tma.defines();
        let get = |k: &str| defines.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("EVOATTN_LOADS_TMA").as_deref(), Some("1"));
        assert_eq!(get("EVOATTN_DYNAMIC_SMEM"), Some(tma.dynamic_smem_bytes().to_string()));
        assert_eq!(cp.defines().iter().find(|(n, _)| n == "EVOATTN_DYNAMIC_SMEM"), None);
        for arch in [Arch::Sm80, Arch::Sm86, Arch::Sm89] {
            assert!(tma.validate(arch).unwrap_err().contains("loads=tma needs"), "{arch}");
        }
        assert!(tma.validate(Arch::Sm90).is_ok() && tma.validate(Arch::Sm90a).is_ok());
    }

    #[test]
    fn wgmma_overrides_and_display() {
        let base = wgmma(128, 2, 2, 128).config;
        let one = base.with_overrides("consumer_warpgroups=1,stages=3,loads=tma").unwrap();
        assert_eq!(
            one,
            KernelConfig::Wgmma(WgmmaConfig {
                block_n: 128,
                stages: 3,
                consumer_warpgroups: 1,
                loads: Loads::Tma,
                warp_specialized: false,
                overlap: false,
                pingpong: false,
                persistent: false,
                dynamic_tiles: false,
                tma_store: false,
                exp2_poly: 0,
                lazy_rescale: false,
                split_tail: false,
                ring_test: false,
                o_passes: 1,
                o_in_q: false,
                rowsum_mma: false,
                half_last: false,
                multicast: false,
                q_in_regs: false,
                trace: false,
            })
        );
        assert_eq!(
            one.to_string(),
            "block_n=128,stages=3,consumer_warpgroups=1,loads=tma,warp_specialized=0,overlap=0,pingpong=0,persistent=0,dynamic_tiles=0,tma_store=0,exp2_poly=0,lazy_rescale=0,split_tail=0,ring_test=0,o_passes=1,o_in_q=0,rowsum_mma=0,half_last=0,multicast=0,q_in_regs=0"
        );
        assert_eq!(
            one.with_overrides("loads=cp_async").unwrap(),
            base.with_overrides("consumer_warpgroups=1,stages=3").unwrap()
        );
        assert!(base.with_overrides("key_warps=1").unwrap_err().contains("not a lever of wgmma"));
        // Each pipeline lever needs the one before it.
        let spec =
            |text: &str| KernelSpec { config: base.with_overrides(text).unwrap(), dtype: Dtype::F16, head_dim: 128 };
        let err = |text: &str| spec(text).validate(Arch::Sm90a).unwrap_err();
        assert!(err("warp_specialized=1").contains("needs loads=tma"));
        assert!(err("loads=tma,overlap=1").contains("needs warp_specialized=1"));
        assert!(err("loads=tma,warp_specialized=1,pingpong=1").contains("needs overlap=1"));
        assert!(err("loads=tma,warp_specialized=1,overlap=1,pingpong=1,consumer_warpgroups=1").contains("2 or more"));
        assert!(err("loads=tma,warp_specialized=1,persistent=1").contains("needs overlap=1"));
        assert!(err("loads=tma,warp_specialized=1,overlap=1,dynamic_tiles=1").contains("needs persistent=1"));
        assert!(err("tma_store=1").contains("needs loads=tma"));
        assert!(spec("loads=tma,warp_specialized=1,overlap=1,pingpong=1,persistent=1").validate(Arch::Sm90a).is_ok());
        assert!(base.with_overrides("block_m=64").unwrap_err().contains("not a lever of wgmma"));
        assert!(base.with_overrides("loads=ldg").unwrap_err().contains("loads is one of cp_async, tma"));
    }
}
