//! `evoattn check`: correctness of a kernel on fresh random inputs, against float64 on the CPU
//! for small problems and the `reference` kernel (itself checked against float64) for large.

use crate::lab::backend::Kernel;
use crate::lab::correctness::{
    self, check_case, CaseResult, CheckOptions, ExpectedCache, CPU_REFERENCE_LIMIT, DEFAULT_SEEDS, ORACLE_CPU,
    ORACLE_GPU, ORACLE_NONE,
};
use crate::lab::kernel_args::KernelArgs;
use crate::lab::kernel_name;
use crate::lab::open::open;
use crate::lab::presets::ProblemArgs;
use crate::out::{self, outln};
use crate::text::{self, Column, Layout as Columns, SHAPE_HEADER};
use anyhow::{bail, Context};
use evoattn::reference::{grad_tolerance, tolerance, Tolerance};
use evoattn::{Dtype, Layout, Pass, Plan, Problem, TensorName};
use std::collections::HashMap;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Exit 0 when every case passes, 1 when one fails (a wrong output, NaN, or no kernel for it), 2
when nothing could run.

Examples:
  evoattn check --preset small                                              # every head dim, dtype and mask
  evoattn check --shape 2,32,1000,128,8 --dtype bf16 --causal bottom-right  # GQA 32:8, the KV-cache mask
  evoattn check --pass both --shape 2,8,300,64,2 --causal all              # O, then dQ, dK, dV, each vs float64")]
pub struct Args {
    #[command(flatten)]
    problems: ProblemArgs,
    #[command(flatten)]
    kernel: KernelArgs,
    /// Random input sets per case; even seeds draw values of mean 0 and std 1, odd seeds wide ones
    /// that push the softmax towards one-hot rows.
    #[arg(long, default_value_t = DEFAULT_SEEDS)]
    seeds: u64,
    /// First seed, for reproducing a failure.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Largest B·H·Sq·Sk·D checked against float64 on the CPU (problems of at most 2^24 input
    /// elements, which the host draws); larger use the reference kernel, on inputs drawn on the GPU.
    #[arg(long, default_value_t = CPU_REFERENCE_LIMIT)]
    cpu_limit: u64,
    /// Softmax scale for every case [default: 1/sqrt(D)]. Any finite non-zero value; a negative
    /// one checks the kernels' reductions over raw scores, which flip from max to min.
    #[arg(long, allow_hyphen_values = true)]
    scale: Option<f32>,
    /// Which pass to check: forward (O and LSE), backward (dQ, dK, dV of the planner's forward,
    /// against float64 on the CPU; `--impl` then names a backward family, mma-bwd, or auto), or
    /// both (each case twice, each pass's planned kernel; `--impl` must be auto).
    #[arg(long = "pass", value_enum, default_value = "forward")]
    pass: PassArg,
    /// Print only the failing rows (with the header and the summary).
    #[arg(long)]
    quiet: bool,
    /// Also print each kernel's full symbol name, under its row (the table names kernels by
    /// family and the levers that differ from the family's default for the problem).
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum PassArg {
    Forward,
    Backward,
    Both,
}

impl PassArg {
    fn passes(self) -> &'static [Pass] {
        match self {
            PassArg::Forward => &[Pass::Forward],
            PassArg::Backward => &[Pass::Backward],
            PassArg::Both => &[Pass::Forward, Pass::Backward],
        }
    }
}

/// The table's columns; the metrics and the result are the last five.
fn columns() -> Vec<Column> {
    vec![
        Column::left(SHAPE_HEADER),
        Column::left("dtype"),
        Column::left("mask"),
        Column::left("layout"),
        Column::left("kernel").wraps(),
        Column::left("oracle"),
        Column::right("max_abs"),
        Column::right("rel_l2"),
        Column::right("lse_abs"),
        Column::right("nan"),
        Column::left("result"),
    ]
}

/// A case's cells before its result: the problem, the kernel's short name and the oracle.
fn case_cells(problem: &Problem, layout: Layout, kernel: &str, oracle: &str) -> Vec<String> {
    vec![
        problem.shape.to_string(),
        problem.dtype.name().to_string(),
        problem.causal.name().to_string(),
        crate::lab::presets::layout_label(problem, layout),
        kernel.to_string(),
        oracle.to_string(),
    ]
}

