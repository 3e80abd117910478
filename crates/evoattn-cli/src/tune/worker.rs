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
use evoattn::runtime::resources::ResourceReport;
use evoattn::{Arch, Causal, Dtype, Impl, KernelSpec, Layout, Problem, Shape};
use std::io::{BufRead, Write};
use std::process::ExitCode;

/// Timed launches are eager, as `evoattn bench` measures by default: the tuned config must win
/// where the planner's users see it.
const TIMING_MODE: crate::stores::record::Mode = crate::stores::record::Mode::Eager;
/// Seed of the timing inputs; the correctness gate draws its own fresh ones.
const TIMING_SEED: u64 = 0x7E57;

#[derive(clap::Args)]
pub struct Args {
    /// The GPU this worker owns (CUDA ordinal).
    #[arg(long, default_value_t = 0)]
    gpu: usize,
}

fn send(out: &mut impl Write, reply: &Reply) -> anyhow::Result<()> {
    writeln!(out, "{}", serde_json::to_string(reply)?)?;
    out.flush()?;
    Ok(())
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut backend = open_on(args.gpu)?;
    let info = backend.info();
    let mut out = std::io::stdout().lock();
    let machine = super::store::Machine::of(&info);
    send(
        &mut out,
        &Reply::Ready { gpu: machine.gpu, driver: machine.driver, arch: info.arch.clone(), sm_count: info.sm_count },
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
            let compiled = CompiledKernel {
                spec,
                arch,
                cubin,
                resources: ResourceReport::default(),
                log: String::new(),
                from_cache: true,
                elapsed: std::time::Duration::ZERO,
            };
            Some(Variant { source: v.source.clone(), compiled })
        }
    };
    Ok(Job { problems, variant, spec })
}

/// Correctness on every shape, then timing on every shape: median µs per shape, or the gate
/// that failed with its error.
fn evaluate(
    backend: &mut dyn Backend,
    (arch, sm_count): (Arch, u32),
    request: &Request,
    cached: &mut WorkerInputs,
    out: &mut impl Write,
) -> anyhow::Result<Result<Vec<f64>, (Gate, String)>> {
    let job = job(request)?;
    // The candidate as the kernel that runs `problem`: its config planned as given, or its source.
    let plan_of = |problem: &Problem| plan(problem, arch, sm_count, evoattn::Request::Config(job.spec.config));
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
        let timed = backend.time(problem, kernel, inputs, options);
        match timed.map(|t| crate::verdicts::stats::summarize(&t.samples_us)) {
            Ok(Some(s)) => medians.push(s.median),
            Ok(None) => return Ok(Err((Gate::Timing, "no samples".to_string()))),
            Err(e) => return Ok(Err((Gate::Timing, e.to_string()))),
        }
    }
    Ok(Ok(medians))
}
