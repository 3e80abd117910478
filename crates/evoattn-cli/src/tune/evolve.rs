//! EvoEngineer-Full as pure logic: an elite population, children that change one lever of an
//! elite plus a few random restarts, gates in order, fitness against the planner's choice.
//! The GPU work sits behind [`Evaluator`], so the loop is tested on the CPU.

use super::space;
use crate::lab::ncu::{composite, NcuTerms};
use evoattn::arch::Arch;
use evoattn::config::{Impl, KernelConfig, KernelSpec, Provider};
use evoattn::problem::Shape;
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::SeedableRng;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

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
    /// After timing: the inputs unchanged by the timed launches, a second correctness check on
    /// inputs the kernel has never seen, and no median below 80% of the roofline's time. What a kernel that
    /// games the first three gates (it behaves once it is being timed) cannot pass.
    Integrity,
    /// Nsight Compute's counters, read when the run ranks by the composite score or asks for
    /// the sanity gate (`--ncu-gate`): a profile that fails to run, or fails that gate.
    Ncu,
}

/// What ranks candidates (`tune --fitness`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fitness {
    /// The geometric-mean speedup over the baseline (the measured time alone).
    Geomean,
    /// The founding documents' composite: 1000 × that speedup + 2 × tensor-pipe % + SM-busy %
    /// − penalties (barrier stalls, registers), from Nsight Compute's counters.
    Composite,
}

impl Fitness {
    pub fn name(self) -> &'static str {
        match self {
            Fitness::Geomean => "geomean",
            Fitness::Composite => "composite",
        }
    }
}

impl Gate {
    pub const ALL: [Gate; 6] =
        [Gate::Compile, Gate::Resources, Gate::Correctness, Gate::Timing, Gate::Integrity, Gate::Ncu];

    pub fn name(self) -> &'static str {
        match self {
            Gate::Compile => "compile",
            Gate::Resources => "resources",
            Gate::Correctness => "correctness",
            Gate::Timing => "timing",
            Gate::Integrity => "integrity",
            Gate::Ncu => "ncu",
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
    /// Nsight Compute's counters, the mean over the shapes, when the run profiled.
    pub counters: Option<NcuTerms>,
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

impl Evaluation {
    /// A failure at `gate` with its error text.
    pub fn failed(gate: Gate, error: impl Into<String>) -> Self {
        Evaluation { failure: Some((gate, error.into())), medians_us: Vec::new(), counters: None }
    }
}

/// What is evaluated: a config of the kernel's embedded source, or a whole source variant
/// (from the proposer) compiled with the config's defines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Child {
    pub spec: KernelSpec,
    pub source: Option<String>,
}

impl Child {
    pub fn of(spec: KernelSpec) -> Self {
        Child { spec, source: None }
    }

    /// The spec's name, marked when the source is a variant.
    pub fn name(&self) -> String {
        match self.source {
            Some(_) => format!("{} [proposed source]", self.spec.name()),
            None => self.spec.name(),
        }
    }
}

/// How candidates are evaluated: a generation at a time, so an evaluator may spread it over
/// GPUs. Anything with the four [`Gates`] is one, evaluating in order.
pub trait Evaluator {
    /// Evaluates a generation, calling `done(i, evaluation)` as each child completes (in any
    /// order) so the caller can store it at once. No child starts after `deadline`: those are
    /// not reported (a resumed run evaluates them).
    fn evaluate_batch(
        &mut self,
        children: &[Child],
        shapes: &[Shape],
        deadline: Option<Instant>,
        done: &mut dyn FnMut(usize, Evaluation),
    );
}

/// Whether `deadline` has passed.
pub fn past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

impl<T: Gates> Evaluator for T {
    fn evaluate_batch(
        &mut self,
        children: &[Child],
        shapes: &[Shape],
        deadline: Option<Instant>,
        done: &mut dyn FnMut(usize, Evaluation),
    ) {
        for (i, child) in children.iter().enumerate() {
            if past(deadline) {
                return;
            }
            let eval = self.evaluate(child, shapes);
            done(i, eval);
        }
    }
}

/// The gates one child passes, one method each.
pub trait Gates {
    fn compile(&mut self, child: &Child) -> Result<(), String>;
    /// Registers, spills and occupancy within bounds.
    fn resources(&mut self, child: &Child) -> Result<(), String>;
    fn correctness(&mut self, child: &Child, shapes: &[Shape]) -> Result<(), String>;
    /// Median µs per shape.
    fn timing(&mut self, child: &Child, shapes: &[Shape]) -> Result<Vec<f64>, String>;
    /// The checks after timing ([`Gate::Integrity`]), given the medians timing measured.
    fn integrity(&mut self, child: &Child, shapes: &[Shape], medians_us: &[f64]) -> Result<(), String>;
    /// Nsight Compute's counters when the run profiles (None when it does not).
    fn profile(&mut self, child: &Child, shapes: &[Shape]) -> Result<Option<NcuTerms>, String>;

