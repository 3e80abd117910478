//! `report.md`: per record a table of our kernel against every peer per case with the speedup
//! summary and the record's plots; then, with the history, each problem's best and latest run.

use super::model::{
    case_row, geomean, history_problems, peer_names, record_plots, run_label, CaseRow, NamedRecord, MIN_RUNS,
};
use super::{Exporter, Sources};
use crate::stores::history::Row;
use crate::verdicts::regression::{speedup_floor, REGRESSION_TOLERANCE};
use crate::verdicts::stats::Verdict;
use std::fmt::Write as _;

/// The report's prose and tables.
pub struct Markdown;

impl Exporter for Markdown {
    fn export(&self, sources: &Sources) -> anyhow::Result<Vec<(String, String)>> {
        let mut markdown = String::from("# evoattn benchmark report\n\n");
        markdown.push_str(
            "Times are medians of the raw samples in µs; speedup is the best non-control peer's median over ours \
             (above 1 we are faster); verdicts: excellent ≥ 1.5×, good ≥ 1.1×, modest ≥ 1.02×, parity ±2%, regression below.\n\n",
        );
        for named in sources.records {
            let plots: Vec<String> = record_plots(named).into_iter().map(|p| p.file).collect();
            markdown_record(&mut markdown, named, &plots);
        }
        if let Some(rows) = sources.history {
            history_section(&mut markdown, rows);
        }
        Ok(vec![("report.md".to_string(), markdown)])
    }
}

fn or_dash(value: Option<String>) -> String {
    value.unwrap_or_else(|| "—".into())
}

fn markdown_record(out: &mut String, named: &NamedRecord, plots: &[String]) {
    let env = &named.record.env;
    let rows: Vec<CaseRow> = named.record.results.iter().map(|r| case_row(r, &named.record.env)).collect();
    let peers = peer_names(&named.record);
    let _ = writeln!(out, "## {}\n", named.name);
    let _ = writeln!(
        out,
        "GPU {} (sm {}), {}, commit {}, mode {}, {} samples per implementation, evoattn {}.\n",
        env.gpu,
        env.compute_capability,
        env.date_utc,
        env.git_commit.as_deref().unwrap_or("unrecorded"),
        env.mode.map_or("unrecorded", |m| m.name()),
        env.samples,
        env.evoattn_version,
    );
    let peer_cols: String = peers.iter().map(|p| format!(" {p} µs |")).collect();
    let _ = writeln!(
        out,
        "| shape B×H×S×D | dtype | mask | our kernel | ours µs | ours TFLOP/s |{peer_cols} best peer | speedup (peer/ours) | verdict |"
    );
    let _ = writeln!(out, "|{}", "---|".repeat(9 + peers.len()));
    for row in &rows {
        let peer_cells: String = peers
            .iter()
            .map(|name| {
                let t = row.peers.iter().find(|(n, _)| n == name).and_then(|(_, t)| *t);
                format!(" {} |", or_dash(t.map(|t| format!("{:.1}", t.median_us))))
            })
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | `{}` | {} | {} |{peer_cells} {} | {} | {} |",
            row.shape,
            row.dtype,
            row.mask,
            row.kernel,
            or_dash(row.ours.map(|t| format!("{:.1}", t.median_us))),
            or_dash(row.ours.map(|t| format!("{:.1}", t.tflops))),
            or_dash(row.best_peer.clone()),
            or_dash(row.speedup.map(|s| format!("{s:.3}×"))),
            or_dash(row.verdict.map(|v| v.name().to_string())),
        );
    }
    let speedups: Vec<f64> = rows.iter().filter_map(|r| r.speedup).collect();
    let worst =
        rows.iter().filter(|r| r.speedup.is_some()).min_by(|a, b| a.speedup.unwrap().total_cmp(&b.speedup.unwrap()));
    match (geomean(&speedups), worst) {
        (Some(g), Some(w)) => {
            let _ = writeln!(
                out,
                "\nGeometric-mean speedup over the best peer: **{g:.3}×** ({}) over {} cases; worst case {} {} mask {}: {:.3}× against {}.\n",
                Verdict::from_speedup(g).name(),
                speedups.len(),
                w.shape,
                w.dtype,
                w.mask,
                w.speedup.unwrap(),
                or_dash(w.best_peer.clone()),
            );
        }
        _ => out.push_str("\nNo case has both our time and a peer's: no speedup.\n\n"),
    }
    for plot in plots {
        let _ = writeln!(out, "![{plot}]({plot})\n");
    }
}

/// The history section: a row per problem of [`history_problems`] and its plot.
fn history_section(markdown: &mut String, rows: &[Row]) {
    markdown.push_str("## History\n\n");
    let problems = history_problems(rows);
    if problems.is_empty() {
        markdown.push_str(&format!("No problem of ours was measured in {MIN_RUNS} or more runs in this period.\n\n"));
        return;
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
         `gate --against-history` fails a case more than {:.0}% slower than the best (speedup vs best below {:.3}×) \
         when its bootstrap interval agrees.\n",
        gpus.join(", "),
        rows.first().map_or("", |r| r.date_utc.as_str()),
        rows.last().map_or("", |r| r.date_utc.as_str()),
        100.0 * REGRESSION_TOLERANCE,
        speedup_floor(REGRESSION_TOLERANCE)
    );
    markdown.push_str("| shape B,H,Sq,D[,Hkv,Sk] | dtype | mask | layout | mode | runs | best µs (run) | latest µs (run) | latest's speedup vs best (best/latest) |\n");
    markdown.push_str(&format!("|{}\n", "---|".repeat(9)));
    for p in &problems {
        let _ = writeln!(
            markdown,
            "| {} | {} | {} | {} | {} | {} | {:.1} ({}) | {:.1} ({}) | {:.3}× |",
            p.key.shape,
            p.key.dtype,
            p.key.causal,
            p.key.layout,
            p.key.mode,
            p.ours_runs,
            p.best.median_us,
            run_label(p.best),
            p.latest.median_us,
            run_label(p.latest),
            p.best.median_us / p.latest.median_us,
        );
    }
    markdown.push('\n');
    for p in &problems {
        let _ = writeln!(markdown, "![{0}]({0})\n", p.file);
    }
}
