//! The inversion pathologies (`evoattn invert`, the founding documents' phase 6): each breaks
//! one property a fast kernel relies on, in the planner's kernel, so that its slowdown measures
//! how much the kernel's speed depends on that property. Every one keeps the output correct
//! (`invert` checks it before timing). Those that change code are defines in the kernel
//! sources (`EVOATTN_PATHOLOGY_*`, compiled only by `invert`: no default kernel changes); the
//! others change a lever or the launch.

use evoattn::{Arch, Impl, KernelConfig, KernelSpec};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Pathology {
    /// K/V (and Q) copies where neighbouring threads take neighbouring rows, not neighbouring
    /// 16-byte columns (cp.async loads only).
    UncoalescedLoads,
    /// Shared-memory rows without their padding, so the 8 rows one ldmatrix reads share banks
    /// (padded cp.async tiles only; TMA's swizzle is the hardware's).
    BankConflicts,
    /// One more barrier a key block among the warps that share it.
    ExtraBarrier,
    /// A branch in the softmax that odd lanes take and even ones skip, once a key block.
    DivergentSoftmax,
    /// The K/V pipeline cut to one stage: no load overlaps the math.
    DepthOne,
    /// Persistent blocks (the static schedule) of which one in eight works (wgmma only).
    TinyGrid,
}

/// How a pathology enters the kernel: a config of the same kernel (the planner's, or one lever
/// off it), compiled with a source define or not.
#[derive(Clone, Debug, PartialEq)]
pub struct Injection {
    pub config: KernelConfig,
    /// Set to 1 when the kernel's source is compiled.
    pub define: Option<&'static str>,
}

impl Injection {
    /// What changed against `base`, for tables and records.
    pub fn describe(&self, base: &KernelConfig) -> String {
        let mut parts = Vec::new();
        if self.config != *base {
            parts.push(self.config.short_name(base));
        }
        parts.extend(self.define.map(|d| format!("-D{d}=1")));
        parts.join(", ")
    }
}

