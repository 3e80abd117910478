//! Correctness, written once for `check`, the lab and the tuner: a case's correct answer
//! (float64 on the CPU for small problems, the `reference` kernel, itself checked against
//! float64, for large ones) and a kernel's check against it over several input sets.

use crate::lab::backend::{Backend, Kernel};
use crate::lab::inputs::{Distribution, Draw, Inputs};
use crate::lab::presets::layout_label;
use evoattn::reference::backward::backward_f64;
use evoattn::reference::{
    attention_f64_descaled, compare, dense_o, grad_tolerance, logical_offsets, tolerance, tolerance_of, Comparison,
};
use evoattn::{Impl, Layout, Plan, Problem, TensorName};
use std::collections::HashMap;

/// Multiply-adds (B·H·Sq·Sk·D) up to which the float64 CPU reference is the oracle; above it
/// the `reference` kernel is. 2^27 keeps one CPU reference under about a second.
pub const CPU_REFERENCE_LIMIT: u64 = 1 << 27;

/// Input elements (Q, K and V together) up to which the float64 CPU reference is the oracle:
/// its inputs are drawn on the host, by one thread. A decode case of 2^27 multiply-adds has
/// 2^28 of them: its check took 7 s of host time (two input sets; docs/perf-log.md, session 28).
pub const CPU_INPUT_LIMIT: u64 = 1 << 24;

/// Whether the float64 CPU reference answers `problem`: at most `macs_limit` multiply-adds
/// and [`CPU_INPUT_LIMIT`] input elements.
pub fn answered_on_cpu(problem: &Problem, macs_limit: u64) -> bool {
    let inputs = [TensorName::Q, TensorName::K, TensorName::V].map(|t| problem.elements(t) as u64);
    macs(problem) <= macs_limit && inputs.iter().fold(0u64, |n, &x| n.saturating_add(x)) <= CPU_INPUT_LIMIT
}

/// The oracle's O (dense, float64) and LSE of `problem` on drawn inputs: float64 on the CPU
/// (the inputs drawn there), or the `reference` kernel (the inputs drawn where it runs).
fn answer(
    backend: &mut dyn Backend,
    problem: &Problem,
    draw: Draw,
    on_cpu: bool,
) -> evoattn::Result<(Vec<f64>, Vec<f64>)> {
    if on_cpu {
        let inputs = draw.host(problem);
        let r = attention_f64_descaled(problem, &inputs.q, &inputs.k, &inputs.v, inputs.descales.as_ref());
        return Ok((r.o, r.lse));
    }
    // The reference kernel reads V's rows; the same logical V in rows gives the same answer.
    let rows;
    let problem = if problem.v_keys_contiguous() {
        rows = problem.clone().with_v_dense(Layout::Bhsd);
        &rows
    } else {
        problem
    };
    let r = backend.forward(problem, Kernel::Reference, Inputs::Drawn(draw))?;
    Ok((dense_o(problem, &r.o), r.lse.unwrap_or_default().into_iter().map(f64::from).collect()))
}

/// The oracle's O (dense, float64) of `problem` on drawn inputs: float64 on the CPU up to
/// [`CPU_REFERENCE_LIMIT`] multiply-adds and [`CPU_INPUT_LIMIT`] input elements, else the
/// `reference` kernel.
pub fn expected_o(backend: &mut dyn Backend, problem: &Problem, draw: Draw) -> evoattn::Result<Vec<f64>> {
    Ok(answer(backend, problem, draw, answered_on_cpu(problem, CPU_REFERENCE_LIMIT))?.0)
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
    pub draw: Draw,
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
            let draw = Draw::new(dist, seed);
            let (o, lse) = answer(backend, problem, draw, on_cpu).map_err(|e| format!("reference kernel: {e}"))?;
            self.answers.insert(key.clone(), Expected { draw, o, lse });
        }
        Ok(&self.answers[&key])
    }
}

/// Names of the oracles in `check`'s table: float64 on the CPU, the reference kernel, and
/// none (a backward case past the CPU limit: the backward has no GPU oracle yet).
pub const ORACLE_CPU: &str = "f64-cpu";
pub const ORACLE_GPU: &str = "reference-gpu";
pub const ORACLE_NONE: &str = "none";

/// The backward pass's oracle for `problem`: float64 on the CPU up to the options' limit, else none.
pub fn backward_oracle(options: &CheckOptions, problem: &Problem) -> &'static str {
    if answered_on_cpu(problem, options.cpu_limit) {
        ORACLE_CPU
    } else {
        ORACLE_NONE
    }
}

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

