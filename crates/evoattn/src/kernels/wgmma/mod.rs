//! `wgmma`: the Hopper kernel (`wgmma.cu`): `wgmma` from 128-byte-swizzled shared memory, TMA
//! loads by a producer warpgroup, pipelined and ping-pong consumers, persistent schedulers;
//! sm_90a only.

pub mod plan;

use crate::arch::Arch;
use crate::config::lever::{choice, flag, num, one_of, Family, Kind, Lever};
use crate::config::{Impl, Loads, TensorMapRows, SWIZZLE_ATOM_BYTES, SWIZZLE_ROW_ELEMS, WARPGROUP_THREADS};
use crate::kernels::SourceFile;
use crate::problem::{Dtype, Shape};

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
    /// takes in every byte (measured slower: docs/decisions/wgmma.md#default). Needs `warp_specialized`
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
    /// stamps the SM's clock at fixed points of its loop (kernels/wgmma/trace.cuh), read back by
    /// `runtime::trace`. Rendered (in `--config` text and the kernel's name) only when on, so
    /// every other kernel keeps its name. Needs `warp_specialized`.
    pub trace: bool,
}

/// Rows of one `wgmma` m64 tile: each consumer warpgroup owns this many query rows.
pub const WGMMA_ROWS_PER_WARPGROUP: u32 = 64;
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
/// Largest head dim whose tuning space includes `exp2_poly`.
pub const EXP2_POLY_MAX_HEAD_DIM: usize = 64;
/// Blocks (linear block index) whose warps a `trace=1` kernel records: enough persistent blocks
/// to see their spread, few enough that the buffer stays small.
pub const TRACE_BLOCKS: usize = 16;
/// Events each warp of a traced block keeps (the first ones): at about 7 a key block, a
/// persistent hd64 block's whole S=512 launch, or some 500 key blocks of a long one.
pub const TRACE_EVENTS: usize = 4096;

impl WgmmaConfig {
    /// The first kernel (step 1): `cp.async` loads by every thread, one consumer warpgroup,
    /// 64-key blocks, one stage, every pipeline switch off. Every other config is written as its
    /// differences from this one, so the full list of levers is written here alone.
    pub const BASE: WgmmaConfig = WgmmaConfig {
        block_n: 64,
        stages: 1,
        consumer_warpgroups: 1,
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
    };
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
    /// kernel's 32-bit piece arithmetic (`SplitTailTiles`, kernels/wgmma/wgmma_scheduler.cuh), which
    /// multiplies a tail's key blocks (at most a tile's times the blocks) by the blocks: 15.8M
    /// keys of 128-key blocks on 132 SMs.
    pub fn split_tail_fits(&self, sk: usize, blocks: usize) -> bool {
        sk.div_ceil(self.block_n as usize).saturating_mul(blocks).saturating_mul(blocks) <= i32::MAX as usize
    }
}

impl Family for WgmmaConfig {
    const IMPL: Impl = Impl::Wgmma;
    const ABOUT: &'static str =
        "Hopper: wgmma from 128B-swizzled shared memory, TMA producer warpgroup, ping-pong consumers (sm_90a)";
    const HEAD_DIMS: &'static [usize] = &[64, 128, 256];
    // `wgmma` and `setmaxnreg` exist only on the arch-specific Hopper target.
    const ARCHS: &'static [Arch] = &[Arch::Sm90a];
    const SOURCE: SourceFile = SourceFile { name: "wgmma.cu", text: include_str!("wgmma.cu") };

    fn default_for(_arch: Arch, head_dim: usize) -> Self {
        plan::default(head_dim)
    }

    fn for_problem(_arch: Arch, problem: &crate::problem::Problem, sm_count: u32) -> Self {
        plan::for_problem(problem, sm_count)
    }

