//! `evoattn tune`: the EvoEngineer tuner. For now `--show` lists the evaluation store; the GPU
//! search loop is wired in next.

use crate::tune::store::{self, Store};
use anyhow::bail;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// List every stored evaluation, oldest first.
    #[arg(long)]
    show: bool,
    /// The store (default: tune.sqlite in the kernel cache dir).
    #[arg(long)]
    store: Option<PathBuf>,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if !args.show {
        bail!("the tuning run is not available yet; `evoattn tune --show` lists the store");
    }
    let path = args.store.clone().unwrap_or_else(store::default_path);
    let rows = Store::open(&path)?.all()?;
    println!("{}: {} evaluations", path.display(), rows.len());
    for row in rows {
        let result = match (&row.evaluation.failure, row.fitness) {
            (Some((gate, error)), _) => format!("failed {}: {error}", gate.name()),
            (None, Some(f)) if row.discarded => format!("{f:.3}x discarded"),
            (None, Some(f)) => format!("{f:.3}x"),
            (None, None) => "passed".to_string(),
        };
        let medians: Vec<String> = row.evaluation.medians_us.iter().map(|m| format!("{m:.1}")).collect();
        println!("{} | {} | {} | {} | µs [{}]", row.gpu, row.bucket, row.spec.name(), result, medians.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}
