//! `evoattn tune-worker --gpu N` (hidden): the process that owns one GPU for the tuner. It
//! runs the correctness and timing gates of one candidate at a time, so a candidate that
//! faults (a poisoned CUDA context) or hangs takes down only this process; the tuner kills
//! and restarts it. Compiles happen in the tuner, in parallel, before a request arrives: the
//! worker finds lever configs in the disk cache and gets proposed sources as CUBIN files.

use super::evolve::Gate;
use super::protocol::{Reply, Request};
use crate::lab::backend::{Backend, Kernel, TimingOptions, Variant};
use crate::lab::correctness::{check_case, summary, CheckOptions, ExpectedCache};
use crate::lab::inputs::{Distribution, Draw, Inputs};
use crate::lab::open::open_on;
use anyhow::Context;
use evoattn::plan::plan;
use evoattn::runtime::compile::CompiledKernel;
use evoattn::{Arch, Causal, Dtype, Impl, KernelSpec, Layout, Problem, Shape, TensorName};
use std::io::{BufRead, Write};
use std::process::ExitCode;

/// Timed launches are eager, as `evoattn bench` measures by default: the tuned config must win
/// where the planner's users see it.
const TIMING_MODE: crate::stores::record::Mode = crate::stores::record::Mode::Eager;
/// Seed of the timing inputs; the correctness gate draws its own fresh ones.
const TIMING_SEED: u64 = 0x7E57;
/// First seed of the integrity gate's recheck (a normal and a wide input set, as the
/// correctness gate's): sets no launch before it saw, the correctness gate drawing seeds 0
/// and 1 and timing [`TIMING_SEED`].
const RECHECK_SEED: u64 = 2;

#[derive(clap::Args)]
pub struct Args {
    /// The GPU this worker owns (CUDA ordinal).
    #[arg(long, default_value_t = 0)]
    gpu: usize,
    /// Read one request, launch its kernel once per shape on the timing inputs and exit,
    /// printing nothing: what the tuner runs under Nsight Compute.
    #[arg(long)]
    launch_once: bool,
}

