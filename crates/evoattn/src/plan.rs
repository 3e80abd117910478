//! The planner: which implementation and configuration run a problem. One rule, written here
//! with its reason, until the tuner's store overrides it.

use crate::arch::Arch;
use crate::config::{Impl, KernelConfig, KernelSpec, SplitkvConfig};
use crate::problem::Problem;
use std::fmt;

/// Environment variable that overrides `--impl auto`.
pub const IMPL_ENV: &str = "EVOATTN_IMPL";

/// What the user asked for: a named implementation, or the planner's choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImplChoice {
    Auto,
    Fixed(Impl),
}

impl ImplChoice {
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(ImplChoice::Auto);
        }
        Impl::parse(s).map(ImplChoice::Fixed).ok_or_else(|| {
            let names: Vec<&str> = Impl::ALL.iter().map(|i| i.name()).collect();
            format!("unknown implementation '{s}'; expected auto or one of: {}", names.join(", "))
        })
    }

    /// `auto` becomes `EVOATTN_IMPL` when that is set; a named choice stays as it is.
    pub fn with_env_override(self) -> Result<Self, String> {
        match (self, std::env::var(IMPL_ENV)) {
            (ImplChoice::Auto, Ok(value)) if !value.is_empty() => {
                ImplChoice::parse(&value).map_err(|e| format!("{IMPL_ENV}: {e}"))
            }
            _ => Ok(self),
        }
    }
}

impl fmt::Display for ImplChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImplChoice::Auto => f.write_str("auto"),
            ImplChoice::Fixed(imp) => f.write_str(imp.name()),
        }
    }
}

/// The kernel a problem runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Plan {
    pub spec: KernelSpec,
    pub arch: Arch,
}

/// Fewest keys for which `auto` splits them. Measured on the H100 (2026-11-22, `bench/results/
/// 2026-11-22-issue5-*`): at Sk <= 8k `splitkv` lost to cuDNN and FlashAttention-2 on every
/// decode shape, and at the seed shapes (Sk = 512) it took 30-48 µs where `wgmma` takes 12-23.
pub const SPLITKV_MIN_KEYS: usize = 16384;
/// Fewest keys for which `auto` splits the keys of a decoding problem whose `splitkv` tiles
/// alone leave SMs idle. H100, bf16 hd128, graph mode (`bench/results/2026-11-22-s4-*`):
/// 1,32,1,128,4,1024 12.9 µs against `wgmma`'s 19.2; at 8k keys 22.5 against 98.7, and B=8
/// 66.8 against 196.7; no GQA, B=1, 8k: 65.0 against 100.3. With B=8 and no GQA (256 tiles
/// of one row) `wgmma` stayed ahead at 1k keys (63.4 against 65.2): that grid fills the GPU.
pub const SPLITKV_MIN_DECODE_KEYS: usize = 1024;
/// Most query rows per KV head (Sq x GQA group) for which `auto` splits the keys: decoding.
/// Past this the whole-row kernel's tiles are full and it has blocks enough.
pub const SPLITKV_MAX_PACKED_ROWS: usize = 64;
/// Fewest key tiles one split walks: fewer, and the split's Q load, partial write and share of
/// the combine outweigh its keys.
pub const SPLITKV_MIN_TILES_PER_SPLIT: usize = 2;

