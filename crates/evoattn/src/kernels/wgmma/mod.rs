//! `wgmma`: the Hopper kernel (`wgmma.cu`): `wgmma` from 128-byte-swizzled shared memory, TMA
//! loads by a producer warpgroup, pipelined and ping-pong consumers, persistent schedulers;
//! sm_90a only.

pub mod plan;
#[cfg(test)]
mod tests;

use crate::arch::Arch;
use crate::config::lever::{axis, flag, num, one_of, product, Family, LaunchNeeds, Lever, Retired, Variant};
use crate::config::{Impl, Loads, TensorMapRows, SWIZZLE_ATOM_BYTES, SWIZZLE_ROW_ELEMS, WARPGROUP_THREADS};
use crate::kernels::SourceFile;
use crate::problem::{Causal, Dtype, Problem, Shape};
use crate::runtime::scratch::ScratchNeed;

/// Levers of the `wgmma` kernel. Query rows per block are derived: 64 per consumer warpgroup
/// (one `wgmma` m64 tile each), see [`WgmmaConfig::block_m`]. How tiles are loaded and computed,
/// scheduled and stored are typed axes ([`Pipeline`], [`Schedule`], [`OStaging`]): each value
/// sets several of the kernel's switches, so that only the combinations it has can be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgmmaConfig {
    /// Keys per main-loop iteration: the N of S = Q·Kᵀ and the K of O += P·V.
    pub block_n: u32,
    /// K/V tiles in the shared-memory ring (loads in flight while one tile is computed).
    pub stages: u32,
    /// Warpgroups (128 threads each) that compute; each owns 64 query rows.
    pub consumer_warpgroups: u32,
    pub pipeline: Pipeline,
    pub schedule: Schedule,
    pub o_staging: OStaging,
    /// One score pair in this many (0: none) is exponentiated by a polynomial on the FMA pipe
    /// instead of MUFU, which at hd64 is as busy as the tensor cores (16 exponentials a cycle
    /// per SM against 128 FMAs).
    pub exp2_poly: u32,
    /// A row's running max follows its new max only when that exceeds it by 2^8 (log2 units),
    /// and a warp rescales O only when one of its rows moved: the exponentials may reach 256,
    /// and most key blocks skip the rescale's FMULs and MUFUs between P·V's completion and the
    /// next GEMM.
    pub lazy_rescale: bool,
    /// Each consumer tests (without blocking) whether the next key block's K and V have landed
    /// once its softmax is done, and its next GEMM turn waits only on a stage whose test failed:
    /// the two waits at the turn otherwise cost two barrier round trips in series even when the
    /// data landed long ago. Needs the overlap pipeline.
    pub ring_test: bool,
    /// P·V also sums each row of P on the tensor cores: 8 more accumulator columns (N = 72)
    /// whose B operand is a constant shared-memory tile with ones in its first column, instead
    /// of a FADD per score in every consumer thread. Where the issue slots bind and the tensor
    /// pipe has room (hd64 with three consumers) that trades 64 of a key block's 480
    /// instructions per warp for 12.5% more P·V work. Needs head dim 64 (the ones tile is one
    /// 64-column block beside V's one) and a warp-specialised pipeline.
    pub rowsum_mma: bool,
    /// A consumer whose rows see none of the second half of its tile's last key block computes
    /// only the first half of it (Q·Kᵀ, softmax and P·V at N = `block_n` / 2), still taking
    /// every ping-pong turn. Under a causal mask with tiles as tall as the key blocks that is
    /// the first consumer's diagonal block; with a key tail, every consumer's last block when
    /// the tail is at most half a block. Needs the overlap pipeline and a `block_n` whose half
    /// is whole k16 steps (a multiple of 32).
    pub half_last: bool,
    /// Blocks run in clusters of two that take adjacent query tiles of one head, and each
    /// block's producer loads half of every K and V block and multicasts it to both, which
    /// halves the K/V bytes L2 reads (at 128-row tiles about 6 TB/s on long rows); each SM still
    /// takes in every byte (measured slower: docs/decisions/wgmma.md#default). Needs a
    /// warp-specialised pipeline and static whole tiles (schedule grid or persistent); unmasked
    /// problems whose heads have an even number of query tiles (both blocks of a cluster visit
    /// the same key blocks).
    pub multicast: bool,
    /// Each consumer loads its 64 rows of Q into registers once a tile (ldmatrix) and Q·Kᵀ
    /// reads them there (an RS wgmma) instead of from shared memory at every key block: 64 of the
    /// 64 + 2 `block_n` rows its GEMMs read a block (a fifth at 128 keys), and no A descriptors
    /// between the wgmmas, for head dim / 4 more registers a consumer thread. Needs the overlap
    /// pipeline (the pipelined consumer).
    pub q_in_regs: bool,
    /// E4M3: the producer warpgroup's three idle warps transpose V in shared memory (ldmatrix,
    /// byte permutes, stmatrix) from a ring of V's tiles as loaded, instead of a transpose
    /// kernel that reads and writes all of V before the launch (about 22 µs for 32 MB of V on
    /// an H100, a sixth of a 512-key fa3-grid row). Costs a V stage's shared memory per stage.
    /// With `vt_given` the warps only permute the caller's Vᵀ tiles in place (no raw ring).
    /// Rendered only when on, so every kernel recorded before it keeps its name; out of the
    /// tuner's space until measured (the planner's E4M3 defaults decide).
    pub vt_producer: bool,
    /// E4M3, V given keys-contiguous ([B, Hkv, D, Sk]: `Problem::v_keys_contiguous`), which
    /// needs only each 16 keys put in P's order: with `vt_producer` TMA loads the caller's Vᵀ
    /// tiles straight into the Vᵀ stages and the producer warpgroup's idle warps permute them
    /// in place (no raw ring, so hd256 fits); without, a kernel of its own permutes V first.
    /// Not a choice: it must match how the problem holds V (the planner sets it, a kernel that
    /// does not match refuses the problem), so it is out of the tuner's space.
    pub vt_given: bool,
    /// Instrumentation, not a tuning lever: each warp of the first [`TRACE_BLOCKS`] blocks
    /// stamps the SM's clock at fixed points of its loop (kernels/wgmma/trace.cuh), read back by
    /// `runtime::trace`. Rendered (in `--config` text and the kernel's name) only when on, so
    /// every other kernel keeps its name. Needs a warp-specialised pipeline.
    pub trace: bool,
}

