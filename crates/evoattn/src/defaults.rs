//! Default kernel configurations: each family's default for a head dim on an arch, and for a
//! problem on a GPU (`wgmma`'s rules). The rules live in their family's folder
//! (`kernels/<family>/`), their evidence in docs/decisions/; the planner starts from these and the
//! tuner's store overrides them per GPU and problem bucket.

use crate::arch::Arch;
use crate::config::{Impl, KernelConfig};

pub use crate::kernels::mma::default as mma;
pub use crate::kernels::reference::DEFAULT as REFERENCE;
pub use crate::kernels::splitkv::plan::default as splitkv;
pub use crate::kernels::wgmma::plan::{default as wgmma, SCHEDULER_L2_KV_PERCENT};

/// The default configuration of `imp` for one problem on a GPU with `sm_count` SMs: the head
/// dim's [`config`], which a family may adapt to the problem (`wgmma`'s rules).
pub fn for_problem(imp: Impl, arch: Arch, problem: &crate::problem::Problem, sm_count: u32) -> KernelConfig {
    imp.config_for_problem(arch, problem, sm_count)
}

/// The default configuration of `imp` for inputs of `dtype` at a head dim on an arch.
pub fn config(imp: Impl, arch: Arch, dtype: crate::problem::Dtype, head_dim: usize) -> KernelConfig {
    imp.default_config(arch, dtype, head_dim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KernelSpec;

    #[test]
    fn every_default_passes_validate_on_its_arch() {
        for imp in Impl::ALL {
            for &arch in imp.archs() {
                for (&head_dim, &dtype) in imp.head_dims().iter().flat_map(|d| imp.dtypes().iter().map(move |t| (d, t)))
                {
                    let spec = KernelSpec { config: config(imp, arch, dtype, head_dim), dtype, head_dim };
                    spec.validate(arch).unwrap_or_else(|e| panic!("{} on {arch}: {e}", spec.name()));
                }
            }
        }
    }
}
