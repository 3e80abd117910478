//! The planner: which implementation and configuration run a problem. One rule, written here
//! with its reason, until the tuner's store overrides it.

use crate::arch::Arch;
use crate::config::{Impl, KernelConfig, KernelSpec, Pass};
use crate::problem::Problem;
use std::fmt;

/// Environment variable that overrides `--impl auto`.
pub const IMPL_ENV: &str = "EVOATTN_IMPL";

/// What the caller asks to run. It names at most one kernel, so it cannot contradict itself:
/// the planner's choice, a family with the planner's levers, or one kernel exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Request {
    /// The planner's family and levers ([`choose_impl`]); `EVOATTN_IMPL` may name the family.
    Auto,
    /// This family, with the planner's levers for the problem.
    Family(Impl),
    /// This kernel, as given.
    Config(KernelConfig),
}

impl Request {
    /// `auto` or a family's name (a config is built from `--config` text by the caller, who
    /// knows the problem its overrides apply to).
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(Request::Auto);
        }
        Impl::parse(s).map(Request::Family).ok_or_else(|| {
            let names: Vec<&str> = Impl::ALL.iter().map(|i| i.name()).collect();
            format!("unknown implementation '{s}'; expected auto or one of: {}", names.join(", "))
        })
    }

    /// `auto` becomes `EVOATTN_IMPL` when that is set; any other request stays as it is.
    pub fn with_env_override(self) -> Result<Self, String> {
        match (self, std::env::var(IMPL_ENV)) {
            (Request::Auto, Ok(value)) if !value.is_empty() => {
                Request::parse(&value).map_err(|e| format!("{IMPL_ENV}: {e}"))
            }
            _ => Ok(self),
        }
    }

    /// The family asked for; `None` for `auto`.
    pub fn family(self) -> Option<Impl> {
        match self {
            Request::Auto => None,
            Request::Family(imp) => Some(imp),
            Request::Config(config) => Some(config.imp()),
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Auto => f.write_str("auto"),
            Request::Family(imp) => f.write_str(imp.name()),
            Request::Config(config) => write!(f, "{}:{config}", config.imp().name()),
        }
    }
}

/// `auto` has a kernel for head dim `d`; else the error names the head dims there are (rather
/// than blaming the family `auto` would have picked).
pub fn auto_covers_head_dim(d: usize) -> crate::Result<()> {
    let mut dims: Vec<usize> = Impl::ALL.iter().flat_map(|i| i.head_dims().iter().copied()).collect();
    dims.sort_unstable();
    dims.dedup();
    if dims.contains(&d) {
        return Ok(());
    }
    let names: Vec<String> = dims.iter().map(usize::to_string).collect();
    Err(crate::Error::Unsupported {
        imp: "auto".into(),
        reason: format!("no kernel is built for head dim {d} (head dims: {})", names.join(", ")),
    })
}

/// A problem and the kernel that runs it on one arch: what [`crate::Attention::forward`] takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub problem: Problem,
    pub spec: KernelSpec,
    pub arch: Arch,
}

/// Fewest keys for which `auto` splits them.
/// Evidence: docs/decisions/splitkv.md#auto-min-keys
pub const SPLITKV_MIN_KEYS: usize = 16384;
/// Fewest keys for which `auto` splits a decoding problem whose `splitkv` tiles alone leave SMs idle.
/// Evidence: docs/decisions/splitkv.md#auto-decode-keys
pub const SPLITKV_MIN_DECODE_KEYS: usize = 1024;
/// Most query rows per KV head (Sq x GQA group) for which `auto` splits the keys: decoding.
/// Past this the whole-row kernel's tiles are full and it has blocks enough.
pub const SPLITKV_MAX_PACKED_ROWS: usize = 64;

/// What the family rules read of a problem on a GPU.
struct Facts {
    /// E4M3 inputs.
    fp8: bool,
    sk: usize,
    sms: usize,
    /// Hopper: the whole-row family is `wgmma` (else `mma`).
    hopper: bool,
    /// At most [`SPLITKV_MAX_PACKED_ROWS`] query rows per KV head.
    decoding: bool,
    /// Blocks the whole-row family's default launches.
    whole_row_blocks: usize,
    /// Blocks `splitkv` launches before splitting (its packed-row tiles).
    split_tiles: usize,
}

