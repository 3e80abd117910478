//! EvoEngineer-Full as pure logic: an elite population, children that change one lever of an
//! elite plus a few random restarts, gates in order, fitness against the planner's choice.
//! The GPU work sits behind [`Evaluator`], so the loop is tested on the CPU.

use super::space;
use evoattn::arch::Arch;
use evoattn::config::{KernelConfig, KernelSpec};
use evoattn::problem::Shape;
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::SeedableRng;
use std::collections::{HashMap, HashSet};

/// Elites kept per generation: few enough that mutations concentrate near the best, more than
/// one so a single lucky timing does not steer the whole search.
pub const ELITES: usize = 3;
/// One-lever children per generation.
pub const CHILDREN: usize = 6;
/// Random configs per generation, so the search can leave a local optimum of one-lever steps.
pub const RESTARTS: usize = 2;
/// A child slower than the baseline by more than this fraction on a shape counts as a
/// regression there: run-to-run noise of a median on the H100 stays well inside 10%.
pub const SLOWDOWN_TOLERANCE: f64 = 0.10;
/// Regressions on this many shapes discard a child whatever its geomean: a winner must not
/// buy one shape with two others.
pub const MAX_SLOWER_SHAPES: usize = 2;
/// Draws per proposal before giving up: invalid or already-seen configs are redrawn.
pub const MAX_DRAWS: usize = 64;

/// The gates a child passes, in order; the first failure stops it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gate {
    Compile,
    Resources,
    Correctness,
    Timing,
}

impl Gate {
    pub const ALL: [Gate; 4] = [Gate::Compile, Gate::Resources, Gate::Correctness, Gate::Timing];

    pub fn name(self) -> &'static str {
        match self {
            Gate::Compile => "compile",
            Gate::Resources => "resources",
            Gate::Correctness => "correctness",
            Gate::Timing => "timing",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Gate::ALL.into_iter().find(|g| g.name() == s)
    }
}

/// The result of one child: the gate that failed (with its error text), or per-shape medians.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    pub failure: Option<(Gate, String)>,
    /// Median time per shape, µs, in the order of the run's shapes; empty on failure.
    pub medians_us: Vec<f64>,
}

impl Evaluation {
    /// The gates passed: all before the failed one.
    pub fn passed(&self) -> &'static [Gate] {
        match &self.failure {
            None => &Gate::ALL,
            Some((gate, _)) => &Gate::ALL[..Gate::ALL.iter().position(|g| g == gate).expect("a gate")],
        }
    }
}

/// The GPU side of the tuner, one method per gate.
pub trait Evaluator {
    fn compile(&mut self, spec: &KernelSpec) -> Result<(), String>;
    /// Registers, spills and occupancy within bounds.
    fn resources(&mut self, spec: &KernelSpec) -> Result<(), String>;
    fn correctness(&mut self, spec: &KernelSpec, shapes: &[Shape]) -> Result<(), String>;
    /// Median µs per shape.
    fn timing(&mut self, spec: &KernelSpec, shapes: &[Shape]) -> Result<Vec<f64>, String>;

    /// Runs the gates in order, stopping at the first failure.
    fn evaluate(&mut self, spec: &KernelSpec, shapes: &[Shape]) -> Evaluation {
        let fail = |gate, e| Evaluation { failure: Some((gate, e)), medians_us: Vec::new() };
        if let Err(e) = self.compile(spec) {
            return fail(Gate::Compile, e);
        }
        if let Err(e) = self.resources(spec) {
            return fail(Gate::Resources, e);
        }
        if let Err(e) = self.correctness(spec, shapes) {
            return fail(Gate::Correctness, e);
        }
        match self.timing(spec, shapes) {
            Ok(medians_us) => Evaluation { failure: None, medians_us },
            Err(e) => fail(Gate::Timing, e),
        }
    }
}

/// Geometric mean over shapes of baseline time / child time (> 1 is faster).
pub fn fitness(baseline_us: &[f64], child_us: &[f64]) -> f64 {
    let logs: f64 = baseline_us.iter().zip(child_us).map(|(b, c)| (b / c).ln()).sum();
    (logs / baseline_us.len().max(1) as f64).exp()
}

