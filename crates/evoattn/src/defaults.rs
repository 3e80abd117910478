//! Default kernel configurations, each with the reason it was chosen. The planner starts from
//! these; the tuner's store overrides them per GPU and problem bucket.

use crate::arch::Arch;
use crate::config::{KernelConfig, Loads, MmaConfig, ReferenceConfig, SplitkvCombine, SplitkvConfig, WgmmaConfig};
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
/// warpgroup, 604 with overlap, 672 with ping-pong. Per-problem changes (persistent blocks, short causal and small-grid tiles): see
/// [`for_problem`].
/// - D=64: three consumer warpgroups (192 query rows) taking turns round robin, 128-key
///   tiles (S 64 registers, P 32, O 32 of the consumers' 160). A warpgroup's softmax is
///   MUFU-bound and takes as long as its GEMMs at hd64, so with two consumers the tensor
///   cores wait for it; with three it hides under two warpgroups' GEMMs. Lever sweep (graph
///   mode, 20 samples, fa3-grid rows, `bench/results/2026-11-22-s7-hd64-three-consumers.txt`):
///   against two consumers with 176-key tiles, 2k-16k unmasked -6 to -10% (persistent
///   blocks, 16k 3982 against 4240 µs, 552 TFLOP/s), causal 4k-16k -2 to -7% (one tile per
///   block). 176-key tiles spill with three consumers.
/// - D=128: 176-key tiles, as FlashAttention-3: 688 against 666 for 128 at 16k (S 88 + P 44
///   + O 64 registers of the consumers' 240); shared memory 208 KiB.
/// - D=256: 80-key tiles (O alone is 128 registers): 724 against 667 for 64 at 16k; 224 KiB.
/// - Every head dim: O leaves by TMA stores (`tma_store`), staged in the Q tile, or on
///   persistent blocks in a tile of their own (which is why those take 128-key rings, or
///   stage O in two column passes, [`for_problem`]). From registers, the epilogue was 15% of the consumers' stall samples at
///   hd128 S=512 (ncu source counters): 4-byte stores half-filling their sectors, and the next
///   tile waiting for them to drain. A/B against the registers or 16-byte stores (ABBA, graph,
///   `bench/results/2026-11-23-s10-tma-store-ab.txt`): hd128 512 -9.7/-7.9% (none/causal), 1k
///   -8.0%, 2k causal -5.8%, 16k -1.7/-0.9%; hd64 512-1k -0.5 to -1.7%, 4k -1.3/-1.6%, 16k
///   causal -1.2%; hd256 512 -3.0/-3.4%, 16k +1.3% (spreads overlap).
/// - `split_tail` off here: it needs persistent blocks, which [`for_problem`] chooses (and
///   with them the split where it measured faster).
/// - `o_passes` 1: one tile per block stages O in the Q tile, which has room for all of it.
/// - `lazy_rescale` off: measured (session 13, planner configs, graph, 30 samples,
///   `bench/results/2026-11-23-s13-lazy-rescale.txt`): hd64 512-2k +0.4 to +2.0% slower, hd128
///   1k/4k -0.3 to -1.1% but 16k +0.3/+0.7%, seed shapes within ±1%. Not adopted. It
///   trims the chain from P·V's completion to the next GEMM turn (an hd64 warp's 470
///   instructions a key block include 34 for the rescale), but moving work in that chain is
///   not a sure gain: running the exponentials under the warpgroup's own P·V measured 3-8%
///   slower (`bench/results/2026-11-23-s12-intra-wg-overlap-ab.txt`).
/// - `multicast` off, here and in [`for_problem`]: measured (session 22, the planner's
///   unmasked configs without the split tail, ABBA, graph,
///   `bench/results/2026-11-24-s22-multicast-ab.txt`): -1.3 to +4.0% where the planner has no
///   split tail either (hd64 1k +4.0%, hd128 512 +1.4%, hd256 512 +3.7%, 16k -1.3%), and +2.8
///   to +4.6% where it has (hd128 16k -0.5%). Halving the K/V bytes L2 sends does not pay:
///   every SM still takes the whole block in, and the pair's stages refill only when both
///   blocks released them.
/// - `q_in_regs` off here: these rings leave Q's fragments no registers (hd128's 176-key ring,
///   hd256 and hd64's three consumers spill with it); [`for_problem`] takes it where it fits and
///   measured faster ([`Q_IN_REGS_HEAD_DIM`]).
pub fn wgmma(head_dim: usize) -> WgmmaConfig {
    let (block_n, consumer_warpgroups) = match head_dim {
        d if d <= 64 => (128, 3),
        d if d <= 128 => (176, 2),
        _ => (80, 2),
    };
    WgmmaConfig {
        block_n,
        stages: 2,
        consumer_warpgroups,
        loads: Loads::Tma,
        warp_specialized: true,
        overlap: true,
        pingpong: true,
        tma_store: true,
        ..WgmmaConfig::BASE
    }
}

