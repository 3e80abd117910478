//! Nsight Compute in the tuner's loop (`tune --fitness composite`, `--ncu-gate`): each candidate
//! that passed the integrity gate is launched once per shape by `evoattn tune-worker
//! --launch-once` under ncu, on its worker's GPU, with the clocks as they are (`--clock-control
//! none`, as the timing saw them), and its counters are the mean over the shapes.

use super::protocol::Request;
use crate::commands::profile::counter_error;
use crate::lab::ncu::{ncu_terms, parse_metrics_csv, NcuTerms, METRICS};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Lines of ncu's stderr kept in an error: its last words say what went wrong.
const STDERR_TAIL: usize = 5;

pub struct Profiler {
    ncu: PathBuf,
    exe: PathBuf,
}

impl Profiler {
    /// A profiler running `ncu` (`--ncu PATH`, which must exist), else ncu where `evoattn
    /// profile` finds it, else the error that says where it looked.
    pub fn find(ncu: Option<&Path>) -> anyhow::Result<Self> {
        use anyhow::Context;
        let ncu = match ncu {
            Some(path) if path.is_file() => path.to_path_buf(),
            Some(path) => anyhow::bail!("--ncu {}: no such file", path.display()),
            None => crate::commands::profile::find_ncu()?,
        };
        let exe = std::env::current_exe().context("cannot locate the evoattn executable to profile")?;
        Ok(Profiler { ncu, exe })
    }

    /// The counters of `request`'s kernel (symbol `kernel`) on GPU `gpu`: one launch per shape.
    pub fn profile(&self, gpu: usize, request: &Request, kernel: &str) -> Result<NcuTerms, String> {
        let launches = request.shapes.len();
        let mut child = Command::new(&self.ncu)
            .args(["--clock-control", "none", "--csv", "--metrics", &METRICS.join(",")])
            .args(["-k", &format!("regex:^{kernel}$"), "-c", &launches.to_string()])
            .arg(&self.exe)
            .args(["tune-worker", "--gpu", &gpu.to_string(), "--launch-once"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run ncu at {}: {e}", self.ncu.display()))?;
        let line = serde_json::to_string(request).map_err(|e| e.to_string())? + "\n";
        if let Some(mut stdin) = child.stdin.take() {
            // A child that exits at once closes its stdin: its stderr says why, below.
            let _ = stdin.write_all(line.as_bytes());
        }
        let output = child.wait_with_output().map_err(|e| format!("waiting for ncu: {e}"))?;
        let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        if let Some(sentence) = counter_error(&stdout).or_else(|| counter_error(&stderr)) {
            return Err(sentence.to_string());
        }
        let tail = || {
            let lines: Vec<&str> = stderr.lines().collect();
            lines[lines.len().saturating_sub(STDERR_TAIL)..].join(" | ")
        };
        let profiles = parse_metrics_csv(&stdout).map_err(|e| format!("{e:#} (ncu {}: {})", output.status, tail()))?;
        if profiles.len() != launches {
            return Err(format!(
                "ncu profiled {} launches of {kernel}, expected {launches} (ncu {}: {})",
                profiles.len(),
                output.status,
                tail()
            ));
        }
        let durations: Vec<Option<f64>> = profiles.iter().map(|p| p.duration_ns()).collect();
        Ok(NcuTerms::mean(&profiles.iter().map(ncu_terms).collect::<Vec<_>>(), &durations))
    }
}
