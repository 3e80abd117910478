//! The kernel-selection flags `check`, `bench`, `gate` and `profile` share, and their one
//! resolution: `--impl` (with `EVOATTN_IMPL` overriding `auto`) and per-problem `--config`.

use anyhow::bail;
use evoattn::plan::{plan_with, ConfigOrigin, ConfigSource};
use evoattn::{Arch, Pass, Plan, Problem, Request};

#[derive(clap::Args, Debug)]
pub struct KernelArgs {
    /// Our kernel: auto (the planner's choice; EVOATTN_IMPL overrides), mma, wgmma, splitkv, resident, mma8 (E4M3 only), cublas (unfused: cuBLASLt GEMMs and a row kernel), hybrid-qk (cuBLASLt Q·Kᵀ and our P·V), hybrid-pv (our Q·Kᵀ and cuBLASLt P·V), reference; wgmma takes E4M3 too (the planner's choice for it on Hopper).
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
    /// The implementation asked for (`auto` or a family); `--config` needs a named one (the
    /// levers belong to one kernel).
    pub fn request(&self) -> anyhow::Result<Request> {
        let request =
            Request::parse(&self.imp).map_err(anyhow::Error::msg)?.with_env_override().map_err(anyhow::Error::msg)?;
        if self.config.is_some() && request == Request::Auto {
            bail!("--config needs a named --impl (the levers belong to one kernel)");
        }
        Ok(request)
    }

    /// The kernel `problem` runs with on `arch` with `sm_count` SMs, planned once: `--config`
    /// levers on the named family's default for the problem's head dim (with
    /// `--config-on-plan`, on the planner's config for the problem), else the tuned store's
    /// best for this GPU and the problem's bucket (`tuned`), else the planner's default; and
    /// where the config came from.
    /// [`KernelArgs::plan`] for `pass`: the request must name a family of that pass (or be
    /// `auto`); the backward pass has no tuned store yet, so it plans the family's default (with
    /// `--config`'s levers on it).
    pub fn plan_pass(
        &self,
        pass: Pass,
        request: Request,
        (arch, sm_count): (Arch, u32),
        problem: &Problem,
        tuned: &dyn ConfigSource,
    ) -> anyhow::Result<Plan> {
        evoattn::plan::check_pass(request, pass)?;
        if pass == Pass::Forward {
            return Ok(self.plan(request, (arch, sm_count), problem, tuned)?.0);
        }
        let request = match (&self.config, request) {
            (Some(text), Request::Family(imp)) => Request::Config(
                evoattn::defaults::for_problem(imp, arch, problem, sm_count)
                    .with_overrides(text)
                    .map_err(anyhow::Error::msg)?,
            ),
            _ => request,
        };
        let plan = evoattn::plan::plan_backward(problem, arch, sm_count, request);
        plan.spec
            .validate(arch)
            .map_err(|reason| evoattn::Error::Unsupported { imp: plan.spec.imp().to_string(), reason })?;
        Ok(plan)
    }

    pub fn plan(
        &self,
        request: Request,
        (arch, sm_count): (Arch, u32),
        problem: &Problem,
        tuned: &dyn ConfigSource,
    ) -> anyhow::Result<(Plan, ConfigOrigin)> {
        if request == Request::Auto {
            evoattn::plan::auto_covers_head_dim(problem.shape.d)?;
        }
        let request = match (&self.config, request) {
            (Some(text), Request::Family(imp)) => {
                let base = if self.config_on_plan {
                    evoattn::defaults::for_problem(imp, arch, problem, sm_count)
                } else {
                    evoattn::defaults::config(imp, arch, problem.dtype, problem.shape.d)
                };
                Request::Config(base.with_overrides(text).map_err(anyhow::Error::msg)?)
            }
            _ => request,
        };
        Ok(plan_with(problem, arch, sm_count, request, tuned))
    }
}