impl Pathology {
    pub const ALL: [Pathology; 6] = [
        Pathology::UncoalescedLoads,
        Pathology::BankConflicts,
        Pathology::ExtraBarrier,
        Pathology::DivergentSoftmax,
        Pathology::DepthOne,
        Pathology::TinyGrid,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pathology::UncoalescedLoads => "uncoalesced-loads",
            Pathology::BankConflicts => "bank-conflicts",
            Pathology::ExtraBarrier => "extra-barrier",
            Pathology::DivergentSoftmax => "divergent-softmax",
            Pathology::DepthOne => "depth-one",
            Pathology::TinyGrid => "tiny-grid",
        }
    }

    /// How it enters `spec` (the planner's kernel for a problem on `arch`), or why it cannot.
    pub fn inject(self, spec: &KernelSpec, arch: Arch) -> Result<Injection, String> {
        let imp = spec.imp();
        let base = spec.config;
        let lever = |text: &str| -> Result<KernelConfig, String> {
            let changed = base.with_overrides(text).map_err(|e| format!("{imp} has no such lever: {e}"))?;
            KernelSpec { config: changed, ..*spec }.validate(arch).map_err(|e| format!("{imp} refuses {text}: {e}"))?;
            Ok(changed)
        };
        let define = |name| Ok(Injection { config: base, define: Some(name) });
        match (self, imp) {
            (Pathology::UncoalescedLoads, Impl::Mma) => define("EVOATTN_PATHOLOGY_UNCOALESCED"),
            (Pathology::BankConflicts, Impl::Mma) => define("EVOATTN_PATHOLOGY_BANK_CONFLICTS"),
            (Pathology::UncoalescedLoads | Pathology::BankConflicts, _) => Err(format!(
                "{imp} does not copy padded rows with cp.async (TMA boxes or its own loads): nothing to undo"
            )),
            (Pathology::ExtraBarrier, Impl::Mma | Impl::Splitkv | Impl::Wgmma | Impl::Resident) => {
                define("EVOATTN_PATHOLOGY_BARRIER")
            }
            (Pathology::ExtraBarrier, _) => Err(format!("{imp}'s key loop has no pathology barrier")),
            (Pathology::DivergentSoftmax, Impl::Reference) => Err("the reference kernel has no online softmax".into()),
            (Pathology::DivergentSoftmax, _) => define("EVOATTN_PATHOLOGY_DIVERGENT"),
            (Pathology::DepthOne, _) => {
                let config = lever("stages=1")?;
                if config == base {
                    return Err(format!("{imp} already runs one stage"));
                }
                Ok(Injection { config, define: None })
            }
            (Pathology::TinyGrid, Impl::Wgmma) => {
                // The persistent schedule double-buffers Q: where that leaves no room for the
                // planner's K/V stages, the fewest stages less that fit (the tiny grid's cost
                // dwarfs a stage's).
                let KernelConfig::Wgmma(c) = base else { return Err(format!("{imp} without a wgmma config")) };
                let config = (1..=c.stages)
                    .rev()
                    .find_map(|stages| lever(&format!("schedule=persistent,stages={stages}")).ok())
                    .map_or_else(|| lever("schedule=persistent"), Ok)?;
                Ok(Injection { config, define: Some("EVOATTN_PATHOLOGY_TINY_GRID") })
            }
            (Pathology::TinyGrid, _) => {
                Err(format!("{imp} launches a block a tile: only wgmma's persistent schedule has a grid to shrink"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use evoattn::{Dtype, Impl};

    fn default(imp: Impl, arch: Arch) -> KernelSpec {
        KernelSpec { config: evoattn::defaults::config(imp, arch, Dtype::Bf16, 128), dtype: Dtype::Bf16, head_dim: 128 }
    }

    #[test]
    fn the_wgmma_kernel_takes_four_of_six() {
        let spec = default(Impl::Wgmma, Arch::Sm90a);
        let at = |p: Pathology| p.inject(&spec, Arch::Sm90a);
        for p in [Pathology::UncoalescedLoads, Pathology::BankConflicts] {
            assert!(at(p).unwrap_err().contains("TMA"), "{}", p.name());
        }
        let same = |define| Ok(Injection { config: spec.config, define: Some(define) });
        assert_eq!(at(Pathology::ExtraBarrier), same("EVOATTN_PATHOLOGY_BARRIER"));
        assert_eq!(at(Pathology::DivergentSoftmax), same("EVOATTN_PATHOLOGY_DIVERGENT"));
        match at(Pathology::DepthOne) {
            Ok(Injection { config: KernelConfig::Wgmma(c), define: None }) => assert_eq!(c.stages, 1),
            // A pipeline that needs two stages says so instead.
            Err(e) => assert!(e.contains("stages=1"), "{e}"),
            other => panic!("{other:?}"),
        }
        let tiny = at(Pathology::TinyGrid).unwrap();
        // hd128's default leaves no room for persistent blocks' second Q tile: one stage less.
        let KernelConfig::Wgmma(base) = spec.config else { panic!("wgmma") };
        assert!(
            matches!(tiny.config, KernelConfig::Wgmma(c) if c.schedule == evoattn::Schedule::Persistent
            && c.stages == base.stages - 1),
            "{:?}",
            tiny.config
        );
        assert_eq!(tiny.define, Some("EVOATTN_PATHOLOGY_TINY_GRID"));
        assert!(
            tiny.describe(&spec.config).ends_with("-DEVOATTN_PATHOLOGY_TINY_GRID=1"),
            "{}",
            tiny.describe(&spec.config)
        );
    }

    #[test]
    fn the_mma_kernel_takes_every_source_pathology_and_no_tiny_grid() {
        let spec = default(Impl::Mma, Arch::Sm80);
        for p in [
            Pathology::UncoalescedLoads,
            Pathology::BankConflicts,
            Pathology::ExtraBarrier,
            Pathology::DivergentSoftmax,
        ] {
            let injected = p.inject(&spec, Arch::Sm80).unwrap();
            assert_eq!(injected.config, spec.config, "{}", p.name());
            assert!(injected.define.is_some_and(|d| d.starts_with("EVOATTN_PATHOLOGY_")));
        }
        assert!(Pathology::TinyGrid.inject(&spec, Arch::Sm80).unwrap_err().contains("persistent"));
        let one = Pathology::DepthOne.inject(&spec, Arch::Sm80).unwrap();
        assert!(matches!(one.config, KernelConfig::Mma(c) if c.stages == 1) && one.define.is_none());
        assert_eq!(one.describe(&spec.config), "mma s=1");
        // Already at one stage, there is nothing to cut.
        let shallow = KernelSpec { config: spec.config.with_overrides("stages=1").unwrap(), ..spec };
        assert!(Pathology::DepthOne.inject(&shallow, Arch::Sm80).unwrap_err().contains("already"));
    }

    #[test]
    fn every_source_pathology_compiles_within_the_resource_gate_where_it_applies() {
        if let Err(e) = evoattn::runtime::nvrtc::Nvrtc::get() {
            assert!(std::env::var_os("CI").is_none(), "NVRTC is required under CI: {e}");
            println!("skipped: {e}");
            return;
        }
        let targets = [
            (Impl::Mma, vec![Arch::Sm80, Arch::Sm89, Arch::Sm90a]),
            (Impl::Splitkv, vec![Arch::Sm80, Arch::Sm90a]),
            (Impl::Wgmma, vec![Arch::Sm90a]),
            (Impl::Resident, vec![Arch::Sm90a]),
        ];
        let jobs: Vec<(KernelSpec, Arch, Pathology, Injection)> = targets
            .iter()
            .flat_map(|(imp, archs)| archs.iter().map(move |&arch| (*imp, arch)))
            .flat_map(|(imp, arch)| {
                [64, 128].into_iter().map(move |d| {
                    let config = evoattn::defaults::config(imp, arch, Dtype::Bf16, d);
                    (KernelSpec { config, dtype: Dtype::Bf16, head_dim: d }, arch)
                })
            })
            .filter(|(spec, arch)| spec.validate(*arch).is_ok())
            .flat_map(|(spec, arch)| {
                Pathology::ALL.into_iter().filter_map(move |p| {
                    let injection = p.inject(&spec, arch).ok().filter(|i| i.define.is_some())?;
                    Some((spec, arch, p, injection))
                })
            })
            .collect();
        assert!(jobs.len() > 30, "{} pathology variants", jobs.len());
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let failures: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = jobs
                .chunks(jobs.len().div_ceil(threads))
                .map(|chunk| {
                    s.spawn(move || {
                        chunk
                            .iter()
                            .filter_map(|(spec, arch, p, injection)| {
                                let spec = KernelSpec { config: injection.config, ..*spec };
                                let unit = evoattn::kernels::main_source(spec.imp());
                                let define = injection.define.expect("filtered above");
                                let result = crate::lab::variant::compile_source(&spec, *arch, &unit, &[define])
                                    .and_then(|c| c.gate());
                                result.err().map(|e| format!("{} {} {arch}: {e}", p.name(), spec.name()))
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().expect("a compile thread")).collect()
        });
        assert!(failures.is_empty(), "{failures:#?}");
    }

    #[test]
    fn names_parse_back_as_the_command_line_spells_them() {
        for p in Pathology::ALL {
            assert_eq!(<Pathology as clap::ValueEnum>::from_str(p.name(), false), Ok(p));
        }
    }
}