/// Whether a child regresses too many shapes to be kept (see [`MAX_SLOWER_SHAPES`]).
pub fn discarded(baseline_us: &[f64], child_us: &[f64]) -> bool {
    let slower = baseline_us.iter().zip(child_us).filter(|(b, c)| **c > **b * (1.0 + SLOWDOWN_TOLERANCE)).count();
    slower >= MAX_SLOWER_SHAPES
}

/// One timed, kept configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub spec: KernelSpec,
    pub medians_us: Vec<f64>,
    pub fitness: f64,
}

/// What the tuner is asked to do.
#[derive(Clone, Debug)]
pub struct Params {
    pub arch: Arch,
    pub generations: usize,
    pub seed: u64,
}

/// What a run found.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Best first; the baseline is among them while nothing beats it.
    pub elites: Vec<Candidate>,
    /// Evaluations run by this call (stored ones reused are not counted).
    pub evaluated: usize,
}

/// Runs the loop from `baseline` (the planner's choice). `known` holds evaluations already
/// stored (resume): their configs are not evaluated again. `record` sees every new evaluation
/// with its fitness (`None` when a gate failed) and whether it was discarded.
pub fn evolve(
    evaluator: &mut impl Evaluator,
    baseline: KernelSpec,
    shapes: &[Shape],
    params: &Params,
    known: &HashMap<KernelConfig, Evaluation>,
    mut record: impl FnMut(&KernelSpec, &Evaluation, Option<f64>, bool),
) -> Result<Outcome, String> {
    let mut rng = SmallRng::seed_from_u64(params.seed);
    let mut evaluated = 0;
    let mut run = |spec: &KernelSpec| -> Evaluation {
        known.get(&spec.config).cloned().unwrap_or_else(|| {
            evaluated += 1;
            evaluator.evaluate(spec, shapes)
        })
    };
    let base_eval = run(&baseline);
    if let Some((gate, e)) = &base_eval.failure {
        return Err(format!("baseline {} failed the {} gate: {e}", baseline.name(), gate.name()));
    }
    if !known.contains_key(&baseline.config) {
        record(&baseline, &base_eval, Some(1.0), false);
    }
    let base_us = base_eval.medians_us;
    let mut elites = vec![Candidate { spec: baseline, medians_us: base_us.clone(), fitness: 1.0 }];
    let mut seen: HashSet<KernelConfig> = HashSet::from([baseline.config]);
    let imp = baseline.imp();
    // A resumed run starts from the population the stored evaluations give (sorted: the map's
    // order is not reproducible), and never proposes them again.
    let mut stored: Vec<(&KernelConfig, &Evaluation)> = known.iter().filter(|(c, _)| c.imp() == imp).collect();
    stored.sort_by_key(|(c, _)| c.to_string());
    for (config, eval) in stored {
        seen.insert(*config);
        if eval.failure.is_none() && *config != baseline.config && !discarded(&base_us, &eval.medians_us) {
            let fitness = fitness(&base_us, &eval.medians_us);
            elites.push(Candidate {
                spec: KernelSpec { config: *config, ..baseline },
                medians_us: eval.medians_us.clone(),
                fitness,
            });
        }
    }
    sort_best_first(&mut elites);
    for _ in 0..params.generations {
        let mut children = Vec::new();
        for i in 0..CHILDREN + RESTARTS {
            let draw = (0..MAX_DRAWS).find_map(|_| {
                let config = if i < CHILDREN {
                    space::mutate_one(elites.choose(&mut rng)?.spec.config, &mut rng)?
                } else {
                    space::random(imp, &mut rng)
                };
                let spec = KernelSpec { config, ..baseline };
                // Invalid combinations never reach the compiler: the tuner draws again.
                (!seen.contains(&config) && spec.validate(params.arch).is_ok()).then_some(spec)
            });
            if let Some(spec) = draw {
                seen.insert(spec.config);
                children.push(spec);
            }
        }
        if children.is_empty() {
            break; // the valid space is exhausted
        }
        for spec in children {
            let is_new = !known.contains_key(&spec.config);
            let eval = run(&spec);
            let kept = eval.failure.is_none().then(|| {
                let f = fitness(&base_us, &eval.medians_us);
                (f, discarded(&base_us, &eval.medians_us))
            });
            if is_new {
                record(&spec, &eval, kept.map(|k| k.0), kept.is_some_and(|k| k.1));
            }
            if let Some((fitness, false)) = kept {
                elites.push(Candidate { spec, medians_us: eval.medians_us, fitness });
            }
        }
        sort_best_first(&mut elites);
    }
    Ok(Outcome { elites, evaluated })
}