    fn into_config(self) -> crate::config::KernelConfig {
        crate::config::KernelConfig::Wgmma(self)
    }
    const LEVERS: &'static [Lever<Self>] = &[
        num!("block_n", "bn", block_n, &WgmmaConfig::BLOCK_N, "keys per main-loop iteration (the N of Q·Kᵀ)"),
        num!("stages", "s", stages, &WgmmaConfig::STAGES, "K/V tiles in the shared-memory ring"),
        num!(
            "consumer_warpgroups",
            "wg",
            consumer_warpgroups,
            &WgmmaConfig::CONSUMER_WARPGROUPS,
            "computing warpgroups, 64 query rows each"
        ),
        choice!(
            "loads",
            "ld",
            loads,
            Loads,
            "loads_tma",
            "Q/K/V tiles by cp_async (every thread) or tma (bulk tensor copies)"
        ),
        flag!("warp_specialized", "ws", warp_specialized, "a producer warpgroup issues the TMA loads"),
        flag!("overlap", "ov", overlap, "each consumer overlaps the next Q·Kᵀ and softmax with P·V"),
        flag!("pingpong", "pp", pingpong, "consumers take turns at issuing GEMMs"),
        flag!("persistent", "pe", persistent, "one block per SM loops over tiles"),
        flag!("dynamic_tiles", "dt", dynamic_tiles, "persistent blocks claim tiles from a global counter"),
        flag!("tma_store", "ts", tma_store, "O leaves through shared memory by TMA stores"),
        num!(
            "exp2_poly",
            "xp",
            exp2_poly,
            &WgmmaConfig::EXP2_POLY,
            "one score in this many exponentiated by an FMA polynomial (0: none)"
        ),
        flag!("lazy_rescale", "lr", lazy_rescale, "rescale O only when a row's max moved by 2^8"),
        flag!("split_tail", "st", split_tail, "persistent blocks split the last round's tiles by key blocks"),
        flag!("ring_test", "rt", ring_test, "consumers test the next stage without blocking"),
        num!("o_passes", "op", o_passes, &WgmmaConfig::O_PASSES, "column passes O is staged and stored in"),
        flag!("o_in_q", "oq", o_in_q, "O staged in the consumer's Q rows"),
        flag!("rowsum_mma", "rs", rowsum_mma, "row sums of P on the tensor cores (hd64)"),
        flag!("half_last", "hl", half_last, "compute only the seen half of a tile's last key block"),
        flag!("multicast", "mc", multicast, "clusters of two multicast K and V"),
        flag!("q_in_regs", "qr", q_in_regs, "Q·Kᵀ reads Q from registers (an RS wgmma)"),
        Lever {
            name: "trace",
            short: "tr",
            about: "instrumentation: per-warp clock stamps of the first blocks (not a tuning lever)",
            shown_only_when_on: true,
            kind: Kind::Flag { get: |c| c.trace, set: |c, v| c.trace = v },
        },
    ];

    fn threads(&self) -> u32 {
        WgmmaConfig::threads(self)
    }

    /// A persistent kernel takes one block per SM (`sm_count`), or one per tile when there are
    /// fewer tiles, in x alone.
    fn grid(&self, shape: &Shape, _splits: usize, sm_count: u32) -> [usize; 3] {
        let tiles = [shape.sq.div_ceil(self.block_m() as usize), shape.h, shape.b];
        if self.split_tail {
            // A split tail cuts tiles into runs of key blocks: one block per SM even with fewer
            // tiles, up to one a key block.
            let units = tiles.iter().product::<usize>() * shape.sk.div_ceil(self.block_n as usize);
            [units.clamp(1, sm_count as usize), 1, 1]
        } else if self.persistent {
            // A cluster's blocks take adjacent tiles: an even count of both.
            let blocks = tiles.iter().product::<usize>().min(sm_count as usize);
            [blocks - blocks % self.cluster_blocks() as usize, 1, 1]
        } else {
            tiles
        }
    }

    /// Q tile + K and V rings, unpadded (the 128-byte swizzle spreads the banks), plus the
    /// slack that lets the kernel align its base to the swizzle atom; persistent blocks with TMA
    /// stores stage O in a tile of their own. The mbarriers are static shared memory.
    fn dynamic_smem_bytes(&self, dtype: Dtype, head_dim: usize) -> usize {
        let row = head_dim * dtype.size_bytes();
        let own_tile = self.tma_store && self.persistent && !self.o_in_q;
        let o_stage = if own_tile { self.block_m() as usize * row / self.o_passes as usize } else { 0 };
        // rowsum_mma's ones tile: one V stage's worth.
        let ones = if self.rowsum_mma { self.block_n as usize * row } else { 0 };
        SWIZZLE_ATOM_BYTES
            + (self.block_m() as usize + 2 * (self.stages * self.block_n) as usize) * row
            + o_stage
            + ones
    }

    fn tensor_map_rows(&self) -> Option<TensorMapRows> {
        (self.loads == Loads::Tma).then(|| TensorMapRows {
            q: Some(if self.o_in_q { WGMMA_ROWS_PER_WARPGROUP } else { self.block_m() }),
            kv: self.block_n / self.cluster_blocks(),
            o: self.tma_store.then_some(WGMMA_ROWS_PER_WARPGROUP),
        })
    }

    fn validate(&self, _dtype: Dtype, head_dim: usize, _arch: Arch) -> Result<(), String> {
        let c = self;
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
            return Err("split_tail=1 needs persistent=1 and dynamic_tiles=0 (it cuts the static round robin's \
                        last round)"
                .into());
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
        let column_blocks = head_dim as u32 / SWIZZLE_ROW_ELEMS;
        if !column_blocks.is_multiple_of(c.o_passes) {
            return Err(format!(
                "o_passes={} must divide head dim {}'s {column_blocks} column blocks of {SWIZZLE_ROW_ELEMS}",
                c.o_passes, head_dim
            ));
        }
        if c.o_in_q && !(c.tma_store && c.persistent && !c.split_tail && c.o_passes == 1) {
            return Err("o_in_q=1 needs tma_store=1 and persistent=1 with whole tiles (split_tail=0) and \
                        o_passes=1; or set o_in_q=0"
                .into());
        }
        if c.rowsum_mma && !(head_dim == ROWSUM_MMA_HEAD_DIM && c.warp_specialized) {
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
            return Err("dynamic_tiles=1 needs persistent=1 (grid blocks take their tile from the launch)".into());
        }
        // ptxas refuses (not spills) a wgmma whose accumulators leave too few of the
        // registers a thread may have for its operands and addresses.
        let cap = (REGISTERS_PER_SM / c.threads()).min(MAX_REGISTERS_PER_THREAD);
        let accumulators = (head_dim as u32).max(c.block_n) / 2;
        if accumulators + WGMMA_OPERAND_REGISTERS > cap {
            return Err(format!(
                "a {}-wide wgmma needs {accumulators} accumulator registers a thread, too many of the {cap} \
                 that {} threads allow",
                (head_dim as u32).max(c.block_n),
                c.threads()
            ));
        }

        Ok(())
    }

    fn extra_defines(&self, dtype: Dtype, head_dim: usize) -> Vec<(String, String)> {
        let mut d = Vec::new();
        if self.trace {
            d.push(("EVOATTN_TRACE_BLOCKS".to_string(), TRACE_BLOCKS.to_string()));
            d.push(("EVOATTN_TRACE_EVENTS".to_string(), TRACE_EVENTS.to_string()));
        }
        // The kernel checks its own shared-memory layout against what the host reserves.
        d.push(("EVOATTN_DYNAMIC_SMEM".to_string(), self.dynamic_smem_bytes(dtype, head_dim).to_string()));
        d
    }

    fn space(head_dim: usize) -> Box<dyn Iterator<Item = Self>> {
        // The polynomial exponential is for the head dim whose softmax binds (hd64);
        // elsewhere MUFU keeps up with the tensor cores, and the space stays small.
        let polys: &'static [u32] = if head_dim <= EXP2_POLY_MAX_HEAD_DIM { &WgmmaConfig::EXP2_POLY } else { &[0] };
        // One column block (hd64) has nothing to cut into passes.
        let passes: &'static [u32] =
            if head_dim as u32 > SWIZZLE_ROW_ELEMS { &WgmmaConfig::O_PASSES } else { &WgmmaConfig::O_PASSES[..1] };
        // The row sums on the tensor cores exist at hd64 only.
        let rowsums: &'static [bool] = if head_dim == ROWSUM_MMA_HEAD_DIM { &[false, true] } else { &[false] };
        let shapes = WgmmaConfig::BLOCK_N.into_iter().flat_map(|block_n| {
            WgmmaConfig::STAGES.into_iter().flat_map(move |stages| {
                WgmmaConfig::CONSUMER_WARPGROUPS.into_iter().flat_map(move |consumer_warpgroups| {
                    Loads::ALL.into_iter().map(move |loads| (block_n, stages, consumer_warpgroups, loads))
                })
            })
        });
        // Every combination of the pipeline switches (bits); `validate` rejects those whose
        // prerequisites are off.
        let switches = (0..2048u32).flat_map(move |bits| {
            polys.iter().flat_map(move |&exp2_poly| {
                [false, true].into_iter().flat_map(move |lazy_rescale| {
                    passes.iter().flat_map(move |&o_passes| {
                        rowsums.iter().flat_map(move |&rowsum_mma| {
                            [false, true]
                                .into_iter()
                                .map(move |half_last| (bits, exp2_poly, lazy_rescale, o_passes, rowsum_mma, half_last))
                        })
                    })
                })
            })
        });
        Box::new(shapes.flat_map(move |(block_n, stages, consumer_warpgroups, loads)| {
            switches.clone().map(move |(bits, exp2_poly, lazy_rescale, o_passes, rowsum_mma, half_last)| {
                let [warp_specialized, overlap, pingpong, persistent, dynamic_tiles, tma_store, split_tail, ring_test, o_in_q, multicast, q_in_regs] =
                    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(|b| bits & (1 << b) != 0);
                WgmmaConfig {
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
                }
            })
        }))
    }
}
