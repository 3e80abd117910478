//! The history section of the report: for each problem measured in at least two runs, a table
//! row (best and latest median of ours) and an SVG of the median across runs, ours per kernel
//! family and each peer, with the p10–p90 spread and the line `gate --against-history` fails
//! above. Also `--since`: a date, or a commit resolved to the date of its first run.

use crate::exporters::report::{
    draw_lines_with_legend, legend_series, plot_err, FONT, LABEL_PX, OURS, PLOT_HEIGHT, PLOT_WIDTH, SLOWER_COLOR,
};
use crate::stores::history::{CaseKey, Row, ROLE_OURS};
use crate::stores::record::is_control;
use crate::verdicts::regression::{REGRESSION_TOLERANCE, SHORT_COMMIT};
use crate::verdicts::stats::quantile;
use anyhow::bail;
use plotters::prelude::*;
use std::fmt::Write as _;

/// Runs a problem needs before its history is a line worth drawing.
const MIN_RUNS: usize = 2;
/// Hex digits a commit prefix needs to name one commit in practice (`git`'s own minimum).
const MIN_COMMIT_PREFIX: usize = 4;
/// Hex digits of a whole (SHA-1) commit hash.
const FULL_COMMIT: usize = 40;
/// Room above the highest whisker per legend entry, as a fraction of it: an entry is about 20
/// of the plot's 450 pixels, so the legend sits above the data instead of on it.
const LEGEND_ENTRY_ROOM: f64 = 0.06;
/// `MM-DD HH:MM` of an ISO date `YYYY-MM-DDTHH:MM:SSZ`: tells apart runs of one commit.
const MONTH_DAY_TIME: std::ops::Range<usize> = 5..16;
/// ... and `MM-DD HH:MM:SS`, for runs that share a minute.
const MONTH_DAY_SECONDS: std::ops::Range<usize> = 5..19;
/// At most this many runs are named on the x axis (a label is about 100 of 900 pixels).
const MAX_X_LABELS: usize = 8;

/// What `--since` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Since {
    /// `YYYY-MM-DD` or a full `YYYY-MM-DDTHH:MM:SSZ`, UTC: runs dated then or later.
    Date(String),
    /// A commit hash or prefix: runs from the first run at that commit on.
    Commit(String),
}

impl std::str::FromStr for Since {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let b = s.as_bytes();
        let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
        let is_date =
            digits(0..4) && b.get(4) == Some(&b'-') && digits(5..7) && b.get(7) == Some(&b'-') && digits(8..10);
        if is_date && (b.len() == 10 || b.get(10) == Some(&b'T')) {
            Ok(Since::Date(s.to_string()))
        } else if s.len() >= MIN_COMMIT_PREFIX && s.len() <= FULL_COMMIT && s.bytes().all(|c| c.is_ascii_hexdigit()) {
            Ok(Since::Commit(s.to_ascii_lowercase()))
        } else {
            Err(format!("'{s}' is neither a date (YYYY-MM-DD[THH:MM:SSZ]) nor a commit hash (at least {MIN_COMMIT_PREFIX} hex digits)"))
        }
    }
}

impl Since {
    /// The earliest date (`date_utc` text, which sorts in time order) to keep. `first_run`
    /// finds the date of a commit's first run, in the history and the records.
    pub fn resolve(&self, first_run: impl FnOnce(&str) -> anyhow::Result<Option<String>>) -> anyhow::Result<String> {
        match self {
            Since::Date(date) => Ok(date.clone()),
            Since::Commit(commit) => match first_run(commit)? {
                Some(date) => Ok(date),
                None => bail!("--since {commit}: no run in the history or the records was measured at that commit"),
            },
        }
    }
}

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

fn run_label(row: &Row) -> String {
    run_label_to(row, MONTH_DAY_TIME)
}