    /// Runs the gates in order, stopping at the first failure.
    fn evaluate(&mut self, child: &Child, shapes: &[Shape]) -> Evaluation {
        if let Err(e) = self.compile(child) {
            return Evaluation::failed(Gate::Compile, e);
        }
        if let Err(e) = self.resources(child) {
            return Evaluation::failed(Gate::Resources, e);
        }
        if let Err(e) = self.correctness(child, shapes) {
            return Evaluation::failed(Gate::Correctness, e);
        }
        let medians_us = match self.timing(child, shapes) {
            Ok(m) => m,
            Err(e) => return Evaluation::failed(Gate::Timing, e),
        };
        if let Err(e) = self.integrity(child, shapes, &medians_us) {
            return Evaluation::failed(Gate::Integrity, e);
        }
        match self.profile(child, shapes) {
            Ok(counters) => Evaluation { failure: None, medians_us, counters },
            Err(e) => Evaluation::failed(Gate::Ncu, e),
        }
    }
}

/// What the proposer hook may add to a generation.
#[derive(Clone, Debug, PartialEq)]
pub enum Proposal {
    Config(KernelConfig),
    /// A whole kernel source, compiled with the best elite's defines.
    Source(String),
}

/// The loop's side channels: outside proposals and progress. Every method has a no-op default.
pub trait Hooks {
    /// Extra children for generation `generation`, given the elites (best first).
    fn propose(&mut self, generation: usize, elites: &[Candidate]) -> Vec<Proposal> {
        let _ = (generation, elites);
        Vec::new()
    }
    /// Called when a generation starts (0-based) and once more when the loop ends.
    fn generation(&mut self, generation: usize, elites: &[Candidate]) {
        let _ = (generation, elites);
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
    /// What ranks it: the geomean speedup, or the composite score ([`Params::fitness`]).
    pub fitness: f64,
    /// The geometric-mean speedup over the baseline.
    pub speedup: f64,
    pub counters: Option<NcuTerms>,
}

/// What the tuner is asked to do.
#[derive(Clone, Debug)]
pub struct Params {
    pub arch: Arch,
    /// The families searched, each as the config its search starts from: the planner's config of
    /// that family for the group's problem (`plan` with `Request::Family`), one per family, the
    /// baseline's included. One: the baseline's family alone. Several (`tune --impl any`): the
    /// family is a gene of its own ([`space::mutate_gene`]) and a switch lands on the family's
    /// start; every start is evaluated once before the first generation.
    pub starts: Vec<KernelConfig>,
    pub generations: usize,
    pub seed: u64,
    /// Elites kept per generation.
    pub elites: usize,
    /// No generation starts after this instant (`--budget`).
    pub deadline: Option<Instant>,
    /// What ranks candidates.
    pub fitness: Fitness,
    /// Whether the NCU sanity gate applies ([`crate::lab::ncu::sanity`]).
    pub ncu_gate: bool,
    /// Whether cuTENSOR loads: without it no library path with `gemm=cutensor` is drawn.
    pub cutensor: bool,
}

impl Params {
    /// Whether the run may evaluate `spec`: valid on the arch, and its library installed.
    /// Invalid combinations never reach the compiler: the tuner draws again.
    fn runnable(&self, spec: &KernelSpec) -> bool {
        let library_missing = !self.cutensor && spec.config.library().is_some_and(|p| p.gemm == Provider::Cutensor);
        !library_missing && spec.validate(self.arch).is_ok()
    }

    /// The families searched, in the order of [`Params::starts`].
    pub fn families(&self) -> Vec<Impl> {
        self.starts.iter().map(KernelConfig::imp).collect()
    }

    /// `config` with one gene changed ([`space::mutate_gene`]): a switch of family lands on the
    /// other family's start.
    fn mutate(&self, config: KernelConfig, rng: &mut impl rand::Rng) -> Option<KernelConfig> {
        let start = |imp: Impl| {
            *self.starts.iter().find(|c| c.imp() == imp).expect("mutate_gene switches to a family searched")
        };
        space::mutate_gene(config, &self.families(), start, rng)
    }
}

/// The best time of one family on one shape, and the config that gave it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShapeBest {
    pub median_us: f64,
    pub config: KernelConfig,
}

/// One family's best per shape: which family wins each shape.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyBest {
    pub imp: Impl,
    /// Per shape, in the run's order: the lowest median over every evaluation of the family's
    /// embedded kernel that passed the gates (the baseline, stored and fresh ones; discarded
    /// ones too: the discard rule is about the elite, not the families' comparison; proposed
    /// sources not: the planner cannot run them). `None` where none passed.
    pub per_shape: Vec<Option<ShapeBest>>,
}

impl FamilyBest {
    /// Takes `eval`'s medians where they beat the family's best so far (`config` is of this
    /// family; a failed evaluation changes nothing).
    fn note(&mut self, config: KernelConfig, eval: &Evaluation) {
        if eval.failure.is_some() {
            return;
        }
        for (best, &median_us) in self.per_shape.iter_mut().zip(&eval.medians_us) {
            if best.is_none_or(|b| median_us < b.median_us) {
                *best = Some(ShapeBest { median_us, config });
            }
        }
    }
}

/// What a run found.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Best first; the baseline is among them while nothing beats it.
    pub elites: Vec<Candidate>,
    /// Evaluations run by this call (stored ones reused are not counted).
    pub evaluated: usize,
    /// Generations run (the families' starts, evaluated before the first, are none of them).
    pub generations: usize,
    /// The baseline's median per shape, what every fitness is relative to.
    pub baseline_us: Vec<f64>,
    /// Per family searched (in [`Params::starts`] order), its best per shape.
    pub families: Vec<FamilyBest>,
}

impl Outcome {
    /// Per shape, the family with the lowest best median (ties: the first in
    /// [`Outcome::families`]); `None` where no family passed, which a run whose baseline passed
    /// never has.
    pub fn winners(&self) -> Vec<Option<Impl>> {
        (0..self.baseline_us.len())
            .map(|shape| {
                let mut winner: Option<(Impl, f64)> = None;
                for family in &self.families {
                    if let Some(Some(best)) = family.per_shape.get(shape) {
                        if winner.is_none_or(|(_, us)| best.median_us < us) {
                            winner = Some((family.imp, best.median_us));
                        }
                    }
                }
                winner.map(|(imp, _)| imp)
            })
            .collect()
    }
}

