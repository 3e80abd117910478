//! `evoattn tune`: the EvoEngineer tuner. Searches one kernel's levers on a set of shapes with
//! worker processes on every GPU asked for, writes every evaluation to the store as it
//! completes, and prints (and with `--json` writes) the elites. `--show` lists the store.

use crate::errln;
use crate::lab::ceilings::{self, Ceilings};
use crate::lab::ncu::{composite, NcuTerms};
use crate::lab::open::device_count;
use crate::lab::oracle::Oracle;
use crate::lab::presets::{ProblemArgs, VLayout};
use crate::text::{self, Column, Notes, Table};
use crate::tune::evaluator::WorkerEvaluator;
use crate::tune::evolve::{evolve, Candidate, Evaluation, Fitness, Hooks, Params, Proposal, ELITES};
use crate::tune::pool::Worker;
use crate::tune::profiler::Profiler;
use crate::tune::progress::Progress;
use crate::tune::proposer::{Guidance, Proposer, Task};
use crate::tune::protocol::Reply;
use crate::tune::store::{self, Bucket, Machine, Store};
use anyhow::{bail, Context};
use evoattn::plan::plan;
use evoattn::Request;
use evoattn::{Arch, Causal, Dtype, Impl, KernelConfig, Shape};
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Generations when `--generations` is not given; `--budget` usually ends a run first.
const DEFAULT_GENERATIONS: usize = 10;

#[derive(clap::Args)]
#[command(
    after_help = "Each generation changes one lever of an elite (plus random restarts and the proposer's answers),
and every child passes compile -> resources -> correctness -> timing -> integrity: after timing,
its inputs must be unchanged (digests around the timed launches), its output right on fresh inputs
it never saw, and no median below 80% of the roofline's time (FLOPs at the GPU's measured matmul
peak, bytes at its copy rate; `evoattn info` measures them, else tune does through the oracle,
else it warns that this check is off). Fitness is the geometric-mean speedup over the planner's
default on the shapes; a child more than 10% slower on two or more shapes is discarded. Every
evaluation is stored as it completes (in --store), and from the default store `check`, `bench`,
`gate`, `profile` and `trace` then plan with the best config per GPU and problem bucket
(--no-tuned or EVOATTN_NO_TUNED=1 to compare with the defaults). Shapes are grouped by dtype, head
dim and mask, one search each; tuning times BHSD tensors, so --layout does not enter. `--proposer
CMD` runs CMD under sh -c.

