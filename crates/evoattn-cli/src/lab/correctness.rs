//! Correctness, written once for `check`, the lab and the tuner: a case's correct answer
//! (float64 on the CPU for small problems, the `reference` kernel, itself checked against
//! float64, for large ones) and a kernel's check against it over several input sets.

use crate::lab::backend::{Backend, Kernel};
use crate::lab::inputs::{random_inputs, Distribution, Inputs};
use evoattn::reference::{attention_f64, compare, dense_o, tolerance, Comparison};
use evoattn::{Impl, Layout, Problem};
use std::collections::HashMap;

/// Multiply-adds (B·H·Sq·Sk·D) up to which the float64 CPU reference is the oracle; above it
/// the `reference` kernel is. 2^27 keeps one CPU reference under about a second.
pub const CPU_REFERENCE_LIMIT: u64 = 1 << 27;

/// The oracle's O (dense, float64) and LSE of `problem` on `inputs`: float64 on the CPU, or the
/// `reference` kernel.
fn answer(
    backend: &mut dyn Backend,
    problem: &Problem,
    inputs: &Inputs,
    on_cpu: bool,
) -> evoattn::Result<(Vec<f64>, Vec<f64>)> {
    if on_cpu {
        let r = attention_f64(problem, &inputs.q, &inputs.k, &inputs.v);
        return Ok((r.o, r.lse));
    }
    let r = backend.forward(problem, Kernel::Reference, &inputs.q, &inputs.k, &inputs.v)?;
    Ok((dense_o(problem, &r.o), r.lse.unwrap_or_default().into_iter().map(f64::from).collect()))
}

/// The oracle's O (dense, float64) of `problem` on `inputs`: float64 on the CPU up to
/// [`CPU_REFERENCE_LIMIT`] multiply-adds, else the `reference` kernel.
pub fn expected_o(backend: &mut dyn Backend, problem: &Problem, inputs: &Inputs) -> evoattn::Result<Vec<f64>> {
    Ok(answer(backend, problem, inputs, macs(problem) <= CPU_REFERENCE_LIMIT)?.0)
}

pub fn macs(p: &Problem) -> u64 {
    let s = p.shape;
    // Saturating: a count past 2^64 is past any CPU limit all the same.
    [s.b, s.h, s.sq, s.sk, s.d].into_iter().fold(1u64, |n, x| n.saturating_mul(x as u64))
}

/// The inputs of one (problem, seed) and the oracle's answer on them. Neither depends on the
/// kernel under test, so the tuner's worker computes them once per shape and seed and checks
/// every candidate against the same answer (`check` keeps none across cases).
pub struct Expected {
    pub inputs: Inputs,
    pub o: Vec<f64>,
    pub lse: Vec<f64>,
}

/// [`Expected`] answers by (problem, seed, oracle on the CPU).
#[derive(Default)]
pub struct ExpectedCache {
    answers: HashMap<(String, u64, bool), Expected>,
}

impl ExpectedCache {
    pub fn get_or_compute(
        &mut self,
        backend: &mut dyn Backend,
        problem: &Problem,
        seed: u64,
        on_cpu: bool,
    ) -> Result<&Expected, String> {
        let key = (format!("{problem:?}"), seed, on_cpu);
        if !self.answers.contains_key(&key) {
            let dist = if seed.is_multiple_of(2) { Distribution::Normal } else { Distribution::Wide };
            let inputs = random_inputs(problem, dist, seed);
            let (o, lse) = answer(backend, problem, &inputs, on_cpu).map_err(|e| format!("reference kernel: {e}"))?;
            self.answers.insert(key.clone(), Expected { inputs, o, lse });
        }
        Ok(&self.answers[&key])
    }
}

/// Names of the two oracles in `check`'s table.
pub const ORACLE_CPU: &str = "f64-cpu";
const ORACLE_GPU: &str = "reference-gpu";

/// What one case's check does: seeds, and where the CPU reference stops.
#[derive(Clone, Copy, Debug)]
pub struct CheckOptions {
    pub seeds: u64,
    pub seed: u64,
    pub cpu_limit: u64,
}

impl CheckOptions {
    /// The tuner's correctness gate: `check`'s defaults (one normal and one wide input set).
    pub const TUNE: CheckOptions = CheckOptions { seeds: DEFAULT_SEEDS, seed: 0, cpu_limit: CPU_REFERENCE_LIMIT };
}