/// Runs the loop from `baseline` (the planner's choice). `known` holds evaluations already
/// stored (resume): their configs are not evaluated again. `record` sees every new evaluation,
/// as it completes, with its fitness (`None` when a gate failed) and whether it was discarded.
/// Where several families are searched, their starts are evaluated after the baseline, before
/// the first generation, so every family is measured at least once.
pub fn evolve(
    evaluator: &mut impl Evaluator,
    baseline: KernelSpec,
    shapes: &[Shape],
    params: &Params,
    known: &HashMap<KernelConfig, Evaluation>,
    hooks: &mut dyn Hooks,
    mut record: impl FnMut(&Child, &Evaluation, Option<f64>, bool),
) -> Result<Outcome, String> {
    let mut rng = SmallRng::seed_from_u64(params.seed);
    let mut evaluated = 0;
    let families = params.families();
    if let Some(twice) = families.iter().enumerate().find_map(|(i, f)| families[..i].contains(f).then_some(f)) {
        return Err(format!("two starts of the family {twice}: one each"));
    }
    let searched = |config: &KernelConfig| families.contains(&config.imp());
    if !searched(&baseline.config) {
        return Err(format!("the baseline {} is of none of the families searched", baseline.name()));
    }
    // Stored evaluations serve only where they hold what this run ranks and gates by.
    let profiles = params.fitness == Fitness::Composite || params.ncu_gate;
    let known: HashMap<KernelConfig, Evaluation> = known
        .iter()
        .filter(|(_, e)| match &e.failure {
            None => !profiles || e.counters.is_some(),
            Some((Gate::Ncu, _)) => params.ncu_gate,
            Some(_) => true,
        })
        .map(|(c, e)| (*c, e.clone()))
        .collect();
    let base_child = Child::of(baseline);
    let base_eval = match known.get(&baseline.config) {
        Some(eval) => eval.clone(),
        None => {
            let mut eval = None;
            // The baseline is what every fitness is relative to: it runs whatever the budget.
            evaluator.evaluate_batch(std::slice::from_ref(&base_child), shapes, None, &mut |_, e| {
                eval = Some(ncu_gate(e, params))
            });
            evaluated += 1;
            let eval = eval.ok_or("the evaluator returned no result for the baseline")?;
            record(&base_child, &eval, eval.failure.is_none().then_some(1.0), false);
            eval
        }
    };
    if let Some((gate, e)) = &base_eval.failure {
        return Err(format!("baseline {} failed the {} gate: {e}", baseline.name(), gate.name()));
    }
    let base_us = base_eval.medians_us.clone();
    let candidate = |spec: KernelSpec, eval: &Evaluation| {
        let speedup = fitness(&base_us, &eval.medians_us);
        let rank = match params.fitness {
            Fitness::Geomean => speedup,
            Fitness::Composite => composite(speedup, &eval.counters.unwrap_or_default()),
        };
        Candidate { spec, medians_us: eval.medians_us.clone(), fitness: rank, speedup, counters: eval.counters }
    };
    let mut bests: Vec<FamilyBest> =
        families.iter().map(|&imp| FamilyBest { imp, per_shape: vec![None; shapes.len()] }).collect();
    let mut note = |config: KernelConfig, eval: &Evaluation| {
        if let Some(best) = bests.iter_mut().find(|b| b.imp == config.imp()) {
            best.note(config, eval);
        }
    };
    note(baseline.config, &base_eval);
    let mut elites = vec![candidate(baseline, &base_eval)];
    let mut seen: HashSet<KernelConfig> = HashSet::from([baseline.config]);
    // A resumed run starts from the population the stored evaluations give (sorted: the map's
    // order is not reproducible), and never proposes them again.
    let mut stored: Vec<(&KernelConfig, &Evaluation)> = known.iter().filter(|(c, _)| searched(c)).collect();
    stored.sort_by_key(|(c, _)| c.to_string());
    for (config, eval) in stored {
        seen.insert(*config);
        note(*config, eval);
        if eval.failure.is_none() && *config != baseline.config && !discarded(&base_us, &eval.medians_us) {
            elites.push(candidate(KernelSpec { config: *config, ..baseline }, eval));
        }
    }
    sort_best_first(&mut elites, params.elites);
    // Every family measured once, from where the planner would run it: random switches alone
    // may never reach one. Starts evaluated already (the baseline, stored ones) are not again.
    if families.len() > 1 && !past(params.deadline) {
        let starts: Vec<Child> = params
            .starts
            .iter()
            .filter(|&&config| seen.insert(config))
            .map(|&config| Child::of(KernelSpec { config, ..baseline }))
            .collect();
        let results = run_children(evaluator, starts, shapes, params, &known, &base_us, &mut evaluated, &mut record);
        for (child, eval) in results {
            note(child.spec.config, &eval);
            if let (Some(_), false) = score(&base_us, &eval) {
                elites.push(candidate(child.spec, &eval));
            }
        }
        sort_best_first(&mut elites, params.elites);
    }
    let mut generations = 0;
    for generation in 0..params.generations {
        if past(params.deadline) {
            break;
        }
        hooks.generation(generation, &elites);
        let mut children = Vec::new();
        for i in 0..CHILDREN + RESTARTS {
            let draw = (0..MAX_DRAWS).find_map(|_| {
                let config = if i < CHILDREN {
                    params.mutate(elites.choose(&mut rng)?.spec.config, &mut rng)?
                } else {
                    // One family draws nothing for it: a run of one family is what it was.
                    let family = match families.as_slice() {
                        [one] => *one,
                        several => *several.choose(&mut rng)?,
                    };
                    space::random(family, &mut rng)
                };
                let spec = KernelSpec { config, ..baseline };
                (!seen.contains(&config) && params.runnable(&spec)).then_some(spec)
            });
            if let Some(spec) = draw {
                seen.insert(spec.config);
                children.push(Child::of(spec));
            }
        }
        for proposal in hooks.propose(generation, &elites) {
            match proposal {
                Proposal::Config(config) => {
                    let spec = KernelSpec { config, ..baseline };
                    if searched(&config) && params.runnable(&spec) && seen.insert(config) {
                        children.push(Child::of(spec));
                    }
                }
                Proposal::Source(text) => children.push(Child { spec: elites[0].spec, source: Some(text) }),
            }
        }
        if children.is_empty() {
            break; // the valid space is exhausted
        }
        generations += 1;
        let results = run_children(evaluator, children, shapes, params, &known, &base_us, &mut evaluated, &mut record);
        for (child, eval) in results {
            // Variants are data, not parents: a one-lever mutation of one would drop its source.
            if child.source.is_some() {
                continue;
            }
            note(child.spec.config, &eval);
            if let (Some(_), false) = score(&base_us, &eval) {
                elites.push(candidate(child.spec, &eval));
            }
        }
        sort_best_first(&mut elites, params.elites);
    }
    hooks.generation(generations, &elites);
    Ok(Outcome { elites, evaluated, generations, baseline_us: base_us, families: bests })
}

/// Evaluates `children`, reusing the stored evaluations of a resumed run (`known`) rather than
/// measuring them again; each fresh one is counted in `evaluated` and recorded as it completes.
/// No child starts after the deadline.
#[allow(clippy::too_many_arguments)]
fn run_children(
    evaluator: &mut impl Evaluator,
    children: Vec<Child>,
    shapes: &[Shape],
    params: &Params,
    known: &HashMap<KernelConfig, Evaluation>,
    base_us: &[f64],
    evaluated: &mut usize,
    record: &mut impl FnMut(&Child, &Evaluation, Option<f64>, bool),
) -> Vec<(Child, Evaluation)> {
    let (reused, fresh): (Vec<Child>, Vec<Child>) =
        children.into_iter().partition(|c| c.source.is_none() && known.contains_key(&c.spec.config));
    let mut results: Vec<(Child, Evaluation)> =
        reused.into_iter().map(|c| (c.clone(), known[&c.spec.config].clone())).collect();
    evaluator.evaluate_batch(&fresh, shapes, params.deadline, &mut |i, eval| {
        *evaluated += 1;
        let eval = ncu_gate(eval, params);
        let (speedup, dropped) = score(base_us, &eval);
        record(&fresh[i], &eval, speedup, dropped);
        results.push((fresh[i].clone(), eval));
    });
    results
}

