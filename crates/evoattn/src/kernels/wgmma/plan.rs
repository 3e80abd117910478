//! The `wgmma` planner: the head dim's default, and the rules that adapt it to a problem on a
//! GPU (a rule table, first match wins); the measurements behind each are in
//! docs/decisions/wgmma.md.

use super::{OStaging, Pipeline, Schedule, WgmmaConfig};
use crate::problem::{Causal, Problem};

/// The `wgmma` default for a head dim (sm_90a only): warp-specialised TMA producer, two or three
/// ping-pong consumers, TMA stores, one tile per block; [`for_problem`] adapts it.
/// Evidence: docs/decisions/wgmma.md#default
pub fn default(head_dim: usize) -> WgmmaConfig {
    let (block_n, consumer_warpgroups) = match head_dim {
        d if d <= 64 => (128, 3),
        d if d <= 128 => (176, 2),
        _ => (80, 2),
    };
    WgmmaConfig {
        block_n,
        stages: 2,
        consumer_warpgroups,
        pipeline: Pipeline::PingPong,
        o_staging: OStaging::Tile,
        ..WgmmaConfig::BASE
    }
}

/// The `wgmma` default for E4M3 inputs at a head dim: 128-key blocks (Vᵀ's rows), two ping-pong
/// consumers (three at hd64, where the exponentials take as long as the GEMMs), O stored by
/// TMA from a staging tile of its own, at hd128 Q in registers, and up to hd128 O rescaled
/// only when a row's max moves (lazy_rescale); the levers E4M3 takes are in `validate_fp8`.
/// Evidence: docs/decisions/wgmma.md#fp8-default, docs/decisions/wgmma.md#fp8-o-staging
pub fn fp8_default(head_dim: usize) -> WgmmaConfig {
    WgmmaConfig {
        block_n: super::FP8_KEY_ROW,
        stages: 2,
        consumer_warpgroups: if head_dim <= 64 { 3 } else { 2 },
        pipeline: Pipeline::PingPong,
        o_staging: OStaging::Tile,
        q_in_regs: head_dim == FP8_Q_IN_REGS_HEAD_DIM,
        lazy_rescale: head_dim <= FP8_LAZY_RESCALE_MAX_HEAD_DIM,
        ..WgmmaConfig::BASE
    }
}

/// Largest E4M3 head dim whose default rescales O lazily (+2% at hd128, +4% at hd64 16k; -7% at
/// hd256, H200 A/B/B/A).
/// Evidence: docs/decisions/wgmma.md#fp8-lazy-rescale
const FP8_LAZY_RESCALE_MAX_HEAD_DIM: usize = 128;

/// Most keys for which E4M3 problems run persistent blocks: a tile's Q load, pipeline fill and
/// epilogue are exposed on the grid and hidden under the previous tile's GEMMs on persistent
/// blocks, a gain that shrinks with the tile's key blocks (+11-25% at 1k keys, +1-3% at 8k; at
/// 16k keys the grid schedule measured faster). Static tiles, not claimed ones: within 2% of
/// each other at 512 keys, and racecheck reports the claimed scheduler's slot (a false
/// positive) on every such problem.
/// Evidence: docs/decisions/wgmma.md#fp8-short-keys
pub const FP8_PERSISTENT_MAX_KEYS: usize = 8192;

/// The E4M3 persistent-blocks limit of a problem's mask and head dim. Causal problems stop
/// earlier, by head dim: static tiles of unequal causal lengths leave SMs idle at the end, which
/// past these lengths costs more than hiding each tile's prologue and epilogue saves (hd64 from
/// 1k keys -10..-35%, hd128 8k -25%, hd256 from 4k -20..-27%; below them +13..+25%).
/// Evidence: docs/decisions/wgmma.md#fp8-short-keys
fn fp8_persistent_max_keys(causal: bool, head_dim: usize) -> usize {
    match (causal, head_dim) {
        (false, _) => FP8_PERSISTENT_MAX_KEYS,
        (true, ..=64) => 512,
        (true, ..=128) => 4096,
        (true, _) => 2048,
    }
}

/// Most keys for which E4M3 problems transpose V in the kernel (`vt_producer`) instead of in a
/// kernel of their own first: the transpose kernel reads and writes all of V once more (~20 µs
/// a fa3-grid row), the in-kernel one costs each key block its shared-memory traffic and
/// instructions (A/B/B/A, H100: hd128 512 -15.9%, 1k -10.0%, 2k -5.6%, 4k -1.1%, 16k +7.5%;
/// hd64 512 -11.8%, 2k -2.4%, 16k +1.7%).
/// Evidence: docs/decisions/wgmma.md#fp8-vt-producer
pub const FP8_VT_PRODUCER_MAX_KEYS: usize = 4096;
/// Largest E4M3 head dim that transposes V in the kernel: hd256's rings leave no room for the
/// raw V stages beside O's staging tile.
/// Evidence: docs/decisions/wgmma.md#fp8-vt-producer
pub const FP8_VT_PRODUCER_MAX_HEAD_DIM: usize = 128;

/// Most keys for which E4M3 problems with V given transposed permute its tiles in the kernel
/// (`vt_producer` with `vt_given`) instead of in a kernel of their own first: in place, the
/// permute sits between each V tile's load and its readers (H100, in the kernel against the
/// permute kernel: 2k hd128 -3.8%, hd256 -3.4%; 4k +2.9%, +1.9%; 8k +8.6%, +5.3%).
/// Evidence: docs/decisions/wgmma.md#fp8-vt-given
pub const FP8_VT_PERMUTE_MAX_KEYS: usize = 2048;

/// Whether an E4M3 problem of `sk` keys at `head_dim` prepares V in the kernel: transposes it,
/// or with V given transposed (`given`) permutes it, which needs no raw ring (any head dim).
fn fp8_vt_producer_pays(sk: usize, head_dim: usize, given: bool) -> bool {
    if given {
        sk <= FP8_VT_PERMUTE_MAX_KEYS
    } else {
        head_dim <= FP8_VT_PRODUCER_MAX_HEAD_DIM && sk <= FP8_VT_PRODUCER_MAX_KEYS
    }
}

/// E4M3 causal problems at hd64 past the static tiles' limit (`fp8_persistent_max_keys`) run
/// persistent blocks that claim their tiles: claimed tiles balance the unequal causal lengths
/// at every length (A/B/B/A against the grid, H100: 1k -20.1%, 2k -14.0%; H200, with O from
/// registers: 4k -5.2%; 8k and 16k even with static persistent tiles, which lost 66.7% at 4k).
/// Evidence: docs/decisions/wgmma.md#fp8-causal-claimed
const FP8_CLAIMED_CAUSAL_MAX_HEAD_DIM: usize = 64;

/// Most keys for which unmasked E4M3 problems on persistent blocks stage O in a tile of their own
/// (the default); longer ones store O from registers where that was measured to pay: there a
/// consumer's staging stores share the MIO queue with the next tile's exponentials, and V is
/// then transposed by a kernel of its own (H200 A/B/B/A against O's tile with V transposed in
/// the kernel: hd64 2k -2.6%, 4k -5.4%, 8k -6.7%; hd128 8k -1.2%; hd256 8k +2.6%).
/// Evidence: docs/decisions/wgmma.md#fp8-o-staging
const FP8_PERSISTENT_O_TILE_MAX_KEYS: usize = 1024;