impl Facts {
    fn of(problem: &Problem, arch: Arch, sm_count: u32) -> Self {
        let hopper = Impl::Wgmma.archs().contains(&arch);
        let blocks = |imp: Impl, config: KernelConfig| -> usize {
            let spec = KernelSpec { config, dtype: problem.dtype, head_dim: problem.shape.d };
            debug_assert_eq!(spec.imp(), imp);
            spec.grid(&problem.shape, 1, sm_count).iter().product()
        };
        let whole_rows = if hopper { Impl::Wgmma } else { Impl::Mma };
        Facts {
            fp8: problem.dtype.is_fp8(),
            sk: problem.shape.sk,
            sms: sm_count as usize,
            hopper,
            decoding: problem.shape.sq * problem.shape.group() <= SPLITKV_MAX_PACKED_ROWS,
            whole_row_blocks: blocks(
                whole_rows,
                crate::defaults::config(whole_rows, arch, problem.dtype, problem.shape.d),
            ),
            split_tiles: blocks(Impl::Splitkv, crate::defaults::for_problem(Impl::Splitkv, arch, problem, sm_count)),
        }
    }
}

/// One family rule: where it applies and the family it picks.
struct FamilyRule {
    /// Its section in docs/decisions/planner.md (a test checks that the section exists).
    #[cfg_attr(not(test), allow(dead_code))]
    evidence: &'static str,
    applies: fn(&Facts) -> bool,
    family: Impl,
}

/// The families `auto` picks, first applicable rule wins. `reference` is never picked: it is
/// the oracle.
const FAMILY_RULES: &[FamilyRule] = &[
    // E4M3 inputs: `wgmma` on Hopper (its TMA maps need keys), `mma8` elsewhere.
    FamilyRule { evidence: "fp8-hopper", applies: |f| f.fp8 && f.hopper && f.sk > 0, family: Impl::Wgmma },
    FamilyRule { evidence: "fp8", applies: |f| f.fp8, family: Impl::Mma8 },
    // No keys: a TMA map cannot describe an empty K or V; `mma`'s loads need none.
    FamilyRule { evidence: "no-keys", applies: |f| f.sk == 0, family: Impl::Mma },
    // Decoding whose `splitkv` tiles alone leave SMs idle.
    FamilyRule {
        evidence: "sparse-decode",
        applies: |f| f.decoding && f.split_tiles < f.sms && f.sk >= SPLITKV_MIN_DECODE_KEYS,
        family: Impl::Splitkv,
    },
    // Long keys, and rows too few to fill tiles or blocks too few to fill the SMs.
    FamilyRule {
        evidence: "split-long-keys",
        applies: |f| (f.decoding || f.whole_row_blocks < f.sms) && f.sk >= SPLITKV_MIN_KEYS,
        family: Impl::Splitkv,
    },
    // Whole rows: `wgmma` on Hopper, `mma` elsewhere.
    FamilyRule { evidence: "whole-rows", applies: |f| f.hopper, family: Impl::Wgmma },
    FamilyRule { evidence: "whole-rows", applies: |_| true, family: Impl::Mma },
];

/// The implementation `auto` runs `problem` with on `arch` with `sm_count` SMs: the first of
/// [`FAMILY_RULES`] that applies.
pub fn choose_impl(problem: &Problem, arch: Arch, sm_count: u32) -> Impl {
    let facts = Facts::of(problem, arch, sm_count);
    FAMILY_RULES.iter().find(|r| (r.applies)(&facts)).map_or(Impl::Mma, |r| r.family)
}

pub use crate::kernels::splitkv::plan::splits;
pub use crate::kernels::wgmma::plan::head_group;

/// The kernel `request` resolves to for `problem` on `arch` with `sm_count` SMs: `auto` follows
/// [`choose_impl`], a family takes the planner's levers for the problem, a config is taken as
/// given.
pub fn plan(problem: &Problem, arch: Arch, sm_count: u32, request: Request) -> Plan {
    plan_family(problem, arch, sm_count, request, || choose_impl(problem, arch, sm_count))
}

/// `request`'s kernel for `problem`: a config as given; a family (or `auto`'s, from `auto`)
/// with its default for the problem.
fn plan_family(problem: &Problem, arch: Arch, sm_count: u32, request: Request, auto: impl FnOnce() -> Impl) -> Plan {
    let config = match request {
        Request::Config(config) => config,
        Request::Family(imp) => crate::defaults::for_problem(imp, arch, problem, sm_count),
        Request::Auto => crate::defaults::for_problem(auto(), arch, problem, sm_count),
    };
    let spec = KernelSpec { config, dtype: problem.dtype, head_dim: problem.shape.d };
    Plan { problem: problem.clone(), spec, arch }
}

