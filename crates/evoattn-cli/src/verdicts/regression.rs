//! `gate --against-history`: ours against the best median ever recorded for the same GPU, mode,
//! problem and kernel family (see `history::CaseKey`), per case. Pure: the history is reached
//! through a lookup function, so the rule and the report are tested without a database.

use crate::stores::history::{CaseKey, Row};
use crate::stores::record::{BenchRecord, Mode, ResultRecord};
use crate::text::{self, Column, Notes, Table, SHAPE_HEADER};
use crate::verdicts::gate::{markdown_table, Outcome, Tally};
use crate::verdicts::stats::{bootstrap_median_change, summarize, Interval, Summary, DEFAULT_RESAMPLES, DEFAULT_SEED};
use serde::Serialize;
use std::fmt::Write as _;

/// The slowdown against the best recorded median that is still no regression: about the
/// run-to-run spread of a median of 100 samples on a quiet GPU (the parity band of the
/// verdicts), so that a gate on an unchanged kernel does not fail on noise.
pub const REGRESSION_TOLERANCE: f64 = 0.02;

/// The regression rule, in one place. `change` is the bootstrap interval of
/// median(current) / median(best) − 1. A case regressed when its median is more than
/// [`REGRESSION_TOLERANCE`] slower than the best AND the whole interval lies above that
/// tolerance: the slowdown is both large enough to matter and not explained by noise.
pub fn regressed(change: &Interval) -> bool {
    change.estimate > REGRESSION_TOLERANCE && change.lo > REGRESSION_TOLERANCE
}

/// The speedup against the best run, median(best) / median(ours) (the tables' convention: above
/// 1 ours is faster), of a `change` (median(ours) / median(best) − 1), with its interval: the
/// map is decreasing, so the change's upper end is the speedup's lower one.
pub fn speedup_vs_best(change: &Interval) -> Interval {
    let speedup = |c: f64| 1.0 / (1.0 + c);
    Interval { lo: speedup(change.hi), hi: speedup(change.lo), estimate: speedup(change.estimate) }
}

/// The speedup against the best below which a slowdown is past [`REGRESSION_TOLERANCE`].
pub fn speedup_floor(tolerance: f64) -> f64 {
    1.0 / (1.0 + tolerance)
}