/// The implementation `auto` runs `problem` with on `arch` with `sm_count` SMs.
///
/// - `splitkv` when the problem is decoding (at most [`SPLITKV_MAX_PACKED_ROWS`] query rows per
///   KV head) against at least [`SPLITKV_MIN_KEYS`] keys, or the whole-row kernel would launch
///   fewer blocks than there are SMs on such keys, or it is decoding against at least
///   [`SPLITKV_MIN_DECODE_KEYS`] keys with fewer `splitkv` tiles than SMs: the whole-row kernels give each head a
///   128-row tile however few its queries (B=8, H=32, Sq=1, 32k keys: `wgmma` took 915 µs,
///   cuDNN 194), and too few blocks leave most SMs idle; splitting the keys fills both the SMs
///   and, with the GQA group packed into its rows, the MMA rows, at the price of one float32
///   partial per row and split.
/// - otherwise `wgmma` on Hopper (sm_90a), `mma` elsewhere. On the H100 `wgmma` was faster
///   than `mma` on every one of ANCHORS.md's 36 fa3-grid shapes and 10 seed shapes already
///   with `cp.async` loads (geomean 0.47× against 0.35× the best peer; `bench/results/
///   2026-11-22-*`), and TMA loads doubled it.
///
/// - no keys at all (Sk = 0): `mma`, whose `cp.async` loads need no tensor map (a TMA map cannot
///   describe an empty K or V); every row is O = 0, LSE = -inf.
///
/// `reference` is never chosen automatically: it is the oracle.
pub fn choose_impl(problem: &Problem, arch: Arch, sm_count: u32) -> Impl {
    if problem.shape.sk == 0 {
        return Impl::Mma;
    }
    let whole_rows = if Impl::Wgmma.archs().contains(&arch) { Impl::Wgmma } else { Impl::Mma };
    let spec = KernelSpec {
        config: crate::defaults::config(whole_rows, arch, problem.shape.d),
        dtype: problem.dtype,
        head_dim: problem.shape.d,
    };
    let blocks: usize = spec.grid(&problem.shape, 1, sm_count).iter().product();
    let decoding = problem.shape.sq * problem.shape.group() <= SPLITKV_MAX_PACKED_ROWS;
    let split_spec = KernelSpec {
        config: crate::defaults::for_problem(Impl::Splitkv, arch, problem, sm_count),
        dtype: problem.dtype,
        head_dim: problem.shape.d,
    };
    let split_tiles: usize = split_spec.grid(&problem.shape, 1, sm_count).iter().product();
    let sparse_decode = decoding && split_tiles < sm_count as usize && problem.shape.sk >= SPLITKV_MIN_DECODE_KEYS;
    if sparse_decode || ((decoding || blocks < sm_count as usize) && problem.shape.sk >= SPLITKV_MIN_KEYS) {
        Impl::Splitkv
    } else {
        whole_rows
    }
}

/// How many splits a `splitkv` launch of `problem` uses on `sm_count` SMs that each hold
/// `resident_per_sm` of its blocks: the config's `splits` when set, else as many as fit every
/// tile's splits in one wave (sm_count × resident_per_sm blocks), but no split shorter than
/// [`SPLITKV_MIN_TILES_PER_SPLIT`] key tiles; always within 1 ..= the key tiles and
/// [`SplitkvConfig::MAX_SPLITS`]. One wave, rounded down: a second, partial wave leaves most
/// SMs idle while it runs (H100, 2026-11-22: 1,32,4,128,4,32768 took 97.8 µs with 264 blocks of
/// one per SM, 65.3 with the same 264 blocks at two per SM).
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

/// Query heads per section of the causal `wgmma` grid order on a GPU with `l2_bytes` of L2.
///
/// Under a causal mask, tiles grow with their query block. Launched head after head, the
/// longest tiles of the last heads start last and run past everyone else: a list-schedule
/// simulation of the fa3 grid on 132 SMs puts that tail at 11-14% over the balanced time at
/// hd256 (128-row tiles, 80-key blocks, 2k-8k) and 5-7% at hd128. So the grid walks sections
/// of heads, longest query block first across the section's heads, then the next section
/// (`GridTiles` in kernels/wgmma/wgmma_scheduler.cuh). A section is as many heads as keep their K
/// and V within [`SCHEDULER_L2_KV_PERCENT`](crate::defaults::SCHEDULER_L2_KV_PERCENT) of L2, a
/// power of two, at least one; query heads that share a KV head read the same keys, so they
/// count as one. H100, causal fa3 rows, graph mode, against heads one after another
/// (`bench/results/2026-11-23-s8-causal-order-ab.txt`): hd256 2k/4k/8k -5.9/-7.6/-6.9%,
/// hd128 2k/4k/8k -0.6/-2.7/-3.2%, hd64 4k/8k/16k -0.9/-1.9/-2.6%, 16k hd128/hd256
/// +0.2/+0.3%. Sections sized to fill the SMs once (3-9 heads, within L2) measured worse at
/// hd64 4k, hd128 2k and 8k.
pub fn head_group(problem: &Problem, l2_bytes: usize) -> usize {
    let s = &problem.shape;
    let kv_head_bytes = (2 * s.sk * s.d * problem.dtype.size_bytes()).max(1);
    let kv_heads = (l2_bytes * crate::defaults::SCHEDULER_L2_KV_PERCENT / 100 / kv_head_bytes).max(1);
    (1usize << kv_heads.ilog2()) * s.group()
}

