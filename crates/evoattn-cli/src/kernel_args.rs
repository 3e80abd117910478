//! The kernel-selection flags `check`, `bench`, `gate` and `profile` share, and their one
//! resolution: `--impl` (with `EVOATTN_IMPL` overriding `auto`) and per-problem `--config`.

use anyhow::bail;
use evoattn::plan::ImplChoice;
use evoattn::{Arch, KernelConfig};

#[derive(clap::Args, Debug)]
pub struct KernelArgs {
    /// Our kernel: auto (the planner's choice; EVOATTN_IMPL overrides), mma, wgmma, splitkv, reference.
    #[arg(long = "impl", default_value = "auto")]
    pub imp: String,
    /// Lever overrides for a named --impl, e.g. block_n=64,stages=3, applied to that kernel's
    /// default for each problem's head dim.
    #[arg(long)]
    pub config: Option<String>,
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

    /// The lever overrides applied to `choice`'s default for head dim `d` on `arch`; `None`
    /// when no `--config` was given (the planner decides).
    pub fn config(&self, choice: ImplChoice, arch: Arch, d: usize) -> anyhow::Result<Option<KernelConfig>> {
        match (&self.config, choice) {
            (Some(text), ImplChoice::Fixed(imp)) => {
                Ok(Some(evoattn::defaults::config(imp, arch, d).with_overrides(text).map_err(anyhow::Error::msg)?))
            }
            _ => Ok(None),
        }
    }
}