/// The best run a case is compared with.
#[derive(Clone, Debug, Serialize)]
pub struct Baseline {
    pub kernel: String,
    pub git_commit: Option<String>,
    pub date_utc: String,
    pub median_us: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct HistoryCase {
    pub shape: String,
    pub dtype: String,
    pub causal: String,
    pub layout: String,
    /// Our kernel's symbol name.
    pub kernel: String,
    /// Its short name in tables (family and the levers that differ from its default).
    #[serde(skip)]
    pub kernel_short: String,
    pub correct: bool,
    pub current_us: Option<Summary>,
    pub best: Option<Baseline>,
    /// median(current) / median(best) − 1 with its bootstrap interval; +0.05 is 5% slower. The
    /// tables show its inverse, the speedup against the best: median(best) / median(current) =
    /// 1 / (1 + change).
    pub change: Option<Interval>,
    pub outcome: Outcome,
    /// Why the case did not pass, or `no history`.
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct HistoryReport {
    pub gpu: String,
    pub mode: Option<Mode>,
    /// The slowdown against the best (a change, + is slower) past which a case regressed.
    pub tolerance: f64,
    pub confidence: f64,
    pub resamples: usize,
    pub seed: u64,
    pub cases: Vec<HistoryCase>,
    pub outcome: Outcome,
}

/// How the bootstrap is run.
#[derive(Clone, Copy, Debug)]
pub struct HistoryOptions {
    pub confidence: f64,
    pub resamples: usize,
    pub seed: u64,
}

impl HistoryOptions {
    pub fn new(confidence: f64) -> Self {
        HistoryOptions { confidence, resamples: DEFAULT_RESAMPLES, seed: DEFAULT_SEED }
    }
}

fn percent(x: f64) -> String {
    format!("{:+.1}%", 100.0 * x)
}

fn evaluate_case(
    record: &BenchRecord,
    result: &ResultRecord,
    opts: &HistoryOptions,
    best: &mut dyn FnMut(&CaseKey) -> anyhow::Result<Option<Row>>,
) -> anyhow::Result<HistoryCase> {
    let c = &result.case;
    let key = CaseKey::of(&record.env.gpu, record.env.mode, c, &result.ours.name);
    let mut case = HistoryCase {
        shape: key.shape.to_string(),
        dtype: c.dtype.clone(),
        causal: c.causal.clone(),
        layout: c.layout.clone(),
        kernel: result.ours.name.clone(),
        kernel_short: crate::lab::kernel_name::in_record(&result.ours.name, c, &record.env),
        correct: result.ours.correct == Some(true),
        current_us: result.ours.is_ok().then(|| summarize(&result.ours.samples_us)).flatten(),
        best: None,
        change: None,
        outcome: Outcome::Pass,
        notes: Vec::new(),
    };
    // A wrong kernel fails whatever its speed; unknown is not correct.
    if !case.correct {
        case.notes.push(match result.ours.correct {
            Some(false) => "ours is incorrect".into(),
            _ => "ours' correctness is unknown".into(),
        });
        case.outcome = Outcome::Fail;
    }
    if case.current_us.is_none() {
        case.notes.push(format!("ours has no samples ({})", result.ours.status));
        case.outcome = Outcome::overall([case.outcome, Outcome::CouldNotRun]);
        return Ok(case);
    }
    let Some(row) = best(&key)? else {
        case.notes.push("no history".into());
        return Ok(case);
    };
    // The wider of the two blocks: drawing whole blocks of the more dependent run keeps its
    // dependence in the interval, and only widens the other side's.
    let block = record.env.block.max(row.block);
    let change = bootstrap_median_change(
        &result.ours.samples_us,
        &row.samples_us,
        block,
        opts.resamples,
        opts.confidence,
        opts.seed,
    )
    .expect("both sides have samples");
    if regressed(&change) {
        let s = speedup_vs_best(&change);
        case.notes.push(format!(
            "regressed: speedup vs the best run {:.3}× (best/ours), {:.0}% interval [{:.3}, {:.3}] all below {:.3}× \
             ({} slower)",
            s.estimate,
            100.0 * opts.confidence,
            s.lo,
            s.hi,
            speedup_floor(REGRESSION_TOLERANCE),
            percent(change.estimate),
        ));
        case.outcome = Outcome::Fail;
    }
    case.best = Some(Baseline {
        kernel: row.kernel,
        git_commit: row.git_commit,
        date_utc: row.date_utc,
        median_us: row.median_us,
    });
    case.change = Some(change);
    Ok(case)
}

/// Gates every case of `record` against the best stored run `best` finds for its key. Errors
/// only when the history cannot be read.
pub fn evaluate(
    record: &BenchRecord,
    opts: &HistoryOptions,
    mut best: impl FnMut(&CaseKey) -> anyhow::Result<Option<Row>>,
) -> anyhow::Result<HistoryReport> {
    let cases: Vec<HistoryCase> =
        record.results.iter().map(|r| evaluate_case(record, r, opts, &mut best)).collect::<anyhow::Result<_>>()?;
    Ok(HistoryReport {
        gpu: record.env.gpu.clone(),
        mode: record.env.mode,
        tolerance: REGRESSION_TOLERANCE,
        confidence: opts.confidence,
        resamples: opts.resamples,
        seed: opts.seed,
        outcome: Outcome::overall(cases.iter().map(|c| c.outcome)),
        cases,
    })
}

impl HistoryReport {
    pub fn summary(&self) -> String {
        if self.cases.is_empty() {
            return "gate against history: could not run: the record has no cases".into();
        }
        let new = self.cases.iter().filter(|c| c.best.is_none() && c.current_us.is_some()).count();
        let counts = Tally::of(self.cases.iter().map(|c| c.outcome)).describe("regressed or failed");
        format!("gate against history: {} ({counts}; {new} with no history)", self.outcome.name())
    }

    fn rule(&self) -> String {
        format!(
            "correct, and not regressed: more than {:.0}% slower than the best run recorded on this GPU (speedup vs \
             best = median(best) / median(ours) below {:.3}×) with the whole {:.0}% bootstrap interval ({} \
             resamples) of that speedup below it too",
            100.0 * self.tolerance,
            speedup_floor(self.tolerance),
            100.0 * self.confidence,
            self.resamples,
        )
    }

    fn mode_name(&self) -> &'static str {
        self.mode.map_or("unknown", Mode::name)
    }

    /// The one-line reason of exit 2.
    pub fn could_not_run_reason(&self) -> String {
        let unjudged: Vec<&HistoryCase> = self.cases.iter().filter(|c| c.outcome == Outcome::CouldNotRun).collect();
        match unjudged.first() {
            None => "the record has no cases".into(),
            Some(c) => format!("{} {} {} {}: {}", c.shape, c.dtype, c.causal, c.layout, c.notes.join("; ")),
        }
    }
}

/// Characters of a commit hash shown in tables, as `git log --oneline`.
pub const SHORT_COMMIT: usize = 7;

fn dash() -> String {
    "–".to_string()
}

/// The speedup against the best and its interval: `0.833× [0.820, 0.845]`.
fn speedup_cell(case: &HistoryCase) -> String {
    case.change
        .as_ref()
        .map(speedup_vs_best)
        .map_or_else(dash, |s| format!("{:.3}× [{:.3}, {:.3}]", s.estimate, s.lo, s.hi))
}

/// The best run: its commit and the minute it was taken, `1111111 2026-01-01 00:00`.
fn best_run_cell(case: &HistoryCase) -> String {
    case.best.as_ref().map_or_else(dash, |b| {
        let commit = b.git_commit.as_deref().map_or("unrecorded", |c| &c[..c.len().min(SHORT_COMMIT)]);
        format!("{commit} {}", b.date_utc.get(..16).unwrap_or(&b.date_utc).replace('T', " "))
    })
}

/// A case's cells between its outcome and its notes, as the text and markdown tables show them:
/// problem, kernel, both medians, the speedup with its interval, the best run.
fn measured_cells(case: &HistoryCase) -> Vec<String> {
    vec![
        case.shape.clone(),
        case.dtype.clone(),
        case.causal.clone(),
        case.layout.clone(),
        case.kernel_short.clone(),
        median_cell(case.current_us.map(|s| s.median)),
        median_cell(case.best.as_ref().map(|b| b.median_us)),
        speedup_cell(case),
        best_run_cell(case),
    ]
}

fn median_cell(s: Option<f64>) -> String {
    s.map_or_else(dash, |m| format!("{m:.2}"))
}

/// The conditions and the run's facts, the table (notes under it, numbered; with `verbose`,
/// each kernel's symbol name under its row), and the summary line.
pub fn render_text(report: &HistoryReport, verbose: bool) -> String {
    let mut table = Table::new(vec![
        Column::left("result"),
        Column::left(SHAPE_HEADER),
        Column::left("dtype"),
        Column::left("mask"),
        Column::left("layout"),
        Column::left("kernel").wraps(),
        Column::right("ours\nµs"),
        Column::right("best\nµs"),
        Column::right(&format!("speedup vs best\nbest/ours, {:.0}% CI", report.confidence * 100.0)),
        Column::left("best run\n(commit, UTC)"),
        Column::left("notes").optional(),
    ]);
    let mut notes = Notes::default();
    for case in &report.cases {
        let mut row = vec![case.outcome.name().to_string()];
        row.extend(measured_cells(case));
        row.push(notes.refer_all(&case.notes));
        table.row(row);
        if verbose {
            table.line(case.kernel.clone());
        }
    }
    let mut out = text::paragraph(&format!("gate against history on {}, {} mode", report.gpu, report.mode_name()));
    out.push_str(&text::paragraph(&format!("pass: {}", report.rule())));
    out.push_str(&table.render());
    out.push_str(&notes.render("notes:"));
    out.push_str(&text::paragraph(&report.summary()));
    out
}

const MARKDOWN_HEADERS: [&str; 11] = [
    "result",
    "shape B,H,Sq,D[,Hkv,Sk]",
    "dtype",
    "mask",
    "layout",
    "kernel",
    "ours µs",
    "best µs",
    "speedup vs best (best/ours), CI",
    "best run (commit, UTC)",
    "notes",
];

pub fn render_markdown(report: &HistoryReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### evoattn gate against history: {} {}\n", report.outcome.icon(), report.outcome.name());
    let _ = writeln!(out, "**GPU** {} · **mode** {}  ", report.gpu.replace('|', "\\|"), report.mode_name());
    let _ = writeln!(out, "**pass** {}\n", report.rule());
    let rows: Vec<Vec<String>> = report
        .cases
        .iter()
        .map(|c| {
            let mut row = vec![c.outcome.icon().to_string()];
            row.extend(measured_cells(c));
            row.push(c.notes.join("; "));
            row
        })
        .collect();
    let headers: Vec<String> = MARKDOWN_HEADERS.iter().map(|h| h.to_string()).collect();
    out.push_str(&markdown_table(&headers, &rows));
    let _ = writeln!(out, "\n**{}**", report.summary());
    out
}

pub fn render_json(report: &HistoryReport) -> String {
    serde_json::to_string_pretty(report).expect("a history gate report serialises")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::record::tests::{gate_case, ok_measurement};
    use crate::stores::record::{Environment, SCHEMA};
    use crate::verdicts::stats::tests::lognormal_samples;

    fn interval(estimate: f64, lo: f64, hi: f64) -> Interval {
        Interval { lo, hi, estimate }
    }

    /// The rule on its own: both conditions are needed.
    #[test]
    fn the_rule_needs_the_median_and_the_whole_interval_above_the_tolerance() {
        assert!(regressed(&interval(0.04, 0.03, 0.05)));
        assert!(!regressed(&interval(0.04, 0.01, 0.07)), "interval reaches below +2%: noise may explain it");
        assert!(!regressed(&interval(0.015, 0.0, 0.03)), "median within 2%");
        assert!(!regressed(&interval(0.02, 0.02, 0.02)), "exactly 2% is tolerated");
        assert!(!regressed(&interval(-0.10, -0.12, -0.08)), "faster is never a regression");
    }

    /// The tables' speedup against the best is the change's inverse, its interval's ends swapped,
    /// and a regression is a speedup (and its whole interval) below the tolerance's floor.
    #[test]
    fn the_speedup_vs_best_inverts_the_change() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        let s = speedup_vs_best(&interval(0.04, 0.03, 0.05));
        assert!(close(s.estimate, 1.0 / 1.04) && close(s.lo, 1.0 / 1.05) && close(s.hi, 1.0 / 1.03), "{s:?}");
        let floor = speedup_floor(REGRESSION_TOLERANCE);
        for c in [interval(0.04, 0.03, 0.05), interval(0.04, 0.01, 0.07), interval(-0.1, -0.12, -0.08)] {
            let s = speedup_vs_best(&c);
            assert_eq!(regressed(&c), s.estimate < floor && s.hi < floor, "{c:?}");
        }
    }

