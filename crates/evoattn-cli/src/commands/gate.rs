//! `evoattn gate`: pass/fail of ours against a peer, per case, or with `--against-history`
//! against the best run recorded on this GPU. Measures ours and the peers with the lab, or with
//! `--samples` re-gates a recorded bench record without a GPU (what CI does). Either way the run
//! is added to the history unless `--no-history`.

use crate::out::{self, errln, outln};
use crate::stores::history::{self, History, Source};
use crate::stores::record::BenchRecord;
use crate::verdicts::gate::{evaluate, render_json, render_markdown, render_text, Against, GateOptions, Outcome};
use crate::verdicts::gate::{DEFAULT_CONFIDENCE, DEFAULT_SPEEDUP};
use crate::verdicts::regression::{self, HistoryOptions};
use anyhow::bail;
use std::path::PathBuf;
use std::process::ExitCode;

/// The argument ids of `LabArgs` (its problem flags by their group): `--samples` conflicts with
/// all of them. Listed because clap's derive leaves the group of an `Args` struct that itself
/// flattens another one empty.
const LAB_FLAGS: [&str; 11] =
    ["ProblemArgs", "imp", "config", "config_on_plan", "no_tuned", "peers", "mode", "reps", "warmup", "block", "seed"];

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    /// An aligned table and a summary line.
    Text,
    /// A table for a pull-request comment.
    Markdown,
    /// The full report, every statistic included.
    Json,
}

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    evoattn gate --preset seed --against sdpa-cudnn --format markdown --record seed.json  # measure, keep the record\n  \
    evoattn gate --samples run.json                                 # re-gate a bench record, no GPU\n  \
    evoattn gate --samples run.json --against-history --no-history  # against the best run, history left as it is")]
pub struct Args {
    /// Re-gate this bench record (`bench --json`) instead of measuring; needs no GPU. The record
    /// decides the cases and the kernel, so the measurement flags (problems, kernel, peers,
    /// timing) are refused beside it.
    #[arg(long, value_name = "FILE.json", conflicts_with_all = LAB_FLAGS)]
    samples: Option<PathBuf>,
    /// The peer to beat: a peer name (sdpa-cudnn, fa4, ...) or best, the fastest peer that ran
    /// each case, never a control (self, self-torch-events, self-do-bench, self-torch-profiler, evoattn-torch: ours measured again).
    #[arg(long, value_name = "PEER|best", default_value = "best")]
    against: Against,
    /// Gate against the history instead of a peer: each case fails when its median is more than
    /// 2% above the best (lowest) median recorded for the same GPU, mode, problem and kernel
    /// family, and the bootstrap interval of that change lies entirely above +2%. A case never
    /// recorded passes with the note "no history". The history is history.sqlite in the cache
    /// dir (EVOATTN_CACHE_DIR); every bench and gate run adds to it, unless --no-history.
    #[arg(long, conflicts_with_all = ["against", "speedup", "p90"])]
    against_history: bool,
    /// Do not add this run to the history.
    #[arg(long)]
    no_history: bool,
    /// Pass needs the speedup median(peer) / median(ours) above SPEEDUP [default: 1/0.95 ≈
    /// 1.053, ours at most 0.95 of the peer's median]; 1.0: faster at all; below 1: ours may be
    /// that much slower. (Before the speedup convention this flag took the inverse, 0.95.)
    #[arg(long, default_value_t = DEFAULT_SPEEDUP, hide_default_value = true)]
    speedup: f64,
    /// Confidence of the bootstrap interval of median(ours) − median(peer), which must lie
    /// entirely below zero; with --against-history, of the change against the best run.
    #[arg(long, default_value_t = DEFAULT_CONFIDENCE)]
    confidence: f64,
    /// Also require p90(ours) ≤ p90(peer): no worse tail.
    #[arg(long)]
    p90: bool,
    /// How the report is printed on stdout (the one-line reason of exit 2 goes to stderr).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also print our kernel's full symbol name under each row of the text table (tables name
    /// kernels by family and the levers that differ from the family's default for the problem).
    #[arg(short, long)]
    verbose: bool,
    /// Write the measured bench record to this file (its directory must exist; checked before
    /// measuring), to re-gate it later with --samples.
    #[arg(long, value_name = "FILE.json", conflicts_with = "samples")]
    record: Option<PathBuf>,
    #[command(flatten)]
    lab: crate::lab::measure::LabArgs,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if args.speedup.is_nan() || args.speedup <= 0.0 {
        bail!("--speedup must be positive, got {}", args.speedup);
    }
    // Negated so that NaN is refused too.
    if !(args.confidence > 0.0 && args.confidence < 1.0) {
        bail!("--confidence must lie strictly between 0 and 1, got {}", args.confidence);
    }
    if let Some(path) = &args.record {
        crate::stores::output::check_writable("--record", path)?;
    }
    let record = match &args.samples {
        Some(path) => BenchRecord::read(path)?,
        None => {
            let record = crate::lab::measure::measure(&args.lab)?.record;
            if let Some(path) = &args.record {
                record.write(path)?;
            }
            record
        }
    };
    let outcome =
        if args.against_history { gate_against_history(args, &record)? } else { gate_against_peer(args, &record)? };
    if !args.no_history {
        history::save_or_warn(Source::Gate, &record);
    }
    Ok(ExitCode::from(outcome.exit_code()))
}