/// Most keys for which E4M3 causal problems on claimed tiles stage O in a tile of their own;
/// longer ones store O from registers (the lengths measured: 4k, 8k, 16k, with claimed tiles
/// and O from registers against the plans before, H200: -5.2%, -3.2%, -0.9%).
/// Evidence: docs/decisions/wgmma.md#fp8-causal-claimed
const FP8_CLAIMED_O_TILE_MAX_KEYS: usize = 2048;

/// Whether an unmasked E4M3 problem of `sk` keys on persistent blocks stores O from registers:
/// past [`FP8_PERSISTENT_O_TILE_MAX_KEYS`] at hd64; at hd128 only past
/// [`FP8_VT_PRODUCER_MAX_KEYS`] (at 4k, O from registers with V transposed by a kernel of its
/// own lost to O's tile with V transposed in the kernel: +9.8%).
/// Evidence: docs/decisions/wgmma.md#fp8-o-staging
fn fp8_o_from_registers(sk: usize, head_dim: usize) -> bool {
    match head_dim {
        ..=64 => sk > FP8_PERSISTENT_O_TILE_MAX_KEYS,
        65..=128 => sk > FP8_VT_PRODUCER_MAX_KEYS,
        _ => false,
    }
}

/// The E4M3 head dim whose default holds Q in registers (hd64 measured even, hd256 spills).
/// Evidence: docs/decisions/wgmma.md#fp8-default
const FP8_Q_IN_REGS_HEAD_DIM: usize = 128;

/// Most keys for which unmasked persistent blocks over hd64 take 128-key blocks; longer ones keep
/// the 176-key ring, stage O in two passes and split the tail.
/// Evidence: docs/decisions/wgmma.md#persistent-max-keys
pub const PERSISTENT_MAX_KEYS: usize = 4096;
/// Largest head dim for which `wgmma` runs persistent blocks on unmasked problems.
/// Evidence: docs/decisions/wgmma.md#persistent-max-head-dim
pub const PERSISTENT_MAX_HEAD_DIM: usize = 128;
/// Largest head dim whose unmasked problems run persistent blocks at any length.
/// Evidence: docs/decisions/wgmma.md#persistent-any-keys
pub const PERSISTENT_ANY_KEYS_MAX_HEAD_DIM: usize = 64;
/// Consumer warpgroups of the short problems' configs (short causal, short unmasked).
/// Evidence: docs/decisions/wgmma.md#short-consumers
const SHORT_CONSUMER_WARPGROUPS: u32 = 2;
/// Time of one 192-row tile of three consumers over one 128-row tile of two (short unmasked hd64):
/// see [`three_consumers_pay`].
/// Evidence: docs/decisions/wgmma.md#three-consumer-cost
const THREE_CONSUMER_TILE_COST: f64 = 1.31;
/// Largest head dim whose two-consumer configs, and causal configs on claimed tiles, take
/// `ring_test` (a consumer's key block is one serial chain there).
/// Evidence: docs/decisions/wgmma.md#ring-test
pub const RING_TEST_MAX_HEAD_DIM: usize = 64;
/// Most keys of a short causal problem per head dim (64, 128): 128-key blocks on persistent
/// blocks up to these.
/// Evidence: docs/decisions/wgmma.md#short-causal
pub const SHORT_CAUSAL_MAX_KEYS: [(usize, usize); 2] = [(64, 1024), (128, 1024)];
/// Most keys per head dim (64, 128) for which longer causal problems run persistent blocks that
/// claim their tiles (`schedule=claimed`).
/// Evidence: docs/decisions/wgmma.md#dynamic-causal
pub const DYNAMIC_CAUSAL_MAX_KEYS: [(usize, usize); 2] = [(64, 8192), (128, 4096)];
/// Largest head dim whose causal problems on claimed tiles take `half_last`.
/// Evidence: docs/decisions/wgmma.md#half-last
pub const HALF_LAST_MAX_HEAD_DIM: usize = 64;
/// Most keys for which unmasked persistent blocks take two consumer warpgroups instead of the
/// head dim's default.
/// Evidence: docs/decisions/wgmma.md#short-unmasked
pub const SHORT_UNMASKED_MAX_KEYS: usize = 1024;
/// Most keys for which head dims over [`PERSISTENT_MAX_HEAD_DIM`] take [`NARROW_BLOCK_N`]-key
/// blocks on persistent blocks, both masks.
/// Evidence: docs/decisions/wgmma.md#narrow-wide-heads
pub const NARROW_MAX_KEYS_WIDE_HEADS: usize = 512;
/// Most keys for which causal problems over [`PERSISTENT_MAX_HEAD_DIM`] take [`NARROW_BLOCK_N`]-key
/// persistent blocks; past [`NARROW_STATIC_CAUSAL_MAX_KEYS_WIDE_HEADS`] they claim their tiles.
/// Evidence: docs/decisions/wgmma.md#narrow-wide-heads-causal
pub const NARROW_CAUSAL_MAX_KEYS_WIDE_HEADS: usize = 2048;
/// Most keys for which those narrow causal problems keep the static round robin.
/// Evidence: docs/decisions/wgmma.md#narrow-wide-heads-static
pub const NARROW_STATIC_CAUSAL_MAX_KEYS_WIDE_HEADS: usize = 1024;
/// O's own staging tile, half the columns in two passes, where the persistent ring leaves no room
/// for the whole tile (hd256's 64-key ring, hd128's 176-key ring).
/// Evidence: docs/decisions/wgmma.md#wide-o-passes
const WIDE_O_STAGING: OStaging = OStaging::HalfTile;
/// The key block of short problems over [`PERSISTENT_MAX_HEAD_DIM`]: 512 keys make 8 whole blocks.
/// Evidence: docs/decisions/wgmma.md#narrow-block-n
const NARROW_BLOCK_N: u32 = 64;
/// Largest head dim measured for one consumer warpgroup on a near-empty GPU.
/// Evidence: docs/decisions/wgmma.md#small-grid
pub const SMALL_GRID_MAX_HEAD_DIM: usize = 64;
/// Query rows of a two-consumer tile: the unit the small-grid rule counts tiles in.
/// Evidence: docs/decisions/wgmma.md#small-grid
const WGMMA_TILE_ROWS: usize = 128;
/// The key block of every persistent config and of small grids: less waste on a masked diagonal
/// or tail block, and room for O's staging tile.
/// Evidence: docs/decisions/wgmma.md#short-block-n
const SHORT_BLOCK_N: u32 = 128;
/// Fewest key blocks a tile needs for unmasked persistent blocks to split the tail
/// (`schedule=split-tail`).
/// Evidence: docs/decisions/wgmma.md#split-tail
pub const SPLIT_TAIL_MIN_KEY_BLOCKS: usize = 16;
/// Fewest query rows for the tail to split: a tile of fewer (decoding) is mostly padding, and a
/// piece's partial and merge cost a whole tile's rows all the same.
/// Evidence: docs/decisions/wgmma.md#split-tail-decode
pub const SPLIT_TAIL_MIN_QUERY_ROWS: usize = WGMMA_TILE_ROWS;