    /// Worked examples through the bootstrap (as stats' two-against-one): the current run
    /// [a, b] resampled has median a, (a+b)/2 or b with probability 1/4, 1/2, 1/4; against a
    /// best of [100] the change is a/100 − 1, ... and the 95% interval spans the two ends.
    #[test]
    fn worked_examples() {
        let opts = HistoryOptions::new(0.95);
        let change = |current: &[f64]| {
            bootstrap_median_change(current, &[100.0], 1, opts.resamples, opts.confidence, opts.seed).unwrap()
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // [103, 105]: +3%, +4%, +5%; median +4% and the interval [+3%, +5%] above +2%: regressed.
        let c = change(&[103.0, 105.0]);
        assert!(close(c.estimate, 0.04) && close(c.lo, 0.03) && close(c.hi, 0.05), "{c:?}");
        assert!(regressed(&c));
        // [101, 105]: +1%, +3%, +5%; median +3% but the interval [+1%, +5%] reaches below +2%: passes.
        let c = change(&[101.0, 105.0]);
        assert!(close(c.estimate, 0.03) && close(c.lo, 0.01) && close(c.hi, 0.05), "{c:?}");
        assert!(!regressed(&c));
        // [101.5, 101.5]: +1.5%, a point interval, within the tolerance: passes.
        let c = change(&[101.5, 101.5]);
        assert!(close(c.lo, 0.015) && close(c.hi, 0.015), "{c:?}");
        assert!(!regressed(&c));
    }

    const N: usize = 100;

    fn record(ours_median: f64, correct: Option<bool>) -> BenchRecord {
        let ours = ok_measurement(
            "evoattn_mma_f16_d64_bm128_bn64_s3_qr1",
            &lognormal_samples(ours_median, 0.03, N, 1),
            correct,
        );
        let env = Environment {
            gpu: "NVIDIA H100 80GB HBM3".into(),
            mode: Some(Mode::Eager),
            block: 20,
            date_utc: "2026-11-22T15:00:00Z".into(),
            ..Environment::default()
        };
        BenchRecord {
            schema: SCHEMA.into(),
            env,
            results: vec![ResultRecord { case: gate_case(), ours, peers: vec![] }],
        }
    }

    fn best_row(median: f64) -> Row {
        let rec = record(median, Some(true));
        let r = &rec.results[0];
        Row {
            key: CaseKey::of(&rec.env.gpu, rec.env.mode, &r.case, &r.ours.name),
            role: crate::stores::history::ROLE_OURS.into(),
            kernel: "evoattn_mma_f16_d64_bm64_bn64_s2_qr1".into(),
            source: "bench".into(),
            date_utc: "2026-11-20T10:00:00Z".into(),
            git_commit: Some("0123456789abcdef".into()),
            version: "0.1.0".into(),
            driver: "580.65".into(),
            block: 20,
            median_us: median,
            samples_us: lognormal_samples(median, 0.03, N, 2),
            correct: Some(true),
        }
    }

    fn gate(current: f64, correct: Option<bool>, best: Option<f64>) -> HistoryReport {
        evaluate(&record(current, correct), &HistoryOptions::new(0.95), |key| {
            assert_eq!(key.family, "mma", "configurations of one family are compared");
            Ok(best.map(best_row))
        })
        .unwrap()
    }

    #[test]
    fn a_ten_percent_slowdown_fails_and_an_unchanged_kernel_passes() {
        let slow = gate(110.0, Some(true), Some(100.0));
        assert_eq!(slow.outcome, Outcome::Fail, "{}", render_text(&slow, false));
        assert!(
            slow.cases[0].notes[0].starts_with("regressed: speedup vs the best run 0.9"),
            "{:?}",
            slow.cases[0].notes
        );
        let same = gate(100.0, Some(true), Some(100.0));
        assert_eq!(same.outcome, Outcome::Pass, "{}", render_text(&same, false));
        let faster = gate(80.0, Some(true), Some(100.0));
        assert_eq!(faster.outcome, Outcome::Pass);
        assert!(faster.cases[0].change.unwrap().hi < 0.0);
    }

    #[test]
    fn no_history_passes_with_a_note_and_wrong_fails() {
        let new = gate(100.0, Some(true), None);
        assert_eq!(new.outcome, Outcome::Pass);
        assert_eq!(new.cases[0].notes, ["no history"]);
        assert_eq!(
            new.summary(),
            "gate against history: pass (1 of 1 cases pass, 0 regressed or failed, 0 could not run; 1 with no history)"
        );
        assert_eq!(gate(80.0, Some(false), Some(100.0)).outcome, Outcome::Fail);
    }

    #[test]
    fn renders_text_markdown_and_json() {
        let report = gate(110.0, Some(true), Some(100.0));
        let text = render_text(&report, false);
        assert!(text.lines().all(|l| crate::text::width(l) <= crate::text::WIDTH), "{text}");
        let row = text.lines().find(|l| l.starts_with("fail")).expect("the case's row");
        assert_eq!(row.split_whitespace().take(2).collect::<Vec<_>>(), ["fail", "1,8,512,64"], "{text}");
        assert!(row.contains("0123456 2026-11-20 10:00"), "{text}");
        // The speedup against the best (best/ours) of a 10% slowdown, under the tolerance's 0.980×.
        assert!(row.contains(" 0.9") && text.contains("below 0.980×"), "{text}");
        assert!(text.contains("  1  regressed: speedup vs the best run 0.9"), "{text}");
        let md = render_markdown(&report);
        assert!(md.starts_with("### evoattn gate against history: ❌ fail\n"), "{md}");
        assert!(md.contains("| ❌ | 1,8,512,64 | f16 | none | bhsd | mma |"), "{md}");
        let v: serde_json::Value = serde_json::from_str(&render_json(&report)).unwrap();
        assert_eq!(v["outcome"], "fail");
        assert_eq!(v["tolerance"], REGRESSION_TOLERANCE);
        assert!(v["cases"][0]["change"]["lo"].as_f64().unwrap() > REGRESSION_TOLERANCE);
    }
}
