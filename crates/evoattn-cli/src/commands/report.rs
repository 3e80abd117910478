//! `evoattn report`: bench records → report.md, results.csv and SVG plots in one directory
//! (see `report::build`), and from the run history a section with each problem's median across
//! runs (`crate::exporters::history::build`). No GPU needed.

use crate::exporters::history::Since;
use crate::exporters::report::{build, NamedRecord};
use crate::stores::history::{self, History, Row};
use crate::stores::record::BenchRecord;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    evoattn report --dir bench/results --out bench/report       # the committed records\n  \
    evoattn report --out hist/ --since 2026-11-20                # the history alone, from that day\n  \
    evoattn report --dir runs/ --history --since b4f86e8 --out r/  # records and history from a commit's first run")]
pub struct Args {
    /// Bench records (`bench --json` output) to report, in this order.
    #[arg(long, num_args = 1.., value_name = "FILE.json", conflicts_with = "dir")]
    records: Vec<PathBuf>,
    /// Report every *.json in this directory that is a bench record (others, such as gate
    /// outputs, are skipped), in file-name order.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Add the history section: every problem measured in two or more runs, its median per run
    /// (commit, day) as a table and a plot, ours and the peers, with the line `gate
    /// --against-history` fails above; and history.csv. Read from history.sqlite in the cache dir
    /// (EVOATTN_CACHE_DIR), which bench and gate fill. The default when no record is given.
    #[arg(long)]
    history: bool,
    /// Only runs dated DATE (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ, UTC) or later, or from the first
    /// run measured at COMMIT (a hash or a prefix of at least 4 hex digits) on; applies to the
    /// records and the history alike.
    #[arg(long, value_name = "DATE|COMMIT")]
    since: Option<Since>,
    /// Write report.md, results.csv (history.csv) and the SVG plots here (created if absent).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

fn named(path: &Path, record: BenchRecord) -> NamedRecord {
    let name = path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned());
    NamedRecord { name, record }
}

fn records_in(dir: &Path) -> anyhow::Result<Vec<NamedRecord>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let records: Vec<NamedRecord> =
        paths.iter().filter_map(|p| BenchRecord::read(p).ok().map(|r| named(p, r))).collect();
    if records.is_empty() {
        bail!("no bench record (*.json with schema {}) in {}", crate::stores::record::SCHEMA, dir.display());
    }
    Ok(records)
}

const HISTORY_CSV_HEADER: &str = "date_utc,git_commit,gpu,driver,mode,b,h,hkv,sq,sk,d,dtype,causal,layout,role,kernel,\
                                  source,n,median_us,p10_us,p90_us";

/// One line per stored measurement, oldest first.
fn history_csv(rows: &[Row]) -> String {
    let mut out = format!("{HISTORY_CSV_HEADER}\n");
    for r in rows {
        let k = &r.key;
        let s = crate::verdicts::stats::summarize(&r.samples_us);
        let q = |f: fn(&crate::verdicts::stats::Summary) -> f64| {
            s.as_ref().map_or(String::new(), |s| format!("{:.3}", f(s)))
        };
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{},{}\n",
            r.date_utc,
            r.git_commit.as_deref().unwrap_or(""),
            k.gpu,
            r.driver,
            k.mode,
            k.shape.b,
            k.shape.h,
            k.shape.hkv,
            k.shape.sq,
            k.shape.sk,
            k.shape.d,
            k.dtype,
            k.causal,
            k.layout,
            r.role,
            r.kernel,
            r.source,
            r.samples_us.len(),
            r.median_us,
            q(|s| s.p10),
            q(|s| s.p90),
        ));
    }
    out
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut records = match &args.dir {
        Some(dir) => records_in(dir)?,
        None => args.records.iter().map(|p| Ok(named(p, BenchRecord::read(p)?))).collect::<anyhow::Result<_>>()?,
    };
    let with_history = args.history || records.is_empty();
    let store = if with_history { Some(History::open(&history::default_path())?) } else { None };
    let since = match &args.since {
        None => None,
        Some(since) => Some(since.resolve(|commit| {
            let in_records = records
                .iter()
                .filter(|r| r.record.env.git_commit.as_deref().is_some_and(|c| c.starts_with(commit)))
                .map(|r| r.record.env.date_utc.clone());
            let in_history = match &store {
                Some(h) => h.first_date_of_commit(commit)?,
                None => None,
            };
            Ok(in_records.chain(in_history).min())
        })?),
    };
    if let Some(since) = &since {
        records.retain(|r| r.record.env.date_utc.as_str() >= since.as_str());
    }
    let mut report = build(&records)?;
    let history_rows = match &store {
        Some(h) => Some(h.rows(since.as_deref())?),
        None => None,
    };
    if let Some(rows) = &history_rows {
        let (markdown, plots) = crate::exporters::history::build(rows)?;
        report.markdown.push_str(&markdown);
        report.plots.extend(plots);
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let write = |name: &str, text: &str| {
        let path = args.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write("report.md", &report.markdown)?;
    write("results.csv", &report.csv)?;
    if let Some(rows) = &history_rows {
        write("history.csv", &history_csv(rows))?;
    }
    for (name, svg) in &report.plots {
        write(name, svg)?;
    }
    let history_note = history_rows.map_or(String::new(), |rows| format!(" and {} history rows", rows.len()));
    println!(
        "report of {} record(s){history_note}: {} (report.md, results.csv, {} plots)",
        records.len(),
        args.out.display(),
        report.plots.len()
    );
    Ok(ExitCode::SUCCESS)
}