/// Resolves a choice (and optional lever overrides) into a kernel for `problem` on `arch`
/// with `sm_count` SMs; `auto` follows [`choose_impl`].
pub fn plan(problem: &Problem, arch: Arch, sm_count: u32, choice: ImplChoice, config: Option<KernelConfig>) -> Plan {
    let imp = match choice {
        ImplChoice::Fixed(imp) => imp,
        ImplChoice::Auto => choose_impl(problem, arch, sm_count),
    };
    let config = match config {
        Some(c) if c.imp() == imp => c,
        _ => crate::defaults::for_problem(imp, arch, problem, sm_count),
    };
    Plan { spec: KernelSpec { config, dtype: problem.dtype, head_dim: problem.shape.d }, arch }
}

// ---- tuned configurations (issue 6) ----

/// Configurations found by tuning. The library never reads a store itself (no SQLite here):
/// the caller passes one in, e.g. the CLI's tuner store keyed by GPU and problem bucket.
pub trait ConfigSource {
    /// The best known config of `imp` for `problem` on this GPU, if one was tuned.
    fn tuned(&self, problem: &Problem, imp: Impl) -> Option<KernelConfig>;
}

/// No tuned configurations: the planner's defaults.
pub struct Untuned;

impl ConfigSource for Untuned {
    fn tuned(&self, _: &Problem, _: Impl) -> Option<KernelConfig> {
        None
    }
}

/// Where a plan's configuration came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigOrigin {
    /// Levers given by the caller (`--config`).
    Requested,
    /// The tuned store's best for this GPU and problem bucket.
    Tuned,
    /// The hand-written default (`defaults.rs`).
    Default,
}

impl ConfigOrigin {
    pub fn name(self) -> &'static str {
        match self {
            ConfigOrigin::Requested => "requested",
            ConfigOrigin::Tuned => "tuned store",
            ConfigOrigin::Default => "default",
        }
    }
}