Examples:
  evoattn tune --shape 1,16,4096,128 --shape 4,16,1024,128 --impl mma --budget 8m --json elite.json
  evoattn tune --preset seed --gpus 0,1 --resume   # one worker per GPU; continue a killed run
  evoattn tune --show                              # every stored evaluation"
)]
pub struct Args {
    /// List every stored evaluation, oldest first, and exit.
    #[arg(long)]
    show: bool,
    /// The store (default: tune.sqlite in the kernel cache dir, the one the planner reads).
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
    #[command(flatten)]
    problems: ProblemArgs,
    /// The kernel family whose levers are searched: mma, wgmma, splitkv, resident, mma8 (for
    /// E4M3 problems), cublas, hybrid-qk or hybrid-pv (default: the planner's choice on this GPU
    /// for each group's first shape); or `any`: every family that runs the group here, from the
    /// planner's choice: each family's start (the planner's config of that family for the
    /// group's first shape) is evaluated once before the first generation, then the family is a
    /// gene of its own (a switch lands on that start); a table after the elites gives each
    /// family's best median per shape and the fastest family there.
    #[arg(long = "impl")]
    imp: Option<String>,
    /// Generations to run (each: one-lever children of the elites, random restarts, proposals).
    #[arg(long, default_value_t = DEFAULT_GENERATIONS)]
    generations: usize,
    /// Elites kept per generation (the population children are drawn from).
    #[arg(long, default_value_t = ELITES)]
    elite: usize,
    /// GPUs to evaluate on, one worker process each: all, or ordinals like 0,1.
    #[arg(long, default_value = "all")]
    gpus: String,
    /// Wall-clock budget, e.g. 90s, 10m, 1h: no group, generation, compile round or candidate
    /// starts after it (candidates already on a GPU finish; a later run resumes from the store).
    #[arg(long, value_parser = parse_duration)]
    budget: Option<Duration>,
    /// Reuse the evaluations stored for this GPU, bucket, shapes and kernel instead of
    /// measuring them again (continues an interrupted run).
    #[arg(long)]
    resume: bool,
    /// Write the final elites (configs, fitness, per-shape medians and speedups) and each
    /// family's best per shape (family_best, winners) as JSON to this file (its directory must exist; checked before tuning); with --show, every stored
    /// evaluation (kernel symbol names, full error texts).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// A program run each generation with a prompt on stdin (what --guidance says: the task and
    /// kernel source, the elites, profile insights); its stdout is config lines (--config
    /// syntax) or a whole kernel source, evaluated through the same gates.
    /// python/proposers/openai_chat.py asks an OpenAI-compatible endpoint.
    #[arg(long, value_name = "CMD")]
    proposer: Option<String>,
    /// Profile insights for the proposer's prompt (e.g. saved `evoattn profile` output).
    #[arg(long, value_name = "FILE")]
    insights: Option<PathBuf>,
    /// What the proposer's prompt carries (EvoEngineer's modes): free, the task alone (the
    /// problem, levers, gates, fitness and kernel source); insight, the task and --insights;
    /// full, those and the elites so far (configs, speedups, medians). Recorded with every
    /// evaluation of the run.
    #[arg(long, value_enum, default_value_t = Guidance::Full, requires = "proposer", hide_possible_values = true)]
    guidance: Guidance,
    /// What ranks candidates: geomean, the geometric-mean speedup over the planner's default (the
    /// measured times alone); composite, the founding documents' 1000 × that speedup + 2 ×
    /// tensor-pipe % + SM-busy % − 10 × barrier stalls per issued instruction − 0.1 × registers,
    /// from Nsight Compute's counters of each candidate that passes the integrity gate (one
    /// launch per shape on its worker's GPU, clocks as they are). The store keeps the speedup
    /// either way, and the counters when read.
    #[arg(long, value_enum, default_value_t = Fitness::Geomean, hide_possible_values = true)]
    fitness: Fitness,
    /// The NCU sanity gate after integrity: the tensor pipe at least 50% busy or DRAM under 50%
    /// (the counters read as for --fitness composite).
    #[arg(long)]
    ncu_gate: bool,
    /// The Nsight Compute binary for --fitness composite and --ncu-gate (default: ncu on PATH,
    /// then /usr/local/cuda/bin/ncu).
    #[arg(long, value_name = "PATH")]
    ncu: Option<PathBuf>,
    /// A candidate whose worker gives no sign of progress for this long is killed and
    /// recorded as failed (a hung kernel); so is a run of ncu on it that lasts longer.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    timeout: Duration,
    /// Seed of the search (mutations and restarts).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Also print each kernel's full symbol name under its row (the tables name kernels by
    /// family and the levers that differ from the planner's default).
    #[arg(short, long)]
    verbose: bool,
}

/// Whether `tune` searches a family's levers: every family but the reference kernel, the oracle
/// the others are checked against.
pub fn tunable(imp: Impl) -> bool {
    // The tuner times forward launches; the backward pass is not tuned yet.
    imp != Impl::Reference && imp.pass() == evoattn::Pass::Forward
}

/// `--impl` for a search across families.
const ANY: &str = "any";

/// The families `--impl any` searches for a group: every tunable family built for the arch,
/// dtype and head dim, the library paths where `library` (cuBLAS loads).
fn any_families(arch: Arch, dtype: Dtype, head_dim: usize, library: bool) -> Vec<Impl> {
    Impl::ALL
        .into_iter()
        .filter(|&i| tunable(i) && (library || !i.is_library()))
        .filter(|i| i.archs().contains(&arch) && i.dtypes().contains(&dtype) && i.head_dims().contains(&head_dim))
        .collect()
}

/// `90s`, `10m`, `1h` or plain seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len()));
    let value: f64 = number.parse().map_err(|_| format!("'{text}' is not a duration like 90s, 10m or 1h"))?;
    let seconds = match unit {
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("unknown unit '{other}' in '{text}': use s, m or h")),
    };
    Ok(Duration::from_secs_f64(seconds))
}