/// Random input sets per case by default: one of std 1, one wide.
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
    /// A case about to be checked against `oracle`: passing until a seed says otherwise.
    fn new(problem: &Problem, layout: Layout, oracle: &'static str) -> Self {
        CaseResult {
            problem: problem.clone(),
            layout,
            kernel: String::new(),
            oracle,
            worst: None,
            lse_err: 0.0,
            error: None,
            passed: true,
        }
    }

    /// The case failed with `error` (nothing compared after it).
    fn failed(mut self, error: String) -> Self {
        self.error = Some(error);
        self.passed = false;
        self
    }

    /// A case that failed before any kernel ran (no kernel can run it), with the reason.
    pub fn unplanned(problem: &Problem, layout: Layout, error: String) -> Self {
        CaseResult::new(problem, layout, ORACLE_CPU).failed(error)
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
    if answered_on_cpu(problem, options.cpu_limit) || is_reference {
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
    let mut result = CaseResult::new(problem, layout, oracle(options, kernel, problem));
    let on_cpu = result.oracle == ORACLE_CPU;
    let tol = kernel.spec().map_or_else(|| tolerance(problem.dtype), |spec| tolerance_of(spec, problem));
    for seed in options.seed..options.seed + options.seeds {
        let want = match cache.get_or_compute(backend, problem, seed, on_cpu) {
            Ok(w) => w,
            Err(e) => return result.failed(e),
        };
        let got = match backend.forward(problem, kernel, Inputs::Drawn(want.draw)) {
            Ok(f) => f,
            Err(e) => return result.failed(e.to_string()),
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

/// Checks the backward `plan` on its problem over the option's seeds against the float64
/// reference's gradients (`grad_tolerance`; each row's worst gradient by rel_l2). The backward
/// has no GPU oracle: a problem past the options' CPU limit is refused with the reason.
pub fn check_backward_case(
    backend: &mut dyn Backend,
    options: &CheckOptions,
    plan: &Plan,
    layout: Layout,
) -> CaseResult {
    let problem = &plan.problem;
    let mut result = CaseResult::new(problem, layout, backward_oracle(options, problem));
    result.kernel = plan.spec.name();
    if result.oracle == ORACLE_NONE {
        return result.failed(format!(
            "the backward pass is checked against float64 on the CPU only (it has no GPU oracle yet): at most \
             {} multiply-adds (--cpu-limit) and {CPU_INPUT_LIMIT} input elements, this case has {}",
            options.cpu_limit,
            macs(problem)
        ));
    }
    let tol = grad_tolerance(problem.dtype);
    for seed in options.seed..options.seed + options.seeds {
        let dist = if seed.is_multiple_of(2) { Distribution::Normal } else { Distribution::Wide };
        let draw = Draw::new(dist, seed);
        let (inputs, d_o) = (draw.host(problem), draw.d_o(problem));
        let got = match backend.backward(plan, &inputs, &d_o) {
            Ok(g) => {
                result.kernel = g.kernel.clone();
                g
            }
            Err(e) => return result.failed(e.to_string()),
        };
        let want = backward_f64(problem, &inputs.q, &inputs.k, &inputs.v, &d_o);
        let dense = |t: TensorName, bits: &[u16]| -> Vec<f64> {
            logical_offsets(problem, t).map(|off| problem.dtype.from_bits(bits[off])).collect()
        };
        for (t, bits, want) in [
            (TensorName::DQ, &got.dq, &want.dq),
            (TensorName::DK, &got.dk, &want.dk),
            (TensorName::DV, &got.dv, &want.dv),
        ] {
            let cmp = compare(&dense(t, bits), want);
            result.passed &= cmp.passes(&tol);
            if result.worst.as_ref().is_none_or(|w| cmp.rel_l2 > w.rel_l2 || cmp.nonfinite > w.nonfinite) {
                result.worst = Some(cmp);
            }
        }
    }
    result
}

/// The case's result in one line: the tuner's error text for a failed correctness gate.
pub fn summary(r: &CaseResult) -> String {
    let p = &r.problem;
    let case = format!("{} {} {} {}", p.shape, p.dtype.name(), p.causal.name(), layout_label(p, r.layout));
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

#[cfg(test)]
mod tests {
    use super::*;
    use evoattn::{Dtype, Shape};

    fn problem(b: usize, h: usize, hkv: usize, sq: usize, sk: usize) -> Problem {
        Problem::dense(Shape { b, h, hkv, sq, sk, d: 128 }, Dtype::Bf16, Layout::Bhsd)
    }

    #[test]
    fn the_cpu_answers_small_problems_and_the_reference_kernel_large_or_wide_ones() {
        // The founding documents' shape: 2^27 multiply-adds, 3·2^18 input elements.
        let mission = Problem::dense(Shape::new(1, 8, 512, 64), Dtype::F16, Layout::Bhsd);
        assert!(answered_on_cpu(&mission, CPU_REFERENCE_LIMIT));
        // Decoding over 32k keys: 2^27 multiply-adds (within the limit) but 2^28 input elements.
        let decode = problem(1, 32, 32, 1, 32768);
        assert_eq!(macs(&decode), CPU_REFERENCE_LIMIT);
        assert!(!answered_on_cpu(&decode, CPU_REFERENCE_LIMIT));
        // Past the multiply-add limit with few inputs.
        let long = problem(1, 1, 1, 4096, 4096);
        assert!(!answered_on_cpu(&long, CPU_REFERENCE_LIMIT) && answered_on_cpu(&long, u64::MAX));
    }
}