/// Most keys for which unmasked persistent `wgmma` blocks over [`PERSISTENT_ANY_KEYS_MAX_HEAD_DIM`]
/// take 128-key blocks; longer ones keep the head dim's 176-key ring, stage O for the TMA
/// stores in two column passes ([`WIDE_O_PASSES`]: the ring and a whole staging tile do not fit
/// together), and split the tail. The passes against O from registers (ABBA, graph, planner
/// configs, `bench/results/2026-11-24-s17-o-passes.txt`): 2,16,8192,128 -1.8%, 1,16,16384,128
/// -0.3%.
/// Persistent blocks without the split were 2% slower than one tile per block at hd128 16k;
/// with it, against one tile per block with TMA stores (ABBA, graph, 30 samples,
/// `bench/results/2026-11-23-s14-split-tail-wide.txt`): 2,16,8192,128 -2.4%, 1,16,16384,128
/// -2.3%; 4,16,8192,128 +0.3% (31.03 rounds: almost no tail). Not where the tiles are fewer
/// than the SMs: every tile would be cut, which measured +9% at 1,2,8192,128
/// (`bench/results/2026-11-23-s13-split-tail.txt`).
pub const PERSISTENT_MAX_KEYS: usize = 4096;
/// Largest head dim for which `wgmma` runs persistent blocks on unmasked problems.
pub const PERSISTENT_MAX_HEAD_DIM: usize = 128;
/// Largest head dim whose unmasked problems run persistent blocks at any length (three
/// consumers: 16k 3982 against 4148 µs with one tile per block).
pub const PERSISTENT_ANY_KEYS_MAX_HEAD_DIM: usize = 64;
/// Consumer warpgroups of the short problems' configs (short causal, short unmasked), which
/// were measured with two: against hd64's three, two fill more SMs with 128-row tiles (a
/// seed shape with B·H = 32 has 128 tiles of 128 rows, 96 of 192), and three on persistent
/// blocks in the static order lose on short causal rows (hd64 512/1k/2k: 190.5/346.5/559.9
/// against 143.5/211.6/353.3 µs); claiming tiles dynamically, three win at 2k (see
/// [`SHORT_CAUSAL_MAX_KEYS`]).
const SHORT_CONSUMER_WARPGROUPS: u32 = 2;
/// Time of one 192-row tile of three consumer warpgroups over one 128-row tile of two, on
/// short unmasked hd64 problems (persistent blocks, 128-key blocks, `ring_test`): where the
/// tiles make many rounds of the SMs, three consumers cost 1.31x a tile for 1.5x the rows,
/// because a third warpgroup's GEMMs hide the others' softmax. Measured (ABBA x2, graph,
/// H100, `bench/results/2026-11-24-s18-short-hd64.txt`): 32,32,512,64 178.45 against 181.68 µs
/// (24 rounds against 32: 1.309), 16,32,1024,64 312.05 against 318.64 (1.306). Where the
/// rounds are few, the rounding of each count decides: 4,16,512,64 (2 rounds either way)
/// 22.42 against 18.94 µs. See [`three_consumers_pay`].
const THREE_CONSUMER_TILE_COST: f64 = 1.31;
/// Largest head dim whose two-consumer configs (the short problems': [`SHORT_CONSUMER_WARPGROUPS`])
/// take `ring_test`. There a consumer's key block is one serial chain (its softmax, MUFU-bound,
/// does not hide under one other consumer's GEMMs), and the ring tests take the two barrier
/// waits off it: planner configs against themselves with the lever (ABBA, graph, 20 samples,
/// `bench/results/2026-11-24-s16-ring-test-ab.txt`): hd64 512 −2.8/−2.6%, 1k −3.9/−3.5%
/// (none/top-left). Where the tensor pipe binds instead it costs: hd64 2k-8k unmasked with three
/// consumers −1.0 to +1.6%, hd128 1k +1.2/+1.9%, 4k +1.3/−0.4%. hd64's causal problems on
/// claimed tiles (three consumers, [`DYNAMIC_CAUSAL_MAX_KEYS`]) take it too: against
/// themselves (ABBA x2, graph, H100, `bench/results/2026-11-24-s18-ring-test-causal.txt`):
/// 8,32,2048,64 −1.8/−2.1% (top-left/bottom-right), 4,32,4096,64 −2.0/−2.4%, 2,32,8192,64
/// −2.7/−2.5%, with disjoint spreads; 1,32,16384,64 (one tile per block) +0.4/−0.3%, not there.
/// The short unmasked problems keep it where they take three consumers
/// ([`three_consumers_pay`]): those were measured with it.
pub const RING_TEST_MAX_HEAD_DIM: usize = 64;
/// Most keys of a "short" causal problem, per head dim (64, 128): up to these, causal tiles
/// take 128-key blocks on persistent blocks. See [`for_problem`].
/// hd64 2k moved to the dynamic tiles of [`DYNAMIC_CAUSAL_MAX_KEYS`] with three consumers:
/// 8,32,2048,64 339.7/342.4 against 366.2/363.0 µs top-left, 339.7/340.0 against 360.4/359.3
/// bottom-right; at 1k and 512 they lose, 238.2 against 214.5 and 162.9 against 142.6 (graph,
/// ABBA by config, 30 samples, `bench/results/2026-11-23-s14-split-tail-wide.txt`).
pub const SHORT_CAUSAL_MAX_KEYS: [(usize, usize); 2] = [(64, 1024), (128, 1024)];
/// Most keys, per head dim (64, 128), for which causal problems longer than the short ones
/// ([`SHORT_CAUSAL_MAX_KEYS`]) run persistent blocks that claim their tiles from a counter
/// (`dynamic_tiles`). See [`for_problem`].
pub const DYNAMIC_CAUSAL_MAX_KEYS: [(usize, usize); 2] = [(64, 8192), (128, 4096)];
/// Largest head dim whose causal problems on claimed tiles ([`DYNAMIC_CAUSAL_MAX_KEYS`]) take
/// `half_last`. With three consumers (192-row tiles, 128-key blocks) the last key block of a
/// tile is empty or half empty for one or two of the three consumers. Against the planner's
/// configs (ABBA x2, graph, H100, `bench/results/2026-11-24-s21-half-last-ab.txt`):
/// 8,32,2048,64 -1.8%, 4,32,4096,64 -1.2%, disjoint spreads. Not on the short causal configs
/// (two consumers, static tiles): 512 +5.7%, 1k +3.4%. There one consumer's diagonal block is
/// halved, but the two consumers then run different copies of the block code at once, and the
/// kernel's code is 70% longer (3931 against 2321 instructions); its loop is 711 instructions
/// against 692. At hd128 on claimed tiles (168 registers with a 128-wide S and O; its short
/// static configs compile clean) and at hd256, ptxas serialises the wgmmas of the half steps
/// (the resource gate's C7511).
pub const HALF_LAST_MAX_HEAD_DIM: usize = 64;
/// Most keys for which unmasked persistent `wgmma` blocks take two consumer warpgroups instead
/// of the head dim's default (see [`for_problem`]).
pub const SHORT_UNMASKED_MAX_KEYS: usize = 1024;
/// Most keys for which head dims over [`PERSISTENT_MAX_HEAD_DIM`] take [`NARROW_BLOCK_N`]-key
/// blocks on persistent blocks, both masks (see [`for_problem`]).
pub const NARROW_MAX_KEYS_WIDE_HEADS: usize = 512;
/// Most keys for which causal problems at head dims over [`PERSISTENT_MAX_HEAD_DIM`] take
/// [`NARROW_BLOCK_N`]-key blocks on persistent blocks (see [`for_problem`]); past
/// [`NARROW_STATIC_CAUSAL_MAX_KEYS_WIDE_HEADS`] the blocks claim their tiles (`dynamic_tiles`).
/// 8,8,2048,256 against one tile per block of 80 keys: 222.0 against 225.1 µs (-1.4%, ABBA);
/// at 4k 400.2 against 390.4 in a sweep (`bench/results/2026-11-24-s17-o-passes.txt`).
pub const NARROW_CAUSAL_MAX_KEYS_WIDE_HEADS: usize = 2048;
/// Most keys for which the causal problems of [`NARROW_CAUSAL_MAX_KEYS_WIDE_HEADS`] keep the
/// static round robin: 32,8,512,256 107.2 against 109.9 µs with dynamic tiles, 16,8,1024,256
/// 140.2 against 140.7 (one sweep); at 2k 227.1 against 225.1.
pub const NARROW_STATIC_CAUSAL_MAX_KEYS_WIDE_HEADS: usize = 1024;
/// Column passes of O's own staging tile (`o_passes`) where persistent blocks hold a ring that
/// leaves no room for the whole tile: hd256's 64-key ring (263168 bytes with the whole tile,
/// 230400 with half) and hd128's 176-key ring (246784, 230400).
const WIDE_O_PASSES: u32 = 2;
/// The key block of short problems at head dims over [`PERSISTENT_MAX_HEAD_DIM`]: 512 keys
/// make 8 full blocks of 64, against 7 blocks of the default 80 whose last one holds 32 keys,
/// so 8.6% of the GEMM work is padding.
const NARROW_BLOCK_N: u32 = 64;
/// Largest head dim measured for one consumer warpgroup on a near-empty GPU.
pub const SMALL_GRID_MAX_HEAD_DIM: usize = 64;
/// Query rows of a two-consumer `wgmma` tile (two warpgroups of 64 rows): the unit the
/// small-grid rule in [`for_problem`] counts tiles in and was measured with, whatever the head
/// dim's default (hd64's three consumers take 192 rows).
const WGMMA_TILE_ROWS: usize = 128;
/// The key block of every persistent `wgmma` config and of small grids in [`for_problem`]:
/// against the 176 of hd128, it wastes less on a masked diagonal or tail block, cuts 512 keys
/// into whole blocks, and its ring leaves room for the TMA stores' staging tile (208 KiB of
/// 176-key ring and Q do not).
const SHORT_BLOCK_N: u32 = 128;
/// Fewest key blocks a tile needs for unmasked persistent `wgmma` blocks to split the tail
/// (`split_tail`): 2048 keys at [`SHORT_BLOCK_N`]. Where a tile is long, a piece's own costs
/// (its Q, the partial's round trip through global memory, the merge) are small against the
/// idle round it saves: graph mode, ABBA, planner configs (`bench/results/2026-11-23-s13-split-tail.txt`):
/// hd64 2k/4k/8k/16k -1.5/-2.6/-0.3/-4.4% (16k: the two runs without it differ by 3%), hd128
/// 2k/4k -0.5/-1.2%, and where tiles are few, 1,2,16384,64 -32% and 1,4,4096,64 -17%. Shorter
/// tiles lose: hd64 512 +10.4%, 1k +6.5%; hd128 512 +4.8%, 1k +1.2% (1k rows from a sequential
/// sweep). Of hd64 512's +10.4%, 3.4% is the merge code's presence alone (a
/// build whose scheduler had no tail); the rest is the pieces' own cost. Walking the pieces in
/// key order in 32-bit arithmetic, with the last piece skipping its partial's write, took
/// hd64 512 from 206.9 to 196.2 µs with the split (-5.2%), but without it the row takes 187-189
/// (`bench/results/2026-11-23-s14-split-tail-wide.txt`): 1k and shorter still do not split.
pub const SPLIT_TAIL_MIN_KEY_BLOCKS: usize = 16;

