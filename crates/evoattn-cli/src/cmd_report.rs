//! `evoattn report`: bench records → report.md, results.csv and SVG plots in one directory
//! (see `report::build`). No GPU needed.

use crate::record::BenchRecord;
use crate::report::{build, NamedRecord};
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Bench records (`bench --json` output) to report, in this order.
    #[arg(long, num_args = 1.., value_name = "FILE.json", required_unless_present = "dir", conflicts_with = "dir")]
    records: Vec<PathBuf>,
    /// Report every *.json in this directory that is a bench record (others, such as gate
    /// outputs, are skipped), in file-name order.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Write report.md, results.csv and the SVG plots here (created if absent).
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
        bail!("no bench record (*.json with schema {}) in {}", crate::record::SCHEMA, dir.display());
    }
    Ok(records)
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let records = match &args.dir {
        Some(dir) => records_in(dir)?,
        None => args.records.iter().map(|p| Ok(named(p, BenchRecord::read(p)?))).collect::<anyhow::Result<_>>()?,
    };
    let report = build(&records)?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let write = |name: &str, text: &str| {
        let path = args.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write("report.md", &report.markdown)?;
    write("results.csv", &report.csv)?;
    for (name, svg) in &report.plots {
        write(name, svg)?;
    }
    println!(
        "report of {} record(s): {} (report.md, results.csv, {} plots)",
        records.len(),
        args.out.display(),
        report.plots.len()
    );
    Ok(ExitCode::SUCCESS)
}