/// `request` names a kernel of `pass` (or is `auto`); else why not, naming that pass's families.
pub fn check_pass(request: Request, pass: Pass) -> crate::Result<()> {
    match request.family() {
        Some(imp) if imp.pass() != pass => {
            let names: Vec<&str> = Impl::ALL.iter().filter(|i| i.pass() == pass).map(|i| i.name()).collect();
            Err(crate::Error::Unsupported {
                imp: imp.to_string(),
                reason: format!(
                    "it computes the {} pass, not the {}; the {} pass runs on {}",
                    imp.pass().name(),
                    pass.name(),
                    pass.name(),
                    names.join(", ")
                ),
            })
        }
        _ => Ok(()),
    }
}

/// [`plan`] for the backward pass: `auto` is `mma-bwd` (the one backward family so far); `auto`
/// and a family take the family's default for the problem. The caller checks the request's
/// pass ([`check_pass`]).
pub fn plan_backward(problem: &Problem, arch: Arch, sm_count: u32, request: Request) -> Plan {
    plan_family(problem, arch, sm_count, request, || Impl::MmaBwd)
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

/// As [`plan`], but for `auto` or a family a tuned config of the planned family replaces the
/// default when `source` has one that is valid on `arch`; a config request is taken as given.
pub fn plan_with(
    problem: &Problem,
    arch: Arch,
    sm_count: u32,
    request: Request,
    source: &dyn ConfigSource,
) -> (Plan, ConfigOrigin) {
    let planned = plan(problem, arch, sm_count, request);
    if let Request::Config(_) = request {
        return (planned, ConfigOrigin::Requested);
    }
    match source.tuned(problem, planned.spec.imp()) {
        // The store keys problems by shape, not by how V is held, which a kernel must match.
        Some(tuned)
            if tuned.imp() == planned.spec.imp()
                && KernelSpec { config: tuned, ..planned.spec }.reads_v_keys_contiguous()
                    == problem.v_keys_contiguous() =>
        {
            let spec = KernelSpec { config: tuned, ..planned.spec };
            match spec.validate(arch) {
                Ok(()) => (Plan { spec, ..planned }, ConfigOrigin::Tuned),
                Err(_) => (planned, ConfigOrigin::Default),
            }
        }
        _ => (planned, ConfigOrigin::Default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pass_takes_its_own_families_and_auto() {
        use crate::config::Pass;
        assert!(check_pass(Request::Auto, Pass::Backward).is_ok());
        assert!(check_pass(Request::Family(Impl::MmaBwd), Pass::Backward).is_ok());
        assert!(check_pass(Request::Family(Impl::Wgmma), Pass::Forward).is_ok());
        let err = check_pass(Request::Family(Impl::Wgmma), Pass::Backward).unwrap_err().to_string();
        assert!(
            err.contains("wgmma") && err.contains("forward pass, not the backward") && err.contains("runs on mma-bwd"),
            "{err}"
        );
        let err = check_pass(Request::Family(Impl::MmaBwd), Pass::Forward).unwrap_err().to_string();
        assert!(err.contains("backward pass, not the forward") && err.contains("mma, wgmma"), "{err}");
    }

    #[test]
    fn auto_plans_the_backward_family_default() {
        let p = Problem::dense(
            crate::problem::Shape::new(2, 8, 1000, 128),
            crate::problem::Dtype::Bf16,
            crate::problem::Layout::Bhsd,
        );
        let plan = plan_backward(&p, Arch::Sm90a, 132, Request::Auto);
        assert_eq!(plan.spec.config, crate::defaults::config(Impl::MmaBwd, Arch::Sm90a, p.dtype, 128));
    }
    use crate::config::SplitkvConfig;
    use crate::problem::{Dtype, Layout, Shape};

    #[test]
    fn parse_choices() {
        assert_eq!(Request::parse("auto").unwrap(), Request::Auto);
        assert_eq!(Request::parse("mma").unwrap(), Request::Family(Impl::Mma));
        let err = Request::parse("cutlass").unwrap_err();
        assert!(err.contains("reference, mma"), "{err}");
    }

    #[test]
    fn every_family_rule_names_a_section_of_the_decisions() {
        let doc = include_str!("../../../docs/decisions/planner.md");
        for rule in FAMILY_RULES {
            assert!(doc.contains(&format!("\n## {}\n", rule.evidence)), "no section {} in planner.md", rule.evidence);
        }
    }

    #[test]
    fn auto_names_the_head_dims_it_has_instead_of_blaming_a_family() {
        assert!(auto_covers_head_dim(128).is_ok());
        let err = auto_covers_head_dim(96).unwrap_err().to_string();
        assert!(err.contains("'auto'") && err.contains("head dim 96 (head dims: 64, 128, 256)"), "{err}");
    }

    #[test]
    fn a_request_names_at_most_one_kernel() {
        let p = Problem::dense(Shape::new(1, 8, 512, 64), Dtype::F16, Layout::Bhsd);
        // A config is run as given, even where auto would pick another family.
        let mma = crate::defaults::config(Impl::Mma, Arch::Sm90a, Dtype::F16, 64).with_overrides("stages=2").unwrap();
        let given = plan(&p, Arch::Sm90a, H100_SMS, Request::Config(mma));
        assert_eq!((given.spec.config, given.problem.clone()), (mma, p.clone()));
        assert_eq!(Request::Config(mma).family(), Some(Impl::Mma));
        assert_eq!(Request::Config(mma).to_string(), format!("mma:{mma}"));
        // A family takes the planner's levers for the problem; auto also picks the family.
        let family = plan(&p, Arch::Sm90a, H100_SMS, Request::Family(Impl::Wgmma));
        assert_eq!(family.spec.config, crate::defaults::for_problem(Impl::Wgmma, Arch::Sm90a, &p, H100_SMS));
        assert_eq!(plan(&p, Arch::Sm90a, H100_SMS, Request::Auto).spec, family.spec);
        assert_eq!((Request::Auto.family(), Request::Auto.to_string()), (None, "auto".to_string()));
    }

    /// An H100 SXM's SM count.
    const H100_SMS: u32 = 132;

    #[test]
    fn auto_picks_mma_with_the_arch_default() {
        let p = Problem::dense(Shape::new(4, 16, 512, 128), Dtype::Bf16, Layout::Bhsd);
        let plan = plan(&p, Arch::Sm89, H100_SMS, Request::Auto);
        assert_eq!(plan.spec.imp(), Impl::Mma);
        assert_eq!(plan.spec.config, crate::defaults::config(Impl::Mma, Arch::Sm89, Dtype::F16, 128));
        assert_eq!(plan.spec.head_dim, 128);
    }

    #[test]
    fn auto_runs_a_problem_without_keys_on_mma_which_needs_no_tensor_map() {
        let s = Shape { b: 1, h: 2, hkv: 2, sq: 5, sk: 0, d: 64 };
        let p = Problem::dense(s, Dtype::F16, Layout::Bhsd);
        assert_eq!(plan(&p, Arch::Sm90a, H100_SMS, Request::Auto).spec.imp(), Impl::Mma);
    }

    #[test]
    fn auto_picks_wgmma_on_hopper_only() {
        let p = Problem::dense(Shape::new(8, 16, 512, 64), Dtype::F16, Layout::Bhsd);
        assert_eq!(plan(&p, Arch::Sm90a, H100_SMS, Request::Auto).spec.imp(), Impl::Wgmma);
        for arch in [Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90] {
            assert_eq!(plan(&p, arch, H100_SMS, Request::Auto).spec.imp(), Impl::Mma, "{arch}");
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
        let plan = plan(&decode(1, 32, 4, 1, 32768), Arch::Sm90a, H100_SMS, Request::Auto);
        assert_eq!(plan.spec.config, crate::defaults::config(Impl::Splitkv, Arch::Sm90a, Dtype::F16, 128));
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
        let mma = Request::Family(Impl::Mma);
        let (got, origin) = plan_with(&p, Arch::Sm80, H100_SMS, Request::Auto, &Fixed(tuned));
        assert_eq!((got.spec.config, origin), (tuned, ConfigOrigin::Tuned));
        let (got, origin) = plan_with(&p, Arch::Sm80, H100_SMS, mma, &Untuned);
        assert_eq!(
            (got.spec.config, origin),
            (crate::defaults::config(Impl::Mma, Arch::Sm80, Dtype::F16, 64), ConfigOrigin::Default)
        );
        let asked = crate::defaults::config(Impl::Mma, Arch::Sm80, Dtype::F16, 128);
        let (got, origin) = plan_with(&p, Arch::Sm80, H100_SMS, Request::Config(asked), &Fixed(tuned));
        assert_eq!((got.spec.config, origin), (asked, ConfigOrigin::Requested));
        // A tuned mma config does not apply where auto picks wgmma.
        let (got, origin) = plan_with(&p, Arch::Sm90a, H100_SMS, Request::Auto, &Fixed(tuned));
        assert_eq!((got.spec.imp(), origin), (Impl::Wgmma, ConfigOrigin::Default));
    }
}
