//! The gate: a hard pass/fail of ours against a peer, per case, from a bench record's raw
//! samples. Pure: the same record and options always give the same report, so CI can re-gate a
//! record taken on a GPU elsewhere.

use crate::stores::record::{
    is_control, BenchRecord, Environment, Measurement, Mode, ResultRecord, Status, Timer, TIMER_FLOOR_US,
    TIMER_TOLERANCE,
};
use crate::text::{self, Column, Notes, Table, SHAPE_HEADER};
use crate::verdicts::stats::{
    bootstrap_median_diff, bootstrap_median_ratio, summarize, unsteady_drift, Interval, Summary, Verdict,
    DEFAULT_RESAMPLES, DEFAULT_SEED, DRIFT_TOLERANCE,
};
use serde::Serialize;
use std::fmt::Write as _;

/// The speedup, median(peer) / median(ours), a pass must exceed (DESIGN): ours at most 0.95 of
/// the peer's median, a 5% margin, about twice the run-to-run spread of a median, so a pass is
/// not noise on a kernel that merely ties.
pub const DEFAULT_SPEEDUP: f64 = 1.0 / 0.95;

/// A ratio as the text says it: at most three decimals, no trailing zeros (`1.053`, `2`, `1.05`).
pub fn ratio(x: f64) -> String {
    let text = format!("{x:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}
/// Confidence of the bootstrap interval of the median difference (DESIGN).
pub const DEFAULT_CONFIDENCE: f64 = 0.95;

/// Which peer a case is gated against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Against {
    /// One named peer; a case it did not run cannot be gated.
    Peer(String),
    /// The fastest peer (lowest median) among those that ran the case, controls (our own
    /// kernel measured again) excepted.
    Best,
}

impl std::str::FromStr for Against {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "" => Err("expected a peer name or 'best'".into()),
            "best" => Ok(Against::Best),
            name => Ok(Against::Peer(name.to_string())),
        }
    }
}

impl std::fmt::Display for Against {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Against::Peer(name) => f.write_str(name),
            Against::Best => f.write_str("best"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct GateOptions {
    pub against: Against,
    /// Pass needs the speedup median(peer) / median(ours) above this.
    pub speedup: f64,
    /// Confidence of the bootstrap interval, in (0, 1).
    pub confidence: f64,
    /// Also require p90(ours) ≤ p90(peer): no worse tail.
    pub p90: bool,
    pub resamples: usize,
    pub seed: u64,
}

impl Default for GateOptions {
    fn default() -> Self {
        GateOptions {
            against: Against::Best,
            speedup: DEFAULT_SPEEDUP,
            confidence: DEFAULT_CONFIDENCE,
            p90: false,
            resamples: DEFAULT_RESAMPLES,
            seed: DEFAULT_SEED,
        }
    }
}

/// Ours against one peer on one case: the statistics the gate decides on.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub ours: Summary,
    pub peer: Summary,
    /// median(peer) / median(ours), with its bootstrap interval.
    pub speedup: Interval,
    /// median(ours) − median(peer) in µs, with its bootstrap interval.
    pub diff_us: Interval,
}

impl Comparison {
    /// `None` when either side has no samples.
    /// `block`: samples per interleaved block as taken (the record's `env.block`; 0 or 1 when
    /// unknown), the unit the bootstrap resamples.
    pub fn new(ours: &[f64], peer: &[f64], block: usize, opts: &GateOptions) -> Option<Self> {
        Some(Comparison {
            ours: summarize(ours)?,
            peer: summarize(peer)?,
            speedup: bootstrap_median_ratio(ours, peer, block, opts.resamples, opts.confidence, opts.seed)?,
            diff_us: bootstrap_median_diff(ours, peer, block, opts.resamples, opts.confidence, opts.seed)?,
        })
    }

    /// median(peer) / median(ours): above 1, ours is faster.
    pub fn median_speedup(&self) -> f64 {
        self.peer.median / self.ours.median
    }

    /// The speedup passes the threshold: median(peer) / median(ours) > threshold.
    pub fn above_threshold(&self, opts: &GateOptions) -> bool {
        self.median_speedup() > opts.speedup
    }

    pub fn ci_below_zero(&self) -> bool {
        self.diff_us.hi < 0.0
    }

    /// The speed test: faster by the threshold, and confidently so.
    pub fn faster(&self, opts: &GateOptions) -> bool {
        self.above_threshold(opts) && self.ci_below_zero()
    }

    /// The equality test: no difference detectable at this confidence.
    pub fn equal(&self) -> bool {
        self.diff_us.contains(0.0)
    }

    pub fn p90_no_worse(&self) -> bool {
        self.ours.p90 <= self.peer.p90
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Pass,
    Fail,
    /// Not judged: no samples of ours, the peer did not run the case, an empty record.
    CouldNotRun,
}

impl Outcome {
    /// The process exit code (DESIGN: 0 pass, 1 fail, 2 could not run).
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Pass => 0,
            Outcome::Fail => 1,
            Outcome::CouldNotRun => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::CouldNotRun => "could not run",
        }
    }

    /// A run's outcome from its cases': fail if any case fails (a definite failure stands
    /// whatever else could not be judged), else could-not-run if any case (or the whole run, when
    /// it has none) could not be judged, else pass.
    pub fn overall(cases: impl IntoIterator<Item = Outcome>) -> Outcome {
        let tally = Tally::of(cases);
        if tally.fail > 0 {
            Outcome::Fail
        } else if tally.could_not_run > 0 || tally.pass == 0 {
            Outcome::CouldNotRun
        } else {
            Outcome::Pass
        }
    }

