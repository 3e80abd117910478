//! The correct answer of a case, computed once for `check`, the lab and the tuner: float64 on
//! the CPU for small problems, the `reference` kernel (itself checked against float64) for
//! large ones.

use crate::backend::{Backend, Kernel};
use crate::inputs::{random_inputs, Distribution, Inputs};
use evoattn::plan::ImplChoice;
use evoattn::reference::{attention_f64, dense_o};
use evoattn::{Impl, Problem};
use std::collections::HashMap;

/// Multiply-adds (B·H·Sq·Sk·D) up to which the float64 CPU reference is the oracle; above it
/// the `reference` kernel is. 2^27 keeps one CPU reference under about a second.
pub const CPU_REFERENCE_LIMIT: u64 = 1 << 27;

/// O (dense, float64) and LSE of `problem` on `inputs` by the `reference` kernel.
pub fn reference_kernel(
    backend: &mut dyn Backend,
    problem: &Problem,
    inputs: &Inputs,
) -> evoattn::Result<(Vec<f64>, Vec<f64>)> {
    let kernel = Kernel::Planned(ImplChoice::Fixed(Impl::Reference), None);
    let r = backend.forward(problem, kernel, &inputs.q, &inputs.k, &inputs.v)?;
    Ok((dense_o(problem, &r.o), r.lse.unwrap_or_default().into_iter().map(f64::from).collect()))
}

/// The oracle's O (dense, float64) of `problem` on `inputs`: float64 on the CPU up to
/// [`CPU_REFERENCE_LIMIT`] multiply-adds, else the `reference` kernel.
pub fn expected_o(backend: &mut dyn Backend, problem: &Problem, inputs: &Inputs) -> evoattn::Result<Vec<f64>> {
    if macs(problem) <= CPU_REFERENCE_LIMIT {
        Ok(attention_f64(problem, &inputs.q, &inputs.k, &inputs.v).o)
    } else {
        Ok(reference_kernel(backend, problem, inputs)?.0)
    }
}

pub fn macs(p: &Problem) -> u64 {
    let s = p.shape;
    (s.b * s.h * s.sq * s.sk * s.d) as u64
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
            let (o, lse) = if on_cpu {
                let r = attention_f64(problem, &inputs.q, &inputs.k, &inputs.v);
                (r.o, r.lse)
            } else {
                reference_kernel(backend, problem, &inputs).map_err(|e| format!("reference kernel: {e}"))?
            };
            self.answers.insert(key.clone(), Expected { inputs, o, lse });
        }
        Ok(&self.answers[&key])
    }
}