/// The `wgmma` config for one problem on a GPU with `sm_count` SMs: the head dim's
/// [`default`] adapted by the first rule of [`WGMMA_RULES`] that applies.
/// Evidence: docs/decisions/wgmma.md#rules
pub fn for_problem(problem: &Problem, sm_count: u32) -> WgmmaConfig {
    let shape = problem.shape;
    if problem.dtype.is_fp8() {
        // V as the problem holds it (a caller's Vᵀ needs only its keys permuted), prepared in
        // the kernel where that pays, by a kernel of its own before elsewhere.
        let c = fp8_default(shape.d);
        let causal = problem.causal != Causal::None;
        let schedule = if shape.sk <= fp8_persistent_max_keys(causal, shape.d) {
            Schedule::Persistent
        } else if causal && shape.d <= FP8_CLAIMED_CAUSAL_MAX_HEAD_DIM {
            Schedule::Claimed
        } else {
            c.schedule
        };
        let vt_given = problem.v_keys_contiguous();
        // A V given transposed and permuted in the kernel keeps O's tile: that pair was never
        // measured against O from registers (whose traced build spills).
        let permutes_given_v = vt_given && fp8_vt_producer_pays(shape.sk, shape.d, true);
        let unmasked_o_regs =
            schedule == Schedule::Persistent && !causal && !permutes_given_v && fp8_o_from_registers(shape.sk, shape.d);
        let claimed_o_regs = schedule == Schedule::Claimed && shape.sk > FP8_CLAIMED_O_TILE_MAX_KEYS;
        let o_staging = if unmasked_o_regs || claimed_o_regs { OStaging::Registers } else { c.o_staging };
        // Unmasked, O from registers and V transposed in the kernel do not combine: the
        // transposer's shared-memory traffic then sets the period (docs/decisions/wgmma.md#fp8-o-staging).
        let vt_producer = fp8_vt_producer_pays(shape.sk, shape.d, vt_given) && (vt_given || !unmasked_o_regs);
        return WgmmaConfig { schedule, o_staging, vt_producer, vt_given, ..c };
    }
    let c = default(shape.d);
    let p = Facts {
        shape,
        causal: problem.causal != Causal::None,
        tiles: shape.b * shape.h * shape.sq.div_ceil(WGMMA_TILE_ROWS),
        sms: sm_count as usize,
    };
    let config = WGMMA_RULES.iter().find(|rule| (rule.applies)(&p)).map_or(c, |rule| (rule.config)(&p, c));
    WgmmaConfig {
        rowsum_mma: rowsum_mma_pays(&config, shape.d),
        q_in_regs: q_in_regs_pays(&config, shape.d, p.causal),
        ..config
    }
}

/// What the `wgmma` rules read of a problem on a GPU.
struct Facts {
    shape: crate::problem::Shape,
    causal: bool,
    /// Tiles of [`WGMMA_TILE_ROWS`] rows.
    tiles: usize,
    sms: usize,
}

impl Facts {
    /// hd128 past [`PERSISTENT_MAX_KEYS`] keeps its 176-key ring on persistent blocks, for the
    /// split tail; with fewer tiles than SMs there is no whole round, and the split would only
    /// cut every tile.
    fn wide_ring(&self) -> bool {
        self.shape.sk > PERSISTENT_MAX_KEYS && self.shape.d > PERSISTENT_ANY_KEYS_MAX_HEAD_DIM
    }

    fn fills_the_sms(&self) -> bool {
        self.tiles >= self.sms
    }
}

/// One planner rule: where it applies, and what it makes of the head dim's default.
struct Rule {
    /// Its section in docs/decisions/wgmma.md (a test checks that the section exists).
    #[cfg_attr(not(test), allow(dead_code))]
    evidence: &'static str,
    applies: fn(&Facts) -> bool,
    config: fn(&Facts, WgmmaConfig) -> WgmmaConfig,
}

/// The `wgmma` planner, first applicable rule wins; none: the head dim's default (one tile per
/// block). `rowsum_mma` and `q_in_regs` then follow from the result ([`rowsum_mma_pays`],
/// [`q_in_regs_pays`]).
const WGMMA_RULES: &[Rule] = &[
    // A near-empty GPU: 64-row tiles of one consumer make twice the blocks.
    Rule {
        evidence: "small-grid",
        applies: |p| 2 * p.tiles < p.sms && p.shape.d <= SMALL_GRID_MAX_HEAD_DIM,
        config: |_, c| WgmmaConfig { consumer_warpgroups: 1, pipeline: Pipeline::Overlap, block_n: SHORT_BLOCK_N, ..c },
    },
    // Wide heads, short keys: whole 64-key blocks on persistent blocks, O staged in two passes.
    Rule {
        evidence: "narrow-wide-heads",
        applies: |p| {
            let keys = if p.causal { NARROW_CAUSAL_MAX_KEYS_WIDE_HEADS } else { NARROW_MAX_KEYS_WIDE_HEADS };
            p.shape.d > PERSISTENT_MAX_HEAD_DIM && p.shape.sk <= keys
        },
        config: |p, c| {
            let claimed = p.causal && p.shape.sk > NARROW_STATIC_CAUSAL_MAX_KEYS_WIDE_HEADS;
            let schedule = if claimed { Schedule::Claimed } else { Schedule::Persistent };
            WgmmaConfig { block_n: NARROW_BLOCK_N, schedule, o_staging: WIDE_O_STAGING, ..c }
        },
    },
    // Wide heads, longer unmasked keys filling the SMs: persistent blocks staging O in Q's rows.
    Rule {
        evidence: "o-in-q-wide-heads",
        applies: |p| !p.causal && p.shape.d > PERSISTENT_MAX_HEAD_DIM && p.fills_the_sms(),
        config: |_, c| WgmmaConfig { schedule: Schedule::Persistent, o_staging: OStaging::QRows, ..c },
    },
    // Short causal: 128-key blocks on persistent blocks, two consumers.
    Rule {
        evidence: "short-causal",
        applies: |p| p.causal && p.shape.sk <= keys_for_head_dim(&SHORT_CAUSAL_MAX_KEYS, p.shape.d),
        config: |p, c| WgmmaConfig {
            block_n: SHORT_BLOCK_N,
            schedule: Schedule::Persistent,
            consumer_warpgroups: SHORT_CONSUMER_WARPGROUPS,
            ring_test: p.shape.d <= RING_TEST_MAX_HEAD_DIM,
            ..c
        },
    },
    // Mid-length causal: persistent blocks claiming their tiles, longest first.
    Rule {
        evidence: "dynamic-causal",
        applies: |p| p.causal && p.shape.sk <= keys_for_head_dim(&DYNAMIC_CAUSAL_MAX_KEYS, p.shape.d),
        config: |p, c| WgmmaConfig {
            block_n: SHORT_BLOCK_N,
            schedule: Schedule::Claimed,
            ring_test: p.shape.d <= RING_TEST_MAX_HEAD_DIM,
            half_last: p.shape.d <= HALF_LAST_MAX_HEAD_DIM,
            ..c
        },
    },
    // Long hd128 causal filling the SMs: claimed tiles on the 176-key ring, O in two passes.
    Rule {
        evidence: "dynamic-wide-ring",
        applies: |p| p.causal && p.wide_ring() && p.shape.d <= PERSISTENT_MAX_HEAD_DIM && p.fills_the_sms(),
        config: |_, c| WgmmaConfig { schedule: Schedule::Claimed, o_staging: WIDE_O_STAGING, ..c },
    },
    // Unmasked up to hd128: persistent blocks, 128-key blocks (two consumers when short) or the
    // wide ring, the tail split on long tiles.
    Rule {
        evidence: "persistent-unmasked",
        applies: |p| !p.causal && p.shape.d <= PERSISTENT_MAX_HEAD_DIM && (!p.wide_ring() || p.fills_the_sms()),
        config: |p, c| {
            let base = if p.wide_ring() {
                WgmmaConfig { o_staging: WIDE_O_STAGING, ..c }
            } else {
                let short = p.shape.sk <= SHORT_UNMASKED_MAX_KEYS;
                let two = short && !(c.consumer_warpgroups == 3 && three_consumers_pay(&p.shape, p.sms));
                let consumer_warpgroups = if two { SHORT_CONSUMER_WARPGROUPS } else { c.consumer_warpgroups };
                let ring_test = short && p.shape.d <= RING_TEST_MAX_HEAD_DIM;
                WgmmaConfig { block_n: SHORT_BLOCK_N, consumer_warpgroups, ring_test, ..c }
            };
            let split = p.shape.sk.div_ceil(base.block_n as usize) >= SPLIT_TAIL_MIN_KEY_BLOCKS
                && p.shape.sq >= SPLIT_TAIL_MIN_QUERY_ROWS
                && base.split_tail_fits(p.shape.sk, p.sms);
            let schedule = if split { Schedule::SplitTail } else { Schedule::Persistent };
            WgmmaConfig { schedule, ..base }
        },
    },
];