/// Random input sets per case by default: one standard normal, one wide.
pub const DEFAULT_SEEDS: u64 = 2;

/// One row of the table: a problem and the worst result over its seeds.
pub struct CaseResult {
    pub problem: Problem,
    pub layout: Layout,
    pub kernel: String,
    pub oracle: &'static str,
    pub worst: Option<Comparison>,
    pub lse_err: f64,
    pub error: Option<String>,
    pub passed: bool,
}

impl CaseResult {
    /// A case that failed before any kernel ran (no kernel can run it), with the reason.
    pub fn unplanned(problem: &Problem, layout: Layout, error: String) -> Self {
        CaseResult {
            problem: problem.clone(),
            layout,
            kernel: String::new(),
            oracle: ORACLE_CPU,
            worst: None,
            lse_err: 0.0,
            error: Some(error),
            passed: false,
        }
    }
}

/// The oracle `kernel` is checked against on `problem`: float64 on the CPU up to the options'
/// limit (and always for the `reference` kernel, itself the GPU oracle), else the `reference`
/// kernel.
pub fn oracle(options: &CheckOptions, kernel: Kernel, problem: &Problem) -> &'static str {
    let is_reference = match kernel {
        Kernel::Reference => true,
        Kernel::Planned(plan) => plan.spec.imp() == Impl::Reference,
        Kernel::Variant(_) => false,
    };
    if macs(problem) <= options.cpu_limit || is_reference {
        ORACLE_CPU
    } else {
        ORACLE_GPU
    }
}

/// Checks `kernel` on `problem` over the option's seeds; never fails, the result says why.
/// `cache` keeps the inputs and the oracle's answers for later calls on the same problem.
pub fn check_case(
    backend: &mut dyn Backend,
    options: &CheckOptions,
    kernel: Kernel,
    problem: &Problem,
    layout: Layout,
    cache: &mut ExpectedCache,
) -> CaseResult {
    let on_cpu = oracle(options, kernel, problem) == ORACLE_CPU;
    let mut result = CaseResult {
        problem: problem.clone(),
        layout,
        kernel: String::new(),
        oracle: oracle(options, kernel, problem),
        worst: None,
        lse_err: 0.0,
        error: None,
        passed: true,
    };
    let tol = tolerance(problem.dtype);
    for seed in options.seed..options.seed + options.seeds {
        let want = match cache.get_or_compute(backend, problem, seed, on_cpu) {
            Ok(w) => w,
            Err(e) => {
                result.error = Some(e);
                result.passed = false;
                return result;
            }
        };
        let got = match backend.forward(problem, kernel, &want.inputs.q, &want.inputs.k, &want.inputs.v) {
            Ok(f) => f,
            Err(e) => {
                result.error = Some(format!("{e}"));
                result.passed = false;
                return result;
            }
        };
        result.kernel = got.kernel.clone();
        let got_lse: Vec<f64> = got.lse.unwrap_or_default().into_iter().map(f64::from).collect();
        let cmp = compare(&dense_o(problem, &got.o), &want.o).with_lse(&got_lse, &want.lse);
        result.passed &= cmp.passes(&tol);
        result.lse_err = result.lse_err.max(cmp.lse_max_abs.unwrap_or(0.0));
        let worse = result.worst.as_ref().is_none_or(|w| cmp.max_abs > w.max_abs || cmp.nonfinite > w.nonfinite);
        if worse {
            result.worst = Some(cmp);
        }
    }
    result
}

/// The case's result in one line: the tuner's error text for a failed correctness gate.
pub fn summary(r: &CaseResult) -> String {
    let p = &r.problem;
    let case = format!("{} {} {} {}", p.shape, p.dtype.name(), p.causal.name(), r.layout.name());
    let verdict = if r.passed { "PASS" } else { "FAIL" };
    match (&r.error, &r.worst) {
        (Some(e), _) => format!("{case}: {verdict}: {e}"),
        (None, Some(c)) => format!(
            "{case}: {verdict}, max_abs {:.2e}, rel_l2 {:.2e}, lse_abs {:.2e}, {} non-finite, against {}",
            c.max_abs, c.rel_l2, r.lse_err, c.nonfinite, r.oracle
        ),
        (None, None) => format!("{case}: no seeds run"),
    }
}
