//! A backend that computes on the CPU: the float64 reference, rounded to the dtype and written
//! by the output strides into a NaN-poisoned buffer, as the GPU backend's contract says. It
//! makes the CLI's behaviour (files, tables, exit codes) testable with no GPU, and its faults
//! (`EVOATTN_MOCK_FAULT`) show that the checks catch a broken kernel.

use crate::backend::{Backend, BackendInfo, Forward, Timing, TimingOptions};
use crate::inputs::nan_bits;
use evoattn::plan::{plan, ImplChoice};
use evoattn::reference::{attention_f64, logical_offsets};
use evoattn::{Arch, Error, KernelConfig, Problem, ProblemError, TensorName};

/// Environment variable that makes the mock misbehave (tests only): `unwritten` or `wrong`.
pub const FAULT_ENV: &str = "EVOATTN_MOCK_FAULT";

/// The arch the mock plans for: the project's main target (H100/H200).
const MOCK_ARCH: Arch = Arch::Sm90a;
/// What the mock reports to be: an H100 SXM, compute capability 9.0 with 132 SMs.
const MOCK_COMPUTE_CAPABILITY: (i32, i32) = (9, 0);
/// An H100's L2 (50 MB), so flush sizes in mock records look like real ones.
const MOCK_L2_BYTES: usize = 50 * 1024 * 1024;
const MOCK_SM_COUNT: u32 = 132;

/// The rate the mock's synthetic timings pretend to reach, so that tables and gates built on
/// them have plausible magnitudes.
const MOCK_TFLOPS: f64 = 100.0;
/// Fixed cost per launch in the synthetic timings, in microseconds.
const MOCK_LAUNCH_US: f64 = 5.0;
/// Relative spread of the synthetic samples (deterministic, seeded by the sample index).
const MOCK_JITTER: f64 = 0.02;

/// Added to one output element by the `wrong` fault: far outside any tolerance, and exact in
/// both dtypes so the shift survives rounding.
const WRONG_SHIFT: f64 = 0.25;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Leaves the last query row of the last head (of the last batch) unwritten: O stays NaN,
    /// and so does its LSE.
    Unwritten,
    /// Adds [`WRONG_SHIFT`] to the first output element.
    Wrong,
}

/// The CPU backend selected by `EVOATTN_BACKEND=mock`.
pub struct MockBackend {
    fault: Option<Fault>,
}

impl MockBackend {
    /// A correct mock, or a faulty one when `EVOATTN_MOCK_FAULT` asks for it.
    pub fn from_env() -> anyhow::Result<Self> {
        let fault = match std::env::var(FAULT_ENV).as_deref() {
            Err(_) | Ok("") => None,
            Ok("unwritten") => Some(Fault::Unwritten),
            Ok("wrong") => Some(Fault::Wrong),
            Ok(other) => anyhow::bail!("{FAULT_ENV}={other}: expected 'unwritten' or 'wrong'"),
        };
        Ok(MockBackend { fault })
    }
}