/// `eval` through the NCU sanity gate when the run applies it; a run that profiles needs the
/// counters of every evaluation that passed the other gates.
fn ncu_gate(eval: Evaluation, params: &Params) -> Evaluation {
    let profiles = params.fitness == Fitness::Composite || params.ncu_gate;
    let verdict = match (&eval.failure, &eval.counters) {
        (Some(_), _) => Ok(()),
        (None, None) if profiles => Err("the evaluator returned no counters".to_string()),
        (None, Some(c)) if params.ncu_gate => crate::lab::ncu::sanity(c),
        (None, _) => Ok(()),
    };
    match verdict {
        Ok(()) => eval,
        Err(e) => Evaluation { counters: eval.counters, ..Evaluation::failed(Gate::Ncu, e) },
    }
}

/// The geomean speedup of an evaluation (`None` when a gate failed) and whether the discard
/// rule drops it.
fn score(base_us: &[f64], eval: &Evaluation) -> (Option<f64>, bool) {
    match eval.failure {
        Some(_) => (None, false),
        None => (Some(fitness(base_us, &eval.medians_us)), discarded(base_us, &eval.medians_us)),
    }
}

/// Best first, ties by name so runs are reproducible; keeps the top `keep`.
fn sort_best_first(elites: &mut Vec<Candidate>, keep: usize) {
    elites.sort_by(|a, b| b.fitness.total_cmp(&a.fitness).then_with(|| a.spec.name().cmp(&b.spec.name())));
    elites.truncate(keep.max(1));
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use evoattn::config::{Loads, Pipeline, Schedule, WgmmaConfig};
    use evoattn::problem::Dtype;

    /// Speed is a known function of the levers: fastest at block_n=128, stages=3, two
    /// warpgroups, TMA loads; every step away costs time on every shape.
    pub(crate) struct Mock {
        pub calls: Vec<KernelConfig>,
        pub fail_at: Option<Gate>,
        pub gates_run: Vec<Gate>,
        /// The counters a config's profile reads, when the run profiles.
        pub counters: Option<fn(KernelConfig) -> NcuTerms>,
        /// A config's median on a shape, µs ([`scaled`] unless a test says otherwise).
        pub time: fn(KernelConfig, &Shape) -> f64,
    }

    impl Mock {
        pub(crate) fn new() -> Self {
            Mock { calls: Vec::new(), fail_at: None, gates_run: Vec::new(), counters: None, time: scaled }
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

    const VARIANT_SPEEDUP: f64 = 10.0;

    /// The mock's optimum: TMA loads with no pipeline beyond them, one tile per block, O from
    /// registers, the polynomial exponential and the lazy rescale off.
    const OPTIMUM: &str = "block_n=128,stages=3,consumer_warpgroups=2,pipeline=tma";
    const SWITCHES_OFF: &str =
        "schedule=grid,o_staging=registers,exp2_poly=0,lazy_rescale=0,ring_test=0,rowsum_mma=0,half_last=0,multicast=0,q_in_regs=0";

    /// The mock's `cublas` path, for the runs that search families: faster than any wgmma
    /// config here (the optimum costs 100), and faster yet with 16-bit scores.
    const CUBLAS_COST: f64 = 80.0;
    const CUBLAS_INPUT_SCORES_COST: f64 = 70.0;

    /// [`cost`] per 1024 query rows: every config keeps its rank on every shape.
    pub(crate) fn scaled(config: KernelConfig, shape: &Shape) -> f64 {
        cost(config) * shape.sq as f64 / 1024.0
    }

    pub(crate) fn cost(config: KernelConfig) -> f64 {
        if let KernelConfig::Cublas(c) = config {
            return if c.scores == evoattn::Scores::Input { CUBLAS_INPUT_SCORES_COST } else { CUBLAS_COST };
        }
        let KernelConfig::Wgmma(c) = config else { panic!("wgmma or cublas only") };
        let mut t = 100.0;
        t += (c.block_n as f64 - 128.0).abs() / 32.0 * 20.0;
        t += (c.stages as f64 - 3.0).abs() * 15.0;
        t += if c.consumer_warpgroups == 2 { 0.0 } else { 30.0 };
        t += if c.pipeline.loads() == Loads::Tma { 0.0 } else { 40.0 };
        // Each of the kernel's switches the axes turn on, the polynomial exponential and the
        // lazy rescale cost more than the 10% discard margin, so the optimum is unique (all off)
        // and every neighbour of it is discarded.
        let (p, s) = (c.pipeline, c.schedule);
        let switches = [
            p.warp_specialized(),
            p.overlap(),
            p == Pipeline::PingPong,
            s.persistent(),
            s == Schedule::Claimed,
            c.o_staging.tma_store(),
        ];
        t += 15.0 * switches.iter().filter(|on| **on).count() as f64;
        t += if c.exp2_poly == 0 { 0.0 } else { 15.0 };
        t += if c.lazy_rescale { 15.0 } else { 0.0 };
        t
    }

    impl Gates for Mock {
        fn compile(&mut self, child: &Child) -> Result<(), String> {
            self.calls.push(child.spec.config);
            self.gate(Gate::Compile)
        }
        fn resources(&mut self, _: &Child) -> Result<(), String> {
            self.gate(Gate::Resources)
        }
        fn correctness(&mut self, _: &Child, _: &[Shape]) -> Result<(), String> {
            self.gate(Gate::Correctness)
        }
        fn timing(&mut self, child: &Child, shapes: &[Shape]) -> Result<Vec<f64>, String> {
            self.gate(Gate::Timing)?;
            // A proposed source is 10x faster than its config: it would top any population.
            let variant = if child.source.is_some() { VARIANT_SPEEDUP.recip() } else { 1.0 };
            Ok(shapes.iter().map(|s| variant * (self.time)(child.spec.config, s)).collect())
        }
        fn integrity(&mut self, _: &Child, _: &[Shape], _: &[f64]) -> Result<(), String> {
            self.gate(Gate::Integrity)
        }
        fn profile(&mut self, child: &Child, _: &[Shape]) -> Result<Option<NcuTerms>, String> {
            self.gate(Gate::Ncu)?;
            Ok(self.counters.map(|f| f(child.spec.config)))
        }
    }

    pub(crate) fn baseline() -> KernelSpec {
        let config = WgmmaConfig::BASE;
        KernelSpec { config: KernelConfig::Wgmma(config), dtype: Dtype::Bf16, head_dim: 64 }
    }

    /// No proposer, no progress display.
    pub(crate) struct NoHooks;

    impl Hooks for NoHooks {}

    pub(crate) fn shapes() -> Vec<Shape> {
        vec![Shape::new(1, 8, 1024, 64), Shape::new(1, 8, 4096, 64)]
    }

    /// Generations enough for the seeded one-lever walk to reach the mock optimum over the
    /// wgmma levers (each lever dilutes the one-lever draws, and each value of a lever its draws:
    /// over the typed axes 24 generations stopped at pipeline=overlap, one value of five from
    /// the optimum's tma).
    pub(crate) fn params() -> Params {
        Params {
            arch: Arch::Sm90a,
            starts: vec![baseline().config],
            generations: 28,
            seed: 42,
            elites: ELITES,
            deadline: None,
            fitness: Fitness::Geomean,
            ncu_gate: false,
            cutensor: false,
        }
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
            let eval = mock.evaluate(&Child::of(baseline()), &shapes());
            assert_eq!(eval.failure, Some((gate, format!("{} failed", gate.name()))));
            assert_eq!(mock.gates_run, Gate::ALL[..=i]);
            assert_eq!(eval.passed(), &Gate::ALL[..i]);
            assert!(eval.medians_us.is_empty());
        }
        let eval = Mock::new().evaluate(&Child::of(baseline()), &shapes());
        assert_eq!(eval.passed(), &Gate::ALL);
        assert_eq!(eval.medians_us.len(), 2);
    }

    #[test]
    fn finds_the_optimum_in_a_few_generations_reproducibly() {
        let mut mock = Mock::new();
        let mut recorded = 0;
        let out = evolve(&mut mock, baseline(), &shapes(), &params(), &HashMap::new(), &mut NoHooks, |_, _, _, _| {
            recorded += 1
        })
        .unwrap();
        let best = out.elites[0].spec.config;
        assert_eq!(best.to_string(), format!("{OPTIMUM},{SWITCHES_OFF}"));
        assert!((out.elites[0].fitness - cost(baseline().config) / 100.0).abs() < 1e-9);
        assert_eq!(out.evaluated, mock.calls.len());
        assert_eq!(recorded, out.evaluated);
        // Far fewer than the whole space.
        assert!(out.evaluated < KernelSpec::space(Impl::Wgmma, Dtype::Bf16, 64).count());
        // No config is evaluated twice, and invalid ones never reach the compiler.
        let unique: HashSet<_> = mock.calls.iter().collect();
        assert_eq!(unique.len(), mock.calls.len());
        let again =
            evolve(&mut Mock::new(), baseline(), &shapes(), &params(), &HashMap::new(), &mut NoHooks, |_, _, _, _| {})
                .unwrap();
        assert_eq!(again.elites, out.elites);
    }

    /// A cublas config: its default with `levers` set.
    fn cublas(levers: &str) -> KernelConfig {
        Impl::Cublas.default_config(Arch::Sm90a, Dtype::Bf16, 64).with_overrides(levers).unwrap()
    }

    /// The start of `mma` in the runs below: not its default, as the planner's config for a
    /// problem need not be (a 192-key `resident` default cannot run 512 keys).
    fn mma_start() -> KernelConfig {
        let start = Impl::Mma.default_config(Arch::Sm90a, Dtype::Bf16, 64).with_overrides("block_n=128").unwrap();
        assert_ne!(start, Impl::Mma.default_config(Arch::Sm90a, Dtype::Bf16, 64));
        start
    }

    /// Three families from the wgmma baseline: mma's start, then cublas's default.
    fn three_families() -> Params {
        Params { starts: vec![baseline().config, mma_start(), cublas("")], ..params() }
    }

    /// [`scaled`] for wgmma and cublas; `mma` 1000 per 1024 rows, slower than the baseline (240)
    /// on every shape, so the discard rule keeps every mma config from the elites.
    fn slow_mma(config: KernelConfig, shape: &Shape) -> f64 {
        match config {
            KernelConfig::Mma(_) => 1000.0 * shape.sq as f64 / 1024.0,
            _ => scaled(config, shape),
        }
    }

    #[test]
    fn searching_families_the_elite_takes_the_faster_family_and_then_its_levers() {
        // The family is the first gene: cublas's start (its default here, f32 scores) is
        // evaluated before the first generation, and a later one-lever child of it finds 16-bit
        // scores.
        let p = Params { starts: vec![baseline().config, cublas("")], ..params() };
        let mut mock = Mock::new();
        let out = evolve(&mut mock, baseline(), &shapes(), &p, &HashMap::new(), &mut NoHooks, |_, _, _, _| {}).unwrap();
        let KernelConfig::Cublas(best) = out.elites[0].spec.config else { panic!("{:?}", out.elites[0]) };
        assert_eq!(best.scores, evoattn::Scores::Input);
        assert!((out.elites[0].fitness - cost(baseline().config) / CUBLAS_INPUT_SCORES_COST).abs() < 1e-9);
        assert!(mock.calls.iter().any(|c| c.imp() == Impl::Wgmma && *c != baseline().config), "wgmma searched too");
        // One family searched: the faster family is never tried.
        let mut alone = Mock::new();
        evolve(&mut alone, baseline(), &shapes(), &params(), &HashMap::new(), &mut NoHooks, |_, _, _, _| {}).unwrap();
        assert!(alone.calls.iter().all(|c| c.imp() == Impl::Wgmma));
        // A baseline outside the families searched is refused, and so are two starts of a family.
        for starts in [vec![cublas("")], vec![baseline().config, cublas(""), cublas("scores=input")]] {
            let wrong = Params { starts, ..params() };
            let refused =
                evolve(&mut Mock::new(), baseline(), &shapes(), &wrong, &HashMap::new(), &mut NoHooks, |_, _, _, _| {});
            assert!(refused.is_err());
        }
    }

    #[test]
    fn gemm_cutensor_is_drawn_only_where_cutensor_loads() {
        let with_cutensor = |c: &KernelConfig| c.library().is_some_and(|p| p.gemm == Provider::Cutensor);
        let p = Params { starts: vec![baseline().config, cublas("")], ..params() };
        let mut without = Mock::new();
        evolve(&mut without, baseline(), &shapes(), &p, &HashMap::new(), &mut NoHooks, |_, _, _, _| {}).unwrap();
        assert!(without.calls.iter().any(|c| c.imp() == Impl::Cublas), "cublas searched");
        assert!(!without.calls.iter().any(with_cutensor), "{:?}", without.calls);
        let mut with = Mock::new();
        let p = Params { cutensor: true, ..p };
        evolve(&mut with, baseline(), &shapes(), &p, &HashMap::new(), &mut NoHooks, |_, _, _, _| {}).unwrap();
        assert!(with.calls.iter().any(with_cutensor), "{:?}", with.calls);
        // Never an invalid one: cuTENSOR writes no f32 scores from 16-bit inputs.
        for c in with.calls.iter().filter(|c| with_cutensor(c)) {
            assert_eq!(c.library().map(|p| p.scores), Some(evoattn::Scores::Input), "{c}");
        }
    }

    #[test]
    fn several_families_evaluate_each_start_once_before_the_first_generation_and_switch_to_it() {
        let p = three_families();
        let run = |mock: &mut Mock, p: &Params, known: &HashMap<KernelConfig, Evaluation>| {
            let mut recorded = Vec::new();
            let out = evolve(mock, baseline(), &shapes(), p, known, &mut NoHooks, |child, _, _, dropped| {
                recorded.push((child.spec.config, dropped))
            })
            .unwrap();
            (out, recorded)
        };
        // No generation: the baseline, then every other family's start, in the order given.
        let mut mock = Mock { time: slow_mma, ..Mock::new() };
        let (out, recorded) = run(&mut mock, &Params { generations: 0, ..p.clone() }, &HashMap::new());
        assert_eq!(mock.calls, [baseline().config, mma_start(), cublas("")]);
        assert_eq!((out.evaluated, out.generations), (3, 0));
        // They join the elites as any child: cublas (80 against the baseline's 240) leads, and
        // mma's start, slower on both shapes, is discarded.
        assert_eq!(recorded, [(baseline().config, false), (mma_start(), true), (cublas(""), false)]);
        let elites: Vec<KernelConfig> = out.elites.iter().map(|c| c.spec.config).collect();
        assert_eq!(elites, [cublas(""), baseline().config]);
        // Resumed: a stored start is reused, not measured again.
        let stored = HashMap::from([(
            mma_start(),
            Mock { time: slow_mma, ..Mock::new() }
                .evaluate(&Child::of(KernelSpec { config: mma_start(), ..baseline() }), &shapes()),
        )]);
        let mut mock = Mock { time: slow_mma, ..Mock::new() };
        let (out, _) = run(&mut mock, &Params { generations: 0, ..p.clone() }, &stored);
        assert_eq!((mock.calls.as_slice(), out.evaluated), ([baseline().config, cublas("")].as_slice(), 2));
        // A spent budget: the baseline alone.
        let mut mock = Mock { time: slow_mma, ..Mock::new() };
        let (out, _) = run(&mut mock, &Params { deadline: Some(Instant::now()), ..p.clone() }, &HashMap::new());
        assert_eq!((mock.calls.as_slice(), out.evaluated), ([baseline().config].as_slice(), 1));
        // A whole run: each start once, right after the baseline (a later switch to the family
        // lands on its start, evaluated already: the tuner draws again).
        let mut mock = Mock { time: slow_mma, ..Mock::new() };
        let (out, _) = run(&mut mock, &p, &HashMap::new());
        assert_eq!(mock.calls[..3], [baseline().config, mma_start(), cublas("")]);
        for start in [mma_start(), cublas("")] {
            assert_eq!(mock.calls.iter().filter(|c| **c == start).count(), 1, "{start}");
        }
        assert_eq!(out.evaluated, mock.calls.len());
        // The children's switches, as the loop draws them: onto the other family's start (the
        // planner's config of it for the problem), never its default.
        let mut rng = SmallRng::seed_from_u64(5);
        let mut switched = HashSet::new();
        for _ in 0..2000 {
            let child = p.mutate(baseline().config, &mut rng).unwrap();
            if child.imp() != Impl::Wgmma {
                switched.insert(child);
            }
        }
        assert_eq!(switched, HashSet::from([mma_start(), cublas("")]));
    }

    #[test]
    fn per_shape_winners_are_the_faster_family_on_each_shape() {
        // cublas pays a fixed 300 a call (its three launches) and then runs at a quarter of its
        // cost: slower than the wgmma baseline (240) on the short shape, 370 against 960 on the
        // long one. mma is slowest everywhere.
        fn launches(config: KernelConfig, shape: &Shape) -> f64 {
            match config {
                KernelConfig::Cublas(_) => 300.0 + cost(config) / 4.0 * shape.sq as f64 / 1024.0,
                _ => slow_mma(config, shape),
            }
        }
        let mut mock = Mock { time: launches, ..Mock::new() };
        let mut passed: Vec<KernelConfig> = Vec::new();
        let out =
            evolve(&mut mock, baseline(), &shapes(), &three_families(), &HashMap::new(), &mut NoHooks, |c, e, _, _| {
                if e.failure.is_none() {
                    passed.push(c.spec.config)
                }
            })
            .unwrap();
        assert_eq!(out.winners(), [Some(Impl::Wgmma), Some(Impl::Cublas)]);
        // Each family's best per shape is the least of its evaluations' medians there, with the
        // config that gave it; discarded ones count (every mma config is).
        assert_eq!(out.families.iter().map(|f| f.imp).collect::<Vec<_>>(), [Impl::Wgmma, Impl::Mma, Impl::Cublas]);
        for family in &out.families {
            for (shape, best) in shapes().iter().zip(&family.per_shape) {
                let fastest = passed
                    .iter()
                    .filter(|c| c.imp() == family.imp)
                    .map(|&c| (launches(c, shape), c))
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                    .unwrap();
                let best = best.expect("every family passed");
                assert_eq!((best.median_us, launches(best.config, shape)), (fastest.0, fastest.0), "{family:?}");
            }
        }
        let KernelConfig::Cublas(c) = out.families[2].per_shape[1].unwrap().config else { panic!("cublas") };
        assert_eq!(c.scores, evoattn::Scores::Input, "16-bit scores are the faster cublas");
        // A family with no evaluation that passed has no best.
        let mut failing = Mock { time: launches, fail_at: Some(Gate::Correctness), ..Mock::new() };
        let known = HashMap::from([(baseline().config, Mock::new().evaluate(&Child::of(baseline()), &shapes()))]);
        let out = evolve(&mut failing, baseline(), &shapes(), &three_families(), &known, &mut NoHooks, |_, _, _, _| {})
            .unwrap();
        assert_eq!(out.families[1].per_shape, [None, None]);
        assert_eq!(out.winners(), [Some(Impl::Wgmma), Some(Impl::Wgmma)]);
    }

    #[test]
    fn one_family_runs_no_starts_and_its_family_wins_every_shape() {
        // The baseline, then eight children a generation: no evaluation more than before
        // families were searched (the golden `tune --impl mma` run's 9).
        let p = Params { generations: 1, ..params() };
        let mut mock = Mock::new();
        let out = evolve(&mut mock, baseline(), &shapes(), &p, &HashMap::new(), &mut NoHooks, |_, _, _, _| {}).unwrap();
        assert_eq!((out.evaluated, mock.calls.len()), (1 + CHILDREN + RESTARTS, 1 + CHILDREN + RESTARTS));
        let none = Params { generations: 0, ..params() };
        let mut mock = Mock::new();
        let out =
            evolve(&mut mock, baseline(), &shapes(), &none, &HashMap::new(), &mut NoHooks, |_, _, _, _| {}).unwrap();
        assert_eq!(mock.calls, [baseline().config]);
        assert_eq!(out.families.len(), 1);
        assert_eq!(out.winners(), [Some(Impl::Wgmma), Some(Impl::Wgmma)]);
        let best: Vec<f64> = out.families[0].per_shape.iter().map(|b| b.unwrap().median_us).collect();
        assert_eq!(best, out.baseline_us);
    }

    /// Counters that favour two stages: both pipes busy there, and elsewhere idle pipes,
    /// barrier stalls and a full register file (375 points apart: more than the optimum's lead
    /// over its two-stage neighbour, 2.4 against 2.09 speedup).
    fn two_stages_busy(config: KernelConfig) -> NcuTerms {
        let KernelConfig::Wgmma(c) = config else { panic!("wgmma only") };
        let (busy, stalls, registers) = if c.stages == 2 { (100.0, 0.0, 0.0) } else { (0.0, 5.0, 255.0) };
        NcuTerms {
            tensor_pct: Some(busy),
            sm_pct: Some(busy),
            dram_pct: Some(10.0),
            barrier_stalls: Some(stalls),
            registers: Some(registers),
            bound: None,
        }
    }

    #[test]
    fn the_composite_ranks_by_the_counters_where_they_outweigh_the_speedup() {
        let composite_params = Params { fitness: Fitness::Composite, ..params() };
        let mut mock = Mock { counters: Some(two_stages_busy), ..Mock::new() };
        let composite_run =
            evolve(&mut mock, baseline(), &shapes(), &composite_params, &HashMap::new(), &mut NoHooks, |_, e, _, _| {
                assert!(e.failure.is_some() || e.counters.is_some(), "every passing evaluation has counters")
            })
            .unwrap();
        let mut mock = Mock { counters: Some(two_stages_busy), ..Mock::new() };
        let geomean_run =
            evolve(&mut mock, baseline(), &shapes(), &params(), &HashMap::new(), &mut NoHooks, |_, _, _, _| {})
                .unwrap();
        let (c, g) = (&composite_run.elites[0], &geomean_run.elites[0]);
        let KernelConfig::Wgmma(best) = g.spec.config else { panic!("wgmma") };
        assert_eq!((best.stages, g.fitness), (3, g.speedup), "the geomean run finds the optimum");
        let KernelConfig::Wgmma(chosen) = c.spec.config else { panic!("wgmma") };
        assert_eq!(chosen.stages, 2, "{c:?}");
        assert!(c.speedup < g.speedup, "slower, ranked first by its counters");
        assert!((c.fitness - composite(c.speedup, &two_stages_busy(c.spec.config))).abs() < 1e-9);
        assert!(composite_run.elites.windows(2).all(|w| w[0].fitness >= w[1].fitness));
    }

    #[test]
    fn the_ncu_gate_fails_what_streams_memory_with_an_idle_tensor_pipe() {
        // TMA loads read as DRAM-bound with a quiet tensor pipe; the rest as tensor-bound.
        fn tma_streams(config: KernelConfig) -> NcuTerms {
            let KernelConfig::Wgmma(c) = config else { panic!("wgmma only") };
            let tma = c.pipeline.loads() == Loads::Tma;
            NcuTerms { tensor_pct: Some(if tma { 20.0 } else { 60.0 }), dram_pct: Some(80.0), ..NcuTerms::default() }
        }
        let p = Params { ncu_gate: true, ..params() };
        let mut mock = Mock { counters: Some(tma_streams), ..Mock::new() };
        let mut gated = Vec::new();
        let out = evolve(&mut mock, baseline(), &shapes(), &p, &HashMap::new(), &mut NoHooks, |child, e, _, _| {
            if let Some((Gate::Ncu, error)) = &e.failure {
                gated.push((child.spec.config, error.clone(), e.counters));
            }
        })
        .unwrap();
        assert!(!gated.is_empty());
        for (config, error, counters) in &gated {
            let KernelConfig::Wgmma(c) = config else { panic!("wgmma") };
            assert_eq!(c.pipeline.loads(), Loads::Tma);
            assert!(error.contains("tensor pipe 20.0%"), "{error}");
            assert!(counters.is_some(), "the counters that failed it are kept");
        }
        assert!(out
            .elites
            .iter()
            .all(|e| matches!(e.spec.config, KernelConfig::Wgmma(c) if c.pipeline.loads() != Loads::Tma)));
    }

    #[test]
    fn a_profiling_run_measures_again_what_was_stored_without_counters() {
        let mut first = Mock::new();
        let mut stored = HashMap::new();
        evolve(&mut first, baseline(), &shapes(), &params(), &HashMap::new(), &mut NoHooks, |child, e, _, _| {
            stored.insert(child.spec.config, e.clone());
        })
        .unwrap();
        let p = Params { fitness: Fitness::Composite, generations: 1, ..params() };
        let mut again = Mock { counters: Some(two_stages_busy), ..Mock::new() };
        evolve(&mut again, baseline(), &shapes(), &p, &stored, &mut NoHooks, |_, _, _, _| {}).unwrap();
        assert_eq!(again.calls.first(), Some(&baseline().config), "the baseline is profiled, not reused");
        // A geomean resume reuses them all, the baseline included.
        let mut reuse = Mock::new();
        let p = Params { generations: 1, ..params() };
        evolve(&mut reuse, baseline(), &shapes(), &p, &stored, &mut NoHooks, |_, _, _, _| {}).unwrap();
        assert!(!reuse.calls.contains(&baseline().config));
    }

    #[test]
    fn elitism_keeps_the_top_k_best_first() {
        let out =
            evolve(&mut Mock::new(), baseline(), &shapes(), &params(), &HashMap::new(), &mut NoHooks, |_, _, _, _| {})
                .unwrap();
        assert_eq!(out.elites.len(), ELITES);
        assert!(out.elites.windows(2).all(|w| w[0].fitness >= w[1].fitness));
        // The elites are the K fastest configs evaluated.
        let mut all: Vec<f64> = Vec::new();
        let mut mock = Mock::new();
        evolve(&mut mock, baseline(), &shapes(), &params(), &HashMap::new(), &mut NoHooks, |_, _, f, d| {
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
        best.config = space::parse(Impl::Wgmma, OPTIMUM).unwrap();
        let mut discards = 0;
        let out = evolve(&mut Mock::new(), best, &shapes(), &params(), &HashMap::new(), &mut NoHooks, |_, _, _, d| {
            discards += usize::from(d)
        })
        .unwrap();
        assert!(discards > 0);
        assert_eq!(out.elites.len(), 1);
        assert_eq!(out.elites[0].spec, best);
    }

    struct Scripted {
        proposals: Vec<Proposal>,
        generations: Vec<usize>,
    }

    impl Hooks for Scripted {
        fn propose(&mut self, generation: usize, _: &[Candidate]) -> Vec<Proposal> {
            if generation == 0 {
                std::mem::take(&mut self.proposals)
            } else {
                Vec::new()
            }
        }
        fn generation(&mut self, generation: usize, _: &[Candidate]) {
            self.generations.push(generation);
        }
    }

    #[test]
    fn proposals_go_through_the_gates_and_sources_never_become_parents() {
        let optimum = space::parse(Impl::Wgmma, OPTIMUM).unwrap();
        let proposals = vec![Proposal::Config(optimum), Proposal::Source("// a variant".into())];
        let mut hooks = Scripted { proposals, generations: Vec::new() };
        let mut mock = Mock::new();
        let mut sources = Vec::new();
        let p = Params { generations: 2, ..params() };
        let out = evolve(&mut mock, baseline(), &shapes(), &p, &HashMap::new(), &mut hooks, |child, _, fitness, _| {
            if child.source.is_some() {
                sources.push(fitness)
            }
        })
        .unwrap();
        assert_eq!(out.elites[0].spec.config, optimum, "the proposed optimum is kept");
        // The variant was timed (with the best elite's defines, the baseline's here) and is the
        // fastest of all, yet no elite: children of it would lose its source.
        assert_eq!(sources.len(), 1);
        assert!((sources[0].unwrap() - VARIANT_SPEEDUP).abs() < 1e-9, "{sources:?}");
        assert!(out.elites.iter().all(|c| c.fitness < VARIANT_SPEEDUP), "{:?}", out.elites);
        assert_eq!(hooks.generations, [0, 1, 2]);
        assert_eq!(out.generations, 2);
    }

    #[test]
    fn a_spent_budget_stops_before_the_first_generation() {
        let p = Params { deadline: Some(Instant::now()), ..params() };
        let mut mock = Mock::new();
        let out = evolve(&mut mock, baseline(), &shapes(), &p, &HashMap::new(), &mut NoHooks, |_, _, _, _| {}).unwrap();
        assert_eq!((out.generations, out.evaluated, mock.calls.len()), (0, 1, 1), "the baseline only");
    }

    #[test]
    fn no_child_starts_once_the_budget_is_spent() {
        // A budget that runs out while the first generation's children are evaluated: the rest
        // of that generation is not started, and no later one.
        struct Slow(Mock);
        impl Gates for Slow {
            fn compile(&mut self, child: &Child) -> Result<(), String> {
                std::thread::sleep(std::time::Duration::from_millis(40));
                self.0.compile(child)
            }
            fn resources(&mut self, child: &Child) -> Result<(), String> {
                self.0.resources(child)
            }
            fn correctness(&mut self, child: &Child, shapes: &[Shape]) -> Result<(), String> {
                self.0.correctness(child, shapes)
            }
            fn timing(&mut self, child: &Child, shapes: &[Shape]) -> Result<Vec<f64>, String> {
                self.0.timing(child, shapes)
            }
            fn integrity(&mut self, child: &Child, shapes: &[Shape], medians_us: &[f64]) -> Result<(), String> {
                self.0.integrity(child, shapes, medians_us)
            }
            fn profile(&mut self, child: &Child, shapes: &[Shape]) -> Result<Option<NcuTerms>, String> {
                self.0.profile(child, shapes)
            }
        }
        let p = Params { deadline: Some(Instant::now() + std::time::Duration::from_millis(100)), ..params() };
        let mut slow = Slow(Mock::new());
        let mut recorded = 0;
        let out =
            evolve(&mut slow, baseline(), &shapes(), &p, &HashMap::new(), &mut NoHooks, |_, _, _, _| recorded += 1)
                .unwrap();
        // The baseline (40 ms) and one or two children fit before 100 ms; a generation has 8.
        assert!((2..=4).contains(&slow.0.calls.len()), "{} evaluations", slow.0.calls.len());
        assert_eq!((out.evaluated, recorded), (slow.0.calls.len(), slow.0.calls.len()));
        assert_eq!(out.generations, 1);
    }
}