/// As [`plan`], but without lever overrides a tuned config of the chosen kernel replaces the
/// default when `source` has one that is valid on `arch`.
pub fn plan_with(
    problem: &Problem,
    arch: Arch,
    sm_count: u32,
    choice: ImplChoice,
    config: Option<KernelConfig>,
    source: &dyn ConfigSource,
) -> (Plan, ConfigOrigin) {
    let planned = plan(problem, arch, sm_count, choice, config);
    if config.is_some_and(|c| c == planned.spec.config) {
        return (planned, ConfigOrigin::Requested);
    }
    match source.tuned(problem, planned.spec.imp()) {
        Some(tuned) if tuned.imp() == planned.spec.imp() => {
            let spec = KernelSpec { config: tuned, ..planned.spec };
            match spec.validate(arch) {
                Ok(()) => (Plan { spec, arch }, ConfigOrigin::Tuned),
                Err(_) => (planned, ConfigOrigin::Default),
            }
        }
        _ => (planned, ConfigOrigin::Default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Dtype, Layout, Shape};

    #[test]
    fn parse_choices() {
        assert_eq!(ImplChoice::parse("auto").unwrap(), ImplChoice::Auto);
        assert_eq!(ImplChoice::parse("mma").unwrap(), ImplChoice::Fixed(Impl::Mma));
        let err = ImplChoice::parse("cutlass").unwrap_err();
        assert!(err.contains("reference, mma"), "{err}");
    }

    /// An H100 SXM's SM count.
    const H100_SMS: u32 = 132;

    #[test]
    fn auto_picks_mma_with_the_arch_default() {
        let p = Problem::dense(Shape::new(4, 16, 512, 128), Dtype::Bf16, Layout::Bhsd);
        let plan = plan(&p, Arch::Sm89, H100_SMS, ImplChoice::Auto, None);
        assert_eq!(plan.spec.imp(), Impl::Mma);
        assert_eq!(plan.spec.config, crate::defaults::config(Impl::Mma, Arch::Sm89, 128));
        assert_eq!(plan.spec.head_dim, 128);
    }

    #[test]
    fn auto_runs_a_problem_without_keys_on_mma_which_needs_no_tensor_map() {
        let s = Shape { b: 1, h: 2, hkv: 2, sq: 5, sk: 0, d: 64 };
        let p = Problem::dense(s, Dtype::F16, Layout::Bhsd);
        assert_eq!(plan(&p, Arch::Sm90a, H100_SMS, ImplChoice::Auto, None).spec.imp(), Impl::Mma);
    }

    #[test]
    fn auto_picks_wgmma_on_hopper_only() {
        let p = Problem::dense(Shape::new(8, 16, 512, 64), Dtype::F16, Layout::Bhsd);
        assert_eq!(plan(&p, Arch::Sm90a, H100_SMS, ImplChoice::Auto, None).spec.imp(), Impl::Wgmma);
        for arch in [Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90] {
            assert_eq!(plan(&p, arch, H100_SMS, ImplChoice::Auto, None).spec.imp(), Impl::Mma, "{arch}");
        }
    }

    #[test]
    fn head_groups_keep_a_sections_keys_within_the_l2_share() {
        const H100_L2: usize = 50 * 1024 * 1024;
        let bf16 = |b, h, s, d| Problem::dense(Shape::new(b, h, s, d), Dtype::Bf16, Layout::Bhsd);
        // 32% of 50 MiB is 16 MiB. hd256 at 8k: K and V are 8 MiB a head, so 2 fit.
        assert_eq!(head_group(&bf16(2, 8, 8192, 256), H100_L2), 2);
        // 2k: 2 MiB a head, 8 fit.
        assert_eq!(head_group(&bf16(8, 8, 2048, 256), H100_L2), 8);
        // 3 MiB a head: 5 fit, rounded down to 4.
        assert_eq!(head_group(&bf16(1, 8, 3072, 256), H100_L2), 4);
        // A head bigger than the share still makes a section of one.
        assert_eq!(head_group(&bf16(1, 2, 131072, 256), H100_L2), 1);
        // GQA 4:1: the query heads of one KV head read the same keys, so they count once.
        let gqa = Problem::dense(Shape { b: 2, h: 32, hkv: 8, sq: 8192, sk: 8192, d: 256 }, Dtype::Bf16, Layout::Bhsd);
        assert_eq!(head_group(&gqa, H100_L2), 8);
    }

    fn decode(b: usize, h: usize, hkv: usize, sq: usize, sk: usize) -> Problem {
        Problem::dense(Shape { b, h, hkv, sq, sk, d: 128 }, Dtype::Bf16, Layout::Bhsd)
    }

    #[test]
    fn auto_splits_the_keys_when_the_grid_cannot_fill_the_gpu() {
        // Decoding: 1 query, 32 heads (8 per KV head), 32k keys: wgmma would launch 32 blocks
        // on 132 SMs.
        assert_eq!(choose_impl(&decode(1, 32, 4, 1, 32768), Arch::Sm90a, H100_SMS), Impl::Splitkv);
        // B=8 fills the grid, but a 1-query row per 128-row tile wastes the whole-row kernel.
        assert_eq!(choose_impl(&decode(8, 32, 4, 1, 32768), Arch::Sm90a, H100_SMS), Impl::Splitkv);
        assert_eq!(choose_impl(&decode(8, 32, 32, 4, 32768), Arch::Sm80, 108), Impl::Splitkv);
        // A long prefill with enough blocks: whole rows.
        assert_eq!(choose_impl(&decode(8, 32, 32, 1024, 32768), Arch::Sm80, 108), Impl::Mma);
        // B=4 x H=32 = 128 blocks < 132: still split.
        assert_eq!(choose_impl(&decode(4, 32, 32, 1, 16384), Arch::Sm90a, H100_SMS), Impl::Splitkv);
        // Decoding at 1k-8k keys with fewer splitkv tiles (4) than SMs: split.
        assert_eq!(choose_impl(&decode(1, 32, 4, 1, 8192), Arch::Sm90a, H100_SMS), Impl::Splitkv);
        assert_eq!(choose_impl(&decode(1, 32, 4, 1, 1024), Arch::Sm90a, H100_SMS), Impl::Splitkv);
        // ... but not below 1k keys, nor when 256 one-row tiles already fill the GPU.
        assert_eq!(choose_impl(&decode(1, 32, 4, 1, 512), Arch::Sm90a, H100_SMS), Impl::Wgmma);
        assert_eq!(choose_impl(&decode(8, 32, 32, 1, 1024), Arch::Sm90a, H100_SMS), Impl::Wgmma);
        // Not decoding (128 query rows per KV head), but 32 blocks on 132 SMs: split.
        assert_eq!(choose_impl(&decode(1, 32, 32, 128, 32768), Arch::Sm90a, H100_SMS), Impl::Splitkv);
        // The seed shape B=1, H=8, S=512: 32 blocks, but 512 queries and keys: whole rows.
        let seed = Problem::dense(Shape::new(1, 8, 512, 64), Dtype::F16, Layout::Bhsd);
        assert_eq!(choose_impl(&seed, Arch::Sm90a, H100_SMS), Impl::Wgmma);
        // A full grid (16 x 16 heads x 16 tiles) never splits.
        let full = Problem::dense(Shape::new(16, 16, 2048, 64), Dtype::F16, Layout::Bhsd);
        assert_eq!(choose_impl(&full, Arch::Sm90a, H100_SMS), Impl::Wgmma);
        let plan = plan(&decode(1, 32, 4, 1, 32768), Arch::Sm90a, H100_SMS, ImplChoice::Auto, None);
        assert_eq!(plan.spec.config, crate::defaults::config(Impl::Splitkv, Arch::Sm90a, 128));
    }

    #[test]
    fn split_count_worked_examples() {
        let cfg = crate::defaults::splitkv(Arch::Sm90a, 128);
        assert_eq!((cfg.block_m, cfg.block_n), (16, 128));
        // GQA 8:1, Sq=1, B=1: 8 packed rows -> one tile per KV head, 4 tiles. 132 SMs holding
        // two blocks each: 264 / 4 = 66 splits; 32k keys are 256 tiles, 3.9 per split.
        assert_eq!(splits(&decode(1, 32, 4, 1, 32768), &cfg, H100_SMS, 2), 66);
        // One block per SM: 132 / 4 = 33.
        assert_eq!(splits(&decode(1, 32, 4, 1, 32768), &cfg, H100_SMS, 1), 33);
        // 1k keys are 8 tiles: at most 8 / 2 = 4 splits of 2 tiles.
        assert_eq!(splits(&decode(1, 32, 4, 1, 1024), &cfg, H100_SMS, 2), 4);
        // GQA 8:1, Sq=4, B=8: 32 rows, two 16-row tiles per KV head, 64 tiles: 264 / 64 = 4
        // (rounded down: a fifth split would start a second wave).
        assert_eq!(splits(&decode(8, 32, 4, 4, 8192), &cfg, H100_SMS, 2), 4);
        // No GQA, B=8, Sq=4: 8 x 32 = 256 tiles already fill the 264 slots: 1 split.
        assert_eq!(splits(&decode(8, 32, 32, 4, 8192), &cfg, H100_SMS, 2), 1);
        // More tiles than slots: 1 split.
        assert_eq!(splits(&decode(8, 32, 32, 512, 8192), &cfg, H100_SMS, 2), 1);
        // One key: one split, whatever the grid.
        assert_eq!(splits(&decode(1, 1, 1, 1, 1), &cfg, H100_SMS, 2), 1);
        // An explicit count wins, within the key tiles and MAX_SPLITS.
        let three = SplitkvConfig { splits: 3, ..cfg };
        assert_eq!(splits(&decode(1, 32, 4, 1, 32768), &three, H100_SMS, 2), 3);
        assert_eq!(splits(&decode(1, 32, 4, 1, 200), &three, H100_SMS, 2), 2);
        let many = SplitkvConfig { splits: 1000, ..cfg };
        assert_eq!(splits(&decode(1, 1, 1, 1, 1 << 20), &many, H100_SMS, 2), SplitkvConfig::MAX_SPLITS as usize);
    }

    struct Fixed(KernelConfig);

    impl ConfigSource for Fixed {
        fn tuned(&self, _: &Problem, imp: Impl) -> Option<KernelConfig> {
            (self.0.imp() == imp).then_some(self.0)
        }
    }

    #[test]
    fn tuned_configs_replace_defaults_but_not_requested_levers() {
        let p = Problem::dense(Shape::new(1, 8, 512, 64), Dtype::F16, Layout::Bhsd);
        let tuned = crate::config::KernelConfig::Mma(crate::config::MmaConfig {
            block_m: 64,
            block_n: 128,
            stages: 2,
            q_in_regs: false,
        });
        let mma = ImplChoice::Fixed(Impl::Mma);
        let (got, origin) = plan_with(&p, Arch::Sm80, H100_SMS, ImplChoice::Auto, None, &Fixed(tuned));
        assert_eq!((got.spec.config, origin), (tuned, ConfigOrigin::Tuned));
        let (got, origin) = plan_with(&p, Arch::Sm80, H100_SMS, mma, None, &Untuned);
        assert_eq!(
            (got.spec.config, origin),
            (crate::defaults::config(Impl::Mma, Arch::Sm80, 64), ConfigOrigin::Default)
        );
        let asked = crate::defaults::config(Impl::Mma, Arch::Sm80, 128);
        let (got, origin) = plan_with(&p, Arch::Sm80, H100_SMS, mma, Some(asked), &Fixed(tuned));
        assert_eq!((got.spec.config, origin), (asked, ConfigOrigin::Requested));
        // A tuned mma config does not apply where auto picks wgmma.
        let (got, origin) = plan_with(&p, Arch::Sm90a, H100_SMS, ImplChoice::Auto, None, &Fixed(tuned));
        assert_eq!((got.spec.imp(), origin), (Impl::Wgmma, ConfigOrigin::Default));
    }
}