/// Best first, ties by name so runs are reproducible; keeps the top [`ELITES`].
fn sort_best_first(elites: &mut Vec<Candidate>) {
    elites.sort_by(|a, b| b.fitness.total_cmp(&a.fitness).then_with(|| a.spec.name().cmp(&b.spec.name())));
    elites.truncate(ELITES);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use evoattn::config::{Impl, WgmmaConfig, WgmmaLoads};
    use evoattn::problem::Dtype;

    /// Speed is a known function of the levers: fastest at block_n=128, stages=3, two
    /// warpgroups, TMA loads; every step away costs time on every shape.
    pub(crate) struct Mock {
        pub calls: Vec<KernelConfig>,
        pub fail_at: Option<Gate>,
        pub gates_run: Vec<Gate>,
    }

    impl Mock {
        pub(crate) fn new() -> Self {
            Mock { calls: Vec::new(), fail_at: None, gates_run: Vec::new() }
        }
        fn gate(&mut self, gate: Gate) -> Result<(), String> {
            self.gates_run.push(gate);
            if self.fail_at == Some(gate) {
                Err(format!("{} failed", gate.name()))
            } else {
                Ok(())
            }
        }
    }

    pub(crate) fn cost(config: KernelConfig) -> f64 {
        let KernelConfig::Wgmma(c) = config else { panic!("wgmma only") };
        let mut t = 100.0;
        t += (c.block_n as f64 - 128.0).abs() / 32.0 * 20.0;
        t += (c.stages as f64 - 3.0).abs() * 15.0;
        t += if c.consumer_warpgroups == 2 { 0.0 } else { 30.0 };
        t += if c.loads == WgmmaLoads::Tma { 0.0 } else { 40.0 };
        t
    }

    impl Evaluator for Mock {
        fn compile(&mut self, spec: &KernelSpec) -> Result<(), String> {
            self.calls.push(spec.config);
            self.gate(Gate::Compile)
        }
        fn resources(&mut self, _: &KernelSpec) -> Result<(), String> {
            self.gate(Gate::Resources)
        }
        fn correctness(&mut self, _: &KernelSpec, _: &[Shape]) -> Result<(), String> {
            self.gate(Gate::Correctness)
        }
        fn timing(&mut self, spec: &KernelSpec, shapes: &[Shape]) -> Result<Vec<f64>, String> {
            self.gate(Gate::Timing)?;
            Ok(shapes.iter().map(|s| cost(spec.config) * s.sq as f64 / 1024.0).collect())
        }
    }

    pub(crate) fn baseline() -> KernelSpec {
        let config = WgmmaConfig {
            block_n: 64,
            stages: 1,
            consumer_warpgroups: 1,
            loads: WgmmaLoads::CpAsync,
            warp_specialized: false,
            overlap: false,
            pingpong: false,
            persistent: false,
        };
        KernelSpec { config: KernelConfig::Wgmma(config), dtype: Dtype::Bf16, head_dim: 64 }
    }

    pub(crate) fn shapes() -> Vec<Shape> {
        vec![Shape::new(1, 8, 1024, 64), Shape::new(1, 8, 4096, 64)]
    }

    pub(crate) fn params() -> Params {
        Params { arch: Arch::Sm90a, generations: 8, seed: 42 }
    }

    #[test]
    fn fitness_is_the_geomean_of_speedups() {
        // 2x faster on one shape, 2x slower on the other: no gain.
        assert!((fitness(&[10.0, 10.0], &[5.0, 20.0]) - 1.0).abs() < 1e-12);
        // 2x and 8x: geomean 4x.
        assert!((fitness(&[10.0, 80.0], &[5.0, 10.0]) - 4.0).abs() < 1e-12);
        assert!((fitness(&[3.0], &[3.0]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn discard_needs_two_shapes_slower_by_more_than_ten_percent() {
        assert!(!discarded(&[10.0, 10.0, 10.0], &[11.0, 11.0, 1.0]), "exactly 10% is tolerated");
        assert!(!discarded(&[10.0, 10.0, 10.0], &[12.0, 1.0, 1.0]), "one slow shape is tolerated");
        assert!(discarded(&[10.0, 10.0, 10.0], &[12.0, 11.5, 1.0]), "despite a 10x geomean win elsewhere");
    }

    #[test]
    fn gates_stop_at_the_first_failure() {
        for (i, gate) in Gate::ALL.into_iter().enumerate() {
            let mut mock = Mock::new();
            mock.fail_at = Some(gate);
            let eval = mock.evaluate(&baseline(), &shapes());
            assert_eq!(eval.failure, Some((gate, format!("{} failed", gate.name()))));
            assert_eq!(mock.gates_run, Gate::ALL[..=i]);
            assert_eq!(eval.passed(), &Gate::ALL[..i]);
            assert!(eval.medians_us.is_empty());
        }
        let eval = Mock::new().evaluate(&baseline(), &shapes());
        assert_eq!(eval.passed(), &Gate::ALL);
        assert_eq!(eval.medians_us.len(), 2);
    }

    #[test]
    fn finds_the_optimum_in_a_few_generations_reproducibly() {
        let mut mock = Mock::new();
        let mut recorded = 0;
        let out =
            evolve(&mut mock, baseline(), &shapes(), &params(), &HashMap::new(), |_, _, _, _| recorded += 1).unwrap();
        let best = out.elites[0].spec.config;
        assert_eq!(best.to_string(), "block_n=128,stages=3,consumer_warpgroups=2,loads=tma");
        assert!((out.elites[0].fitness - cost(baseline().config) / 100.0).abs() < 1e-9);
        assert_eq!(out.evaluated, mock.calls.len());
        assert_eq!(recorded, out.evaluated);
        // Far fewer than the whole space (64 configs).
        assert!(out.evaluated < KernelSpec::space(Impl::Wgmma, Dtype::Bf16, 64).len());
        // No config is evaluated twice, and invalid ones never reach the compiler.
        let unique: HashSet<_> = mock.calls.iter().collect();
        assert_eq!(unique.len(), mock.calls.len());
        let again =
            evolve(&mut Mock::new(), baseline(), &shapes(), &params(), &HashMap::new(), |_, _, _, _| {}).unwrap();
        assert_eq!(again.elites, out.elites);
    }

    #[test]
    fn elitism_keeps_the_top_k_best_first() {
        let out = evolve(&mut Mock::new(), baseline(), &shapes(), &params(), &HashMap::new(), |_, _, _, _| {}).unwrap();
        assert_eq!(out.elites.len(), ELITES);
        assert!(out.elites.windows(2).all(|w| w[0].fitness >= w[1].fitness));
        // The elites are the K fastest configs evaluated.
        let mut all: Vec<f64> = Vec::new();
        let mut mock = Mock::new();
        evolve(&mut mock, baseline(), &shapes(), &params(), &HashMap::new(), |_, _, f, d| {
            if !d {
                all.extend(f)
            }
        })
        .unwrap();
        all.sort_by(|a, b| b.total_cmp(a));
        let top: Vec<f64> = out.elites.iter().map(|c| c.fitness).collect();
        assert_eq!(top, all[..ELITES]);
    }

    #[test]
    fn discarded_children_do_not_become_elites() {
        // Every child is slower on both shapes than the (optimal) baseline.
        let mut best = baseline();
        best.config = space::parse(Impl::Wgmma, "block_n=128,stages=3,consumer_warpgroups=2,loads=tma").unwrap();
        let mut discards = 0;
        let out = evolve(&mut Mock::new(), best, &shapes(), &params(), &HashMap::new(), |_, _, _, d| {
            discards += usize::from(d)
        })
        .unwrap();
        assert!(discards > 0);
        assert_eq!(out.elites.len(), 1);
        assert_eq!(out.elites[0].spec, best);
    }
}