fn gpu_list(text: &str) -> anyhow::Result<Vec<usize>> {
    if text == "all" {
        return Ok((0..device_count()?).collect());
    }
    let gpus: Vec<usize> = text
        .split(',')
        .map(|g| g.trim().parse().map_err(|_| anyhow::anyhow!("--gpus: '{g}' is not a GPU ordinal")))
        .collect::<anyhow::Result<_>>()?;
    if gpus.is_empty() {
        bail!("--gpus needs 'all' or ordinals like 0,1");
    }
    Ok(gpus)
}

/// One stored evaluation as `tune --show --json` writes it.
#[derive(Serialize)]
struct StoredJson<'a> {
    gpu: &'a str,
    driver: &'a str,
    bucket: &'a str,
    shapes: Vec<String>,
    /// The kernel's symbol name.
    kernel: String,
    config: String,
    /// A whole kernel source proposed to the tuner (not the embedded one with the levers).
    proposed_source: bool,
    failed_gate: Option<&'static str>,
    error: Option<&'a str>,
    /// Geometric mean over the shapes of the run's default median / this one (above 1 faster).
    fitness: Option<f64>,
    discarded: bool,
    medians_us: &'a [f64],
    /// What the run's proposer was shown (free, insight, full); null without a proposer.
    guidance: Option<&'static str>,
    /// Nsight Compute's counters (the mean over the shapes) where the run read them.
    counters: Option<NcuTerms>,
    /// The composite score of the speedup and those counters.
    composite: Option<f64>,
}

/// Every stored evaluation, oldest first, in a table per GPU; a failed gate's error as a
/// numbered note (one per distinct text). With `json`, every row written there too.
fn show(path: &std::path::Path, json: Option<&std::path::Path>, verbose: bool) -> anyhow::Result<ExitCode> {
    let rows = Store::open(path)?.all()?;
    if let Some(json) = json {
        let stored: Vec<StoredJson> = rows
            .iter()
            .map(|r| StoredJson {
                gpu: &r.gpu,
                driver: &r.driver,
                bucket: &r.bucket,
                shapes: r.shapes.iter().map(store::shape_text).collect(),
                kernel: r.spec.name(),
                config: r.spec.config.to_string(),
                proposed_source: r.source.is_some(),
                failed_gate: r.evaluation.failure.as_ref().map(|(gate, _)| gate.name()),
                error: r.evaluation.failure.as_ref().map(|(_, e)| e.as_str()),
                fitness: r.fitness,
                discarded: r.discarded,
                medians_us: &r.evaluation.medians_us,
                guidance: r.guidance.map(Guidance::name),
                counters: r.evaluation.counters,
                composite: r.fitness.zip(r.evaluation.counters).map(|(f, c)| composite(f, &c)),
            })
            .collect();
        let text = serde_json::to_string_pretty(&stored)?;
        std::fs::write(json, text + "\n").with_context(|| format!("writing {}", json.display()))?;
    }
    let mut out =
        text::paragraph(&format!("{}: {}", path.display(), text::count(rows.len(), "evaluation", "evaluations")));
    let mut gpus: Vec<&str> = Vec::new();
    for row in &rows {
        if !gpus.contains(&row.gpu.as_str()) {
            gpus.push(&row.gpu);
        }
    }
    let mut notes = Notes::default();
    for gpu in gpus {
        let mut table = Table::new(vec![
            Column::left("bucket"),
            Column::left("kernel").wraps(),
            Column::right("speedup\nvs default"),
            Column::left("result"),
            Column::left("medians µs").wraps(),
            Column::left("guidance").optional(),
            Column::right("tensor%\nsm%").optional(),
            Column::right("score").optional(),
            Column::left("notes").optional(),
        ]);
        for row in rows.iter().filter(|r| r.gpu == gpu) {
            let (result, note) = match (&row.evaluation.failure, row.fitness) {
                (Some((gate, error)), _) => (format!("failed {}", gate.name()), notes.refer(error).to_string()),
                (None, Some(_)) if row.discarded => ("discarded".to_string(), String::new()),
                (None, Some(_)) => ("kept".to_string(), String::new()),
                (None, None) => ("passed".to_string(), String::new()),
            };
            let kernel = match &row.source {
                Some(_) => format!("{} (proposed source)", row.short_name()),
                None => row.short_name(),
            };
            let medians: Vec<String> = row.evaluation.medians_us.iter().map(|m| format!("{m:.1}")).collect();
            table.row(vec![
                row.bucket.clone(),
                kernel,
                row.fitness.map_or_else(|| "–".to_string(), |f| format!("{f:.3}×")),
                result,
                medians.join(", "),
                row.guidance.map_or_else(String::new, |g| g.name().to_string()),
                row.evaluation.counters.map_or_else(String::new, |c| {
                    let pct = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.0}"));
                    format!("{} {}", pct(c.tensor_pct), pct(c.sm_pct))
                }),
                row.fitness
                    .zip(row.evaluation.counters)
                    .map_or_else(String::new, |(f, c)| format!("{:.0}", composite(f, &c))),
                note,
            ]);
            if verbose {
                table.line(row.spec.name());
            }
        }
        out.push_str(&text::paragraph(&format!("GPU {gpu}:")));
        out.push_str(&table.render());
    }
    if !rows.is_empty() {
        let mut legend = "speedup vs default = geometric mean over the run's shapes of the default's median / this \
                          kernel's (above 1 faster; the run's default is the planner's for its first shape); kernel = \
                          the family and the levers that differ from that default; discarded = slower than the \
                          default by more than 10% on two shapes"
            .to_string();
        if rows.iter().any(|r| r.evaluation.counters.is_some()) {
            legend.push_str(
                "; tensor% sm% = Nsight Compute's tensor-pipe and SM-busy percent (mean over the shapes) and score = \
                 the composite (1000 × speedup + 2 × tensor% + sm% − penalties), where the run read them",
            );
        }
        out.push_str(&text::paragraph(&legend));
    }
    out.push_str(&notes.render("notes (the failed gates' errors):"));
    if let Some(json) = json {
        out.push_str(&text::paragraph(&format!("evaluations written to {}", json.display())));
    }
    crate::out::text(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// The hooks of a run: the progress display and the optional proposer.
struct RunHooks<'a> {
    progress: &'a Progress,
    proposer: Option<Proposer>,
}

