//! The planner: which implementation and configuration run a problem. One rule, written here
//! with its reason, until the tuner's store overrides it.

use crate::arch::Arch;
use crate::config::{Impl, KernelConfig, KernelSpec};
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

/// Resolves a choice (and optional lever overrides) into a kernel for `problem` on `arch`.
///
/// Rule for `auto`: `wgmma` on Hopper (sm_90a), `mma` elsewhere. On the H100 `wgmma` was
/// faster than `mma` on every one of ANCHORS.md's 36 fa3-grid shapes and 10 seed shapes
/// already with `cp.async` loads (geomean 0.47× against 0.35× the best peer; `bench/results/
/// 2026-11-22-*`), and TMA loads doubled it. `reference` is never chosen automatically: it is
/// the oracle.
pub fn plan(problem: &Problem, arch: Arch, choice: ImplChoice, config: Option<KernelConfig>) -> Plan {
    let imp = match choice {
        ImplChoice::Fixed(imp) => imp,
        ImplChoice::Auto if Impl::Wgmma.archs().contains(&arch) => Impl::Wgmma,
        ImplChoice::Auto => Impl::Mma,
    };
    let config = match config {
        Some(c) if c.imp() == imp => c,
        _ => crate::defaults::config(imp, arch, problem.shape.d),
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
    choice: ImplChoice,
    config: Option<KernelConfig>,
    source: &dyn ConfigSource,
) -> (Plan, ConfigOrigin) {
    let planned = plan(problem, arch, choice, config);
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

    #[test]
    fn auto_picks_mma_with_the_arch_default() {
        let p = Problem::dense(Shape::new(1, 8, 512, 128), Dtype::Bf16, Layout::Bhsd);
        let plan = plan(&p, Arch::Sm89, ImplChoice::Auto, None);
        assert_eq!(plan.spec.imp(), Impl::Mma);
        assert_eq!(plan.spec.config, crate::defaults::config(Impl::Mma, Arch::Sm89, 128));
        assert_eq!(plan.spec.head_dim, 128);
    }

    #[test]
    fn auto_picks_wgmma_on_hopper_only() {
        let p = Problem::dense(Shape::new(1, 8, 512, 64), Dtype::F16, Layout::Bhsd);
        assert_eq!(plan(&p, Arch::Sm90a, ImplChoice::Auto, None).spec.imp(), Impl::Wgmma);
        for arch in [Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90] {
            assert_eq!(plan(&p, arch, ImplChoice::Auto, None).spec.imp(), Impl::Mma, "{arch}");
        }
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
        let (got, origin) = plan_with(&p, Arch::Sm80, ImplChoice::Auto, None, &Fixed(tuned));
        assert_eq!((got.spec.config, origin), (tuned, ConfigOrigin::Tuned));
        let (got, origin) = plan_with(&p, Arch::Sm80, mma, None, &Untuned);
        assert_eq!(
            (got.spec.config, origin),
            (crate::defaults::config(Impl::Mma, Arch::Sm80, 64), ConfigOrigin::Default)
        );
        let asked = crate::defaults::config(Impl::Mma, Arch::Sm80, 128);
        let (got, origin) = plan_with(&p, Arch::Sm80, mma, Some(asked), &Fixed(tuned));
        assert_eq!((got.spec.config, origin), (asked, ConfigOrigin::Requested));
        // A tuned mma config does not apply where auto picks wgmma.
        let (got, origin) = plan_with(&p, Arch::Sm90a, ImplChoice::Auto, None, &Fixed(tuned));
        assert_eq!((got.spec.imp(), origin), (Impl::Wgmma, ConfigOrigin::Default));
    }
}