/// How Q, K and V reach shared memory and how the consumers pipeline their GEMMs; each value
/// adds to the one before it (`EVOATTN_LOADS_TMA`, `_WARP_SPECIALIZED`, `_OVERLAP`, `_PINGPONG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pipeline {
    /// Every thread issues `cp.async` copies (step 1).
    CpAsync,
    /// One thread issues TMA (bulk tensor) copies on an mbarrier ring.
    Tma,
    /// A producer warpgroup issues the TMA loads and gives its registers to the consumers
    /// (`setmaxnreg`); K and V get rings of their own.
    Specialized,
    /// Each consumer issues S(j+1) = Q·K(j+1)ᵀ with O += P(j)·V(j) and runs the softmax of
    /// block j+1 while the latter runs.
    Overlap,
    /// The consumer warpgroups (two or three) take turns at issuing GEMMs (round robin), so
    /// one's softmax hides under the others' GEMMs.
    PingPong,
}

impl Pipeline {
    pub const ALL: [Pipeline; 5] =
        [Pipeline::CpAsync, Pipeline::Tma, Pipeline::Specialized, Pipeline::Overlap, Pipeline::PingPong];
    pub(crate) const VARIANTS: [Variant; 5] = [
        Variant {
            name: "cp-async",
            key: "cp",
            about: "every thread loads Q, K and V by cp.async",
            defines: &[("loads_tma", 0), ("warp_specialized", 0), ("overlap", 0), ("pingpong", 0)],
        },
        Variant {
            name: "tma",
            key: "tma",
            about: "TMA loads (bulk tensor copies on an mbarrier ring)",
            defines: &[("loads_tma", 1), ("warp_specialized", 0), ("overlap", 0), ("pingpong", 0)],
        },
        Variant {
            name: "specialized",
            key: "ws",
            about: "a producer warpgroup issues the TMA loads",
            defines: &[("loads_tma", 1), ("warp_specialized", 1), ("overlap", 0), ("pingpong", 0)],
        },
        Variant {
            name: "overlap",
            key: "ov",
            about: "specialized, and each consumer overlaps the next Q·Kᵀ and softmax with P·V",
            defines: &[("loads_tma", 1), ("warp_specialized", 1), ("overlap", 1), ("pingpong", 0)],
        },
        Variant {
            name: "pingpong",
            key: "pp",
            about: "overlap, and the consumers take turns at issuing GEMMs (2 or 3 consumers)",
            defines: &[("loads_tma", 1), ("warp_specialized", 1), ("overlap", 1), ("pingpong", 1)],
        },
    ];