/// The default configuration of `imp` for one problem on a GPU with `sm_count` SMs: [`config`],
/// with `wgmma` adapted to the problem where it measured faster (H100, 2026-11-22, graph
/// mode, medians of 20-30 samples; docs/perf-log.md "short and causal tiles"):
/// - A grid under half the SMs (128-row tiles), hd <= 64: one consumer warpgroup (64-row
///   tiles, twice the blocks), 128-key blocks, no ping-pong: seed shapes B=1,H=8 and B=2,H=8
///   (S=512) 10.3 against 13.5 µs and 10.6 against 14.1.
/// - Causal, short (up to [`SHORT_CAUSAL_MAX_KEYS`]): 128-key blocks, persistent blocks. A
///   causal tile of a short problem has 1-8 key blocks, the diagonal one masked: smaller
///   blocks waste less on the diagonal, and the next tile's loads under this one's epilogue
///   fill the short main loop (measured with a third stage at hd64, since dropped: below). hd64 S=512/1k: 50.5,
///   65.0 against 64.7, 84.8 µs (2k, 100.0 against 123.0, now takes dynamic tiles); hd128 S=512/1k: 39.9, 47.7 (a third stage at
///   1k) against 48.6, 62.0. At hd128 1k two stages leave room for the TMA stores' staging
///   tile, which the third took: 144.8 against 158.8 µs (16,16,1024,128, graph). hd256 took
///   persistent blocks at 1k until TMA stores, whose staging tile does not fit beside its ring:
///   one tile per block with them, 150.9/151.8 against 156.8/156.7 µs (16,8,1024,256, two
///   sweeps, `bench/results/2026-11-23-s10-tma-store-sweeps.txt`). hd64 took a third stage
///   until the mask became one compare a score (session 20); since, two measure faster (ABBA
///   x4, graph, `bench/results/2026-11-24-s20-short-causal-levers.txt`): 32,32,512,64 -0.4%,
///   16,32,1024,64 -0.5%.
/// - hd256 up to [`NARROW_MAX_KEYS_WIDE_HEADS`] keys unmasked and [`NARROW_CAUSAL_MAX_KEYS_WIDE_HEADS`]
///   causal: 64-key blocks on persistent blocks, O staged for the TMA stores in two column
///   passes ([`WIDE_O_PASSES`]). One tile per block spends about a fifth of each tile's time
///   between tiles (8 rounds of 132 tiles at S=512 take 16.2 µs a round against about 12.6 in
///   a block's own marks), and persistent blocks with O from registers lost (163.5 against
///   140.8 µs). Against one tile per block with 64-key blocks (512) or the default's 80
///   (1k) (ABBA, graph, `bench/results/2026-11-24-s17-o-passes.txt`): 32,8,512,256 -6.5/-9.7%
///   (none/top-left), 16,8,1024,256 causal -7.7%; unmasked 1k -0.2%, 2k +2.6% (a sweep): not
///   there. Causal at 2k claims its tiles (see [`NARROW_CAUSAL_MAX_KEYS_WIDE_HEADS`]).
/// - hd256 unmasked past [`NARROW_MAX_KEYS_WIDE_HEADS`] keys, where tiles are at least the SMs:
///   persistent blocks on the head dim's 80-key ring with O staged in each consumer's Q rows
///   (`o_in_q`: neither a whole staging tile nor half fits beside that ring). Against one tile
///   per block (ABBA x2, graph, `bench/results/2026-11-24-s17-o-passes.txt`): 16,8,1024,256 /
///   8,8,2048,256 / 4,8,4096,256 / 2,8,8192,256 -0.6/-0.6/-0.6/-0.7%, 1,8,16384,256 -3.3%
///   (spreads 2671-2724 against 2708-2812 µs). At 512 keys the 64-key blocks with the staging
///   passes stay ahead (131.4 against 142.2 µs): there each tile's Q load, which `o_in_q` waits
///   for at every tile's start, is a larger share. Causal problems keep the rules above: at 2k
///   one sweep read 222.0 against 224.0 µs, within the spread; static tiles lose at 4k (526.2
///   against 385.9: causal tiles differ in length).
/// - Causal past the short ones (hd64 2k), up to [`DYNAMIC_CAUSAL_MAX_KEYS`] (hd64 8k, hd128 4k):
///   128-key blocks on persistent blocks that claim their tiles from a counter, longest first
///   (`dynamic_tiles`), so the next tile's loads overlap this one's end and a block that finishes early takes the
///   next tile. Against one tile per block (graph, ABBA, fa3 rows, two machines,
///   `bench/results/2026-11-23-s9-dynamic-tiles-ab.txt`): hd64 4k -4.3/-4.5%; hd128 2k
///   -4.0/-5.6%, 4k -1.8/-3.2%. hd64 8k read -1.6/+0.3% then, and -2.0% and -2.0/-1.7%
///   (top-left/bottom-right) in two sweeps of session 14 on two machines (ABBA by config,
///   `bench/results/2026-11-23-s14-split-tail-wide.txt`). Longer problems do not gain (hd64 16k
///   +0.3% and +0.4%; hd128 8k/16k +0.5/+1.3% with O from registers, but see the next rule), a tile's end being a small share of it, nor does hd256 (+1.4
///   to +2.2% at 2k-16k with O from registers; 2k gains on 64-key blocks with the staging
///   passes, see [`NARROW_CAUSAL_MAX_KEYS_WIDE_HEADS`]), nor the short problems against their static persistent blocks
///   (hd64 512/1k +13/+3.4%). hd128 took 128-key blocks up to 2k (87.6 against 90.6 µs at
///   2k, one tile per block) and 176 at 4k until TMA stores; with them 128 also at 4k, 422.5
///   against 446.8 µs (176-key blocks from registers).
/// - hd128 causal past those keys, where the tiles fill the SMs: persistent blocks that claim
///   their tiles on the head dim's 176-key ring, O staged for the TMA stores in two column
///   passes ([`WIDE_O_PASSES`]). Against one tile per block (ABBA x2, graph, H200,
///   `bench/results/2026-11-24-s18-dynamic-wide.txt`): 2,16,8192,128 -2.3/-2.3%
///   (top-left/bottom-right), 1,16,16384,128 -0.7/-0.6%, 1,32,16384,128 -1.3/-6.0% (spreads
///   of 9%). At 4k it loses to the 128-key blocks above (432.0 against 423.0 µs, one sweep).
/// - Unmasked, hd <= [`PERSISTENT_MAX_HEAD_DIM`]: persistent
///   blocks, faster at every S measured (hd64: +29% at S=512, +14% at 1k, +4% at 4k; hd128:
///   +15%, +8%, +1.5%), but 2% slower at 16k until the split tail (past
///   [`PERSISTENT_MAX_KEYS`] at hd128, see there); hd256 slower at S <= 1k (-7%, -4%), even
///   at 4k, with O from registers (for its short problems see above).
///   Longer causal problems keep one tile per block, longest first from the grid: persistent
///   blocks lost at hd128 S=16k (448 against 687 TFLOP/s with a head's tiles in order; with
///   the alternating order 640 against 673, and +3.5% at 4k).
/// - Those persistent blocks take 128-key blocks, except hd128 past [`PERSISTENT_MAX_KEYS`]. Up to [`SHORT_UNMASKED_MAX_KEYS`], with two
///   consumer warpgroups: 4 blocks for 512 keys where 176-key blocks take 3 with the last one
///   masked. 1-4% faster on every shape measured (graph mode, 20 samples,
///   `bench/results/2026-11-22-s6-*-lever-sweep.txt`): hd64 S=512 188.2 against 191.4 µs, 1k
///   329.3 against 332.2; hd128 145.1 against 149.4, 235.6 against 239.6; seed shapes
///   4,16,512,64 20.4 against 21.3, 8,16,512,64 33.3 against 33.8. At hd128 2k-4k the
///   176-key ring left no room for the TMA stores' staging tile: with 128-key blocks and TMA
///   stores 401.5/774.1 µs against 430.6/807.1 (8,16,2048,128 and 4,16,4096,128). hd64 keeps
///   its three consumers there where their 192-row tiles make enough rounds of the SMs
///   ([`three_consumers_pay`]): the fa3 rows at 512 and 1k keys.
/// - hd64's two-consumer configs (short causal, short unmasked) and its causal problems on
///   claimed tiles test the next key block's ring barriers during the softmax (`ring_test`).
///   See [`RING_TEST_MAX_HEAD_DIM`].
/// - Those persistent blocks cut the last round's tiles into runs of key blocks (`split_tail`)
///   when a tile has at least [`SPLIT_TAIL_MIN_KEY_BLOCKS`] key blocks. See that constant.
/// - hd128's on 128-key blocks hold Q in registers (`q_in_regs`). See [`Q_IN_REGS_HEAD_DIM`].
pub fn for_problem(
    imp: crate::config::Impl,
    arch: Arch,
    problem: &crate::problem::Problem,
    sm_count: u32,
) -> KernelConfig {
    let shape = &problem.shape;
    let KernelConfig::Wgmma(c) = config(imp, arch, shape.d) else {
        return config(imp, arch, shape.d);
    };
    let tiles = shape.b * shape.h * shape.sq.div_ceil(WGMMA_TILE_ROWS);
    let causal = problem.causal != Causal::None;
    let short_causal_keys = keys_for_head_dim(&SHORT_CAUSAL_MAX_KEYS, shape.d);
    let dynamic_causal_keys = keys_for_head_dim(&DYNAMIC_CAUSAL_MAX_KEYS, shape.d);
    // hd128 past 4k keys keeps its 176-key ring on persistent blocks, for the split tail; with
    // fewer tiles than SMs there is no whole round, and the split would only cut every tile.
    let wide_ring = shape.sk > PERSISTENT_MAX_KEYS && shape.d > PERSISTENT_ANY_KEYS_MAX_HEAD_DIM;
    let narrow_keys = if causal { NARROW_CAUSAL_MAX_KEYS_WIDE_HEADS } else { NARROW_MAX_KEYS_WIDE_HEADS };
    let config = if 2 * tiles < sm_count as usize && shape.d <= SMALL_GRID_MAX_HEAD_DIM {
        WgmmaConfig { consumer_warpgroups: 1, pingpong: false, block_n: SHORT_BLOCK_N, ..c }
    } else if shape.d > PERSISTENT_MAX_HEAD_DIM && shape.sk <= narrow_keys {
        let dynamic_tiles = causal && shape.sk > NARROW_STATIC_CAUSAL_MAX_KEYS_WIDE_HEADS;
        WgmmaConfig { block_n: NARROW_BLOCK_N, persistent: true, dynamic_tiles, o_passes: WIDE_O_PASSES, ..c }
    } else if !causal && shape.d > PERSISTENT_MAX_HEAD_DIM && tiles >= sm_count as usize {
        // Past the narrow keys (the branch above took the shorter ones).
        WgmmaConfig { persistent: true, o_in_q: true, ..c }
    } else if causal && shape.sk <= short_causal_keys {
        WgmmaConfig {
            block_n: SHORT_BLOCK_N,
            persistent: true,
            consumer_warpgroups: SHORT_CONSUMER_WARPGROUPS,
            ring_test: shape.d <= RING_TEST_MAX_HEAD_DIM,
            ..c
        }
    } else if causal && shape.sk <= dynamic_causal_keys {
        let ring_test = shape.d <= RING_TEST_MAX_HEAD_DIM;
        let half_last = shape.d <= HALF_LAST_MAX_HEAD_DIM;
        WgmmaConfig { block_n: SHORT_BLOCK_N, persistent: true, dynamic_tiles: true, ring_test, half_last, ..c }
    } else if causal && wide_ring && shape.d <= PERSISTENT_MAX_HEAD_DIM && tiles >= sm_count as usize {
        WgmmaConfig { persistent: true, dynamic_tiles: true, o_passes: WIDE_O_PASSES, ..c }
    } else if !causal && shape.d <= PERSISTENT_MAX_HEAD_DIM && !(wide_ring && tiles < sm_count as usize) {
        let base = if wide_ring {
            WgmmaConfig { o_passes: WIDE_O_PASSES, ..c }
        } else {
            let short = shape.sk <= SHORT_UNMASKED_MAX_KEYS;
            let two = short && !(c.consumer_warpgroups == 3 && three_consumers_pay(shape, sm_count as usize));
            let consumer_warpgroups = if two { SHORT_CONSUMER_WARPGROUPS } else { c.consumer_warpgroups };
            let ring_test = short && shape.d <= RING_TEST_MAX_HEAD_DIM;
            WgmmaConfig { block_n: SHORT_BLOCK_N, consumer_warpgroups, ring_test, ..c }
        };
        let split_tail = shape.sk.div_ceil(base.block_n as usize) >= SPLIT_TAIL_MIN_KEY_BLOCKS
            && base.split_tail_fits(shape.sk, sm_count as usize);
        WgmmaConfig { persistent: true, split_tail, ..base }
    } else {
        c
    };
    KernelConfig::Wgmma(WgmmaConfig {
        rowsum_mma: rowsum_mma_pays(&config, shape.d),
        q_in_regs: q_in_regs_pays(&config, shape.d, causal),
        ..config
    })
}