/// The head dim whose unmasked persistent two-consumer configs on 128-key blocks hold Q in
/// registers (`q_in_regs`).
/// Evidence: docs/decisions/wgmma.md#q-in-regs
pub const Q_IN_REGS_HEAD_DIM: usize = 128;

/// Whether a planner config takes `q_in_regs` (see [`Q_IN_REGS_HEAD_DIM`]).
fn q_in_regs_pays(c: &WgmmaConfig, head_dim: usize, causal: bool) -> bool {
    head_dim == Q_IN_REGS_HEAD_DIM
        && !causal
        && c.schedule.persistent()
        && c.block_n == SHORT_BLOCK_N
        && c.consumer_warpgroups == SHORT_CONSUMER_WARPGROUPS
}

/// Consumer warpgroups with which `rowsum_mma` pays on persistent hd64 blocks.
/// Evidence: docs/decisions/wgmma.md#rowsum-mma
const ROWSUM_MMA_CONSUMER_WARPGROUPS: u32 = 3;

/// Whether a planner config takes `rowsum_mma` (see [`ROWSUM_MMA_CONSUMER_WARPGROUPS`]).
fn rowsum_mma_pays(c: &WgmmaConfig, head_dim: usize) -> bool {
    head_dim == crate::config::ROWSUM_MMA_HEAD_DIM
        && c.schedule.persistent()
        && c.consumer_warpgroups == ROWSUM_MMA_CONSUMER_WARPGROUPS
}

/// Whether a short unmasked problem runs faster on 192-row tiles of three consumer warpgroups
/// than on 128-row tiles of two: persistent blocks take whole rounds of `sm_count` tiles, so
/// each side costs its rounds times its tile's time ([`THREE_CONSUMER_TILE_COST`]).
fn three_consumers_pay(shape: &crate::problem::Shape, sm_count: usize) -> bool {
    let rounds = |consumers: u32| {
        let tile_rows = (consumers * crate::config::WGMMA_ROWS_PER_WARPGROUP) as usize;
        (shape.b * shape.h * shape.sq.div_ceil(tile_rows)).div_ceil(sm_count) as f64
    };
    rounds(3) * THREE_CONSUMER_TILE_COST < rounds(SHORT_CONSUMER_WARPGROUPS)
}

/// The key limit of a `(head dim, keys)` table for head dim `d`: the first row whose head dim
/// is at least `d`, or 0 (no problem qualifies) past the last.
fn keys_for_head_dim(table: &[(usize, usize)], d: usize) -> usize {
    table.iter().find(|(head_dim, _)| d <= *head_dim).map_or(0, |(_, keys)| *keys)
}

/// Share of L2, in percent, that the K and V of one section of heads may fill under the causal
/// grid order ([`head_group`]).
/// Evidence: docs/decisions/wgmma.md#causal-order
pub const SCHEDULER_L2_KV_PERCENT: usize = 32;