impl Hooks for RunHooks<'_> {
    fn propose(&mut self, generation: usize, elites: &[Candidate]) -> Vec<Proposal> {
        let Some(proposer) = &self.proposer else { return Vec::new() };
        let (proposals, warnings) = proposer.propose(generation, elites);
        for w in warnings {
            self.progress.say_once(&format!("tune: {w}"));
        }
        proposals
    }

    fn generation(&mut self, generation: usize, elites: &[Candidate]) {
        self.progress.generation(generation, elites);
    }
}

#[derive(Serialize)]
struct EliteJson {
    kernel: String,
    /// The kernel's short name: the levers that differ from the baseline.
    #[serde(skip)]
    short: String,
    config: String,
    /// What ranked it (the run's `fitness`): the geomean speedup, or the composite score.
    fitness: f64,
    /// Geometric mean of `speedups`.
    speedup: f64,
    /// Nsight Compute's counters (the mean over the shapes) where the run read them.
    counters: Option<NcuTerms>,
    medians_us: Vec<f64>,
    /// The speedup over the baseline per shape: baseline median / this median (above 1 faster).
    speedups: Vec<f64>,
}

/// One family's best per shape over every evaluation of it that passed the gates (discarded
/// ones included: the discard rule is about the elites, not this comparison).
#[derive(Serialize)]
struct FamilyBestJson {
    imp: String,
    /// Per shape: the family's lowest median, µs; null where none of its evaluations passed.
    medians_us: Vec<Option<f64>>,
    /// Per shape: the config that gave that median.
    configs: Vec<Option<String>>,
}

#[derive(Serialize)]
struct WorkerJson {
    gpu: usize,
    evaluations: usize,
    restarts: usize,
}