/// The series name of a row: ours by family, peers by name.
fn series_name(row: &Row) -> String {
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

fn file_name(key: &CaseKey) -> String {
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

/// The median across runs of one problem. `rows` are the problem's, oldest first; `runs` the
/// distinct run dates in order (the x positions).
fn history_svg(key: &CaseKey, rows: &[&Row], runs: &[(String, String)]) -> anyhow::Result<String> {
    let x_of = |row: &Row| runs.iter().position(|(date, _)| *date == row.date_utc).unwrap_or(0) as f64;
    let drawn: Vec<&Row> = rows.iter().copied().filter(|r| !is_control(&r.kernel)).collect();
    // One series (and one legend entry) per name, however many runs it has.
    let series = legend_series(drawn.iter().map(|r| (series_name(r), vec![(x_of(r), r.median_us)])).collect());
    let color_of = |name: &str| series.iter().find(|s| s.0 == name).map_or(BLACK, |s| s.1);
    let whiskers: Vec<(f64, f64, f64, RGBColor)> = drawn
        .iter()
        .map(|r| {
            let mut sorted = r.samples_us.clone();
            sorted.sort_by(f64::total_cmp);
            (x_of(r), quantile(&sorted, 0.1), quantile(&sorted, 0.9), color_of(&series_name(r)))
        })
        .collect();
    let best = rows.iter().filter(|r| r.role == ROLE_OURS && r.correct == Some(true)).map(|r| r.median_us);
    let threshold = best.fold(f64::INFINITY, f64::min) * (1.0 + REGRESSION_TOLERANCE);
    let top = whiskers.iter().map(|w| w.2).fold(if threshold.is_finite() { threshold } else { 0.0 }, f64::max);
    let y_hi = top * (1.0 + LEGEND_ENTRY_ROOM * (series.len() + 2) as f64);
    let x_hi = runs.len() as f64 - 0.5;
    let title = format!(
        "{} {} {} {}: median per run ({}, {} mode)",
        key.shape, key.dtype, key.causal, key.layout, key.gpu, key.mode
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH, PLOT_HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, LABEL_PX + 2))
            .margin(12)
            .x_label_area_size(56)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.5..x_hi, 0.0..y_hi.max(1.0))
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("run (commit, day), oldest first")
            .y_desc("median µs (lower is faster); bars p10–p90")
            .x_labels(runs.len().min(MAX_X_LABELS))
            .y_label_formatter(&|y| format!("{y:.0}"))
            // Only whole positions are runs.
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-9 && i >= 0.0 {
                    runs.get(i as usize).map_or(String::new(), |r| r.1.clone())
                } else {
                    String::new()
                }
            })
            .disable_x_mesh()
            .label_style((FONT, LABEL_PX))
            .axis_desc_style((FONT, LABEL_PX + 1))
            .draw()
            .map_err(plot_err)?;
        for (x, lo, hi, color) in whiskers {
            chart.draw_series([PathElement::new(vec![(x, lo), (x, hi)], color.mix(0.6))]).map_err(plot_err)?;
        }
        if threshold.is_finite() {
            chart
                .draw_series(LineSeries::new([(-0.5, threshold), (x_hi, threshold)], SLOWER_COLOR.stroke_width(1)))
                .map_err(plot_err)?
                .label(format!("regression line: best of ours + {:.0}%", 100.0 * REGRESSION_TOLERANCE))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], SLOWER_COLOR.stroke_width(1)));
        }
        draw_lines_with_legend(&mut chart, series)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// The markdown section and the plots (file name, SVG) of `rows` (the history, oldest first).