    pub fn icon(self) -> &'static str {
        match self {
            Outcome::Pass => "✅",
            Outcome::Fail => "❌",
            Outcome::CouldNotRun => "⚠️",
        }
    }
}

/// How many cases had each outcome: what a run's outcome and its summary line are made of.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub pass: usize,
    pub fail: usize,
    pub could_not_run: usize,
}

impl Tally {
    pub fn of(outcomes: impl IntoIterator<Item = Outcome>) -> Tally {
        let mut tally = Tally::default();
        for outcome in outcomes {
            match outcome {
                Outcome::Pass => tally.pass += 1,
                Outcome::Fail => tally.fail += 1,
                Outcome::CouldNotRun => tally.could_not_run += 1,
            }
        }
        tally
    }

    /// The counts as a summary line says them, `failed` naming the failures.
    pub fn describe(&self, failed: &str) -> String {
        let total = self.pass + self.fail + self.could_not_run;
        format!("{} of {total} cases pass, {} {failed}, {} could not run", self.pass, self.fail, self.could_not_run)
    }
}

/// Each condition of a case; `None` where it was not evaluated (no samples, no peer, or the
/// p90 condition not asked for).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Checks {
    pub correct: bool,
    /// The speedup median(peer) / median(ours) is above `speedup_threshold` (the name is older
    /// than the speedup convention: ours' median below the peer's divided by the threshold).
    pub below_threshold: Option<bool>,
    pub ci_below_zero: Option<bool>,
    pub p90: Option<bool>,
    /// Neither side's samples drift past `stats::DRIFT_TOLERANCE`, and every other harness that
    /// timed our kernel agrees with our timer within `TIMER_TOLERANCE` (else the case is not
    /// judged).
    pub steady: Option<bool>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CaseReport {
    /// `B,H,Sq,D[,Hkv,Sk]`, as `bench` prints it.
    pub shape: String,
    pub dtype: String,
    pub causal: String,
    pub layout: String,
    /// Our kernel's symbol name.
    pub kernel: String,
    /// Its short name in tables (family and the levers that differ from its default).
    #[serde(skip)]
    pub kernel_short: String,
    pub peer: Option<String>,
    pub ours_us: Option<Summary>,
    pub peer_us: Option<Summary>,
    /// The speedup median(peer) / median(ours) (above 1: ours is faster), with its bootstrap
    /// interval.
    pub speedup: Option<Interval>,
    pub diff_us: Option<Interval>,
    pub verdict: Option<Verdict>,
    /// The equality test: the interval of the difference contains 0.
    pub equal: Option<bool>,
    pub checks: Checks,
    pub outcome: Outcome,
    /// Why the case did not pass, one entry per failed condition.
    pub reasons: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct GateReport {
    pub gpu: String,
    pub arch: String,
    pub mode: Option<Mode>,
    /// Timed launches per implementation and case that were asked for.
    pub samples: usize,
    pub against: String,
    /// The speedup median(peer) / median(ours) a pass must exceed.
    pub speedup_threshold: f64,
    pub confidence: f64,
    pub p90: bool,
    pub resamples: usize,
    pub seed: u64,
    pub cases: Vec<CaseReport>,
    pub outcome: Outcome,
}

/// The peer a case is gated against, or why there is none.
fn pick_peer<'a>(result: &'a ResultRecord, against: &Against) -> Result<&'a Measurement, String> {
    match against {
        Against::Peer(name) => {
            let peer = result
                .peers
                .iter()
                .find(|p| &p.name == name)
                .ok_or_else(|| format!("peer {name} is not in the record"))?;
            if peer.is_ok() {
                Ok(peer)
            } else {
                let why = peer.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
                Err(format!(
                    "peer {name} {}{why}",
                    if peer.status == Status::Ok { "has no samples".to_string() } else { peer.status.to_string() }
                ))
            }
        }
        Against::Best => result
            .peers
            .iter()
            .filter(|p| p.is_ok() && !is_control(&p.name))
            .filter_map(|p| summarize(&p.samples_us).map(|s| (p, s.median)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(p, _)| p)
            .ok_or_else(|| "no peer ran this case (controls do not count)".to_string()),
    }
}

/// Each timer control ([`Timer`]) whose median of our kernel is more than [`TIMER_TOLERANCE`]
/// from our timer's, as a sentence: `bench` flags the case, `gate` does not judge it.
pub fn timer_disagreements(result: &ResultRecord) -> Vec<String> {
    let Some(ours) = summarize(&result.ours.samples_us) else { return Vec::new() };
    result
        .peers
        .iter()
        .filter(|p| p.is_ok() && Timer::of_peer(&p.name).is_some())
        .filter_map(|p| {
            let theirs = summarize(&p.samples_us)?.median;
            let off = theirs / ours.median - 1.0;
            let allowed = (TIMER_TOLERANCE * ours.median).max(TIMER_FLOOR_US);
            ((theirs - ours.median).abs() > allowed).then(|| {
                format!(
                    "{}'s median of our kernel {theirs:.2} µs is {:+.1}% from our timer's {:.2} µs (more than ±{:.0}% \
                     and {TIMER_FLOOR_US} µs): the timers disagree, not judged",
                    p.name,
                    off * 100.0,
                    ours.median,
                    TIMER_TOLERANCE * 100.0
                )
            })
        })
        .collect()
}

