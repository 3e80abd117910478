//! What every format reports, computed once: per case our kernel against the peers, the plots
//! a record gets, and the history's problems. Pure: no files, no GPU.

use crate::stores::history::{CaseKey, Row, ROLE_OURS};
use crate::stores::record::{is_control, BenchRecord, CaseRecord, Environment, Measurement, ResultRecord};
use crate::verdicts::regression::SHORT_COMMIT;
use crate::verdicts::stats::{summarize, Verdict};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One record with the name it is reported under (its file stem).
pub struct NamedRecord {
    pub name: String,
    pub record: BenchRecord,
}

/// Median, p10 and p90 in µs and the TFLOP/s of the median, of one implementation on one case.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub median_us: f64,
    pub p10_us: f64,
    pub p90_us: f64,
    pub tflops: f64,
}

pub fn timing(m: &Measurement, case: &CaseRecord) -> Option<Timing> {
    if !m.is_ok() {
        return None;
    }
    let s = summarize(&m.samples_us)?;
    Some(Timing { median_us: s.median, p10_us: s.p10, p90_us: s.p90, tflops: tflops(case.flops, s.median) })
}

/// FLOPs over µs, in TFLOP/s (1 FLOP/µs = 10⁶ FLOP/s).
fn tflops(flops: f64, us: f64) -> f64 {
    flops / us / 1e6
}

/// One table row: our kernel against every peer on one case.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseRow {
    pub shape: String,
    pub dtype: String,
    pub mask: String,
    /// Our kernel's short name (family and the levers that differ from its default).
    pub kernel: String,
    pub ours: Option<Timing>,
    /// Every peer in the record's order, `None` when it did not run (refused, missing).
    pub peers: Vec<(String, Option<Timing>)>,
    /// The fastest non-control peer that ran, and our speedup over it (its median / ours).
    pub best_peer: Option<String>,
    pub speedup: Option<f64>,
    pub verdict: Option<Verdict>,
}

/// `B×H×S×D`, with the KV heads and key length spelled out only when they differ.
pub fn shape_label(c: &CaseRecord) -> String {
    let heads = if c.hkv == c.h { c.h.to_string() } else { format!("{}/{}", c.h, c.hkv) };
    let seq = if c.sk == c.sq { c.sq.to_string() } else { format!("{}:{}", c.sq, c.sk) };
    format!("{}×{heads}×{seq}×{}", c.b, c.d)
}

pub fn case_row(r: &ResultRecord, env: &Environment) -> CaseRow {
    let ours = timing(&r.ours, &r.case);
    let peers: Vec<(String, Option<Timing>)> = r.peers.iter().map(|p| (p.name.clone(), timing(p, &r.case))).collect();
    let best = peers
        .iter()
        .filter(|(name, _)| !is_control(name))
        .filter_map(|(name, t)| t.map(|t| (name.clone(), t.median_us)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let speedup = match (ours, &best) {
        (Some(o), Some((_, peer_us))) => Some(peer_us / o.median_us),
        _ => None,
    };
    CaseRow {
        shape: shape_label(&r.case),
        dtype: r.case.dtype.clone(),
        mask: r.case.causal.clone(),
        kernel: crate::lab::kernel_name::in_record(&r.ours.name, &r.case, env),
        ours,
        peers,
        best_peer: best.map(|(name, _)| name),
        speedup,
        verdict: speedup.map(Verdict::from_speedup),
    }
}

/// Geometric mean; `None` for no values.
pub fn geomean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

/// Peer names of a record in first-seen order.
pub fn peer_names(record: &BenchRecord) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in record.results.iter().flat_map(|r| &r.peers) {
        if !names.contains(&p.name) {
            names.push(p.name.clone());
        }
    }
    names
}

/// What a record's plot shows.
pub enum PlotKind<'a> {
    /// TFLOP/s against sequence length, the cases of one (dtype, head dim, mask).
    Tflops(Vec<&'a ResultRecord>),
    /// Our speedup per case.
    Speedup(Vec<CaseRow>),
}

/// One plot of a record: its file name, title and content.
pub struct RecordPlot<'a> {
    pub file: String,
    pub title: String,
    pub kind: PlotKind<'a>,
}

/// The plots a record gets. TFLOP/s plots are drawn only for (dtype, head dim, mask) groups
/// whose cases are a sequence-length sweep (every length distinct, at least two): other grids,
/// such as batch sweeps at one length, have no curve to draw and are covered by the bars.
pub fn record_plots(named: &NamedRecord) -> Vec<RecordPlot<'_>> {
    let mut groups: BTreeMap<(String, usize, String), Vec<&ResultRecord>> = BTreeMap::new();
    for r in &named.record.results {
        groups.entry((r.case.dtype.clone(), r.case.d, r.case.causal.clone())).or_default().push(r);
    }
    let mut plots = Vec::new();
    for ((dtype, d, mask), cases) in groups {
        let mut lengths: Vec<usize> = cases.iter().map(|r| r.case.sq).collect();
        lengths.sort_unstable();
        lengths.dedup();
        if lengths.len() < 2 || lengths.len() != cases.len() {
            continue;
        }
        plots.push(RecordPlot {
            file: format!("{}-tflops-{dtype}-d{d}-{mask}.svg", named.name),
            title: format!("{}: {dtype}, head dim {d}, mask {mask}", named.name),
            kind: PlotKind::Tflops(cases),
        });
    }
    let rows: Vec<CaseRow> = named.record.results.iter().map(|r| case_row(r, &named.record.env)).collect();
    if rows.iter().any(|r| r.speedup.is_some()) {
        plots.push(RecordPlot {
            file: format!("{}-speedup.svg", named.name),
            title: format!("{}: speedup per case", named.name),
            kind: PlotKind::Speedup(rows),
        });
    }
    plots
}