impl Backend for MockBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            gpu: "mock (CPU float64)".to_string(),
            compute_capability: MOCK_COMPUTE_CAPABILITY,
            arch: MOCK_ARCH.name().to_string(),
            sm_count: MOCK_SM_COUNT,
            l2_bytes: MOCK_L2_BYTES,
            driver: "none (mock backend)".to_string(),
            nvrtc: "none (mock backend)".to_string(),
            mock: true,
        }
    }

    /// Checks what the GPU path checks before a launch (problem, kernel spec, buffer sizes),
    /// then computes in float64 and stores like a kernel would.
    fn forward(
        &mut self,
        problem: &Problem,
        choice: ImplChoice,
        config: Option<KernelConfig>,
        q: &[u16],
        k: &[u16],
        v: &[u16],
    ) -> evoattn::Result<Forward> {
        problem.validate()?;
        let plan = plan(problem, MOCK_ARCH, MOCK_SM_COUNT, choice, config);
        plan.spec
            .validate(MOCK_ARCH)
            .map_err(|reason| Error::Unsupported { imp: plan.spec.imp().to_string(), reason })?;
        for (tensor, buf) in [(TensorName::Q, q), (TensorName::K, k), (TensorName::V, v)] {
            let need = problem.extent(tensor);
            if buf.len() < need {
                return Err(ProblemError::BufferTooSmall { tensor, need, have: buf.len() }.into());
            }
        }

        let reference = attention_f64(problem, q, k, v);
        // Dense O is [B, H, Sq, D]: the last row of the last head is its last D elements.
        let written = match self.fault {
            Some(Fault::Unwritten) => reference.o.len().saturating_sub(problem.shape.d),
            _ => reference.o.len(),
        };
        let mut o = vec![nan_bits(problem.dtype); problem.extent(TensorName::O)];
        for (i, (off, &x)) in logical_offsets(problem, TensorName::O).zip(&reference.o).take(written).enumerate() {
            let x = if i == 0 && self.fault == Some(Fault::Wrong) { x + WRONG_SHIFT } else { x };
            o[off] = problem.dtype.to_bits(x);
        }
        let lse = problem.with_lse.then(|| {
            let mut lse: Vec<f32> = reference.lse.iter().map(|&x| x as f32).collect();
            if let (Some(Fault::Unwritten), Some(last)) = (self.fault, lse.last_mut()) {
                *last = f32::NAN;
            }
            lse
        });
        Ok(Forward { o, lse, kernel: plan.spec.name() })
    }

    /// Synthetic, deterministic samples: FLOPs at [`MOCK_TFLOPS`] plus a launch cost, with a
    /// small spread. They exercise the lab's plumbing, and say nothing about any kernel.
    fn time(
        &mut self,
        problem: &Problem,
        choice: ImplChoice,
        config: Option<KernelConfig>,
        _q: &[u16],
        _k: &[u16],
        _v: &[u16],
        options: TimingOptions,
    ) -> evoattn::Result<Timing> {
        problem.validate()?;
        let _ = (choice, config);
        let base = MOCK_LAUNCH_US + problem.flops() / (MOCK_TFLOPS * 1e6);
        // A fixed low-discrepancy sequence in [-1, 1): the golden-ratio fractions.
        let spread = |i: usize| ((i as f64 * 0.618_033_988_75).fract() * 2.0 - 1.0) * MOCK_JITTER;
        let samples_us = (0..options.samples).map(|i| base * (1.0 + spread(i))).collect();
        Ok(Timing { samples_us })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::{random_inputs, Distribution};
    use evoattn::reference::dense_o;
    use evoattn::{Causal, Dtype, Impl, Layout, Shape};

    fn gqa_problem(layout: Layout) -> Problem {
        let shape = Shape { b: 2, h: 4, hkv: 2, sq: 5, sk: 3, d: 64 };
        Problem::dense(shape, Dtype::F16, layout).with_causal(Causal::BottomRight).with_lse(true)
    }

    fn run(fault: Option<Fault>, problem: &Problem, choice: ImplChoice) -> evoattn::Result<(Forward, Vec<f64>)> {
        let inputs = random_inputs(problem, Distribution::Wide, 11);
        let forward = MockBackend { fault }.forward(problem, choice, None, &inputs.q, &inputs.k, &inputs.v)?;
        let reference = attention_f64(problem, &inputs.q, &inputs.k, &inputs.v);
        let rounded = reference.o.iter().map(|&x| problem.dtype.round(x)).collect();
        Ok((forward, rounded))
    }

    #[test]
    fn writes_the_rounded_reference_by_the_output_strides() {
        for layout in [Layout::Bhsd, Layout::Bshd] {
            let p = gqa_problem(layout);
            let (forward, want) = run(None, &p, ImplChoice::Auto).unwrap();
            assert_eq!(forward.o.len(), 2 * 4 * 5 * 64);
            assert_eq!(dense_o(&p, &forward.o), want, "{layout}");
            // Sq=5 > Sk=3 bottom-right: rows 0 and 1 of every head see no key.
            let lse = forward.lse.unwrap();
            assert_eq!(lse.len(), 2 * 4 * 5);
            assert_eq!(lse[..2], [f32::NEG_INFINITY; 2]);
            assert!(lse[2..5].iter().all(|x| x.is_finite()));
        }
    }

    #[test]
    fn unwritten_fault_leaves_exactly_the_last_row_nan() {
        let p = gqa_problem(Layout::Bshd);
        let (forward, want) = run(Some(Fault::Unwritten), &p, ImplChoice::Auto).unwrap();
        let got = dense_o(&p, &forward.o);
        let split = got.len() - 64;
        assert!(got[split..].iter().all(|x| x.is_nan()));
        assert_eq!(got[..split], want[..split]);
        let lse = forward.lse.unwrap();
        assert!(lse[lse.len() - 1].is_nan() && !lse[lse.len() - 2].is_nan());
    }

    #[test]
    fn wrong_fault_shifts_one_element() {
        let p = gqa_problem(Layout::Bhsd);
        let (forward, want) = run(Some(Fault::Wrong), &p, ImplChoice::Auto).unwrap();
        let got = dense_o(&p, &forward.o);
        let differ: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
        assert_eq!(differ, [0]);
        // rows 0-1 see no key, so element 0 is 0 and the shift lands exactly
        assert_eq!(got[0], WRONG_SHIFT);
    }

    #[test]
    fn reports_the_planned_kernel() {
        let p = gqa_problem(Layout::Bhsd);
        let (auto, _) = run(None, &p, ImplChoice::Auto).unwrap();
        // The mock is an H100: the planner picks wgmma there.
        assert!(auto.kernel.starts_with("evoattn_wgmma_f16_d64_"), "{}", auto.kernel);
        let (reference, _) = run(None, &p, ImplChoice::Fixed(Impl::Reference)).unwrap();
        assert_eq!(reference.kernel, "evoattn_reference_f16_d64_t128");
    }

    #[test]
    fn rejects_what_the_gpu_path_rejects() {
        let mut p = gqa_problem(Layout::Bhsd);
        p.shape.hkv = 3;
        let err = run(None, &p, ImplChoice::Auto).unwrap_err();
        assert!(matches!(err, Error::Problem(ProblemError::HeadsNotDivisible { h: 4, hkv: 3 })), "{err}");
        // D=32 is a valid problem, but no kernel is instantiated for it
        let p = Problem::dense(Shape::new(1, 1, 4, 32), Dtype::Bf16, Layout::Bhsd);
        let err = run(None, &p, ImplChoice::Auto).unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{err}");
        let p = Problem::dense(Shape::new(1, 1, 4, 64), Dtype::Bf16, Layout::Bhsd);
        let err = MockBackend { fault: None }.forward(&p, ImplChoice::Auto, None, &[0; 64], &[], &[]).unwrap_err();
        assert!(err.to_string().contains("tensor q: buffer holds 64 elements, the problem needs 256"), "{err}");
    }

    #[test]
    fn empty_problems_give_empty_outputs() {
        let p = Problem::dense(Shape { b: 0, h: 4, hkv: 2, sq: 8, sk: 8, d: 128 }, Dtype::Bf16, Layout::Bhsd);
        let (forward, _) = run(None, &p.with_lse(true), ImplChoice::Auto).unwrap();
        assert!(forward.o.is_empty());
        assert_eq!(forward.lse, Some(vec![]));
    }
}
