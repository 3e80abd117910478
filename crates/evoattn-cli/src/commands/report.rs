//! `evoattn report`: bench records → report.md, results.csv and SVG plots in one directory, and
//! from the run history a section with each problem's median across runs and history.csv
//! (`exporters`, one per format). No GPU needed.

use crate::exporters::{NamedRecord, Sources, ALL};
use crate::stores::history::{self, History};
use crate::stores::record::BenchRecord;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    evoattn report --dir bench/results --out bench/report                  # the committed records\n  \
    evoattn report --out hist/ --since 2026-11-20                          # the history alone, from that day\n  \
    evoattn report --dir bench/results --history --since b4f86e8 --out r/  # both, from a commit's first run")]
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
    let history_rows = match &store {
        Some(h) => Some(h.rows(since.as_deref())?),
        None => None,
    };
    let sources = Sources { records: &records, history: history_rows.as_deref() };
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut plots = 0;
    for exporter in ALL {
        for (name, text) in exporter.export(&sources)? {
            let path = args.out.join(&name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            plots += usize::from(name.ends_with(".svg"));
        }
    }
    let history_note = history_rows.map_or(String::new(), |rows| format!(" and {} history rows", rows.len()));
    crate::out::text(&crate::text::paragraph(&format!(
        "report of {} record(s){history_note}: {} (report.md, results.csv, {plots} plots)",
        records.len(),
        args.out.display(),
    )))?;
    Ok(ExitCode::SUCCESS)
}

/// Hex digits a commit prefix needs to name one commit in practice (`git`'s own minimum).
const MIN_COMMIT_PREFIX: usize = 4;
/// Hex digits of a whole (SHA-1) commit hash.
const FULL_COMMIT: usize = 40;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
