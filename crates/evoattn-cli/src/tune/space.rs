//! The tuner's search space: each kernel's levers and their allowed values, taken from the
//! family's lever table so the tuner never proposes a value the kernel does not know.

use evoattn::config::{Impl, KernelConfig, KernelSpec};
use evoattn::problem::Dtype;
use rand::seq::IndexedRandom;
use rand::Rng;

/// The levers of `imp` and the values each may take, as `with_overrides` text: the family's
/// lever table, less its instrumentation levers.
pub fn levers(imp: Impl) -> Vec<(&'static str, Vec<String>)> {
    imp.tuning_levers()
}

/// A config of `imp` to apply overrides to: the first of its space, so that a lever missing from
/// a config's text (a store record older than the lever) takes its off value. The space is lazy:
/// its first element costs nothing to make.
fn base(imp: Impl) -> KernelConfig {
    KernelSpec::space(imp, Dtype::F16, imp.head_dims()[0]).next().expect("every implementation has a space").config
}

/// Parses a config's `key=value,...` text (as `Display` writes it) back into a config of `imp`.
pub fn parse(imp: Impl, text: &str) -> Result<KernelConfig, String> {
    base(imp).with_overrides(text)
}

fn set(config: KernelConfig, key: &str, value: &str) -> KernelConfig {
    config.with_overrides(&format!("{key}={value}")).expect("space values are levers of their kernel")
}

/// `config` with exactly one lever changed to a different allowed value; `None` when no lever
/// has an alternative (the reference kernel).
pub fn mutate_one(config: KernelConfig, rng: &mut impl Rng) -> Option<KernelConfig> {
    let current = config.levers();
    let choices: Vec<(&str, Vec<String>)> = levers(config.imp())
        .into_iter()
        .map(|(key, values)| {
            let now = current.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()).unwrap_or_default();
            (key, values.into_iter().filter(|v| *v != now).collect::<Vec<_>>())
        })
        .filter(|(_, others)| !others.is_empty())
        .collect();
    let (key, others) = choices.choose(rng)?;
    Some(set(config, key, others.choose(rng)?))
}

/// `config` with one gene changed. Where the run searches several families (`tune --impl
/// any`), the family is a gene beside the config's levers, drawn as often as any one of them:
/// a switch takes another family's `start` (the planner's config of it for the run's problem;
/// its levers below it, searched from there on). One family: [`mutate_one`].
pub fn mutate_gene(
    config: KernelConfig,
    families: &[Impl],
    start: impl Fn(Impl) -> KernelConfig,
    rng: &mut impl Rng,
) -> Option<KernelConfig> {
    let others: Vec<Impl> = families.iter().copied().filter(|&f| f != config.imp()).collect();
    if !others.is_empty() && rng.random_range(0..=levers(config.imp()).len()) == 0 {
        return others.choose(rng).map(|&f| start(f));
    }
    mutate_one(config, rng)
}

/// A uniformly random config of `imp` (every lever drawn independently).
pub fn random(imp: Impl, rng: &mut impl Rng) -> KernelConfig {
    levers(imp).iter().fold(base(imp), |c, (key, values)| set(c, key, values.choose(rng).expect("non-empty")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn in_space(config: KernelConfig) -> bool {
        let space = levers(config.imp());
        config.levers().iter().all(|(k, v)| space.iter().any(|(key, values)| key == k && values.contains(v)))
    }

    #[test]
    fn the_family_is_one_gene_more_and_a_switch_takes_the_other_familys_start() {
        let mut rng = SmallRng::seed_from_u64(3);
        // Any map from family to config: the run's is the planner's config for its problem.
        let starts = |imp: Impl| imp.default_config(evoattn::Arch::Sm90a, Dtype::Bf16, 128);
        let start = starts(Impl::Wgmma);
        let families = [Impl::Wgmma, Impl::Mma, Impl::Cublas];
        let (mut switches, draws) = (0, 3000);
        for _ in 0..draws {
            let child = mutate_gene(start, &families, starts, &mut rng).unwrap();
            if child.imp() == start.imp() {
                let changed = start.levers().iter().zip(child.levers()).filter(|(a, b)| **a != *b).count();
                assert_eq!(changed, 1, "{start} -> {child}");
            } else {
                assert!(families.contains(&child.imp()));
                assert_eq!(child, starts(child.imp()), "a switch lands on the family's start");
                switches += 1;
            }
        }
        // As often as one lever of the config's: 1 in (levers + 1).
        let expected = draws as f64 / (levers(Impl::Wgmma).len() + 1) as f64;
        assert!((switches as f64 - expected).abs() < 0.3 * expected, "{switches} switches, ~{expected} expected");
        // One family: never a switch.
        for _ in 0..200 {
            assert_eq!(mutate_gene(start, &[Impl::Wgmma], starts, &mut rng).unwrap().imp(), Impl::Wgmma);
        }
    }

    #[test]
    fn mutation_changes_exactly_one_lever_and_stays_in_the_space() {
        let mut rng = SmallRng::seed_from_u64(7);
        for imp in [Impl::Mma, Impl::Wgmma] {
            for _ in 0..200 {
                let parent = random(imp, &mut rng);
                assert!(in_space(parent), "{parent}");
                let child = mutate_one(parent, &mut rng).unwrap();
                assert!(in_space(child), "{child}");
                let changed = parent.levers().iter().zip(child.levers()).filter(|(a, b)| **a != *b).count();
                assert_eq!(changed, 1, "{parent} -> {child}");
            }
        }
        let reference = evoattn::config::KernelConfig::Reference(evoattn::defaults::REFERENCE);
        assert_eq!(mutate_one(reference, &mut rng), None);
    }

    #[test]
    fn random_draws_every_lever_value_and_reaches_every_head_dims_space() {
        // `random` draws each lever on its own, so the configs it reaches are the product of the
        // levers' values (1.5M for wgmma; drawing all of the 9.4M before its typed axes took over
        // 15 minutes). Checked in two parts instead: every value of every lever comes up about as
        // often as its lever's others over a few thousand draws (each draw's text round-trips),
        // and every head dim's space lies inside that product.
        let mut rng = SmallRng::seed_from_u64(1);
        let space = levers(Impl::Wgmma);
        const DRAWS: usize = 6000;
        let mut counts = std::collections::HashMap::new();
        for _ in 0..DRAWS {
            let c = random(Impl::Wgmma, &mut rng);
            assert_eq!(parse(Impl::Wgmma, &c.to_string()).unwrap(), c);
            for (key, value) in c.levers() {
                *counts.entry((key, value)).or_insert(0usize) += 1;
            }
        }
        for (key, values) in &space {
            // A lever of k values: DRAWS / k each, binomial; 30% is over 6 standard deviations
            // at k = 6 (the most values a lever has), so a miss is a bias, not chance.
            let expected = DRAWS / values.len();
            for value in values {
                let n = counts.get(&(*key, value.clone())).copied().unwrap_or(0);
                assert!(n * 10 >= expected * 7 && n * 10 <= expected * 13, "{key}={value}: {n} of {DRAWS}");
            }
        }
        for &d in Impl::Wgmma.head_dims() {
            assert!(KernelSpec::space(Impl::Wgmma, Dtype::F16, d).all(|s| in_space(s.config)), "hd{d}");
        }
    }
}