/// The head dim whose unmasked persistent configs on 128-key blocks with two
/// consumers (hd128 up to [`PERSISTENT_MAX_KEYS`]) hold Q in registers for Q·Kᵀ (`q_in_regs`):
/// a fifth fewer shared-memory operand reads a key block for 32 registers a consumer thread,
/// which those kernels have (168 either way, no spill). Against the same configs without it
/// (ABBA x2, graph, H100, `bench/results/2026-11-24-s23-q-in-regs-ab.txt`): 32,16,512,128
/// −0.5%, 16,16,1024,128 −1.3%, 8,16,2048,128 −0.7%, 4,16,4096,128 −0.6%, disjoint spreads.
/// Not elsewhere:
/// - causal hd128 512-4k: +0.4/+0.2/+0.1/−0.1%, within the spreads;
/// - hd64 with two consumers (512 causal, static tiles): +5.9%;
/// - hd128's 176-key ring, hd256 and hd64 with three consumers: 96 to 256 bytes of spills.
pub const Q_IN_REGS_HEAD_DIM: usize = 128;

/// Whether a planner config takes `q_in_regs` (see [`Q_IN_REGS_HEAD_DIM`]).
fn q_in_regs_pays(c: &WgmmaConfig, head_dim: usize, causal: bool) -> bool {
    head_dim == Q_IN_REGS_HEAD_DIM
        && !causal
        && c.persistent
        && c.block_n == SHORT_BLOCK_N
        && c.consumer_warpgroups == SHORT_CONSUMER_WARPGROUPS
}