#[derive(Serialize)]
struct RunJson {
    gpu: String,
    driver: String,
    /// The baseline's family.
    imp: String,
    /// The families searched (`--impl any`: several).
    families: Vec<String>,
    dtype: String,
    head_dim: usize,
    causal: String,
    shapes: Vec<String>,
    baseline: String,
    baseline_us: Vec<f64>,
    generations: usize,
    evaluated: usize,
    /// Evaluations each worker ran so far (cumulative over the groups of one invocation).
    workers: Vec<WorkerJson>,
    failed_gates: String,
    elites: Vec<EliteJson>,
    /// Per family searched (in `families` order), its best per shape.
    family_best: Vec<FamilyBestJson>,
    /// Per shape (in `shapes` order), the family with the lowest of those medians.
    winners: Vec<Option<String>>,
    /// What the proposer was shown; null without a proposer.
    guidance: Option<&'static str>,
    /// What ranked the candidates: geomean or composite.
    fitness: &'static str,
    /// Whether the NCU sanity gate applied.
    ncu_gate: bool,
}

/// One tuning group: cases sharing the compile-time traits and mask (one kernel spec).
type Group = ((Dtype, usize, Causal), Vec<Shape>);

fn groups(problems: &ProblemArgs) -> anyhow::Result<Vec<Group>> {
    if problems.v_layout != VLayout::Rows {
        bail!(
            "--v-layout bhds: the tuner times V in rows and its store keys shapes, not how V is held (a V given \
             transposed runs the planner's rule)"
        );
    }
    let mut groups: Vec<Group> = Vec::new();
    for (problem, _) in problems.expand()? {
        let key = (problem.dtype, problem.shape.d, problem.causal);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, shapes)) if shapes.contains(&problem.shape) => {}
            Some((_, shapes)) => shapes.push(problem.shape),
            None => groups.push((key, vec![problem.shape])),
        }
    }
    if groups.is_empty() {
        bail!("no shapes to tune: give --preset NAME or --shape B,H,S,D");
    }
    Ok(groups)
}

/// What every group of one invocation shares.
struct RunSetup<'a> {
    machine: &'a Machine,
    arch: Arch,
    sm_count: u32,
    request: Request,
    /// `--impl any`: whether the library paths are among the families.
    any: Option<bool>,
    /// Whether cuTENSOR loads: the library paths' `gemm=cutensor` is drawn only then.
    cutensor: bool,
    deadline: Option<Instant>,
    insights: Option<&'a str>,
    path: &'a std::path::Path,
}