fn send(out: &mut impl Write, reply: &Reply) -> anyhow::Result<()> {
    writeln!(out, "{}", serde_json::to_string(reply)?)?;
    out.flush()?;
    Ok(())
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut backend = open_on(args.gpu)?;
    if args.launch_once {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).context("reading the request")?;
        let request: Request = serde_json::from_str(&line).context("a tune-worker request")?;
        launch_once(backend.as_mut(), &request)?;
        return Ok(ExitCode::SUCCESS);
    }
    let info = backend.info();
    let mut out = std::io::stdout().lock();
    let machine = super::store::Machine::of(&info);
    send(
        &mut out,
        &Reply::Ready {
            gpu: machine.gpu,
            device: info.gpu.clone(),
            driver: machine.driver,
            arch: info.arch.clone(),
            sm_count: info.sm_count,
        },
    )?;
    let arch = Arch::parse(&info.arch).with_context(|| format!("backend reports unknown arch {}", info.arch))?;
    let target = (arch, info.sm_count);
    let mut inputs = WorkerInputs::default();
    for line in std::io::stdin().lock().lines() {
        let request: Request = serde_json::from_str(&line?).context("a tune-worker request")?;
        let id = request.id;
        let reply = match evaluate(backend.as_mut(), target, &request, &mut inputs, &mut out) {
            Ok(Ok(medians_us)) => Reply::Passed { id, medians_us },
            Ok(Err((gate, error))) => Reply::Failed { id, gate: gate.name().to_string(), error },
            Err(e) => Reply::Failed { id, gate: Gate::Correctness.name().to_string(), error: format!("{e:#}") },
        };
        send(&mut out, &reply)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What a worker keeps across candidates, per shape: the oracle's answers on the correctness
/// gate's inputs. They do not depend on the candidate, and computing them (a float64 or
/// reference-kernel answer) took most of an evaluation's time, leaving the GPU idle while the
/// CPU worked.
#[derive(Default)]
struct WorkerInputs {
    expected: ExpectedCache,
}

/// The request's kernel spec, problems and (for a proposed source) variant.
struct Job {
    problems: Vec<Problem>,
    variant: Option<Variant>,
    spec: KernelSpec,
}

fn job(request: &Request) -> anyhow::Result<Job> {
    let imp = Impl::parse(&request.imp).with_context(|| format!("impl '{}'", request.imp))?;
    let config = super::space::parse(imp, &request.config).map_err(anyhow::Error::msg)?;
    let dtype = Dtype::parse(&request.dtype).with_context(|| format!("dtype '{}'", request.dtype))?;
    let causal = Causal::parse(&request.causal).with_context(|| format!("mask '{}'", request.causal))?;
    let spec = KernelSpec { config, dtype, head_dim: request.head_dim };
    let problems = request
        .shapes
        .iter()
        .map(|s| Shape::parse(s).map(|shape| Problem::dense(shape, dtype, Layout::Bhsd).with_causal(causal)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let variant = match &request.variant {
        None => None,
        Some(v) => {
            let arch = Arch::parse(&v.arch).with_context(|| format!("arch '{}'", v.arch))?;
            let cubin = std::fs::read(&v.cubin).with_context(|| format!("reading {}", v.cubin.display()))?;
            // The tuner already judged its resources; the load needs only the CUBIN and spec.
            let compiled = CompiledKernel::from_cubin(spec, arch, cubin);
            Some(Variant { source: v.source.clone(), compiled })
        }
    };
    Ok(Job { problems, variant, spec })
}

/// One launch of the request's kernel per shape, on the timing inputs.
fn launch_once(backend: &mut dyn Backend, request: &Request) -> anyhow::Result<()> {
    let info = backend.info();
    let arch = Arch::parse(&info.arch).with_context(|| format!("backend reports unknown arch {}", info.arch))?;
    let job = job(request)?;
    for problem in &job.problems {
        let plan = plan(problem, arch, info.sm_count, evoattn::Request::Config(job.spec.config));
        let kernel = job.variant.as_ref().map_or(Kernel::Planned(&plan), Kernel::Variant);
        backend.forward(problem, kernel, Inputs::Drawn(Draw::new(Distribution::Normal, TIMING_SEED)))?;
    }
    Ok(())
}

/// The names of the tensors whose digests differ.
fn written_inputs(before: &[(TensorName, u64)], after: &[(TensorName, u64)]) -> Vec<String> {
    before.iter().zip(after).filter(|(b, a)| b != a).map(|((t, _), _)| t.name().to_uppercase()).collect()
}

/// The integrity gate after timing: correctness again on input sets the kernel never saw
/// (a kernel that behaves until it is timed fails here), then each median against the
/// roofline's time (no kernel runs faster: the timing missed the work). The first failure.
fn integrity(
    backend: &mut dyn Backend,
    job: &Job,
    request: &Request,
    medians_us: &[f64],
    plan_of: &dyn Fn(&Problem) -> evoattn::Plan,
    cached: &mut WorkerInputs,
) -> Option<String> {
    let recheck = CheckOptions { seed: RECHECK_SEED, ..CheckOptions::TUNE };
    for problem in &job.problems {
        let problem = problem.clone().with_lse(true);
        let plan = plan_of(&problem);
        let kernel = job.variant.as_ref().map_or(Kernel::Planned(&plan), Kernel::Variant);
        let result = check_case(backend, &recheck, kernel, &problem, Layout::Bhsd, &mut cached.expected);
        if !result.passed {
            return Some(format!("on fresh inputs after the timed launches: {}", summary(&result)));
        }
    }
    let floors = request.roofline_us.as_deref()?;
    job.problems.iter().zip(medians_us).zip(floors).find(|((_, median), floor)| median < floor).map(
        |((problem, median), floor)| {
            format!(
                "{}: median {median:.2} µs is below {floor:.2} µs, {:.0}% of the roofline's time (its FLOPs at the \
                 measured matmul peak, its bytes at the measured copy rate): the timing did not measure the work",
                problem.shape,
                100.0 * crate::lab::roofline::IMPOSSIBLE_SHARE
            )
        },
    )
}

/// The request's gates: median µs per shape, or the gate that failed with its error.
fn evaluate(
    backend: &mut dyn Backend,
    target: (Arch, u32),
    request: &Request,
    cached: &mut WorkerInputs,
    out: &mut impl Write,
) -> anyhow::Result<Result<Vec<f64>, (Gate, String)>> {
    run_gates(backend, target, &job(request)?, request, cached, out)
}

/// Correctness on every shape, timing on every shape, then integrity: median µs per shape, or
/// the gate that failed with its error.
fn run_gates(
    backend: &mut dyn Backend,
    (arch, sm_count): (Arch, u32),
    job: &Job,
    request: &Request,
    cached: &mut WorkerInputs,
    out: &mut impl Write,
) -> anyhow::Result<Result<Vec<f64>, (Gate, String)>> {
    // The candidate as the kernel that runs `problem`: its config planned as given, or its source.
    let config = job.spec.config;
    let plan_of = |problem: &Problem| plan(problem, arch, sm_count, evoattn::Request::Config(config));
    let id = request.id;
    send(out, &Reply::Gate { id, gate: Gate::Correctness.name().to_string() })?;
    for problem in &job.problems {
        // As `check` does: the LSE output is checked too.
        let problem = problem.clone().with_lse(true);
        let plan = plan_of(&problem);
        let kernel = job.variant.as_ref().map_or(Kernel::Planned(&plan), Kernel::Variant);
        let result = check_case(backend, &CheckOptions::TUNE, kernel, &problem, Layout::Bhsd, &mut cached.expected);
        if !result.passed {
            return Ok(Err((Gate::Correctness, summary(&result))));
        }
    }
    send(out, &Reply::Gate { id, gate: Gate::Timing.name().to_string() })?;
    let options = TimingOptions { warmup: request.warmup, samples: request.samples, mode: TIMING_MODE };
    let mut medians = Vec::with_capacity(job.problems.len());
    for problem in &job.problems {
        let inputs = Inputs::Drawn(Draw::new(Distribution::Normal, TIMING_SEED));
        let plan = plan_of(problem);
        let kernel = job.variant.as_ref().map_or(Kernel::Planned(&plan), Kernel::Variant);
        // The inputs' digests around the timed launches: a kernel must not write them.
        let before = backend.input_digests(problem, inputs);
        let timed = backend.time(problem, kernel, inputs, options);
        match timed.map(|t| crate::verdicts::stats::summarize(&t.samples_us)) {
            Ok(Some(s)) => medians.push(s.median),
            Ok(None) => return Ok(Err((Gate::Timing, "no samples".to_string()))),
            Err(e) => return Ok(Err((Gate::Timing, e.to_string()))),
        }
        let after = backend.input_digests(problem, inputs);
        let (before, after) = match (before, after) {
            (Ok(b), Ok(a)) => (b, a),
            (Err(e), _) | (_, Err(e)) => return Ok(Err((Gate::Integrity, format!("reading the inputs back: {e}")))),
        };
        let written = written_inputs(&before, &after);
        if !written.is_empty() {
            return Ok(Err((
                Gate::Integrity,
                format!(
                    "the kernel wrote its inputs: {} changed during the timed launches on {}",
                    written.join(", "),
                    problem.shape
                ),
            )));
        }
    }
    send(out, &Reply::Gate { id, gate: Gate::Integrity.name().to_string() })?;
    if let Some(failure) = integrity(backend, job, request, &medians, &plan_of, cached) {
        return Ok(Err((Gate::Integrity, failure)));
    }
    Ok(Ok(medians))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::ceilings::Ceilings;
    use crate::lab::mock::{Cheat, MockBackend, PLANTED_CHEAT};
    use crate::lab::roofline::impossible_below_us;

    const TARGET: (Arch, u32) = (Arch::Sm90a, 132);
    /// Ceilings under which the mock's honest kernels run above 80% of the roofline's time on
    /// [`shapes`] and an empty timed stream (1 µs) below it.
    const CEILINGS: Ceilings = Ceilings { matmul_tflops: 400.0, copy_gbps: 80.0 };

    fn shapes() -> [Shape; 2] {
        [Shape::new(1, 2, 128, 64), Shape::new(1, 2, 300, 64)]
    }

    fn request(roofline: bool) -> Request {
        let config = evoattn::defaults::config(Impl::Mma, TARGET.0, Dtype::Bf16, 64);
        let problem = |s: Shape| Problem::dense(s, Dtype::Bf16, Layout::Bhsd);
        Request {
            id: 1,
            imp: "mma".into(),
            config: config.to_string(),
            dtype: "bf16".into(),
            head_dim: 64,
            causal: "none".into(),
            shapes: shapes().iter().map(Shape::to_string).collect(),
            warmup: 1,
            samples: 5,
            variant: None,
            roofline_us: roofline
                .then(|| shapes().into_iter().map(|s| impossible_below_us(&problem(s), CEILINGS)).collect()),
        }
    }

    /// The gates of the baseline config, or of a source variant holding `source`.
    fn gates(source: Option<&str>, roofline: bool) -> Result<Vec<f64>, (Gate, String)> {
        let request = request(roofline);
        let mut job = job(&request).unwrap();
        job.variant = source.map(|text| Variant {
            source: text.to_string(),
            compiled: CompiledKernel::from_cubin(job.spec, TARGET.0, Vec::new()),
        });
        let mut backend = MockBackend::default();
        run_gates(&mut backend, TARGET, &job, &request, &mut WorkerInputs::default(), &mut Vec::new()).unwrap()
    }

    fn planted(cheat: Cheat) -> String {
        format!("/* {PLANTED_CHEAT}{} */ extern \"C\" __global__ void k() {{}}", cheat.name())
    }

    #[test]
    fn honest_configs_and_sources_pass_every_gate() {
        for source in [None, Some("extern \"C\" __global__ void k() {}")] {
            let medians = gates(source, true).unwrap_or_else(|f| panic!("{source:?}: {f:?}"));
            assert_eq!(medians.len(), 2);
        }
    }

    #[test]
    fn each_planted_cheat_passes_correctness_and_timing_and_fails_integrity() {
        let caught_by = |cheat| match cheat {
            Cheat::CachedOutput | Cheat::PartialWrite | Cheat::SkippedKeyBlocks => {
                "on fresh inputs after the timed launches: 1,2,128,64 bf16 none bhsd: FAIL"
            }
            Cheat::OtherStream => "1,2,128,64: median 1.0",
            Cheat::InputsOverwritten => {
                "the kernel wrote its inputs: K changed during the timed launches on 1,2,128,64"
            }
        };
        for cheat in Cheat::ALL {
            let (gate, error) = gates(Some(&planted(cheat)), true).expect_err(cheat.name());
            assert_eq!(gate, Gate::Integrity, "{}: {error}", cheat.name());
            assert!(error.contains(caught_by(cheat)), "{}: {error}", cheat.name());
        }
        // The partial write leaves NaN behind; the other two wrong values.
        let (_, partial) = gates(Some(&planted(Cheat::PartialWrite)), true).unwrap_err();
        assert!(!partial.contains(" 0 non-finite"), "{partial}");
    }

    #[test]
    fn only_the_roofline_sees_work_moved_off_the_timed_stream() {
        let (_, error) = gates(Some(&planted(Cheat::OtherStream)), true).unwrap_err();
        assert!(error.contains("% of the roofline's time"), "{error}");
        // Without measured ceilings its outputs are right and its inputs untouched: it passes,
        // which is why a run without ceilings says so.
        assert!(gates(Some(&planted(Cheat::OtherStream)), false).is_ok());
    }

    #[test]
    fn digests_name_the_written_tensors() {
        let before = [(TensorName::Q, 1), (TensorName::K, 2), (TensorName::V, 3)];
        assert!(written_inputs(&before, &before).is_empty());
        let after = [(TensorName::Q, 1), (TensorName::K, 5), (TensorName::V, 6)];
        assert_eq!(written_inputs(&before, &after), ["K", "V"]);
    }
}