/// Query heads per section of the causal `wgmma` grid order on a GPU with `l2_bytes` of L2: as
/// many heads as keep their K and V within [`SCHEDULER_L2_KV_PERCENT`](SCHEDULER_L2_KV_PERCENT)
/// of L2, a power of two (`GridTiles` in kernels/wgmma/wgmma_scheduler.cuh).
/// Evidence: docs/decisions/wgmma.md#causal-order
pub fn head_group(problem: &Problem, l2_bytes: usize) -> usize {
    let s = &problem.shape;
    let kv_head_bytes = (2 * s.sk * s.d * problem.dtype.size_bytes()).max(1);
    let kv_heads = (l2_bytes * SCHEDULER_L2_KV_PERCENT / 100 / kv_head_bytes).max(1);
    (1usize << kv_heads.ilog2()) * s.group()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Arch;
    use crate::config::{Impl, KernelConfig, KernelSpec};
    use crate::problem::Dtype;

    fn wgmma_for(p: &Problem) -> WgmmaConfig {
        for_problem(p, H100_SMS)
    }

    const H100_SMS: u32 = 132;

    #[test]
    fn every_wgmma_rule_names_a_section_of_the_decisions() {
        let doc = include_str!("../../../../../docs/decisions/wgmma.md");
        for rule in WGMMA_RULES {
            assert!(doc.contains(&format!("\n## {}\n", rule.evidence)), "no section {} in wgmma.md", rule.evidence);
        }
    }

    #[test]
    fn e4m3_takes_its_own_default_and_persistent_blocks_on_short_keys() {
        use crate::config::KernelSpec;
        use crate::problem::{Causal, Layout, Problem, Shape};
        for d in [64, 128, 256] {
            let long = Problem::dense(Shape::new(1, 2048 / d, 16384, d), Dtype::E4m3, Layout::Bhsd);
            assert_eq!(wgmma_for(&long), fp8_default(d));
            // V is transposed in the kernel up to FP8_VT_PRODUCER_MAX_KEYS, by a kernel of its own
            // past them, and where O leaves from registers.
            let vt_at =
                |sk| wgmma_for(&Problem::dense(Shape::new(1, 2048 / d, sk, d), Dtype::E4m3, Layout::Bhsd)).vt_producer;
            let in_kernel = d <= FP8_VT_PRODUCER_MAX_HEAD_DIM;
            let causal_vt_at = |sk| {
                wgmma_for(
                    &Problem::dense(Shape::new(1, 2048 / d, sk, d), Dtype::E4m3, Layout::Bhsd)
                        .with_causal(Causal::TopLeft),
                )
                .vt_producer
            };
            let max = FP8_VT_PRODUCER_MAX_KEYS;
            assert_eq!((causal_vt_at(max), causal_vt_at(max + 1)), (in_kernel, false), "hd{d}");
            let o_regs_below_max = d <= 64;
            assert_eq!((vt_at(max), vt_at(max + 1)), (in_kernel && !o_regs_below_max, false), "hd{d}");
            assert_eq!(vt_at(FP8_PERSISTENT_O_TILE_MAX_KEYS), in_kernel, "hd{d}");
            // A V given transposed and permuted in the kernel keeps O's tile.
            let given = Problem::dense(Shape::new(1, 2048 / d, FP8_VT_PERMUTE_MAX_KEYS, d), Dtype::E4m3, Layout::Bhsd)
                .with_v_keys_contiguous();
            let c = wgmma_for(&given);
            assert_eq!((c.vt_producer, c.vt_given, c.o_staging), (true, true, OStaging::Tile), "hd{d}");
            let past =
                Problem::dense(Shape::new(1, 2048 / d, FP8_PERSISTENT_MAX_KEYS + 1, d), Dtype::E4m3, Layout::Bhsd);
            assert_eq!(wgmma_for(&past), fp8_default(d));
            // Unmasked persistent blocks past FP8_PERSISTENT_O_TILE_MAX_KEYS store O from
            // registers at hd64, and at hd128 past FP8_VT_PRODUCER_MAX_KEYS; the rest stage O in
            // its tile.
            let o_at =
                |sk| wgmma_for(&Problem::dense(Shape::new(1, 2048 / d, sk, d), Dtype::E4m3, Layout::Bhsd)).o_staging;
            let (regs_past_tile, regs_at_8k) = match d {
                64 => (OStaging::Registers, OStaging::Registers),
                128 => (OStaging::Tile, OStaging::Registers),
                _ => (OStaging::Tile, OStaging::Tile),
            };
            let (last_tile, first_past) = (FP8_PERSISTENT_O_TILE_MAX_KEYS, FP8_PERSISTENT_O_TILE_MAX_KEYS + 1);
            assert_eq!((o_at(last_tile), o_at(first_past)), (OStaging::Tile, regs_past_tile), "hd{d}");
            assert_eq!(o_at(FP8_PERSISTENT_MAX_KEYS), regs_at_8k, "hd{d}");
            // Causal problems stop earlier, by head dim (unequal causal tiles on static blocks).
            let causal_limit = fp8_persistent_max_keys(true, d);
            assert!((512..FP8_PERSISTENT_MAX_KEYS).contains(&causal_limit));
            let at = |sk| {
                wgmma_for(
                    &Problem::dense(Shape::new(1, 2048 / d, sk, d), Dtype::E4m3, Layout::Bhsd)
                        .with_causal(Causal::TopLeft),
                )
                .schedule
            };
            // hd64 then claims its causal tiles at every length, O from registers past
            // FP8_CLAIMED_O_TILE_MAX_KEYS; the others take the grid.
            let claimed = d <= FP8_CLAIMED_CAUSAL_MAX_HEAD_DIM;
            let after = if claimed { Schedule::Claimed } else { Schedule::Grid };
            assert_eq!((at(causal_limit), at(causal_limit + 1)), (Schedule::Persistent, after), "hd{d}");
            assert_eq!(at(16384), after, "hd{d}");
            let causal_o_at = |sk| {
                wgmma_for(
                    &Problem::dense(Shape::new(1, 2048 / d, sk, d), Dtype::E4m3, Layout::Bhsd)
                        .with_causal(Causal::TopLeft),
                )
                .o_staging
            };
            let claimed_regs = if claimed { OStaging::Registers } else { fp8_default(d).o_staging };
            let (last, past) = (FP8_CLAIMED_O_TILE_MAX_KEYS, FP8_CLAIMED_O_TILE_MAX_KEYS + 1);
            assert_eq!((causal_o_at(last), causal_o_at(past)), (fp8_default(d).o_staging, claimed_regs), "hd{d}");
            let short = Problem::dense(Shape::new(32, 2048 / d, 512, d), Dtype::E4m3, Layout::Bhsd)
                .with_causal(Causal::TopLeft);
            let c = wgmma_for(&short);
            // ...and up to hd128 transpose V in the kernel.
            let vt_producer = d <= FP8_VT_PRODUCER_MAX_HEAD_DIM;
            assert_eq!(c, WgmmaConfig { schedule: Schedule::Persistent, vt_producer, ..fp8_default(d) });
            // Every E4M3 plan is one the kernel takes.
            for config in [fp8_default(d), c] {
                let spec = KernelSpec { config: KernelConfig::Wgmma(config), dtype: Dtype::E4m3, head_dim: d };
                spec.validate(Arch::Sm90a).unwrap_or_else(|e| panic!("{}: {e}", spec.name()));
            }
        }
        assert!(fp8_default(128).q_in_regs && !fp8_default(64).q_in_regs && !fp8_default(256).q_in_regs);
    }

    #[test]
    fn e4m3_reads_a_v_given_transposed_as_it_is_and_every_other_kernel_refuses_it() {
        use crate::config::KernelSpec;
        use crate::problem::{Layout, Problem, Shape};
        for (d, sk) in [(64, 512), (128, 2048), (256, 512), (128, 4096), (256, 16384)] {
            let rows = Problem::dense(Shape::new(1, 2048 / d, sk, d), Dtype::E4m3, Layout::Bhsd);
            let given = rows.clone().with_v_keys_contiguous();
            // The plan for V in rows, V's keys permuted in the kernel up to
            // FP8_VT_PERMUTE_MAX_KEYS at every head dim (no raw ring), by a kernel first past them.
            let c = wgmma_for(&given);
            let in_kernel = sk <= FP8_VT_PERMUTE_MAX_KEYS;
            assert_eq!(c, WgmmaConfig { vt_given: true, vt_producer: in_kernel, ..wgmma_for(&rows) }, "hd{d} {sk}");
            let spec = KernelSpec { config: KernelConfig::Wgmma(c), dtype: Dtype::E4m3, head_dim: d };
            spec.validate(Arch::Sm90a).unwrap_or_else(|e| panic!("{}: {e}", spec.name()));
            assert_eq!(spec.transpose_kernel_name().is_some(), !in_kernel);
            assert!(spec.name().contains("_vg1"), "{}", spec.name());
            assert_eq!(KernelSpec::from_name(&spec.name()), Some(spec));
            assert!(spec.launch_needs(&given, H100_SMS, 1).is_ok());
            // Each kernel reads V one way: the problem's, or it says which lever fits.
            let e = spec.launch_needs(&rows, H100_SMS, 1).unwrap_err();
            assert!(e.contains("set vt_given=0"), "{e}");
            let natural = KernelSpec { config: KernelConfig::Wgmma(wgmma_for(&rows)), ..spec };
            let e = natural.launch_needs(&given, H100_SMS, 1).unwrap_err();
            assert!(e.contains("set vt_given=1"), "{e}");
            let mma8 = KernelSpec {
                config: crate::defaults::config(crate::config::Impl::Mma8, Arch::Sm89, Dtype::E4m3, d),
                ..spec
            };
            let e = mma8.launch_needs(&given, H100_SMS, 1).unwrap_err();
            assert!(e.contains("only wgmma reads"), "{e}");
        }
        // The lever is E4M3's.
        let sixteen = KernelSpec {
            config: KernelConfig::Wgmma(WgmmaConfig { vt_given: true, ..default(128) }),
            dtype: Dtype::Bf16,
            head_dim: 128,
        };
        assert!(sixteen.validate(Arch::Sm90a).unwrap_err().contains("vt_given=1"));
    }

    #[test]
    fn wgmma_is_persistent_without_a_mask_on_short_keys_up_to_hd128() {
        use crate::problem::{Layout, Problem, Shape};
        let p = Problem::dense(Shape::new(2, 16, 512, 128), Dtype::Bf16, Layout::Bhsd);
        assert!(wgmma_for(&p).schedule.persistent());
        assert!(wgmma_for(&Problem::dense(Shape::new(4, 32, 4096, 64), Dtype::Bf16, Layout::Bhsd))
            .schedule
            .persistent());
        // hd128 past 4k: persistent with the 176-key ring, O staged in two passes, the tail
        // split; one tile per block where the tiles are fewer than the SMs.
        let long = wgmma_for(&Problem::dense(Shape::new(1, 16, 16384, 128), Dtype::Bf16, Layout::Bhsd));
        assert_eq!(long, WgmmaConfig { schedule: Schedule::SplitTail, o_staging: OStaging::HalfTile, ..default(128) });
        assert_eq!(wgmma_for(&Problem::dense(Shape::new(1, 2, 8192, 128), Dtype::Bf16, Layout::Bhsd)), default(128));
        assert!(
            wgmma_for(&Problem::dense(Shape::new(16, 8, 1024, 256), Dtype::Bf16, Layout::Bhsd)).o_staging
                == OStaging::QRows
        );
        // Up to 1k keys two consumers and 128-key blocks; from 2k the head dim's consumers, and
        // still 128-key blocks (room for the TMA stores' staging tile).
        assert_eq!(wgmma_for(&p).block_n, 128);
        let c = wgmma_for(&Problem::dense(Shape::new(2, 16, 1024, 64), Dtype::Bf16, Layout::Bhsd));
        assert_eq!((c.block_n, c.consumer_warpgroups), (128, 2));
        let c = wgmma_for(&Problem::dense(Shape::new(8, 16, 2048, 128), Dtype::Bf16, Layout::Bhsd));
        assert_eq!((c.block_n, c.consumer_warpgroups, c.o_staging), (128, 2, OStaging::Tile));
        // hd64 (three consumers) stays persistent at every length.
        let long = wgmma_for(&Problem::dense(Shape::new(1, 32, 16384, 64), Dtype::Bf16, Layout::Bhsd));
        assert_eq!(long, WgmmaConfig { schedule: Schedule::SplitTail, rowsum_mma: true, ..default(64) });
        assert_eq!(long.consumer_warpgroups, 3);
        assert_eq!(
            crate::defaults::for_problem(Impl::Mma, Arch::Sm80, &p, H100_SMS),
            crate::defaults::config(Impl::Mma, Arch::Sm80, Dtype::F16, 128)
        );
    }

    #[test]
    fn short_unmasked_hd64_takes_three_consumers_where_their_rounds_pay() {
        use crate::problem::Shape;
        // 32,32,512: 3072 tiles of 192 rows are 24 rounds of 132 SMs, 24 x 1.31 = 31.4 against
        // 4096 tiles of 128 rows in 32 rounds: three. 4,16,512: 192 tiles (2 rounds, 2.62)
        // against 256 (2 rounds): two.
        assert!(three_consumers_pay(&Shape::new(32, 32, 512, 64), 132));
        assert!(three_consumers_pay(&Shape::new(16, 32, 1024, 64), 132));
        assert!(!three_consumers_pay(&Shape::new(4, 16, 512, 64), 132));
        // 8,16,512: 384 tiles (3 rounds, 3.93) against 512 (4 rounds): three, barely.
        assert!(three_consumers_pay(&Shape::new(8, 16, 512, 64), 132));
        let plan = |b, h, s| {
            wgmma_for(&crate::problem::Problem::dense(
                Shape::new(b, h, s, 64),
                Dtype::Bf16,
                crate::problem::Layout::Bhsd,
            ))
        };
        let three = plan(32, 32, 512);
        assert_eq!(
            (three.consumer_warpgroups, three.ring_test, three.block_n, three.schedule.persistent()),
            (3, true, 128, true)
        );
        assert_eq!(plan(4, 16, 512).consumer_warpgroups, 2);
        // hd128 has two either way; causal short problems keep two.
        let hd128 = Shape::new(32, 16, 512, 128);
        assert_eq!(
            wgmma_for(&crate::problem::Problem::dense(hd128, Dtype::Bf16, crate::problem::Layout::Bhsd))
                .consumer_warpgroups,
            2
        );
    }

    #[test]
    fn hd64_two_consumer_configs_test_the_ring() {
        use crate::problem::{Layout, Problem, Shape};
        let plan = |s, d, causal| {
            let mut p = Problem::dense(Shape::new(8, 16, s, d), Dtype::Bf16, Layout::Bhsd);
            p.causal = causal;
            wgmma_for(&p)
        };
        // Short hd64 problems, both masks: tested, with two consumers (causal) and with three
        // where their rounds pay (8,16,512 unmasked: see three_consumers_pay).
        for causal in [Causal::None, Causal::TopLeft] {
            for s in [512, 1024] {
                let c = plan(s, 64, causal);
                let consumers = if causal == Causal::None { 3 } else { 2 };
                assert!(c.ring_test && c.consumer_warpgroups == consumers, "{s} {causal:?}");
            }
        }
        // hd64 causal on claimed tiles (2k-8k, three consumers): tested; unmasked from 2k, and
        // every hd128 and hd256 config: not.
        assert!(plan(2048, 64, Causal::TopLeft).ring_test && plan(8192, 64, Causal::BottomRight).ring_test);
        assert!(!plan(2048, 64, Causal::None).ring_test && !plan(16384, 64, Causal::TopLeft).ring_test);
        assert!(!plan(1024, 128, Causal::None).ring_test && !plan(512, 128, Causal::TopLeft).ring_test);
        assert!(!plan(512, 256, Causal::None).ring_test);
        // The head dim's defaults leave it off.
        assert!([64, 128, 256].iter().all(|&d| !default(d).ring_test));
    }

    #[test]
    fn three_consumer_persistent_hd64_sums_the_rows_on_the_tensor_cores() {
        use crate::problem::{Layout, Problem, Shape};
        let plan = |b, s, d, causal| {
            let mut p = Problem::dense(Shape::new(b, 2048 / d, s, d), Dtype::Bf16, Layout::Bhsd);
            p.causal = causal;
            wgmma_for(&p)
        };
        // The fa3 rows: unmasked at every length (three consumers, persistent, split or not)
        // and causal on claimed tiles (2k-8k) take it.
        for s in [512, 1024, 2048, 4096, 8192, 16384] {
            let c = plan(16384 / s, s, 64, Causal::None);
            assert!(c.rowsum_mma && c.consumer_warpgroups == 3 && c.schedule.persistent(), "{s}");
        }
        for s in [2048, 4096, 8192] {
            let c = plan(16384 / s, s, 64, Causal::TopLeft);
            assert!(c.rowsum_mma && c.schedule == Schedule::Claimed, "{s}");
        }
        // Not: two consumers (short causal; short unmasked where three do not pay), one tile
        // per block (causal 16k), one consumer (a near-empty GPU), other head dims.
        assert!(!plan(32, 512, 64, Causal::TopLeft).rowsum_mma && !plan(16, 1024, 64, Causal::BottomRight).rowsum_mma);
        assert!(!wgmma_for(&Problem::dense(Shape::new(4, 16, 512, 64), Dtype::Bf16, Layout::Bhsd)).rowsum_mma);
        assert!(!plan(1, 16384, 64, Causal::TopLeft).rowsum_mma);
        assert!(!wgmma_for(&Problem::dense(Shape::new(1, 8, 512, 64), Dtype::Bf16, Layout::Bhsd)).rowsum_mma);
        for d in [128, 256] {
            assert!(
                !plan(16384 / 2048, 2048, d, Causal::None).rowsum_mma && !plan(8, 2048, d, Causal::TopLeft).rowsum_mma
            );
        }
        assert!([64, 128, 256].iter().all(|&d| !default(d).rowsum_mma));
    }

    #[test]
    fn unmasked_persistent_problems_split_the_tail_from_16_key_blocks_a_tile() {
        use crate::problem::{Layout, Problem, Shape};
        let split = |b, h, s, d| {
            wgmma_for(&Problem::dense(Shape::new(b, h, s, d), Dtype::Bf16, Layout::Bhsd)).schedule
                == Schedule::SplitTail
        };
        // 2048 keys are 16 blocks of 128: split; 1024 are 8: not (the pieces' cost measured more
        // than the idle round there); 2047 keys round up to 16 blocks.
        assert!(split(8, 32, 2048, 64) && split(4, 16, 4096, 128));
        assert!(split(1, 32, 16384, 64) && split(8, 32, 2047, 64));
        assert!(!split(16, 32, 1024, 64) && !split(32, 16, 512, 128));
        // hd128 past 4k keys counts 176-key blocks. Only on persistent blocks: not at hd256,
        // nor causal.
        assert!(split(1, 16, 16384, 128) && split(2, 16, 8192, 128));
        assert!(!split(4, 8, 4096, 256));
        let causal =
            Problem::dense(Shape::new(4, 32, 4096, 64), Dtype::Bf16, Layout::Bhsd).with_causal(Causal::TopLeft);
        assert_eq!(wgmma_for(&causal).schedule, Schedule::Claimed);
        // Past the kernel's 32-bit piece arithmetic (15.8M keys on 132 SMs): no split.
        assert!(split(1, 1, 1 << 16, 64) && !split(1, 1, 1 << 24, 64));
        // Decoding (1 or 4 queries, tiles of padding): persistent blocks, no split; from a whole
        // tile of queries, the split.
        for (sq, schedule) in [(1, Schedule::Persistent), (4, Schedule::Persistent), (128, Schedule::SplitTail)] {
            let decode =
                Problem::dense(Shape { b: 8, h: 32, hkv: 32, sq, sk: 8192, d: 128 }, Dtype::Bf16, Layout::Bhsd);
            assert_eq!(wgmma_for(&decode).schedule, schedule, "Sq={sq}");
        }
    }

    #[test]
    fn hd128_unmasked_problems_on_128_key_blocks_hold_q_in_registers() {
        use crate::problem::{Layout, Problem, Shape};
        let plan = |b, h, s, d, mask| {
            wgmma_for(&Problem::dense(Shape::new(b, h, s, d), Dtype::Bf16, Layout::Bhsd).with_causal(mask))
        };
        // The fa3 grid's hd128 rows up to 4k keys, static tiles or split tail: Q in registers.
        for s in [512, 1024, 2048, 4096] {
            let c = plan(16384 / s, 16, s, 128, Causal::None);
            assert!(c.q_in_regs && c.block_n == 128 && c.consumer_warpgroups == 2, "{s}: {c:?}");
        }
        // Not on the 176-key ring past 4k (no registers left), causal tiles, or other head dims.
        assert!(!plan(1, 16, 16384, 128, Causal::None).q_in_regs);
        assert!(!plan(8, 16, 2048, 128, Causal::TopLeft).q_in_regs);
        assert!(!plan(32, 32, 512, 64, Causal::TopLeft).q_in_regs && !plan(32, 32, 512, 64, Causal::None).q_in_regs);
        assert!(!plan(32, 8, 512, 256, Causal::None).q_in_regs);
        assert!([64, 128, 256].iter().all(|&d| !default(d).q_in_regs));
    }

    #[test]
    fn short_causal_problems_take_128_key_blocks_on_persistent_blocks() {
        use crate::problem::{Layout, Problem, Shape};
        let causal =
            |b, h, s, d| Problem::dense(Shape::new(b, h, s, d), Dtype::Bf16, Layout::Bhsd).with_causal(Causal::TopLeft);
        // hd64 up to 1k keys: 128-key blocks, 2 stages, persistent.
        let c = wgmma_for(&causal(16, 32, 1024, 64));
        assert_eq!((c.block_n, c.stages, c.schedule, c.consumer_warpgroups), (128, 2, Schedule::Persistent, 2));
        // hd128 keeps two stages, which leave room for the TMA stores' staging tile.
        let c = wgmma_for(&causal(32, 16, 512, 128));
        assert_eq!((c.block_n, c.stages, c.schedule, c.o_staging), (128, 2, Schedule::Persistent, OStaging::Tile));
        let c = wgmma_for(&causal(16, 16, 1024, 128));
        assert_eq!((c.stages, c.o_staging), (2, OStaging::Tile));
        // hd128 at 2k: 128-key blocks on persistent blocks with dynamic tiles.
        let c = wgmma_for(&causal(8, 16, 2048, 128).with_causal(Causal::BottomRight));
        assert_eq!((c.block_n, c.schedule), (128, Schedule::Claimed));
        // hd256 at 512 keys, both masks, and causal at 1k: 64-key blocks on persistent blocks,
        // O staged in two passes.
        let narrow =
            WgmmaConfig { block_n: 64, schedule: Schedule::Persistent, o_staging: OStaging::HalfTile, ..default(256) };
        for p in [causal(32, 8, 512, 256), causal(32, 8, 512, 256).with_causal(Causal::None), causal(16, 8, 1024, 256)]
        {
            assert_eq!(wgmma_for(&p), narrow);
        }
        // Causal at 2k: the same, claiming tiles dynamically.
        assert_eq!(wgmma_for(&causal(8, 8, 2048, 256)), WgmmaConfig { schedule: Schedule::Claimed, ..narrow });
        // hd256 unmasked from 1k: persistent 80-key blocks staging O in the Q rows, where the
        // tiles fill the SMs; causal from 4k: the default (one tile per block).
        let o_in_q = WgmmaConfig { schedule: Schedule::Persistent, o_staging: OStaging::QRows, ..default(256) };
        for s in [1024, 2048, 16384] {
            assert_eq!(wgmma_for(&causal(16384 / s, 8, s, 256).with_causal(Causal::None)), o_in_q, "{s}");
        }
        assert_eq!(wgmma_for(&causal(1, 8, 2048, 256).with_causal(Causal::None)), default(256));
        assert_eq!(wgmma_for(&causal(4, 8, 4096, 256)), default(256));
        assert_eq!(wgmma_for(&causal(2, 32, 16384, 64)), default(64));
        assert_eq!(wgmma_for(&causal(2, 8, 4096, 256)), default(256));
    }

    #[test]
    fn key_tables_take_the_first_row_at_or_above_the_head_dim() {
        assert_eq!(keys_for_head_dim(&SHORT_CAUSAL_MAX_KEYS, 64), 1024);
        assert_eq!(keys_for_head_dim(&SHORT_CAUSAL_MAX_KEYS, 96), 1024);
        assert_eq!(keys_for_head_dim(&DYNAMIC_CAUSAL_MAX_KEYS, 128), 4096);
        assert_eq!(keys_for_head_dim(&DYNAMIC_CAUSAL_MAX_KEYS, 256), 0);
    }

    #[test]
    fn mid_length_causal_problems_claim_their_tiles_dynamically() {
        use crate::problem::{Layout, Problem, Shape};
        let causal =
            |b, h, s, d| Problem::dense(Shape::new(b, h, s, d), Dtype::Bf16, Layout::Bhsd).with_causal(Causal::TopLeft);
        let dynamic = |c: WgmmaConfig| WgmmaConfig { schedule: Schedule::Claimed, ..c };
        // hd64 2k to 8k: the default (three consumers) on dynamic persistent blocks, testing the
        // ring, halving the last key block where a consumer's rows see none of its second half;
        // 16k one tile per block.
        let tested = WgmmaConfig { ring_test: true, rowsum_mma: true, half_last: true, ..dynamic(default(64)) };
        assert_eq!(wgmma_for(&causal(8, 32, 2048, 64)), tested);
        assert_eq!(wgmma_for(&causal(4, 32, 4096, 64)), tested);
        assert_eq!(wgmma_for(&causal(2, 32, 8192, 64)), tested);
        assert_eq!(wgmma_for(&causal(1, 32, 16384, 64)), default(64));
        // hd128 takes 128-key blocks (the 176-key ring leaves no room to stage O for TMA stores).
        assert_eq!(wgmma_for(&causal(4, 16, 4096, 128)), WgmmaConfig { block_n: 128, ..dynamic(default(128)) });
        // Past 4k keys, where the tiles fill the SMs: the 176-key ring, O staged in two passes;
        // fewer tiles (1,1,16384: 128) keep one tile per block.
        let wide = WgmmaConfig { o_staging: OStaging::HalfTile, ..dynamic(default(128)) };
        assert_eq!(wgmma_for(&causal(2, 16, 8192, 128)), wide);
        assert_eq!(wgmma_for(&causal(1, 16, 16384, 128).with_causal(Causal::BottomRight)), wide);
        assert_eq!(wgmma_for(&causal(1, 1, 16384, 128)), default(128));
        // Short causal problems keep the static order; unmasked problems never claim.
        assert_ne!(wgmma_for(&causal(16, 32, 1024, 64)).schedule, Schedule::Claimed);
        assert_ne!(wgmma_for(&causal(4, 32, 4096, 64).with_causal(Causal::None)).schedule, Schedule::Claimed);
        // The half last block is hd64's on claimed tiles only (two consumers on static tiles
        // lost with it; at hd128 ptxas serialises its wgmmas).
        assert!(!wgmma_for(&causal(16, 32, 1024, 64)).half_last && !wgmma_for(&causal(4, 16, 4096, 128)).half_last);
        assert!(!wgmma_for(&causal(1, 32, 16384, 64)).half_last);
    }

    #[test]
    fn every_planned_wgmma_config_fits_and_stores_by_tma() {
        use crate::problem::{Layout, Problem, Shape};
        // The fa3 grid's lengths and a few small grids, every head dim, every mask: whatever the
        // planner adapts, the config validates (its rings leave room for a staging tile where
        // persistent blocks need one of their own) and keeps the TMA stores; rings that leave
        // no room for a whole staging tile (hd128's 176 keys, hd256's 64 on persistent blocks)
        // stage O in two column passes.
        for d in [64, 128, 256] {
            for s in [128, 512, 1024, 2048, 4096, 8192, 16384] {
                for b in [1, 16384 / s] {
                    for mask in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
                        let p =
                            Problem::dense(Shape::new(b, 2048 / d, s, d), Dtype::Bf16, Layout::Bhsd).with_causal(mask);
                        let c = wgmma_for(&p);
                        let spec = KernelSpec { config: KernelConfig::Wgmma(c), dtype: Dtype::Bf16, head_dim: d };
                        let halved =
                            c.schedule.persistent() && c.o_staging != OStaging::QRows && (c.block_n == 176 || d == 256);
                        assert!(spec.validate(Arch::Sm90a).is_ok() && c.o_staging.tma_store(), "{p:?}: {c:?}");
                        assert_eq!(c.o_staging.passes(), if halved { 2 } else { 1 }, "{p:?}: {c:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_near_empty_gpu_gets_one_consumer_warpgroup_at_hd64() {
        use crate::problem::{Layout, Problem, Shape};
        // B=2, H=8, S=512: 64 tiles of 128 rows on 132 SMs.
        let p = Problem::dense(Shape::new(2, 8, 512, 64), Dtype::F16, Layout::Bhsd);
        let c = wgmma_for(&p);
        assert_eq!((c.consumer_warpgroups, c.pipeline, c.block_n), (1, Pipeline::Overlap, 128));
        assert_eq!(wgmma_for(&p.clone().with_causal(Causal::TopLeft)).consumer_warpgroups, 1);
        // B=4, H=8: 128 tiles, at least half the SMs: two consumers; hd128: not measured.
        assert_eq!(
            wgmma_for(&Problem::dense(Shape::new(4, 8, 512, 64), Dtype::F16, Layout::Bhsd)).consumer_warpgroups,
            2
        );
        assert_eq!(
            wgmma_for(&Problem::dense(Shape::new(1, 8, 512, 128), Dtype::F16, Layout::Bhsd)).consumer_warpgroups,
            2
        );
    }

    #[test]
    fn every_problem_default_passes_validate() {
        use crate::problem::{Layout, Problem, Shape};
        for d in [64, 128, 256] {
            for s in [128, 512, 1024, 2048, 4096, 16384] {
                for causal in [Causal::None, Causal::TopLeft] {
                    for (b, h) in [(1, 8), (4, 16), (32, 32)] {
                        let p = Problem::dense(Shape::new(b, h, s, d), Dtype::Bf16, Layout::Bhsd).with_causal(causal);
                        let spec =
                            KernelSpec { config: KernelConfig::Wgmma(wgmma_for(&p)), dtype: Dtype::Bf16, head_dim: d };
                        spec.validate(Arch::Sm90a)
                            .unwrap_or_else(|e| panic!("{} for {b},{h},{s},{d}: {e}", spec.name()));
                    }
                }
            }
        }
    }
}