/// The three renderings of a report: text (with `-v` or not), markdown and JSON.
struct Renderers<R> {
    text: fn(&R, bool) -> String,
    markdown: fn(&R) -> String,
    json: fn(&R) -> String,
}

/// Prints `report` by the renderer of the format asked for.
fn print<R>(args: &Args, report: &R, renderers: Renderers<R>) -> anyhow::Result<()> {
    match args.format {
        Format::Text => out::text(&(renderers.text)(report, args.verbose)),
        Format::Markdown => out::text(&(renderers.markdown)(report)),
        Format::Json => outln!("{}", (renderers.json)(report)),
    }
}

fn gate_against_history(args: &Args, record: &BenchRecord) -> anyhow::Result<Outcome> {
    let path = history::default_path();
    let store = History::open(&path)?;
    // The run being gated may already be stored (a re-gated record): never its own baseline.
    let report = regression::evaluate(record, &HistoryOptions::new(args.confidence), |key| {
        store.best(key, &record.env.date_utc)
    })?;
    let renderers = Renderers {
        text: regression::render_text,
        markdown: regression::render_markdown,
        json: regression::render_json,
    };
    print(args, &report, renderers)?;
    if report.outcome == Outcome::CouldNotRun {
        errln!("evoattn: gate could not run: {}", report.could_not_run_reason());
    }
    Ok(report.outcome)
}

fn gate_against_peer(args: &Args, record: &BenchRecord) -> anyhow::Result<Outcome> {
    let opts = GateOptions {
        against: args.against.clone(),
        speedup: args.speedup,
        confidence: args.confidence,
        p90: args.p90,
        ..GateOptions::default()
    };
    let report = evaluate(record, &opts);
    print(args, &report, Renderers { text: render_text, markdown: render_markdown, json: render_json })?;
    if report.outcome == Outcome::CouldNotRun {
        // The one-line reason of exit 2, whatever the format on stdout.
        let unjudged: Vec<_> = report.cases.iter().filter(|c| c.outcome == Outcome::CouldNotRun).collect();
        let reason = match unjudged.first() {
            None => "the record has no cases".to_string(),
            Some(c) => {
                let more = match unjudged.len() - 1 {
                    0 => String::new(),
                    n => format!(" (and {n} more cases)"),
                };
                format!("{} {} {} {}: {}{more}", c.shape, c.dtype, c.causal, c.layout, c.reasons.join("; "))
            }
        };
        errln!("evoattn: gate could not run: {reason}");
    }
    Ok(report.outcome)
}