/// Consumer warpgroups with which `rowsum_mma` (row sums on the tensor cores) pays on
/// persistent hd64 blocks: with three, a key block's 480 instructions per warp bind and the
/// tensor pipe has room for 12.5% more P·V; with two, its GEMMs are what hides the softmax.
/// Against the same configs without it (ABBA, graph, H100,
/// `bench/results/2026-11-24-s19-rowsum-mma-ab.txt`): three consumers, causal on claimed tiles
/// 8,32,2048,64 / 4,32,4096,64 / 2,32,8192,64 -1.7/-2.3/-1.8%; unmasked 32,32,512,64 /
/// 16,32,1024,64 / 4,16,512,64 -1.3/-2.8/-1.0%, 2k-16k with the split tail -0.8/-0.6/-1.2/-0.5%;
/// two consumers (short causal, static) 512/1k +2.1/+3.1%; one tile per block (1,32,16384,64
/// causal) +0.2%; one consumer (1,8,512,64) +0.6%.
const ROWSUM_MMA_CONSUMER_WARPGROUPS: u32 = 3;

/// Whether a planner config takes `rowsum_mma` (see [`ROWSUM_MMA_CONSUMER_WARPGROUPS`]).
fn rowsum_mma_pays(c: &WgmmaConfig, head_dim: usize) -> bool {
    head_dim == crate::config::ROWSUM_MMA_HEAD_DIM
        && c.persistent
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

/// Share of the L2 cache, in percent, that the K and V of one section of heads may fill under
/// the causal `wgmma` grid order ([`crate::plan::head_group`]): the blocks running at once read
/// every key of their section's heads. 32% of the H100's 50 MiB is 16 MiB. Against 64% (H100,
/// causal fa3 rows, graph mode, each against heads one after another): equal at hd256 2k-8k
/// and hd64; faster at hd128 2k (-1.3% against +2.1%), 4k (-2.7 against -1.7) and 8k (-2.9
/// against -2.2).
pub const SCHEDULER_L2_KV_PERCENT: usize = 32;

/// Deepest K/V ring the `splitkv` default takes with the `mma` default's key tiles (hd256, the
/// 99 KiB parts): three tiles in flight while one is computed. A cap, not a measured optimum:
/// the sweeps measured 2-4 stages of 64-key tiles at hd128 only, where 4 was best.
pub const SPLITKV_MAX_DEFAULT_STAGES: u32 = 4;
/// The `splitkv` default's key tile where two stages of it fit: 32 keys per key warp.
pub const SPLITKV_WIDE_BLOCK_N: u32 = 128;
/// Warps of a default `splitkv` block: as many as the 64-row `mma` tile has, spent on key
/// slices of one 16-row tile.
const SPLITKV_WARPS: u32 = 4;

/// The `splitkv` default for a head dim on an arch, for decoding (few packed rows).
///
/// - 16 packed rows (one `mma` row group) with 4 key warps, each taking a quarter of every key
///   tile: decoding has 1-8 packed rows at Sq = 1 (Sq × group), so a 64-row tile would do
///   4-64× the MMA work and hold 4× the Q tile in shared memory, and one warp alone would
///   issue a whole tile's loads. More packed rows take more 16-row tiles, not wider ones: at
///   Sq=4 with GQA 8:1 (32 rows) two 16-row tiles per KV head took 54.4 µs against 71.4 for
///   one 32-row tile with 2 key warps (1,32,4,128,4,32768); the tiles of one KV head read the
///   same keys at the same time, so the second read hits L2.
/// - 128-key tiles, two stages, where they fit (hd64, hd128 on sm_80/sm_90): each warp's
///   online-softmax bookkeeping (max, rescale, shuffles) is per tile, so wider tiles spend
///   fewer instructions per byte. Otherwise the `mma` default's key tiles with the deepest
///   ring up to [`SPLITKV_MAX_DEFAULT_STAGES`] that fits. H100, bf16 hd128, graph mode, one
///   wave (`bench/results/2026-11-22-s4-splitkv-sweep.txt`): 128 keys × 2 stages was fastest
///   or within 1% on 8 of 9 decode shapes (1,32,1,128,4,32768: 47.6 µs against 48.2 with 64
///   keys × 4 stages and 53.2 with 64 × 3; Sq=4: 54.4 against 71.7).
/// - Q in registers follows the `mma` default of the head dim.
/// - splits = 0: the planner chooses from the problem, the SM count and the occupancy.
/// - combine fused into the last split of each tile: one launch per call instead of two. With
///   64-key tiles a second kernel measured within 3% of it on 8 of 9 decode shapes and faster
///   at Sq=4 (57.7 against 70.8 µs); not yet measured against the 128-key default.
/// - Hopper (sm_90, sm_90a): K/V tiles by TMA, one thread issuing 16 KiB boxes on an mbarrier
///   ring, instead of every thread's 16-byte cp.async copies. H100, same sweep: faster on all
///   9 decode shapes, 3-14% (1,32,1,128,4,32768: 44.9 against 48.0 µs; Sq=4: 46.9 against
///   54.5); the unpadded swizzled tiles also leave more shared memory for stages.
pub fn splitkv(arch: Arch, head_dim: usize) -> SplitkvConfig {
    use crate::config::{KernelSpec, MMA_K, MMA_ROWS_PER_WARP};
    let MmaConfig { block_n: mma_block_n, q_in_regs, .. } = mma(arch, head_dim);
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

    fn wgmma_for(p: &crate::problem::Problem) -> WgmmaConfig {
        match for_problem(Impl::Wgmma, Arch::Sm90a, p, H100_SMS) {
            KernelConfig::Wgmma(c) => c,
            _ => unreachable!(),
        }
    }

    const H100_SMS: u32 = 132;

    #[test]
    fn wgmma_is_persistent_without_a_mask_on_short_keys_up_to_hd128() {
        use crate::problem::{Layout, Problem, Shape};
        let p = Problem::dense(Shape::new(2, 16, 512, 128), Dtype::Bf16, Layout::Bhsd);
        assert!(wgmma_for(&p).persistent);
        assert!(wgmma_for(&Problem::dense(Shape::new(4, 32, 4096, 64), Dtype::Bf16, Layout::Bhsd)).persistent);
        // hd128 past 4k: persistent with the 176-key ring, O staged in two passes, the tail
        // split; one tile per block where the tiles are fewer than the SMs.
        let long = wgmma_for(&Problem::dense(Shape::new(1, 16, 16384, 128), Dtype::Bf16, Layout::Bhsd));
        assert_eq!(long, WgmmaConfig { persistent: true, o_passes: 2, split_tail: true, ..wgmma(128) });
        assert_eq!(wgmma_for(&Problem::dense(Shape::new(1, 2, 8192, 128), Dtype::Bf16, Layout::Bhsd)), wgmma(128));
        assert!(wgmma_for(&Problem::dense(Shape::new(16, 8, 1024, 256), Dtype::Bf16, Layout::Bhsd)).o_in_q);
        // Up to 1k keys two consumers and 128-key blocks; from 2k the head dim's consumers, and
        // still 128-key blocks (room for the TMA stores' staging tile).
        assert_eq!(wgmma_for(&p).block_n, 128);
        let c = wgmma_for(&Problem::dense(Shape::new(2, 16, 1024, 64), Dtype::Bf16, Layout::Bhsd));
        assert_eq!((c.block_n, c.consumer_warpgroups), (128, 2));
        let c = wgmma_for(&Problem::dense(Shape::new(8, 16, 2048, 128), Dtype::Bf16, Layout::Bhsd));
        assert_eq!((c.block_n, c.consumer_warpgroups, c.tma_store), (128, 2, true));
        // hd64 (three consumers) stays persistent at every length.
        let long = wgmma_for(&Problem::dense(Shape::new(1, 32, 16384, 64), Dtype::Bf16, Layout::Bhsd));
        assert_eq!(long, WgmmaConfig { persistent: true, split_tail: true, rowsum_mma: true, ..wgmma(64) });
        assert_eq!(long.consumer_warpgroups, 3);
        assert_eq!(for_problem(Impl::Mma, Arch::Sm80, &p, H100_SMS), config(Impl::Mma, Arch::Sm80, 128));
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
        assert_eq!((three.consumer_warpgroups, three.ring_test, three.block_n, three.persistent), (3, true, 128, true));
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
        assert!([64, 128, 256].iter().all(|&d| !wgmma(d).ring_test));
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
            assert!(c.rowsum_mma && c.consumer_warpgroups == 3 && c.persistent, "{s}");
        }
        for s in [2048, 4096, 8192] {
            let c = plan(16384 / s, s, 64, Causal::TopLeft);
            assert!(c.rowsum_mma && c.dynamic_tiles, "{s}");
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
        assert!([64, 128, 256].iter().all(|&d| !wgmma(d).rowsum_mma));
    }

    #[test]
    fn unmasked_persistent_problems_split_the_tail_from_16_key_blocks_a_tile() {
        use crate::problem::{Layout, Problem, Shape};
        let plan = |b, h, s, d| wgmma_for(&Problem::dense(Shape::new(b, h, s, d), Dtype::Bf16, Layout::Bhsd));
        // 2048 keys are 16 blocks of 128: split; 1024 are 8: not (the pieces' cost measured more
        // than the idle round there); 2047 keys round up to 16 blocks.
        assert!(plan(8, 32, 2048, 64).split_tail && plan(4, 16, 4096, 128).split_tail);
        assert!(plan(1, 32, 16384, 64).split_tail && plan(8, 32, 2047, 64).split_tail);
        assert!(!plan(16, 32, 1024, 64).split_tail && !plan(32, 16, 512, 128).split_tail);
        // hd128 past 4k keys counts 176-key blocks. Only on persistent blocks: not at hd256,
        // nor causal.
        assert!(plan(1, 16, 16384, 128).split_tail && plan(2, 16, 8192, 128).split_tail);
        assert!(!plan(4, 8, 4096, 256).split_tail);
        let causal =
            Problem::dense(Shape::new(4, 32, 4096, 64), Dtype::Bf16, Layout::Bhsd).with_causal(Causal::TopLeft);
        assert!(!wgmma_for(&causal).split_tail);
        // Past the kernel's 32-bit piece arithmetic (15.8M keys on 132 SMs): no split.
        assert!(plan(1, 1, 1 << 16, 64).split_tail && !plan(1, 1, 1 << 24, 64).split_tail);
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
        assert!([64, 128, 256].iter().all(|&d| !wgmma(d).q_in_regs));
    }

    #[test]
    fn short_causal_problems_take_128_key_blocks_on_persistent_blocks() {
        use crate::problem::{Layout, Problem, Shape};
        let causal =
            |b, h, s, d| Problem::dense(Shape::new(b, h, s, d), Dtype::Bf16, Layout::Bhsd).with_causal(Causal::TopLeft);
        // hd64 up to 1k keys: 128-key blocks, 2 stages, persistent.
        let c = wgmma_for(&causal(16, 32, 1024, 64));
        assert_eq!((c.block_n, c.stages, c.persistent, c.consumer_warpgroups), (128, 2, true, 2));
        // hd128 keeps two stages, which leave room for the TMA stores' staging tile.
        let c = wgmma_for(&causal(32, 16, 512, 128));
        assert_eq!((c.block_n, c.stages, c.persistent, c.tma_store), (128, 2, true, true));
        let c = wgmma_for(&causal(16, 16, 1024, 128));
        assert_eq!((c.stages, c.tma_store), (2, true));
        // hd128 at 2k: 128-key blocks on persistent blocks with dynamic tiles.
        let c = wgmma_for(&causal(8, 16, 2048, 128).with_causal(Causal::BottomRight));
        assert_eq!((c.block_n, c.persistent, c.dynamic_tiles), (128, true, true));
        // hd256 at 512 keys, both masks, and causal at 1k: 64-key blocks on persistent blocks,
        // O staged in two passes.
        let narrow = WgmmaConfig { block_n: 64, persistent: true, o_passes: 2, ..wgmma(256) };
        for p in [causal(32, 8, 512, 256), causal(32, 8, 512, 256).with_causal(Causal::None), causal(16, 8, 1024, 256)]
        {
            assert_eq!(wgmma_for(&p), narrow);
        }
        // Causal at 2k: the same, claiming tiles dynamically.
        assert_eq!(wgmma_for(&causal(8, 8, 2048, 256)), WgmmaConfig { dynamic_tiles: true, ..narrow });
        // hd256 unmasked from 1k: persistent 80-key blocks staging O in the Q rows, where the
        // tiles fill the SMs; causal from 4k: the default (one tile per block).
        let o_in_q = WgmmaConfig { persistent: true, o_in_q: true, ..wgmma(256) };
        for s in [1024, 2048, 16384] {
            assert_eq!(wgmma_for(&causal(16384 / s, 8, s, 256).with_causal(Causal::None)), o_in_q, "{s}");
        }
        assert_eq!(wgmma_for(&causal(1, 8, 2048, 256).with_causal(Causal::None)), wgmma(256));
        assert_eq!(wgmma_for(&causal(4, 8, 4096, 256)), wgmma(256));
        assert_eq!(wgmma_for(&causal(2, 32, 16384, 64)), wgmma(64));
        assert_eq!(wgmma_for(&causal(2, 8, 4096, 256)), wgmma(256));
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
        let dynamic = |c: WgmmaConfig| WgmmaConfig { persistent: true, dynamic_tiles: true, ..c };
        // hd64 2k to 8k: the default (three consumers) on dynamic persistent blocks, testing the
        // ring, halving the last key block where a consumer's rows see none of its second half;
        // 16k one tile per block.
        let tested = WgmmaConfig { ring_test: true, rowsum_mma: true, half_last: true, ..dynamic(wgmma(64)) };
        assert_eq!(wgmma_for(&causal(8, 32, 2048, 64)), tested);
        assert_eq!(wgmma_for(&causal(4, 32, 4096, 64)), tested);
        assert_eq!(wgmma_for(&causal(2, 32, 8192, 64)), tested);
        assert_eq!(wgmma_for(&causal(1, 32, 16384, 64)), wgmma(64));
        // hd128 takes 128-key blocks (the 176-key ring leaves no room to stage O for TMA stores).
        assert_eq!(wgmma_for(&causal(4, 16, 4096, 128)), WgmmaConfig { block_n: 128, ..dynamic(wgmma(128)) });
        // Past 4k keys, where the tiles fill the SMs: the 176-key ring, O staged in two passes;
        // fewer tiles (1,1,16384: 128) keep one tile per block.
        let wide = WgmmaConfig { o_passes: 2, ..dynamic(wgmma(128)) };
        assert_eq!(wgmma_for(&causal(2, 16, 8192, 128)), wide);
        assert_eq!(wgmma_for(&causal(1, 16, 16384, 128).with_causal(Causal::BottomRight)), wide);
        assert_eq!(wgmma_for(&causal(1, 1, 16384, 128)), wgmma(128));
        // Short causal problems keep the static order; unmasked problems never claim.
        assert!(!wgmma_for(&causal(16, 32, 1024, 64)).dynamic_tiles);
        assert!(!wgmma_for(&causal(4, 32, 4096, 64).with_causal(Causal::None)).dynamic_tiles);
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
                        let halved = c.persistent && !c.o_in_q && (c.block_n == 176 || d == 256);
                        assert!(spec.validate(Arch::Sm90a).is_ok() && c.tma_store, "{p:?}: {c:?}");
                        assert_eq!(c.o_passes, if halved { 2 } else { 1 }, "{p:?}: {c:?}");
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
        assert_eq!((c.consumer_warpgroups, c.pingpong, c.block_n), (1, false, 128));
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

    #[test]
    fn splitkv_loads_by_tma_on_hopper_only() {
        for arch in Arch::ALL {
            let hopper = matches!(arch, Arch::Sm90 | Arch::Sm90a);
            for d in [64, 128, 256] {
                let c = splitkv(arch, d);
                assert_eq!(c.loads == Loads::Tma, hopper, "{arch} d{d}");
            }
        }
        // hd128 on Hopper: 128-key tiles, two stages, four key warps of 32 keys.
        let c = splitkv(Arch::Sm90a, 128);
        assert_eq!((c.block_m, c.block_n, c.stages, c.key_warps), (16, 128, 2, 4));
        // hd256: two 128-key stages of unpadded K and V (256 KiB) do not fit; 64-key tiles do.
        let c = splitkv(Arch::Sm90a, 256);
        assert_eq!((c.block_n, c.stages), (64, 3));
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