fn evaluate_case(result: &ResultRecord, env: &Environment, opts: &GateOptions) -> CaseReport {
    let block = env.block;
    let c = &result.case;
    let shape = evoattn::Shape { b: c.b, h: c.h, hkv: c.hkv, sq: c.sq, sk: c.sk, d: c.d };
    let mut report = CaseReport {
        shape: shape.to_string(),
        dtype: c.dtype.clone(),
        causal: c.causal.clone(),
        layout: c.layout.clone(),
        kernel: result.ours.name.clone(),
        kernel_short: crate::lab::kernel_name::in_record(&result.ours.name, c, env),
        peer: None,
        ours_us: summarize(&result.ours.samples_us),
        peer_us: None,
        speedup: None,
        diff_us: None,
        verdict: None,
        equal: None,
        checks: Checks { correct: result.ours.correct == Some(true), ..Checks::default() },
        outcome: Outcome::Pass,
        reasons: Vec::new(),
    };
    // Correctness first: a wrong kernel fails whatever its speed; unknown is not correct.
    let mut failed = !report.checks.correct;
    match result.ours.correct {
        Some(true) => {}
        Some(false) => report.reasons.push(match result.ours.max_abs {
            Some(err) => format!("ours is incorrect (max abs error {err:.3e})"),
            None => "ours is incorrect".into(),
        }),
        None => report.reasons.push("ours' correctness is unknown".into()),
    }
    let peer = match pick_peer(result, &opts.against) {
        Ok(peer) => peer,
        Err(why) => {
            report.reasons.push(why);
            report.outcome = if failed { Outcome::Fail } else { Outcome::CouldNotRun };
            return report;
        }
    };
    report.peer = Some(peer.name.clone());
    let Some(cmp) = Comparison::new(&result.ours.samples_us, &peer.samples_us, block, opts) else {
        report.reasons.push(format!("ours has no samples ({})", result.ours.status));
        report.outcome = if failed { Outcome::Fail } else { Outcome::CouldNotRun };
        return report;
    };
    let above = cmp.above_threshold(opts);
    if !above {
        report.reasons.push(format!(
            "speedup {:.3}× (median peer / median ours) is not above {}×",
            cmp.median_speedup(),
            ratio(opts.speedup)
        ));
    }
    let ci_below = cmp.ci_below_zero();
    if !ci_below {
        let what = if cmp.equal() { "contains 0: no detectable difference" } else { "is above 0: slower" };
        report.reasons.push(format!(
            "{:.0}% interval of the median difference [{:+.2}, {:+.2}] µs {what}",
            opts.confidence * 100.0,
            cmp.diff_us.lo,
            cmp.diff_us.hi
        ));
    }
    let p90 = cmp.p90_no_worse();
    if opts.p90 && !p90 {
        report.reasons.push(format!("p90 {:.2} µs is above the peer's {:.2} µs", cmp.ours.p90, cmp.peer.p90));
    }
    // Another harness timing our kernel differently from our timer: neither median is trusted.
    let disagreements = timer_disagreements(result);
    let timers_agree = disagreements.is_empty();
    report.reasons.extend(disagreements);
    // Samples still moving say nothing about either median: the case is re-measured, not judged.
    let drifting: Vec<String> = [("ours", &result.ours.samples_us), (peer.name.as_str(), &peer.samples_us)]
        .into_iter()
        .filter_map(|(who, samples)| {
            let d = unsteady_drift(samples)?;
            Some(format!(
                "{who}'s samples drift {:+.0}% from the first third to the last (more than ±{:.0}%): not steady, measure again",
                d * 100.0,
                DRIFT_TOLERANCE * 100.0
            ))
        })
        .collect();
    let steady = drifting.is_empty() && timers_agree;
    report.reasons.extend(drifting);
    report.checks.steady = Some(steady);
    failed |= !cmp.faster(opts) || (opts.p90 && !p90);
    report.checks.below_threshold = Some(above);
    report.checks.ci_below_zero = Some(ci_below);
    report.checks.p90 = opts.p90.then_some(p90);
    report.verdict = Some(Verdict::from_speedup(cmp.speedup.estimate));
    report.equal = Some(cmp.equal());
    report.peer_us = Some(cmp.peer);
    report.speedup = Some(cmp.speedup);
    report.diff_us = Some(cmp.diff_us);
    report.outcome = if !report.checks.correct {
        Outcome::Fail
    } else if !steady {
        Outcome::CouldNotRun
    } else if failed {
        Outcome::Fail
    } else {
        Outcome::Pass
    };
    report
}

/// Gates every case of `record`. Overall: fail if any case fails (a definite failure stands
/// whatever else could not be judged), else could-not-run if any case (or the whole record,
/// when empty) could not be judged, else pass.
pub fn evaluate(record: &BenchRecord, opts: &GateOptions) -> GateReport {
    let cases: Vec<CaseReport> = record.results.iter().map(|r| evaluate_case(r, &record.env, opts)).collect();
    let outcome = Outcome::overall(cases.iter().map(|c| c.outcome));
    GateReport {
        gpu: record.env.gpu.clone(),
        arch: record.env.arch.clone(),
        mode: record.env.mode,
        samples: record.env.samples,
        against: opts.against.to_string(),
        speedup_threshold: opts.speedup,
        confidence: opts.confidence,
        p90: opts.p90,
        resamples: opts.resamples,
        seed: opts.seed,
        cases,
        outcome,
    }
}