    /// As `--config` writes it.
    pub fn name(self) -> &'static str {
        Self::VARIANTS[self as usize].name
    }

    pub fn loads(self) -> Loads {
        if self == Pipeline::CpAsync {
            Loads::CpAsync
        } else {
            Loads::Tma
        }
    }

    /// A producer warpgroup: what `setmaxnreg`, the marks, the row sums and the multicast need.
    pub fn warp_specialized(self) -> bool {
        self >= Pipeline::Specialized
    }

    /// The pipelined consumer, which persistent blocks, the ring tests and Q in registers build on.
    pub fn overlap(self) -> bool {
        self >= Pipeline::Overlap
    }
}

/// Which tiles a block computes (`EVOATTN_PERSISTENT`, `_DYNAMIC_TILES`, `_SPLIT_TAIL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// One block per tile.
    Grid,
    /// At most one block per SM, each looping over tiles (a head at a time; causal: its longest
    /// first), taking every gridDim-th, so the next tile's loads overlap the current tile's last
    /// GEMM and epilogue. Needs the overlap pipeline, as every persistent schedule does.
    Persistent,
    /// Persistent blocks claim each next tile from a counter in global memory (one atomic add
    /// a tile): causal tiles differ in length, and a block that finishes early takes the next one.
    Claimed,
    /// Persistent blocks cut the last round's tiles (fewer than the blocks) into runs of key
    /// blocks, one run per block, and the last piece of each tile merges the pieces' partial
    /// (O, max, sum) through global memory: without it, 4096 tiles on 132 SMs take 32 rounds
    /// for 31.03 tiles of work a block. Unmasked problems (causal tiles differ in length:
    /// `Claimed` balances those).
    SplitTail,
}

impl Schedule {
    pub const ALL: [Schedule; 4] = [Schedule::Grid, Schedule::Persistent, Schedule::Claimed, Schedule::SplitTail];
    pub(crate) const VARIANTS: [Variant; 4] = [
        Variant {
            name: "grid",
            key: "gr",
            about: "one block per tile",
            defines: &[("persistent", 0), ("dynamic_tiles", 0), ("split_tail", 0)],
        },
        Variant {
            name: "persistent",
            key: "pe",
            about: "one block per SM loops over tiles, every gridDim-th",
            defines: &[("persistent", 1), ("dynamic_tiles", 0), ("split_tail", 0)],
        },
        Variant {
            name: "claimed",
            key: "cl",
            about: "persistent blocks claim tiles from a global counter",
            defines: &[("persistent", 1), ("dynamic_tiles", 1), ("split_tail", 0)],
        },
        Variant {
            name: "split-tail",
            key: "st",
            about: "persistent, and the last round's tiles split by key blocks",
            defines: &[("persistent", 1), ("dynamic_tiles", 0), ("split_tail", 1)],
        },
    ];

    /// As `--config` writes it.
    pub fn name(self) -> &'static str {
        Self::VARIANTS[self as usize].name
    }

    pub fn persistent(self) -> bool {
        self != Schedule::Grid
    }
}

/// How O leaves: from registers, or staged in shared memory for TMA stores that one thread per
/// consumer warpgroup issues, so the consumers go on to their next tile while the stores drain
/// (`EVOATTN_TMA_STORE`, `_O_PASSES`, `_O_IN_Q`). Staging needs TMA loads (O's tensor map
/// follows those of Q, K and V).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OStaging {
    /// Each thread stores its accumulators.
    Registers,
    /// In a whole tile: the Q tile, whose last reader is done by then, on grid blocks; a tile of
    /// its own (`block_m` rows more shared memory) on persistent blocks, which are already
    /// loading the next tile's Q.
    Tile,
    /// Persistent blocks: a tile of their own that holds half the columns, which each consumer
    /// stages and stores in two passes (the second waits until the first's stores have read
    /// it). At hd256 the whole tile does not fit beside a 64-key ring and the Q tile (257 KiB).
    /// Needs a head dim of at least two 64-column blocks.
    HalfTile,
    /// Persistent blocks of whole tiles (not `SplitTail`): each consumer stages O in its own
    /// rows of the Q tile, and those rows load the next tile's Q once the stores have read them
    /// (Q's barriers per consumer, Q's box one consumer's rows).
    QRows,
}

