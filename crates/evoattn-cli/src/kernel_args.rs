//! The kernel-selection flags `check`, `bench`, `gate` and `profile` share, and their one
//! resolution: `--impl` (with `EVOATTN_IMPL` overriding `auto`) and per-problem `--config`.

use anyhow::bail;
use evoattn::plan::{plan_with, ConfigOrigin, ConfigSource, ImplChoice};
use evoattn::{Arch, KernelConfig, Problem};

#[derive(clap::Args, Debug)]
pub struct KernelArgs {
    /// Our kernel: auto (the planner's choice; EVOATTN_IMPL overrides), mma, wgmma, splitkv, reference.
    #[arg(long = "impl", default_value = "auto")]
    pub imp: String,
    /// Lever overrides for a named --impl, e.g. block_n=64,stages=3, applied to that kernel's
    /// default for each problem's head dim.
    #[arg(long)]
    pub config: Option<String>,
    /// Apply --config to the planner's per-problem config of the named --impl instead of its
    /// head-dim default: one lever changed on whatever the planner picks for each problem (a
    /// lever's A/B across a preset whose problems the planner adapts differently).
    #[arg(long, requires = "config")]
    pub config_on_plan: bool,
    /// Ignore the tuner's store: plan with the hand defaults (also EVOATTN_NO_TUNED=1), for
    /// before/after comparisons of a tuning run.
    #[arg(long)]
    pub no_tuned: bool,
}

impl KernelArgs {
    /// The implementation asked for; `--config` needs a named one (the levers belong to one
    /// kernel).
    pub fn choice(&self) -> anyhow::Result<ImplChoice> {
        let choice = ImplChoice::parse(&self.imp)
            .map_err(anyhow::Error::msg)?
            .with_env_override()
            .map_err(anyhow::Error::msg)?;
        if self.config.is_some() && choice == ImplChoice::Auto {
            bail!("--config needs a named --impl (the levers belong to one kernel)");
        }
        Ok(choice)
    }

    /// The lever overrides applied to `choice`'s default for the problem's head dim on `arch`
    /// (with `--config-on-plan`, to the planner's default for the problem on `sm_count` SMs);
    /// `None` when no `--config` was given (the planner decides).
    pub fn config(
        &self,
        choice: ImplChoice,
        (arch, sm_count): (Arch, u32),
        problem: &Problem,
    ) -> anyhow::Result<Option<KernelConfig>> {
        match (&self.config, choice) {
            (Some(text), ImplChoice::Fixed(imp)) => {
                let base = if self.config_on_plan {
                    evoattn::defaults::for_problem(imp, arch, problem, sm_count)
                } else {
                    evoattn::defaults::config(imp, arch, problem.shape.d)
                };
                Ok(Some(base.with_overrides(text).map_err(anyhow::Error::msg)?))
            }
            _ => Ok(None),
        }
    }

    /// The kernel `problem` runs with: `--config` levers, else the tuned store's best for this
    /// GPU and the problem's bucket (`tuned`), else the default; as a fixed choice with its
    /// config (so the backend's own planning agrees), and where the config came from.
    pub fn resolve(
        &self,
        choice: ImplChoice,
        (arch, sm_count): (Arch, u32),
        problem: &Problem,
        tuned: &dyn ConfigSource,
    ) -> anyhow::Result<(ImplChoice, Option<KernelConfig>, ConfigOrigin)> {
        let config = self.config(choice, (arch, sm_count), problem)?;
        let (plan, origin) = plan_with(problem, arch, sm_count, choice, config, tuned);
        Ok(match origin {
            ConfigOrigin::Default => (choice, config, origin),
            _ => (ImplChoice::Fixed(plan.spec.imp()), Some(plan.spec.config), origin),
        })
    }
}