impl GateReport {
    /// One line: the outcome and the counts behind it.
    pub fn summary(&self) -> String {
        if self.cases.is_empty() {
            return "gate: could not run: the record has no cases".into();
        }
        let counts = Tally::of(self.cases.iter().map(|c| c.outcome)).describe("fail");
        format!("gate: {} ({counts}; against {})", self.outcome.name(), self.against)
    }

    /// The pass rule in words, for the headers.
    fn rule(&self) -> String {
        let mut rule = format!(
            "correct; speedup = median(peer) / median(ours) above {}×; the {:.0}% bootstrap interval ({} resamples) \
             of median(ours) − median(peer) below 0",
            ratio(self.speedup_threshold),
            self.confidence * 100.0,
            self.resamples
        );
        if self.p90 {
            rule.push_str(", p90(ours) ≤ p90(peer)");
        }
        let _ = write!(
            rule,
            "; not judged where either side's samples drift (last third's median more than ±{:.0}% from the first's)",
            DRIFT_TOLERANCE * 100.0
        );
        rule
    }

    fn mode_name(&self) -> &'static str {
        self.mode.map_or("unknown", Mode::name)
    }
}

fn mark(check: Option<bool>) -> &'static str {
    match check {
        Some(true) => "✓",
        Some(false) => "✗",
        None => "–",
    }
}

fn us(value: Option<f64>) -> String {
    value.map_or_else(|| "–".into(), |v| format!("{v:.2}"))
}

fn speedup_cell(case: &CaseReport) -> String {
    case.speedup.map_or_else(|| "–".into(), |s| format!("{:.3}×", s.estimate))
}

fn diff_cell(case: &CaseReport) -> String {
    case.diff_us.map_or_else(|| "–".into(), |d| format!("[{:+.2}, {:+.2}]", d.lo, d.hi))
}

/// The cells both tables give a case between its outcome and its verdict or notes: the problem,
/// the kernel, the peer, the medians, the speedup and the interval.
fn measured_cells(case: &CaseReport) -> [String; 10] {
    [
        case.shape.clone(),
        case.dtype.clone(),
        case.causal.clone(),
        case.layout.clone(),
        case.kernel_short.clone(),
        case.peer.clone().unwrap_or_else(|| "–".into()),
        us(case.ours_us.map(|s| s.median)),
        us(case.peer_us.map(|s| s.median)),
        speedup_cell(case),
        diff_cell(case),
    ]
}

/// The markdown table's cells of one case, in the order of `markdown_headers`.
fn cells(case: &CaseReport, p90: bool) -> Vec<String> {
    let mut row = vec![case.outcome.icon().to_string()];
    row.extend(measured_cells(case));
    row.extend([
        case.verdict.map_or("–", Verdict::name).to_string(),
        mark(Some(case.checks.correct)).into(),
        mark(case.checks.below_threshold).into(),
        mark(case.checks.ci_below_zero).into(),
    ]);
    if p90 {
        row.push(mark(case.checks.p90).into());
    }
    row.push(case.reasons.join("; "));
    row
}

/// The markdown table's column headers; the p90 column only when that condition is on.
fn markdown_headers(report: &GateReport) -> Vec<String> {
    let mut h: Vec<String> = [
        "result",
        "shape B,H,Sq,D[,Hkv,Sk]",
        "dtype",
        "mask",
        "layout",
        "kernel",
        "peer",
        "ours µs",
        "peer µs",
        "speedup (peer/ours)",
        "Δ median µs CI",
        "verdict",
        "correct",
    ]
    .map(String::from)
    .to_vec();
    h.push(format!("speedup > {}×", ratio(report.speedup_threshold)));
    h.push("CI < 0".into());
    if report.p90 {
        h.push("p90".into());
    }
    h.push("reason".into());
    h
}

/// A GitHub markdown table, `|` in cells escaped.
pub fn markdown_table(headers: &[String], rows: &[Vec<String>]) -> String {
    let escape = |s: &String| s.replace('|', "\\|");
    let mut out = String::new();
    let _ = writeln!(out, "| {} |", headers.iter().map(escape).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(headers.len()));
    for row in rows {
        let _ = writeln!(out, "| {} |", row.iter().map(escape).collect::<Vec<_>>().join(" | "));
    }
    out
}

/// The rule and the run's facts, the table (the reasons a case did not pass as numbered notes
/// under it; with `verbose`, each kernel's symbol name under its row), and the summary line.
pub fn render_text(report: &GateReport, verbose: bool) -> String {
    let mut table = Table::new(vec![
        Column::left("result"),
        Column::left(SHAPE_HEADER),
        Column::left("dtype"),
        Column::left("mask"),
        Column::left("layout"),
        Column::left("kernel").wraps(),
        Column::left("peer"),
        Column::right("ours\nµs"),
        Column::right("peer\nµs"),
        Column::right("speedup\npeer/ours"),
        Column::right(&format!("Δ median µs\n{:.0}% CI", report.confidence * 100.0)),
        Column::left("notes").optional(),
    ]);
    let mut notes = Notes::default();
    for case in &report.cases {
        let mut row = vec![case.outcome.name().to_string()];
        row.extend(measured_cells(case));
        row.push(notes.refer_all(&case.reasons));
        table.row(row);
        if verbose {
            table.line(case.kernel.clone());
        }
    }
    let mut out = text::paragraph(&format!(
        "gate on {} ({}), {} mode, {} samples per kernel, against {}",
        report.gpu,
        report.arch,
        report.mode_name(),
        report.samples,
        report.against
    ));
    out.push_str(&text::paragraph(&format!("pass: {}", report.rule())));
    out.push_str(&table.render());
    out.push_str(&notes.render("notes (why a case did not pass):"));
    out.push_str(&text::paragraph(&report.summary()));
    out
}