impl OStaging {
    pub const ALL: [OStaging; 4] = [OStaging::Registers, OStaging::Tile, OStaging::HalfTile, OStaging::QRows];
    pub(crate) const VARIANTS: [Variant; 4] = [
        Variant {
            name: "registers",
            key: "rg",
            about: "each thread stores O from its registers",
            defines: &[("tma_store", 0), ("o_passes", 1), ("o_in_q", 0)],
        },
        Variant {
            name: "tile",
            key: "tl",
            about: "TMA stores from a tile: Q's on grid blocks (E4M3: its own), its own on persistent ones",
            defines: &[("tma_store", 1), ("o_passes", 1), ("o_in_q", 0)],
        },
        Variant {
            name: "half-tile",
            key: "ht",
            about: "persistent: TMA stores from an own tile of half the columns, in two passes",
            defines: &[("tma_store", 1), ("o_passes", 2), ("o_in_q", 0)],
        },
        Variant {
            name: "q-rows",
            key: "qr",
            about: "persistent whole tiles: TMA stores from each consumer's Q rows",
            defines: &[("tma_store", 1), ("o_passes", 1), ("o_in_q", 1)],
        },
    ];

    /// As `--config` writes it.
    pub fn name(self) -> &'static str {
        Self::VARIANTS[self as usize].name
    }

    pub fn tma_store(self) -> bool {
        self != OStaging::Registers
    }

    /// Column passes O is staged and stored in.
    pub fn passes(self) -> u32 {
        if self == OStaging::HalfTile {
            2
        } else {
            1
        }
    }
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
    /// 64-key blocks, one stage, one tile per block, O stored from registers, every switch off.
    /// Every other config is written as its differences from this one, so the full list of
    /// levers is written here alone.
    pub const BASE: WgmmaConfig = WgmmaConfig {
        block_n: 64,
        stages: 1,
        consumer_warpgroups: 1,
        pipeline: Pipeline::CpAsync,
        schedule: Schedule::Grid,
        o_staging: OStaging::Registers,
        exp2_poly: 0,
        lazy_rescale: false,
        ring_test: false,
        rowsum_mma: false,
        half_last: false,
        multicast: false,
        q_in_regs: false,
        vt_producer: false,
        vt_given: false,
        trace: false,
    };
    pub const BLOCK_N: [u32; 6] = [64, 80, 96, 128, 176, 192];
    /// `block_n` with E4M3 inputs: whole 128-key rows of Vᵀ. 256 is taken by `--config` only
    /// (the tuner's space is [`WgmmaConfig::BLOCK_N`], whose one whole row is 128).
    pub const FP8_BLOCK_N: [u32; 2] = [128, 256];
    pub const STAGES: [u32; 4] = [1, 2, 3, 4];
    pub const CONSUMER_WARPGROUPS: [u32; 3] = [1, 2, 3];
    pub const EXP2_POLY: [u32; 4] = [0, 4, 6, 8];

    pub fn threads(&self) -> u32 {
        (self.consumer_warpgroups + u32::from(self.pipeline.warp_specialized())) * WARPGROUP_THREADS
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

/// Claims and blocks done claiming (`DynamicTiles` in kernels/wgmma/wgmma_scheduler.cuh).
const TILE_COUNTERS: usize = 2;

/// The split tail's scratch (`schedule=split-tail`, kernels/wgmma/wgmma_epilogue.cuh): one
/// counter per tail tile (fewer than the `blocks`) and consumer warpgroup, which the last piece
/// of each tile resets; and two partial slots per block, each every consumer thread's O fragment
/// (head dim / 2 floats) and its two rows' max and sum (`PIECE_FLOATS`).
fn split_tail_scratch(c: &WgmmaConfig, head_dim: usize, blocks: usize) -> Option<ScratchNeed> {
    const SLOTS_PER_BLOCK: usize = 2;
    const ROW_STATE_FLOATS: usize = 4;
    let consumer_threads = (c.consumer_warpgroups as usize).checked_mul(WARPGROUP_THREADS as usize)?;
    let slot_floats = (head_dim / 2 + ROW_STATE_FLOATS).checked_mul(consumer_threads)?;
    Some(ScratchNeed {
        counters: blocks.checked_mul(c.consumer_warpgroups as usize)?,
        floats: SLOTS_PER_BLOCK.checked_mul(blocks)?.checked_mul(slot_floats)?,
    })
}

/// Keys and threads of one block of E4M3's V transpose kernel (wgmma_vt.cuh, which takes them
/// as defines; the launch sizes its grid by the keys).
pub const VT_BLOCK_KEYS: usize = 64;
pub const VT_BLOCK_THREADS: u32 = 256;

/// Keys of a Vᵀ row that E4M3's `block_n` must be whole multiples of: FP8 `wgmma` reads B
/// K-major, so P·V reads V transposed, in rows of 128 keys (one 128-byte swizzled row).
pub const FP8_KEY_ROW: u32 = 128;

/// The levers E4M3 inputs take beside [`WgmmaConfig::FP8_BLOCK_N`]
/// (kernels/wgmma/wgmma_mainloop.cuh's `static_assert`s): the pipelined consumer, O not staged
/// in the Q rows (they hold half of O's bytes), no ones tile, no multicast (V's tiles are Vᵀ's),
/// no half block (ptxas serialises its wgmma).
fn validate_fp8(c: &WgmmaConfig) -> Result<(), String> {
    let refuse = |what: &str, why: &str| Err(format!("with E4M3 inputs, {what}: {why}"));
    if !c.pipeline.overlap() {
        return refuse("pipeline must be overlap or pingpong", "the E4M3 path is the pipelined consumer's");
    }
    if c.o_staging == OStaging::QRows {
        return refuse("o_staging cannot be q-rows", "the Q tile's E4M3 rows hold half of O's 16-bit bytes");
    }
    if c.rowsum_mma || c.multicast {
        return refuse(
            "rowsum_mma and multicast must be off",
            "the ones tile and the multicast halves are 16-bit tiles",
        );
    }
    if c.half_last {
        return refuse(
            "half_last must be off",
            "ptxas serialises the half block's wgmma at every E4M3 head dim (C7511, insufficient registers for \
             the wgmma pipeline)",
        );
    }
    Ok(())
}

impl Family for WgmmaConfig {
    const IMPL: Impl = Impl::Wgmma;
    const ABOUT: &'static str =
        "Hopper: wgmma from 128B-swizzled shared memory, TMA producer warpgroup, ping-pong consumers (sm_90a)";
    const HEAD_DIMS: &'static [usize] = &[64, 128, 256];
    // `wgmma` and `setmaxnreg` exist only on the arch-specific Hopper target.
    const ARCHS: &'static [Arch] = &[Arch::Sm90a];
    // E4M3 with V transposed by a kernel of its own first (`wgmma_vt.cuh`) or, `vt_producer`,
    // by the producer warpgroup.
    const DTYPES: &'static [Dtype] = &Dtype::ALL;
    const SOURCE: SourceFile = SourceFile { name: "wgmma.cu", text: include_str!("wgmma.cu") };

    fn default_for(_arch: Arch, dtype: Dtype, head_dim: usize) -> Self {
        if dtype.is_fp8() {
            plan::fp8_default(head_dim)
        } else {
            plan::default(head_dim)
        }
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
        axis!("pipeline", "pl", pipeline, Pipeline, "how Q/K/V tiles are loaded and the consumers' GEMMs pipelined"),
        axis!("schedule", "sc", schedule, Schedule, "which tiles a block computes"),
        // One column block (hd64) has nothing to cut into passes.
        axis!("o_staging", "os", o_staging, OStaging, "how O leaves the consumers", tuned_at: |c, d| {
            c.o_staging != OStaging::HalfTile || d as u32 > SWIZZLE_ROW_ELEMS
        }),
        // The polynomial exponential is for the head dim whose softmax binds (hd64); elsewhere
        // MUFU keeps up with the tensor cores, and the space stays small.
        num!(
            "exp2_poly",
            "xp",
            exp2_poly,
            &WgmmaConfig::EXP2_POLY,
            "one score in this many exponentiated by an FMA polynomial (0: none)",
            tuned_at: |c, d| c.exp2_poly == 0 || d <= EXP2_POLY_MAX_HEAD_DIM
        ),
        flag!(
            "lazy_rescale",
            "lr",
            lazy_rescale,
            "rescale O only when a row's max moved by 2^8 (2^0.75 with E4M3 inputs)"
        ),
        flag!("ring_test", "rt", ring_test, "consumers test the next stage without blocking"),
        flag!("rowsum_mma", "rs", rowsum_mma, "row sums of P on the tensor cores (hd64)", tuned_at: |c, d| {
            !c.rowsum_mma || d == ROWSUM_MMA_HEAD_DIM
        }),
        flag!("half_last", "hl", half_last, "compute only the seen half of a tile's last key block"),
        flag!("multicast", "mc", multicast, "clusters of two multicast K and V"),
        flag!("q_in_regs", "qr", q_in_regs, "Q·Kᵀ reads Q from registers (an RS wgmma)"),
        flag!(
            "vt_producer",
            "vp",
            vt_producer,
            "E4M3: the producer warps prepare V in shared memory (transpose, or permute a given Vᵀ)",
            shown_only_when_on
        ),
        flag!(
            "vt_given",
            "vg",
            vt_given,
            "E4M3: reads V given keys-contiguous ([B, Hkv, D, Sk]); set by the planner from the problem",
            shown_only_when_on
        ),
        flag!(
            "trace",
            "tr",
            trace,
            "instrumentation: per-warp clock stamps of the first blocks (not a tuning lever)",
            shown_only_when_on
        ),
    ];

    /// The levers the axes replaced, as older `--config` text (tuner records, scripts) writes
    /// them: `pipeline` was `loads`, `warp_specialized`, `overlap` and `pingpong`; `schedule` was
    /// `persistent`, `dynamic_tiles` and `split_tail`; `o_staging` was `tma_store`, `o_passes`
    /// and `o_in_q`. Each sets the define of its name (`loads`: `loads_tma`).
    const RETIRED: &'static [Retired] = &[
        Retired { key: "loads", define: "loads_tma", names: &Loads::NAMES },
        Retired::same("warp_specialized"),
        Retired::same("overlap"),
        Retired::same("pingpong"),
        Retired::same("persistent"),
        Retired::same("dynamic_tiles"),
        Retired::same("split_tail"),
        Retired::same("tma_store"),
        Retired::same("o_passes"),
        Retired::same("o_in_q"),
    ];

    fn threads(&self) -> u32 {
        WgmmaConfig::threads(self)
    }

    /// A persistent kernel takes one block per SM (`sm_count`), or one per tile when there are
    /// fewer tiles, in x alone.
    fn grid(&self, shape: &Shape, _splits: usize, sm_count: u32) -> [usize; 3] {
        let tiles = [shape.sq.div_ceil(self.block_m() as usize), shape.h, shape.b];
        if self.schedule == Schedule::SplitTail {
            // A split tail cuts tiles into runs of key blocks: one block per SM even with fewer
            // tiles, up to one a key block.
            let units = tiles.iter().product::<usize>() * shape.sk.div_ceil(self.block_n as usize);
            [units.clamp(1, sm_count as usize), 1, 1]
        } else if self.schedule.persistent() {
            // A cluster's blocks take adjacent tiles: an even count of both.
            let blocks = tiles.iter().product::<usize>().min(sm_count as usize);
            [blocks - blocks % self.cluster_blocks() as usize, 1, 1]
        } else {
            tiles
        }
    }

    /// Q tile + K and V rings, unpadded (the 128-byte swizzle spreads the banks), plus the
    /// slack that lets the kernel align its base to the swizzle atom; persistent blocks with TMA
    /// stores, and E4M3's on any schedule, stage O in a tile of their own, of O's 16-bit rows.
    /// The mbarriers are static shared memory.
    fn dynamic_smem_bytes(&self, dtype: Dtype, head_dim: usize) -> usize {
        let row = head_dim * dtype.size_bytes();
        let own_tile = (self.schedule.persistent() || dtype.is_fp8())
            && matches!(self.o_staging, OStaging::Tile | OStaging::HalfTile);
        let o_row = head_dim * dtype.output().size_bytes();
        let o_stage = if own_tile { self.block_m() as usize * o_row / self.o_staging.passes() as usize } else { 0 };
        // rowsum_mma's ones tile: one V stage's worth.
        let ones = if self.rowsum_mma { self.block_n as usize * row } else { 0 };
        // vt_producer's raw ring: V's tiles as loaded, one per stage beside the Vᵀ stages (a V
        // given transposed lands in the Vᵀ stages).
        let kv_tiles = if self.vt_producer && !self.vt_given { 3 } else { 2 };
        SWIZZLE_ATOM_BYTES
            + (self.block_m() as usize + kv_tiles * (self.stages * self.block_n) as usize) * row
            + o_stage
            + ones
    }

    fn tensor_map_rows(&self) -> Option<TensorMapRows> {
        (self.pipeline.loads() == Loads::Tma).then(|| TensorMapRows {
            q: Some(if self.o_staging == OStaging::QRows { WGMMA_ROWS_PER_WARPGROUP } else { self.block_m() }),
            kv: self.block_n / self.cluster_blocks(),
            o: self.o_staging.tma_store().then_some(WGMMA_ROWS_PER_WARPGROUP),
        })
    }

    /// The rules between the axes and the other levers (within an axis, every value is one the
    /// kernel has); each mirrors a `static_assert` of the kernel.
    fn validate(&self, dtype: Dtype, head_dim: usize, _arch: Arch) -> Result<(), String> {
        let c = self;
        if dtype.is_fp8() {
            one_of("block_n", c.block_n, &WgmmaConfig::FP8_BLOCK_N).map_err(|e| {
                format!("with E4M3 inputs, {e}: P·V reads Vᵀ in rows of {FP8_KEY_ROW} keys (FP8 wgmma reads B K-major only)")
            })?;
            validate_fp8(c)?;
        } else {
            one_of("block_n", c.block_n, &WgmmaConfig::BLOCK_N)?;
        }
        one_of("stages", c.stages, &WgmmaConfig::STAGES)?;
        one_of("consumer_warpgroups", c.consumer_warpgroups, &WgmmaConfig::CONSUMER_WARPGROUPS)?;
        one_of("exp2_poly", c.exp2_poly, &WgmmaConfig::EXP2_POLY)?;
        let (overlap, specialized) = (c.pipeline.overlap(), c.pipeline.warp_specialized());
        if c.pipeline == Pipeline::PingPong && c.consumer_warpgroups < 2 {
            return Err("pipeline=pingpong needs consumer_warpgroups of 2 or more (they take turns)".into());
        }
        if c.schedule.persistent() && !overlap {
            return Err(format!(
                "schedule={} needs pipeline=overlap or pingpong (the pipelined consumer releases Q early)",
                c.schedule.name()
            ));
        }
        if c.o_staging.tma_store() && c.pipeline == Pipeline::CpAsync {
            return Err(format!(
                "o_staging={} needs TMA loads, pipeline=tma or later (O's tensor map follows those of Q, K and V)",
                c.o_staging.name()
            ));
        }
        if c.o_staging == OStaging::HalfTile && !c.schedule.persistent() {
            return Err("o_staging=half-tile needs a persistent schedule (grid blocks stage O in the Q tile, which \
                        is not cut into passes)"
                .into());
        }
        let column_blocks = head_dim as u32 / SWIZZLE_ROW_ELEMS;
        if !column_blocks.is_multiple_of(c.o_staging.passes()) {
            return Err(format!(
                "o_staging=half-tile needs a head dim of two or more {SWIZZLE_ROW_ELEMS}-column blocks, not {head_dim}"
            ));
        }
        if c.o_staging == OStaging::QRows && !matches!(c.schedule, Schedule::Persistent | Schedule::Claimed) {
            return Err(
                "o_staging=q-rows needs schedule=persistent or claimed (persistent blocks of whole tiles)".into()
            );
        }
        if c.ring_test && !overlap {
            return Err("ring_test=1 needs pipeline=overlap or pingpong (the tests sit in the pipelined consumer's \
                        loop)"
                .into());
        }
        if c.rowsum_mma && !(head_dim == ROWSUM_MMA_HEAD_DIM && specialized) {
            return Err(format!(
                "rowsum_mma=1 needs head dim {ROWSUM_MMA_HEAD_DIM} (its ones tile is one 64-column block beside \
                 V's one) and a warp-specialised pipeline; or set rowsum_mma=0"
            ));
        }
        if c.half_last && !(overlap && c.block_n.is_multiple_of(HALF_LAST_BLOCK_N_MULTIPLE)) {
            return Err(format!(
                "half_last=1 needs pipeline=overlap or pingpong (the half block is the pipelined consumer's) and a \
                 block_n that is a multiple of {HALF_LAST_BLOCK_N_MULTIPLE} (half a block is whole k16 steps of \
                 P·V), not {}; or set half_last=0",
                c.block_n
            ));
        }
        if c.multicast && !(specialized && matches!(c.schedule, Schedule::Grid | Schedule::Persistent)) {
            return Err("multicast=1 needs a warp-specialised pipeline (its producer multicasts K and V) and \
                        static whole tiles, schedule=grid or persistent (a cluster's blocks take adjacent tiles \
                        and visit the same key blocks); or set multicast=0"
                .into());
        }
        if c.q_in_regs && !overlap {
            return Err("q_in_regs=1 needs pipeline=overlap or pingpong (the pipelined consumer loads Q's \
                        fragments); or set q_in_regs=0"
                .into());
        }
        if c.vt_producer && !dtype.is_fp8() {
            return Err(format!(
                "vt_producer=1 transposes E4M3's V; {dtype} inputs are read as they are (16-bit wgmma reads V \
                 MN-major); or set vt_producer=0"
            ));
        }
        if c.vt_given && !dtype.is_fp8() {
            return Err(format!(
                "vt_given=1 reads E4M3's V given transposed; {dtype} inputs are read as they are; or set vt_given=0"
            ));
        }
        if c.trace && !specialized {
            return Err("trace=1 needs a warp-specialised pipeline (the marks are in that pipeline)".into());
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
        if dtype.is_fp8() && !self.vt_producer {
            d.push(("EVOATTN_VT_KEYS".to_string(), VT_BLOCK_KEYS.to_string()));
            d.push(("EVOATTN_VT_THREADS".to_string(), VT_BLOCK_THREADS.to_string()));
        }
        d
    }

    fn reads_v_keys_contiguous(&self) -> bool {
        self.vt_given
    }

    /// The schedulers' scratch (the claimed tiles' counters, the split tail's counters and
    /// partial slots), and the limits of schedules and clusters that depend on the problem.
    fn launch_needs(&self, problem: &Problem, sm_count: u32, _resident_per_sm: u32) -> Result<LaunchNeeds, String> {
        let c = self;
        let causal = problem.causal != Causal::None;
        let blocks = c.grid(&problem.shape, 1, sm_count)[0];
        if c.schedule == Schedule::SplitTail && causal {
            return Err("schedule=split-tail cuts equal tiles into runs of key blocks; causal tiles differ in length \
                        (schedule=claimed balances those)"
                .into());
        }
        if c.multicast && causal {
            return Err("multicast=1 shares every key block between a cluster's two query tiles; causal tiles see \
                        different key blocks"
                .into());
        }
        if !c.clusters_fit(problem.shape.sq) {
            return Err(format!(
                "multicast=1 pairs a head's query tiles of {} rows in clusters of {MULTICAST_CLUSTER_BLOCKS} blocks: \
                 {} query rows make an odd count",
                c.block_m(),
                problem.shape.sq
            ));
        }
        if c.schedule == Schedule::SplitTail && !c.split_tail_fits(problem.shape.sk, blocks) {
            return Err(format!(
                "schedule=split-tail counts a tail's key blocks times the {blocks} blocks in 32 bits: {} keys are \
                 too many",
                problem.shape.sk
            ));
        }
        let scratch = match c.schedule {
            Schedule::SplitTail => {
                split_tail_scratch(c, problem.shape.d, blocks).ok_or("its scratch is too large to count")?
            }
            Schedule::Claimed => ScratchNeed { counters: TILE_COUNTERS, floats: 0 },
            Schedule::Grid | Schedule::Persistent => ScratchNeed::default(),
        };
        Ok(LaunchNeeds { scratch, ..LaunchNeeds::default() })
    }

    fn space(head_dim: usize) -> Box<dyn Iterator<Item = Self>> {
        Box::new(product(WgmmaConfig::BASE, head_dim))
    }
}