/// Tunes one group of shapes, writing every evaluation to `store` as it completes.
fn tune_group(
    args: &Args,
    setup: &RunSetup,
    ((dtype, head_dim, causal), shapes): Group,
    store: &mut Store,
    eval: &mut WorkerEvaluator,
) -> anyhow::Result<RunJson> {
    let machine = setup.machine;
    // The baseline is the planner's hand default (never a tuned config), so fitness stays
    // comparable across runs and resumes.
    let probe = evoattn::Problem::dense(shapes[0], dtype, evoattn::Layout::Bhsd).with_causal(causal);
    let baseline = plan(&probe, setup.arch, setup.sm_count, setup.request).spec;
    let families = match setup.any {
        Some(library) => any_families(setup.arch, dtype, head_dim, library),
        None => vec![baseline.imp()],
    };
    let mut buckets: Vec<Bucket> = Vec::new();
    for bucket in shapes.iter().map(|s| Bucket::of(s, dtype, causal)) {
        if !buckets.contains(&bucket) {
            buckets.push(bucket);
        }
    }
    let mut known: HashMap<KernelConfig, Evaluation> = HashMap::new();
    if args.resume {
        for &imp in &families {
            known.extend(store.completed(&machine.gpu, &buckets[0], &shapes, imp)?);
        }
    }
    eval.causal = causal;
    let progress = Progress::new(args.generations);
    progress.say(&format!(
        "tune: {} {dtype} D={head_dim} {} on {} ({} shapes, {} stored evaluations reused, {} workers, fitness {}{})",
        if families.len() > 1 {
            let names: Vec<&str> = families.iter().map(|f| f.name()).collect();
            format!("any of {} (from {})", names.join(", "), baseline.imp())
        } else {
            baseline.imp().to_string()
        },
        causal.name(),
        machine.gpu,
        shapes.len(),
        known.len(),
        eval.workers.len(),
        args.fitness.name(),
        if args.ncu_gate { ", NCU sanity gate" } else { "" }
    ));
    let proposer = args.proposer.clone().map(|command| {
        let task = Task {
            gpu: machine.gpu.clone(),
            arch: setup.arch,
            baseline,
            causal,
            shapes: shapes.clone(),
            insights: setup.insights.map(str::to_string),
            guidance: args.guidance,
        };
        Proposer::new(command, task)
    });
    let mut hooks = RunHooks { progress: &progress, proposer };
    // Each family searched from the planner's config of it for this group's problem (a family's
    // default may not run it: a 192-key `resident` default, 512 keys).
    let starts = families
        .iter()
        .map(|&imp| {
            if imp == baseline.imp() {
                baseline.config
            } else {
                plan(&probe, setup.arch, setup.sm_count, Request::Family(imp)).spec.config
            }
        })
        .collect();
    let params = Params {
        arch: setup.arch,
        starts,
        generations: args.generations,
        seed: args.seed,
        elites: args.elite,
        deadline: setup.deadline,
        fitness: args.fitness,
        ncu_gate: args.ncu_gate,
        cutensor: setup.cutensor,
    };
    let mut write_error = None;
    let guidance = args.proposer.as_ref().map(|_| args.guidance);
    let outcome = evolve(eval, baseline, &shapes, &params, &known, &mut hooks, |child, e, fitness, dropped| {
        progress.evaluated(child, e, dropped);
        if let Err(err) = store.insert(machine, &buckets, &shapes, child, e, fitness, dropped, guidance) {
            write_error.get_or_insert(err);
        }
    });
    progress.finish();
    if let Some(err) = write_error {
        return Err(err.context(format!("writing to {}", setup.path.display())));
    }
    let outcome = outcome.map_err(anyhow::Error::msg)?;
    let winners = outcome.winners().into_iter().map(|w| w.map(|imp| imp.name().to_string())).collect();
    let family_best = outcome
        .families
        .iter()
        .map(|f| FamilyBestJson {
            imp: f.imp.name().to_string(),
            medians_us: f.per_shape.iter().map(|b| b.map(|b| b.median_us)).collect(),
            configs: f.per_shape.iter().map(|b| b.map(|b| b.config.to_string())).collect(),
        })
        .collect();
    let baseline_us = outcome.baseline_us;
    Ok(RunJson {
        gpu: machine.gpu.clone(),
        driver: machine.driver.clone(),
        imp: baseline.imp().name().to_string(),
        families: families.iter().map(|f| f.name().to_string()).collect(),
        dtype: dtype.name().to_string(),
        head_dim,
        causal: causal.name().to_string(),
        shapes: shapes.iter().map(store::shape_text).collect(),
        baseline: baseline.config.to_string(),
        generations: outcome.generations,
        evaluated: outcome.evaluated,
        workers: eval
            .workers
            .iter()
            .map(|w| WorkerJson { gpu: w.gpu, evaluations: w.evaluations, restarts: w.restarts })
            .collect(),
        failed_gates: progress.failures(),
        elites: outcome
            .elites
            .iter()
            .map(|c| EliteJson {
                kernel: c.spec.name(),
                short: c.spec.config.short_name(&baseline.config),
                config: c.spec.config.to_string(),
                fitness: c.fitness,
                speedup: c.speedup,
                counters: c.counters,
                medians_us: c.medians_us.clone(),
                speedups: baseline_us.iter().zip(&c.medians_us).map(|(b, m)| b / m).collect(),
            })
            .collect(),
        baseline_us,
        family_best,
        winners,
        guidance: guidance.map(Guidance::name),
        fitness: args.fitness.name(),
        ncu_gate: args.ncu_gate,
    })
}