/// A markdown section for a pull-request comment: heading with the outcome, the conditions, one
/// row per case, the summary line.
pub fn render_markdown(report: &GateReport) -> String {
    let escape = |s: &str| s.replace('|', "\\|");
    let mut out = String::new();
    let _ = writeln!(out, "### evoattn gate: {} {}\n", report.outcome.icon(), report.outcome.name());
    let _ = writeln!(
        out,
        "**GPU** {} ({}) · **mode** {} · **samples** {} per kernel · **against** {}  ",
        escape(&report.gpu),
        escape(&report.arch),
        report.mode_name(),
        report.samples,
        escape(&report.against)
    );
    let _ = writeln!(out, "**pass** {}\n", report.rule());
    let rows: Vec<Vec<String>> = report.cases.iter().map(|case| cells(case, report.p90)).collect();
    out.push_str(&markdown_table(&markdown_headers(report), &rows));
    let _ = writeln!(out, "\n**{}**", report.summary());
    out
}

pub fn render_json(report: &GateReport) -> String {
    serde_json::to_string_pretty(report).expect("a gate report serialises")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::record::tests::{gate_case, ok_measurement};
    use crate::stores::record::Timer;
    use crate::stores::record::{Environment, Status, PYTHON_PEER, SCHEMA, SELF_PEER, TORCH_TIMED_PEER};
    use crate::verdicts::stats::tests::lognormal_samples;

    /// Samples per kernel, as `bench`'s default.
    const N: usize = 100;
    /// Lognormal jitter of a quiet GPU: about 3% spread around the median.
    const SIGMA: f64 = 0.03;

    fn measurement(name: &str, median_us: f64, seed: u64) -> Measurement {
        Measurement {
            max_abs: Some(1e-3),
            rel_l2: Some(1e-4),
            ..ok_measurement(name, &lognormal_samples(median_us, SIGMA, N, seed), Some(true))
        }
    }

    fn refused(name: &str) -> Measurement {
        Measurement {
            status: Status::Refused,
            reason: Some("head dim 256 unsupported".into()),
            samples_us: Vec::new(),
            ..measurement(name, 1.0, 0)
        }
    }

    fn result(ours: Measurement, peers: Vec<Measurement>) -> ResultRecord {
        ResultRecord { case: gate_case(), ours, peers }
    }

    fn record(results: Vec<ResultRecord>) -> BenchRecord {
        let env = Environment {
            gpu: "NVIDIA H100 80GB HBM3".into(),
            arch: "sm_90a".into(),
            samples: N,
            ..Default::default()
        };
        BenchRecord { schema: SCHEMA.into(), env, results }
    }

    fn against(name: &str) -> GateOptions {
        GateOptions { against: Against::Peer(name.into()), ..GateOptions::default() }
    }

    /// Ours at `ours_us` against one peer `sdpa-flash` at `peer_us`.
    fn one_case(ours_us: f64, peer_us: f64) -> BenchRecord {
        record(vec![result(measurement("mma", ours_us, 1), vec![measurement("sdpa-flash", peer_us, 2)])])
    }

    #[test]
    fn clear_win_passes() {
        let report = evaluate(&one_case(80.0, 100.0), &against("sdpa-flash"));
        assert_eq!(report.outcome, Outcome::Pass, "{}", render_text(&report, false));
        let case = &report.cases[0];
        assert_eq!(case.verdict, Some(Verdict::Good));
        assert!(case.reasons.is_empty() && case.equal == Some(false));
        assert!((case.speedup.unwrap().estimate - 1.25).abs() < 0.03);
        let d = case.diff_us.unwrap();
        assert!(d.lo < d.estimate && d.estimate < d.hi && d.hi < 0.0);
    }

    #[test]
    fn clear_loss_fails() {
        let report = evaluate(&one_case(120.0, 100.0), &against("sdpa-flash"));
        assert_eq!(report.outcome, Outcome::Fail);
        let case = &report.cases[0];
        assert_eq!((case.checks.below_threshold, case.checks.ci_below_zero), (Some(false), Some(false)));
        assert_eq!(case.verdict, Some(Verdict::Regression));
        assert!(case.reasons[1].contains("slower"), "{:?}", case.reasons);
    }

    #[test]
    fn a_tie_fails_the_speed_test() {
        let report = evaluate(&one_case(100.0, 100.0), &against("sdpa-flash"));
        assert_eq!(report.outcome, Outcome::Fail);
        assert_eq!(report.cases[0].verdict, Some(Verdict::Parity));
        assert_eq!(report.cases[0].equal, Some(true));
    }

    #[test]
    fn confidently_faster_but_inside_the_margin_fails() {
        // 3% faster with 100 samples of 3% jitter: the interval is below 0, the speedup of about
        // 1.03 is not above 1/0.95.
        let report = evaluate(&one_case(97.0, 100.0), &against("sdpa-flash"));
        let case = &report.cases[0];
        assert_eq!((case.checks.below_threshold, case.checks.ci_below_zero), (Some(false), Some(true)));
        assert_eq!(report.outcome, Outcome::Fail);
        // With the margin relaxed it passes: the threshold is the only failing condition.
        let relaxed = GateOptions { speedup: 1.0, ..against("sdpa-flash") };
        assert_eq!(evaluate(&one_case(97.0, 100.0), &relaxed).outcome, Outcome::Pass);
    }

    #[test]
    fn incorrect_or_unknown_correctness_fails_even_when_fast() {
        for (correct, why) in [(Some(false), "incorrect"), (None, "unknown")] {
            let mut rec = one_case(50.0, 100.0);
            rec.results[0].ours.correct = correct;
            let report = evaluate(&rec, &against("sdpa-flash"));
            assert_eq!(report.outcome, Outcome::Fail);
            let case = &report.cases[0];
            assert!(!case.checks.correct && case.checks.ci_below_zero == Some(true));
            assert!(case.reasons[0].contains(why), "{:?}", case.reasons);
        }
    }

    #[test]
    fn drifting_samples_are_not_judged() {
        // The peer's first third 4x slower than the rest, as a warm-up still under way: a
        // "win" the speed test alone would pass.
        let mut rec = one_case(100.0, 100.0);
        for s in &mut rec.results[0].peers[0].samples_us[..N / 3] {
            *s *= 4.0;
        }
        let report = evaluate(&rec, &against("sdpa-flash"));
        assert_eq!(report.outcome, Outcome::CouldNotRun, "{}", render_text(&report, false));
        let case = &report.cases[0];
        assert_eq!(case.checks.steady, Some(false));
        assert!(case.reasons.iter().any(|r| r.starts_with("sdpa-flash's samples drift -75%")), "{:?}", case.reasons);
        // Ours drifting is no more a result; a wrong kernel still fails.
        let mut rec = one_case(80.0, 100.0);
        for s in &mut rec.results[0].ours.samples_us[2 * N / 3..] {
            *s *= 1.5;
        }
        assert_eq!(evaluate(&rec, &against("sdpa-flash")).outcome, Outcome::CouldNotRun);
        rec.results[0].ours.correct = Some(false);
        assert_eq!(evaluate(&rec, &against("sdpa-flash")).outcome, Outcome::Fail);
        // Steady samples are judged as before.
        assert_eq!(evaluate(&one_case(80.0, 100.0), &against("sdpa-flash")).cases[0].checks.steady, Some(true));
    }

    #[test]
    fn a_refused_or_absent_peer_could_not_run() {
        let rec = record(vec![result(measurement("mma", 80.0, 1), vec![refused("fa4")])]);
        let report = evaluate(&rec, &against("fa4"));
        assert_eq!(report.outcome, Outcome::CouldNotRun);
        assert_eq!(report.cases[0].reasons, ["peer fa4 refused: head dim 256 unsupported"]);
        assert_eq!(evaluate(&rec, &GateOptions::default()).outcome, Outcome::CouldNotRun, "no ok peer for best");
        let report = evaluate(&rec, &against("sdpa-cudnn"));
        assert_eq!(report.cases[0].reasons, ["peer sdpa-cudnn is not in the record"]);
    }

    #[test]
    fn a_failure_outranks_a_case_that_could_not_run() {
        let mut rec = one_case(120.0, 100.0);
        rec.results.push(result(measurement("mma", 80.0, 3), vec![refused("sdpa-flash")]));
        let report = evaluate(&rec, &against("sdpa-flash"));
        let outcomes: Vec<Outcome> = report.cases.iter().map(|c| c.outcome).collect();
        assert_eq!(outcomes, [Outcome::Fail, Outcome::CouldNotRun]);
        assert_eq!(report.outcome, Outcome::Fail);
    }

    #[test]
    fn an_empty_record_could_not_run() {
        let report = evaluate(&record(Vec::new()), &GateOptions::default());
        assert_eq!(report.outcome, Outcome::CouldNotRun);
        assert_eq!(report.outcome.exit_code(), 2);
        assert!(report.summary().contains("no cases"));
    }

    #[test]
    fn best_is_the_fastest_peer_that_ran() {
        let peers = vec![
            measurement("sdpa-math", 300.0, 2),
            refused("fa4"),
            measurement("sdpa-cudnn", 90.0, 3),
            measurement("sdpa-flash", 110.0, 4),
        ];
        let rec = record(vec![result(measurement("mma", 80.0, 1), peers)]);
        let report = evaluate(&rec, &GateOptions::default());
        assert_eq!(report.cases[0].peer.as_deref(), Some("sdpa-cudnn"));
        assert_eq!(report.outcome, Outcome::Pass);
        assert_eq!(report.against, "best");
    }

    #[test]
    fn best_never_picks_a_control() {
        // Our kernel measured again (or through the Python package) is faster than ours here
        // (noise), but it is no peer.
        let peers = vec![
            measurement(SELF_PEER, 70.0, 2),
            measurement(TORCH_TIMED_PEER, 70.0, 3),
            measurement(PYTHON_PEER, 70.0, 5),
            measurement("fa4", 90.0, 4),
        ];
        let rec = record(vec![result(measurement("mma", 80.0, 1), peers)]);
        assert_eq!(evaluate(&rec, &GateOptions::default()).cases[0].peer.as_deref(), Some("fa4"));
        // Named, a control is gated against like any peer: that is the A/A check.
        assert_eq!(evaluate(&rec, &against(SELF_PEER)).cases[0].peer.as_deref(), Some(SELF_PEER));
        let only_controls = record(vec![result(measurement("mma", 80.0, 1), vec![measurement(SELF_PEER, 80.0, 2)])]);
        let report = evaluate(&only_controls, &GateOptions::default());
        assert_eq!(report.outcome, Outcome::CouldNotRun);
        assert_eq!(report.cases[0].reasons, ["no peer ran this case (controls do not count)"]);
    }

    #[test]
    fn a_case_whose_timers_disagree_by_more_than_three_percent_and_half_a_microsecond_is_not_judged() {
        let with = |do_bench_us: f64| {
            let peers = vec![
                measurement("fa4", 100.0, 2),
                measurement(TORCH_TIMED_PEER, 80.5, 3),
                measurement(Timer::DoBench.peer(), do_bench_us, 4),
            ];
            record(vec![result(measurement("mma", 80.0, 1), peers)])
        };
        let agree = evaluate(&with(81.0), &GateOptions::default());
        assert_eq!(agree.outcome, Outcome::Pass, "{}", render_text(&agree, false));
        assert!(timer_disagreements(&with(81.0).results[0]).is_empty());
        let off = evaluate(&with(84.0), &GateOptions::default());
        assert_eq!(off.outcome, Outcome::CouldNotRun, "{}", render_text(&off, false));
        assert_eq!(off.cases[0].checks.steady, Some(false));
        let reason = off.cases[0].reasons.iter().find(|r| r.contains("the timers disagree")).expect("a reason");
        assert!(reason.starts_with("self-do-bench's median of our kernel 8"), "{reason}");
        // On a kernel of 10 µs, 0.4 µs (4%) is within the floor; 0.6 µs is not.
        let short = |control_us: f64| {
            let peers = vec![measurement("fa4", 12.0, 2), measurement(Timer::Profiler.peer(), control_us, 3)];
            record(vec![result(measurement("mma", 10.0, 1), peers)])
        };
        assert!(timer_disagreements(&short(10.4).results[0]).is_empty());
        assert_eq!(timer_disagreements(&short(10.6).results[0]).len(), 1);
        // The controls stay out of the best peer, and a wrong kernel still fails.
        assert_eq!(off.cases[0].peer.as_deref(), Some("fa4"));
        let mut wrong = with(84.0);
        wrong.results[0].ours.correct = Some(false);
        assert_eq!(evaluate(&wrong, &GateOptions::default()).outcome, Outcome::Fail);
    }

    #[test]
    fn p90_can_turn_a_pass_into_a_fail() {
        // Ours is faster in the middle but has a slow tail: every fifth launch takes 150 µs.
        let mut ours = measurement("mma", 80.0, 1);
        for t in ours.samples_us.iter_mut().step_by(5) {
            *t = 150.0;
        }
        let rec = record(vec![result(ours, vec![measurement("sdpa-flash", 100.0, 2)])]);
        assert_eq!(evaluate(&rec, &against("sdpa-flash")).outcome, Outcome::Pass);
        let report = evaluate(&rec, &GateOptions { p90: true, ..against("sdpa-flash") });
        assert_eq!(report.outcome, Outcome::Fail);
        assert_eq!(report.cases[0].checks.p90, Some(false));
        assert!(report.cases[0].reasons[0].starts_with("p90"));
    }

    #[test]
    fn the_same_record_gives_the_same_report() {
        let rec = one_case(99.0, 100.0);
        let opts = against("sdpa-flash");
        assert_eq!(render_json(&evaluate(&rec, &opts)), render_json(&evaluate(&rec, &opts)));
    }

    /// A/A: ours against an independent draw from its own distribution, on `REPEATS` fresh
    /// draws. Returns how many passed the speed test and how many the equality test.
    fn aa_rates(sigma: f64) -> (usize, usize) {
        const REPEATS: u64 = 20;
        let opts = GateOptions::default();
        let mut faster = 0;
        let mut equal = 0;
        for r in 0..REPEATS {
            let a = lognormal_samples(100.0, sigma, N, 1000 + 2 * r);
            let b = lognormal_samples(100.0, sigma, N, 1001 + 2 * r);
            let cmp = Comparison::new(&a, &b, 1, &opts).unwrap();
            faster += usize::from(cmp.faster(&opts));
            equal += usize::from(cmp.equal());
        }
        (faster, equal)
    }

    #[test]
    fn aa_never_faster_and_equal_at_about_the_stated_rate() {
        // DESIGN: a candidate gated against itself fails the speed test and passes the
        // equality test at the stated rate (95%: 19 of 20 expected).
        for sigma in [SIGMA, 0.3] {
            let (faster, equal) = aa_rates(sigma);
            println!("A/A at sigma {sigma}: faster {faster}/20, equal {equal}/20");
            assert!(faster <= 1, "sigma {sigma}: {faster} of 20 A/A gates passed the speed test");
            assert!(equal >= 18, "sigma {sigma}: only {equal} of 20 A/A intervals contain 0");
        }
    }

    #[test]
    fn a_copy_of_ours_as_peer_fails_the_speed_test_and_is_equal() {
        let ours = measurement("mma", 100.0, 1);
        let copy = Measurement { name: "copy".into(), ..ours.clone() };
        let report = evaluate(&record(vec![result(ours, vec![copy])]), &against("copy"));
        let case = &report.cases[0];
        assert_eq!(report.outcome, Outcome::Fail);
        assert_eq!(
            (case.checks.below_threshold, case.checks.ci_below_zero, case.equal),
            (Some(false), Some(false), Some(true))
        );
        assert_eq!(case.diff_us.unwrap().estimate, 0.0);
    }

    #[test]
    fn markdown_has_the_header_and_one_row_per_case() {
        let mut rec = one_case(80.0, 100.0);
        rec.results.push(result(measurement("mma", 120.0, 3), vec![measurement("sdpa-flash", 100.0, 4)]));
        rec.results.push(result(measurement("mma", 80.0, 5), vec![refused("sdpa-flash")]));
        rec.env.mode = Some(Mode::Graph);
        let md = render_markdown(&evaluate(&rec, &against("sdpa-flash")));
        assert!(md.starts_with("### evoattn gate: ❌ fail\n"), "{md}");
        assert!(md.contains("**GPU** NVIDIA H100 80GB HBM3 (sm_90a) · **mode** graph · **samples** 100 per kernel"));
        assert!(md.contains("speedup = median(peer) / median(ours) above 1.053×; the 95% bootstrap interval (10000"));
        assert!(md.contains("| speedup (peer/ours) |") && md.contains("| speedup > 1.053× |"), "{md}");
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(rows.len(), 4, "header and three cases:\n{md}");
        assert!(rows[1].starts_with("| ✅ | 1,8,512,64 | f16 | none | bhsd | mma | sdpa-flash |"), "{}", rows[1]);
        assert!(rows[2].starts_with("| ❌ ") && rows[3].starts_with("| ⚠️ "));
        assert!(md
            .trim_end()
            .ends_with("**gate: fail (1 of 3 cases pass, 1 fail, 1 could not run; against sdpa-flash)**"));
    }

    #[test]
    fn text_is_aligned_within_the_width_with_notes_and_the_summary() {
        let mut rec = one_case(80.0, 100.0);
        rec.results.push(result(measurement("mma", 120.0, 3), vec![measurement("sdpa-flash", 100.0, 4)]));
        let text = render_text(&evaluate(&rec, &against("sdpa-flash")), false);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.iter().all(|l| crate::text::width(l) <= crate::text::WIDTH), "{text}");
        assert!(lines[0].starts_with("gate on NVIDIA H100 80GB HBM3 (sm_90a), unknown mode, 100 samples per kernel"));
        let header = lines.iter().position(|l| l.starts_with("result")).expect("a header line");
        // The peer column starts at the same character in the header and both rows.
        let column = |line: &str, text: &str| line[..line.find(text).unwrap()].chars().count();
        assert_eq!(column(lines[header], "peer"), column(lines[header + 1], "sdpa-flash"));
        assert_eq!(column(lines[header + 1], "sdpa-flash"), column(lines[header + 2], "sdpa-flash"));
        assert!(lines[header - 1].contains("speedup") && lines[header].contains("peer/ours"), "{text}");
        // One convention: the slower case's speedup is below 1 in its cell and in its note.
        assert!(lines[header + 2].starts_with("fail") && lines[header + 2].contains("0.8"), "{text}");
        assert!(lines[header + 2].trim_end().ends_with("1, 2"), "{text}");
        assert!(text.contains("  1  speedup 0.8") && text.contains("is not above 1.053×"), "{text}");
        assert_eq!(
            lines.last().copied(),
            Some("gate: fail (1 of 2 cases pass, 1 fail, 0 could not run; against sdpa-flash)")
        );
        // -v: our kernel's symbol under each row.
        let verbose = render_text(&evaluate(&rec, &against("sdpa-flash")), true);
        assert_eq!(verbose.lines().filter(|l| *l == "    mma").count(), 2, "{verbose}");
    }

    #[test]
    fn json_carries_the_numbers_and_the_outcome() {
        let report = evaluate(&one_case(80.0, 100.0), &against("sdpa-flash"));
        let v: serde_json::Value = serde_json::from_str(&render_json(&report)).unwrap();
        assert_eq!(v["outcome"], "pass");
        assert_eq!(v["cases"][0]["verdict"], "good");
        assert_eq!(v["cases"][0]["ours_us"]["n"], N);
        assert!(v["cases"][0]["diff_us"]["hi"].as_f64().unwrap() < 0.0);
        let empty: serde_json::Value =
            serde_json::from_str(&render_json(&evaluate(&record(Vec::new()), &GateOptions::default()))).unwrap();
        assert_eq!(empty["outcome"], "could-not-run");
    }

    #[test]
    fn the_default_threshold_is_ours_at_most_095_of_the_peer() {
        // The convention's speedup of the rule "median(ours) < 0.95 × median(peer)".
        let opts = GateOptions::default();
        let cmp = |ours: f64, peer: f64| Comparison::new(&[ours; 5], &[peer; 5], 1, &opts).unwrap();
        assert!(cmp(94.9, 100.0).above_threshold(&opts));
        assert!(!cmp(95.1, 100.0).above_threshold(&opts));
        assert_eq!(
            (ratio(DEFAULT_SPEEDUP), ratio(2.0), ratio(1.05), ratio(1.0)),
            ("1.053".into(), "2".into(), "1.05".into(), "1".into())
        );
    }

    #[test]
    fn against_parses_best_and_names() {
        assert_eq!("best".parse::<Against>(), Ok(Against::Best));
        assert_eq!("fa4".parse::<Against>(), Ok(Against::Peer("fa4".into())));
        assert!("".parse::<Against>().is_err());
    }
}