/// The metrics and result cells of a checked case (empty metrics where it did not run; no LSE
/// error for the backward pass, which writes none).
fn result_cells(r: &CaseResult, pass: Pass) -> Vec<String> {
    let verdict = if r.passed { "PASS" } else { "FAIL" };
    match &r.worst {
        Some(c) if r.error.is_none() => vec![
            format!("{:.2e}", c.max_abs),
            format!("{:.2e}", c.rel_l2),
            if pass == Pass::Backward { "-".to_string() } else { format!("{:.2e}", r.lse_err) },
            c.nonfinite.to_string(),
            verdict.to_string(),
        ],
        _ => vec![String::new(), String::new(), String::new(), String::new(), verdict.to_string()],
    }
}

/// What one case will run: its pass and plan (or why it has none) and the table's cells before
/// the result.
struct Planned {
    pass: Pass,
    problem: Problem,
    layout: Layout,
    plan: Result<Plan, String>,
    cells: Vec<String>,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let request = args.kernel.request()?;
    if args.pass == PassArg::Both && request != evoattn::Request::Auto {
        bail!("--pass both runs each pass's planned kernel; --impl {request} names one pass's, so give --pass too");
    }
    if args.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let mut cases = args.problems.expand()?;
    if args.scale.is_some() {
        for (problem, _) in &mut cases {
            problem.scale = args.scale;
            problem.validate().context("--scale")?;
        }
    }
    let options = CheckOptions { seeds: args.seeds, seed: args.seed, cpu_limit: args.cpu_limit };
    let mut backend = open()?;
    let info = backend.info();
    let arch =
        evoattn::Arch::parse(&info.arch).with_context(|| format!("backend reports unknown arch {}", info.arch))?;
    let tuned = crate::tune::tuned::source(&info, args.kernel.no_tuned);
    // Every case planned first, so that the table's columns are sized before the first row.
    let planned: Vec<Planned> = cases
        .iter()
        .flat_map(|case| args.pass.passes().iter().map(move |&pass| (case, pass)))
        .map(|((problem, layout), pass)| {
            let plan = args.kernel.plan_pass(pass, request, (arch, info.sm_count), problem, tuned.as_ref());
            let plan = plan.map_err(|e| format!("{e:#}"));
            let (kernel, oracle) = match &plan {
                Ok(plan) => (
                    kernel_name::short(&plan.spec, problem, arch, info.sm_count),
                    match pass {
                        Pass::Forward => correctness::oracle(&options, Kernel::Planned(plan), problem),
                        Pass::Backward => correctness::backward_oracle(&options, problem),
                    },
                ),
                Err(_) => ("–".to_string(), "–"),
            };
            let cells = case_cells(problem, *layout, &kernel, oracle);
            Planned { pass, problem: problem.clone(), layout: *layout, plan, cells }
        })
        .collect();
    // The non-finite count's column: as wide as the largest output's count (a larger one wraps).
    let widest_count = planned.iter().map(|c| c.problem.elements(TensorName::O)).max().unwrap_or(0).min(9_999_999);
    let sample: Vec<Vec<String>> = planned
        .iter()
        .map(|c| {
            let metric = "9.99e-99".to_string();
            let mut row = c.cells.clone();
            row.extend([metric.clone(), metric.clone(), metric, widest_count.to_string(), "FAIL".into()]);
            row
        })
        .collect();
    let table = Columns::for_rows(columns(), &sample);
    out::text(&text::paragraph(&format!(
        "check: {} x {} on {} ({}), impl {request}, tolerances per dtype in evoattn::reference::{}",
        text::count(cases.len(), "case", "cases"),
        text::count(args.seeds as usize, "seed", "seeds"),
        info.gpu,
        info.arch,
        match args.pass {
            PassArg::Forward => "tolerance",
            PassArg::Backward => "grad_tolerance",
            PassArg::Both => "tolerance and grad_tolerance",
        }
    )))?;
    for line in table.header() {
        outln!("{line}")?;
    }
    let bar = indicatif::ProgressBar::new(cases.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} cases, {elapsed} elapsed, eta {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut results = Vec::with_capacity(cases.len());
    // Each error text is written once, under its first case; later cases point back to it.
    let mut said: HashMap<String, String> = HashMap::new();
    for case in &planned {
        // A fresh cache per case: `check` meets each problem once, and keeping its inputs would only
        // hold memory.
        let mut cache = ExpectedCache::default();
        let r = match &case.plan {
            Ok(plan) if case.pass == Pass::Backward => {
                correctness::check_backward_case(backend.as_mut(), &options, plan, case.layout)
            }
            Ok(plan) => {
                check_case(backend.as_mut(), &options, Kernel::Planned(plan), &case.problem, case.layout, &mut cache)
            }
            Err(e) => CaseResult::unplanned(&case.problem, case.layout, e.clone()),
        };
        if !args.quiet || !r.passed {
            let mut lines = table.row(&[case.cells.clone(), result_cells(&r, case.pass)].concat());
            if args.verbose && !r.kernel.is_empty() {
                lines.extend(text::wrap(&r.kernel, text::WIDTH, "    ", "    "));
            }
            if let Some(e) = &r.error {
                let label = case.cells[..4].join(" ");
                let note = match said.get(e) {
                    Some(first) => format!("error: as for {first}"),
                    None => {
                        said.insert(e.clone(), label);
                        format!("error: {e}")
                    }
                };
                lines.extend(text::wrap(&note, text::WIDTH, "    ", "      "));
            }
            bar.suspend(|| lines.iter().try_for_each(|line| outln!("{line}")))?;
        }
        bar.inc(1);
        results.push(r);
    }
    bar.finish_and_clear();
    let failed = results.iter().filter(|r| !r.passed).count();
    let mut summary = String::new();
    for &pass in args.pass.passes() {
        // A forward-only run's lines name no pass.
        let (label, tolerance): (&str, fn(Dtype) -> Tolerance) = match pass {
            Pass::Forward if args.pass == PassArg::Forward => ("", tolerance),
            Pass::Forward => ("forward ", tolerance),
            Pass::Backward => ("backward ", grad_tolerance),
        };
        for dtype in Dtype::ALL {
            let of_dtype: Vec<&CaseResult> = results
                .iter()
                .zip(&planned)
                .filter(|(r, case)| r.problem.dtype == dtype && case.pass == pass)
                .map(|(r, _)| r)
                .collect();
            let worst = of_dtype.iter().filter_map(|r| r.worst.as_ref()).map(|c| c.max_abs).fold(0.0, f64::max);
            let worst_rel = of_dtype.iter().filter_map(|r| r.worst.as_ref()).map(|c| c.rel_l2).fold(0.0, f64::max);
            if !of_dtype.is_empty() {
                let tol = tolerance(dtype);
                summary.push_str(&text::paragraph(&format!(
                    "{label}{dtype}: {}, worst max_abs {worst:.3e}, worst rel_l2 {worst_rel:.3e} (tolerance: max_abs {:.1e} x max(1, |ref|), rel_l2 {:.1e})",
                    text::count(of_dtype.len(), "case", "cases"),
                    tol.max_abs,
                    tol.rel_l2
                )));
            }
        }
    }
    let by = |oracle: &str| results.iter().filter(|r| r.oracle == oracle).count();
    let none = by(ORACLE_NONE);
    summary.push_str(&text::paragraph(&format!(
        "oracles: {} against float64 on the CPU, {} against the reference kernel{}",
        text::count(by(ORACLE_CPU), "case", "cases"),
        by(ORACLE_GPU),
        if none > 0 { format!(", {none} with none (the backward past --cpu-limit)") } else { String::new() }
    )));
    let repeated: usize = results.iter().filter_map(|r| r.error.as_ref()).count().saturating_sub(said.len());
    if repeated > 0 {
        summary.push_str(&text::paragraph(&format!(
            "errors: {} distinct, each written under its first case; {} failed with one of them too",
            said.len(),
            text::count(repeated, "more case", "more cases")
        )));
    }
    summary.push_str(&format!("{} passed, {} failed\n", results.len() - failed, failed));
    out::text(&summary)?;
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