/// The closing note of one group: evaluations per worker and the elites (with `verbose`, each
/// one's symbol name under its row).
fn print_run(run: &RunJson, elapsed: Duration, verbose: bool) -> anyhow::Result<()> {
    let per_worker: Vec<String> =
        run.workers.iter().map(|w| format!("GPU {} {} ({} restarts)", w.gpu, w.evaluations, w.restarts)).collect();
    let mut out = text::paragraph(&format!(
        "tune: {} {} D={} {} on {}: {} generations, {} evaluations in {:.0} s (per worker: {})",
        run.imp,
        run.dtype,
        run.head_dim,
        run.causal,
        run.gpu,
        run.generations,
        run.evaluated,
        elapsed.as_secs_f64(),
        per_worker.join(", ")
    ));
    out.push_str(&text::paragraph(&format!(
        "baseline (planner default): {}; failed gates: {}",
        run.baseline, run.failed_gates
    )));
    let mut table = Table::new(vec![
        Column::right("rank"),
        Column::left("kernel").wraps(),
        Column::right("speedup\nvs baseline"),
        Column::right("score").optional(),
        Column::left("speedup per shape").wraps(),
    ]);
    let composite = run.fitness == Fitness::Composite.name();
    for (i, e) in run.elites.iter().enumerate() {
        let per_shape: Vec<String> = e.speedups.iter().map(|s| format!("{s:.3}×")).collect();
        let score = if composite { format!("{:.0}", e.fitness) } else { String::new() };
        table.row(vec![
            (i + 1).to_string(),
            e.short.clone(),
            format!("{:.3}×", e.speedup),
            score,
            per_shape.join(", "),
        ]);
        if verbose {
            table.line(e.kernel.clone());
        }
    }
    out.push_str(&table.render());
    out.push_str(&text::paragraph(
        "speedup = the baseline's median / the kernel's (above 1 faster), per shape and their geometric mean; kernel = \
         the family and the levers that differ from the baseline",
    ));
    if run.families.len() > 1 {
        out.push_str(&families_table(run));
    }
    crate::out::text(&out)
}

/// Which family wins each shape (a run of several families): per shape, each family's best
/// median and the fastest family.
fn families_table(run: &RunJson) -> String {
    let mut columns = vec![Column::left("shape")];
    columns.extend(run.family_best.iter().map(|f| Column::right(&format!("{}\nµs", f.imp))));
    columns.push(Column::left("winner"));
    let mut table = Table::new(columns);
    for (i, shape) in run.shapes.iter().enumerate() {
        let mut cells = vec![shape.clone()];
        cells.extend(
            run.family_best.iter().map(|f| f.medians_us[i].map_or_else(|| "–".into(), |us| format!("{us:.2}"))),
        );
        cells.push(run.winners[i].clone().unwrap_or_else(|| "–".into()));
        table.row(cells);
    }
    let mut out = table.render();
    out.push_str(&text::paragraph(
        "µs = the family's best median on the shape over its evaluations that passed the gates (discarded ones \
         included; – none passed); winner = the fastest family there (each family's config per shape in --json's \
         family_best)",
    ));
    out
}