/// Runs a problem needs before its history is a line worth drawing.
pub const MIN_RUNS: usize = 2;
/// `MM-DD HH:MM` of an ISO date `YYYY-MM-DDTHH:MM:SSZ`: tells apart runs of one commit.
const MONTH_DAY_TIME: std::ops::Range<usize> = 5..16;
/// ... and `MM-DD HH:MM:SS`, for runs that share a minute.
const MONTH_DAY_SECONDS: std::ops::Range<usize> = 5..19;
/// The name of our kernel's series (the history's are `ours (<family>)`).
pub const OURS: &str = "ours";

/// One problem: its key without the kernel family, so that ours across families and the peers
/// share one plot.
fn problem(k: &CaseKey) -> CaseKey {
    CaseKey { family: String::new(), ..k.clone() }
}

/// One run's label on the x axis: its commit (short) and time, to the minute or `to`.
fn run_label_to(row: &Row, to: std::ops::Range<usize>) -> String {
    let commit = row.git_commit.as_deref().map_or("unrecorded", |c| &c[..c.len().min(SHORT_COMMIT)]);
    format!("{commit} {}", row.date_utc.get(to).unwrap_or("").replace('T', " "))
}

pub fn run_label(row: &Row) -> String {
    run_label_to(row, MONTH_DAY_TIME)
}

/// The series name of a row: ours by family, peers by name.
pub fn series_name(row: &Row) -> String {
    if row.role == ROLE_OURS {
        format!("{OURS} ({})", row.key.family)
    } else {
        row.kernel.clone()
    }
}

fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

pub fn file_name(key: &CaseKey) -> String {
    let s = &key.shape;
    let mut shape = format!("{}x{}x{}x{}", s.b, s.h, s.sq, s.d);
    if s.hkv != s.h {
        write!(shape, "-hkv{}", s.hkv).expect("writing to a String");
    }
    if s.sk != s.sq {
        write!(shape, "-sk{}", s.sk).expect("writing to a String");
    }
    format!("history-{}-{}-{shape}-{}-{}-{}.svg", slug(&key.gpu), key.mode, key.dtype, key.causal, key.layout)
}

/// One problem of the history measured in [`MIN_RUNS`] or more runs of ours.
pub struct HistoryProblem<'a> {
    /// The problem's key as its latest run of ours has it.
    pub key: CaseKey,
    /// Its plot's file name.
    pub file: String,
    /// Every row of the problem (ours of any family, the peers), oldest first.
    pub rows: Vec<&'a Row>,
    /// The distinct runs in time order: (date, x-axis label).
    pub runs: Vec<(String, String)>,
    /// Rows of ours.
    pub ours_runs: usize,
    pub best: &'a Row,
    pub latest: &'a Row,
}

/// The history's problems worth a table row and a plot, in order of each problem's first run.
pub fn history_problems(rows: &[Row]) -> Vec<HistoryProblem<'_>> {
    let mut problems: Vec<(CaseKey, Vec<&Row>)> = Vec::new();
    for row in rows {
        let key = problem(&row.key);
        match problems.iter_mut().find(|(k, _)| *k == key) {
            Some((_, group)) => group.push(row),
            None => problems.push((key, vec![row])),
        }
    }
    let mut out = Vec::new();
    for (_, group) in problems {
        let ours: Vec<&Row> = group.iter().copied().filter(|r| r.role == ROLE_OURS).collect();
        // One row per run (its first), oldest first; labelled to the minute, or to the second
        // where two runs share a minute.
        let mut firsts: Vec<&Row> = Vec::new();
        for row in &group {
            if !firsts.iter().any(|r| r.date_utc == row.date_utc) {
                firsts.push(row);
            }
        }
        firsts.sort_by(|a, b| a.date_utc.cmp(&b.date_utc));
        let minutes: Vec<String> = firsts.iter().map(|r| run_label(r)).collect();
        let runs: Vec<(String, String)> = firsts
            .iter()
            .zip(&minutes)
            .map(|(r, minute)| {
                let shared = minutes.iter().filter(|m| *m == minute).count() > 1;
                (r.date_utc.clone(), if shared { run_label_to(r, MONTH_DAY_SECONDS) } else { minute.clone() })
            })
            .collect();
        let (Some(latest), Some(best)) = (
            ours.last().copied(),
            ours.iter().copied().filter(|r| r.correct == Some(true)).min_by(|a, b| a.median_us.total_cmp(&b.median_us)),
        ) else {
            continue;
        };
        if ours.len() < MIN_RUNS {
            continue;
        }
        out.push(HistoryProblem {
            key: latest.key.clone(),
            file: file_name(&latest.key),
            rows: group,
            runs,
            ours_runs: ours.len(),
            best,
            latest,
        });
    }
    out
}