pub fn build(rows: &[Row]) -> anyhow::Result<(String, Vec<(String, String)>)> {
    // In order of each problem's first run.
    let mut problems: Vec<(CaseKey, Vec<&Row>)> = Vec::new();
    for row in rows {
        let key = problem(&row.key);
        match problems.iter_mut().find(|(k, _)| *k == key) {
            Some((_, group)) => group.push(row),
            None => problems.push((key, vec![row])),
        }
    }
    let mut markdown = String::from("## History\n\n");
    let mut plots = Vec::new();
    let mut table = Vec::new();
    for (_, group) in &problems {
        let ours: Vec<&Row> = group.iter().copied().filter(|r| r.role == ROLE_OURS).collect();
        // One row per run (its first), oldest first; labelled to the minute, or to the second
        // where two runs share a minute.
        let mut firsts: Vec<&Row> = Vec::new();
        for row in group {
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
            ours.last(),
            ours.iter().filter(|r| r.correct == Some(true)).min_by(|a, b| a.median_us.total_cmp(&b.median_us)),
        ) else {
            continue;
        };
        if ours.len() < MIN_RUNS {
            continue;
        }
        let key = &latest.key;
        let file = file_name(key);
        plots.push((file.clone(), history_svg(key, group, &runs)?));
        table.push(format!(
            "| {} | {} | {} | {} | {} | {} | {:.1} ({}) | {:.1} ({}) | {:+.1}% |",
            key.shape,
            key.dtype,
            key.causal,
            key.layout,
            key.mode,
            ours.len(),
            best.median_us,
            run_label(best),
            latest.median_us,
            run_label(latest),
            100.0 * (latest.median_us / best.median_us - 1.0),
        ));
    }
    if plots.is_empty() {
        markdown.push_str(&format!("No problem of ours was measured in {MIN_RUNS} or more runs in this period.\n\n"));
        return Ok((markdown, plots));
    }
    let gpus: Vec<&str> = {
        let mut g: Vec<&str> = rows.iter().map(|r| r.key.gpu.as_str()).collect();
        g.sort_unstable();
        g.dedup();
        g
    };
    let _ = writeln!(
        markdown,
        "Our median per run for every problem measured at least {MIN_RUNS} times ({}, {} to {}). \
         `gate --against-history` fails a case above the best + {:.0}% when its bootstrap interval agrees.\n",
        gpus.join(", "),
        rows.first().map_or("", |r| r.date_utc.as_str()),
        rows.last().map_or("", |r| r.date_utc.as_str()),
        100.0 * REGRESSION_TOLERANCE
    );
    markdown.push_str("| shape B,H,Sq,D[,Hkv,Sk] | dtype | mask | layout | mode | runs | best µs (run) | latest µs (run) | latest vs best |\n");
    markdown.push_str(&format!("|{}\n", "---|".repeat(9)));
    for line in table {
        markdown.push_str(&line);
        markdown.push('\n');
    }
    markdown.push('\n');
    for (file, _) in &plots {
        let _ = writeln!(markdown, "![{file}]({file})\n");
    }
    Ok((markdown, plots))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(date: &str, commit: &str, role: &str, kernel: &str, median: f64) -> Row {
        Row {
            key: CaseKey {
                gpu: "NVIDIA H100 80GB HBM3".into(),
                mode: "eager".into(),
                shape: evoattn::Shape { b: 4, h: 16, hkv: 16, sq: 4096, sk: 4096, d: 128 },
                dtype: "bf16".into(),
                causal: "none".into(),
                layout: "bhsd".into(),
                family: crate::stores::history::family(kernel).into(),
            },
            role: role.into(),
            kernel: kernel.into(),
            source: "bench".into(),
            date_utc: date.into(),
            git_commit: Some(commit.into()),
            version: "0.1.0".into(),
            driver: "580.65".into(),
            block: 20,
            median_us: median,
            samples_us: vec![median * 0.98, median, median * 1.02],
            correct: Some(true),
        }
    }

    fn history() -> Vec<Row> {
        let mma = "evoattn_mma_bf16_d128_bm128_bn64_s3_qr1";
        let wgmma = "evoattn_wgmma_bf16_d128_bn128_s2_wg2_ldtma";
        vec![
            row("2026-11-20T10:00:00Z", "aaaaaaaaaa", ROLE_OURS, mma, 1500.0),
            row("2026-11-20T10:00:00Z", "aaaaaaaaaa", "peer", "sdpa-cudnn", 820.0),
            row("2026-11-21T10:00:00Z", "bbbbbbbbbb", ROLE_OURS, mma, 1400.0),
            row("2026-11-21T10:00:00Z", "bbbbbbbbbb", "peer", "sdpa-cudnn", 825.0),
            row("2026-11-22T10:00:00Z", "cccccccccc", ROLE_OURS, wgmma, 1019.0),
            row("2026-11-22T10:00:00Z", "cccccccccc", "peer", "sdpa-cudnn", 821.0),
            row("2026-11-22T10:00:00Z", "cccccccccc", "peer", "self", 1000.0),
        ]
    }

    #[test]
    fn since_parses_dates_and_commits() {
        assert_eq!("2026-11-21".parse(), Ok(Since::Date("2026-11-21".into())));
        assert_eq!("2026-11-21T10:00:00Z".parse(), Ok(Since::Date("2026-11-21T10:00:00Z".into())));
        assert_eq!("B4F86E8".parse(), Ok(Since::Commit("b4f86e8".into())));
        for bad in ["yesterday", "2026-1-2", "abc", "2026-11-21 10:00"] {
            assert!(bad.parse::<Since>().is_err(), "{bad}");
        }
        let date = Since::Commit("bbbb".into()).resolve(|c| Ok((c == "bbbb").then(|| "2026-11-21T10:00:00Z".into())));
        assert_eq!(date.unwrap(), "2026-11-21T10:00:00Z");
        let err = Since::Commit("ffff".into()).resolve(|_| Ok(None)).unwrap_err();
        assert!(err.to_string().contains("no run in the history"), "{err}");
    }

    #[test]
    fn one_plot_per_problem_with_one_legend_entry_per_series() {
        let (md, plots) = build(&history()).unwrap();
        assert_eq!(plots.len(), 1);
        assert_eq!(plots[0].0, "history-nvidia-h100-80gb-hbm3-eager-4x16x4096x128-bf16-none-bhsd.svg");
        assert!(
            md.contains("| 4,16,4096,128 | bf16 | none | bhsd | eager | 3 | 1019.0 (ccccccc 11-22 10:00) | 1019.0 (ccccccc 11-22 10:00) | +0.0% |"),
            "{md}"
        );
        let svg = &plots[0].1;
        // Two runs of mma and one of wgmma: one legend entry each; the `self` control is no series.
        for (label, count) in [("ours (mma)", 1), ("ours (wgmma)", 1), ("sdpa-cudnn", 1), ("self", 0)] {
            assert_eq!(svg.matches(&format!(">\n{label}\n<")).count(), count, "{label}");
        }
        for tick in
            ["aaaaaaa 11-20 10:00", "bbbbbbb 11-21 10:00", "ccccccc 11-22 10:00", "regression line: best of ours + 2%"]
        {
            assert!(svg.contains(tick), "{tick} missing");
        }
    }

    #[test]
    fn a_single_run_is_no_history() {
        let (md, plots) = build(&history()[4..]).unwrap();
        assert!(plots.is_empty());
        assert!(md.contains("No problem of ours was measured in 2 or more runs"), "{md}");
    }
}