/// The workers' GPU's measured ceilings, for the integrity gate's roofline: cached, or measured
/// now through the oracle where it runs on that GPU; else why not.
fn roofline_ceilings(device: &str, driver: &str) -> Result<Ceilings, String> {
    if let Some(c) = ceilings::cached(device, driver) {
        return Ok(c);
    }
    let mut oracle = Oracle::start().map_err(|e| format!("{e:#}"))?;
    let hello = oracle.hello();
    if hello.fake {
        return Err("the oracle is the fake one, which measures no GPU".into());
    }
    if hello.gpu != device {
        return Err(format!("the oracle runs on {}, not on the workers' GPU", hello.gpu));
    }
    errln!("tune: measuring {device}'s ceilings (matmul peak, copy bandwidth) for the roofline, once");
    ceilings::measure(&mut oracle, device, driver).map_err(|e| format!("{e:#}"))
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let path = args.store.clone().unwrap_or_else(store::default_path);
    if args.show {
        return show(&path, args.json.as_deref(), args.verbose);
    }
    if args.generations == 0 || args.elite == 0 {
        bail!("--generations and --elite must be at least 1");
    }
    let groups = groups(&args.problems)?;
    let request = match &args.imp {
        Some(name) if name == ANY => Request::Auto,
        Some(name) => Request::parse(name).map_err(anyhow::Error::msg)?,
        None => Request::Auto,
    };
    // `--impl any` takes the library paths only where cuBLAS loads, saying so otherwise.
    let any = (args.imp.as_deref() == Some(ANY)).then(|| match evoattn::runtime::cublas::Cublas::get() {
        Ok(_) => true,
        Err(e) => {
            errln!("tune: --impl any leaves the library paths (cublas, hybrid-qk, hybrid-pv) out: {e}");
            false
        }
    });
    // The library paths' `gemm=cutensor` only where cuTENSOR loads, saying so otherwise.
    let searches_library = any == Some(true) || request.family().is_some_and(Impl::is_library);
    let cutensor = searches_library
        && match evoattn::runtime::cutensor::Cutensor::get() {
            Ok(_) => true,
            Err(e) => {
                errln!("tune: the library paths' gemm=cutensor is left out of the search: {e}");
                false
            }
        };
    if request.family().is_some_and(|imp| !tunable(imp)) {
        let names: Vec<&str> = Impl::ALL.into_iter().filter(|&i| tunable(i)).map(Impl::name).collect();
        bail!(
            "the reference kernel is the oracle, not a tuning target: --impl {}",
            crate::lab::presets::one_of(&names)
        );
    }
    if let Some(path) = &args.json {
        crate::stores::output::check_writable("--json", path)?;
    }
    let insights = match &args.insights {
        Some(p) => Some(std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?),
        None => None,
    };
    // Before any worker starts: a run that needs counters and has no ncu stops here.
    let profiler = if args.fitness == Fitness::Composite || args.ncu_gate {
        Some(Profiler::find(args.ncu.as_deref(), args.timeout)?)
    } else {
        None
    };
    let mut store = Store::open(&path)?;
    let mut workers = Vec::new();
    let mut ready = None;
    for gpu in gpu_list(&args.gpus)? {
        let (worker, reply) = Worker::start(gpu, args.timeout)?;
        workers.push(worker);
        ready.get_or_insert(reply);
    }
    let Some(Reply::Ready { gpu, device, driver, arch, sm_count }) = ready else { bail!("no tune worker started") };
    let arch = Arch::parse(&arch).with_context(|| format!("worker reports unknown arch {arch}"))?;
    let mut eval = WorkerEvaluator::new(workers, arch)?;
    eval.ceilings = match roofline_ceilings(&device, &driver) {
        Ok(c) => Some(c),
        Err(why) => {
            errln!(
                "tune: warning: the integrity gate runs without its roofline check: no ceilings for {device} ({why}); \
                 `evoattn info` measures them where the oracle runs"
            );
            None
        }
    };
    eval.profiler = profiler;
    let machine = Machine { gpu, driver, arch: Some(arch), sm_count: Some(sm_count) };
    let started = Instant::now();
    let deadline = args.budget.map(|b| started + b);
    let mut runs = Vec::new();
    let mut not_started = Vec::new();
    for group in groups {
        if crate::tune::evolve::past(deadline) {
            let ((dtype, head_dim, causal), _) = &group;
            not_started.push(format!("{dtype} D={head_dim} {causal}"));
            continue;
        }
        let setup = RunSetup {
            machine: &machine,
            arch,
            sm_count,
            request,
            any,
            cutensor,
            deadline,
            insights: insights.as_deref(),
            path: &path,
        };
        runs.push(tune_group(args, &setup, group, &mut store, &mut eval)?);
    }
    for run in &runs {
        print_run(run, started.elapsed(), args.verbose)?;
    }
    let mut out = String::new();
    if !not_started.is_empty() {
        out.push_str(&text::paragraph(&format!(
            "budget spent before {} of the groups started ({}): run again with the same store to go on",
            not_started.len(),
            not_started.join(", ")
        )));
    }
    out.push_str(&text::paragraph(&format!(
        "store: {} (the planner uses its best config per GPU and problem bucket)",
        path.display()
    )));
    if let Some(json) = &args.json {
        let elites = serde_json::to_string_pretty(&runs)?;
        std::fs::write(json, elites + "\n").with_context(|| format!("writing {}", json.display()))?;
        out.push_str(&text::paragraph(&format!("elites written to {}", json.display())));
    }
    crate::out::text(&out)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("8m"), Ok(Duration::from_secs(480)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("12"), Ok(Duration::from_secs(12)));
        assert!(parse_duration("10 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("m").is_err());
    }
}
