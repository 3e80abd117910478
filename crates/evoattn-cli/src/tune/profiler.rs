//! Nsight Compute in the tuner's loop (`tune --fitness composite`, `--ncu-gate`): each candidate
//! that passed the integrity gate is launched once per shape by `evoattn tune-worker
//! --launch-once` under ncu, on its worker's GPU, with the clocks as they are (`--clock-control
//! none`, as the timing saw them), and its counters are the mean over the shapes.

use super::protocol::Request;
use crate::commands::profile::counter_error;
use crate::lab::ncu::{ncu_terms, parse_metrics_csv, NcuTerms, METRICS};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Lines of ncu's stderr kept in an error: its last words say what went wrong.
const STDERR_TAIL: usize = 5;
/// How often a running ncu is checked for its end.
const POLL: Duration = Duration::from_millis(20);

pub struct Profiler {
    ncu: PathBuf,
    exe: PathBuf,
    /// A run of ncu that lasts longer is killed and its candidate gets no counters: a hung
    /// kernel (or an ncu waiting on something) never stalls the caller.
    timeout: Duration,
}

impl Profiler {
    /// A profiler running `ncu` (`--ncu PATH`, which must exist), else ncu where `evoattn
    /// profile` finds it, else the error that says where it looked; each run killed after
    /// `timeout`.
    pub fn find(ncu: Option<&Path>, timeout: Duration) -> anyhow::Result<Self> {
        use anyhow::Context;
        let ncu = match ncu {
            Some(path) if path.is_file() => path.to_path_buf(),
            Some(path) => anyhow::bail!("--ncu {}: no such file", path.display()),
            None => crate::commands::profile::find_ncu()?,
        };
        let exe = std::env::current_exe().context("cannot locate the evoattn executable to profile")?;
        Ok(Profiler { ncu, exe, timeout })
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
        let output = wait_until(child, self.timeout)?;
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

/// What a finished child wrote and how it ended.
struct Output {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Waits for `child` (stdout and stderr piped, read as it writes so it never blocks on a full
/// pipe) at most `timeout`; past it the child is killed and the answer is why.
fn wait_until(mut child: Child, timeout: Duration) -> Result<Output, String> {
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait().map_err(|e| format!("waiting for ncu: {e}"))? {
            Some(status) => break status,
            None if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "ncu did not finish in {:.1} s and was killed (a hung kernel, or ncu waiting on the GPU)",
                    timeout.as_secs_f64()
                ));
            }
            None => std::thread::sleep(POLL),
        }
    };
    let joined = |t: std::thread::JoinHandle<Vec<u8>>| t.join().unwrap_or_default();
    Ok(Output { status, stdout: joined(stdout), stderr: joined(stderr) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// An executable script at `dir/name` with `body`.
    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn request() -> Request {
        let spec = evoattn::plan::plan(
            &evoattn::Problem::dense(evoattn::Shape::new(1, 2, 128, 64), evoattn::Dtype::F16, evoattn::Layout::Bhsd),
            evoattn::Arch::Sm90a,
            132,
            evoattn::Request::Auto,
        )
        .spec;
        Request::new(0, &spec, evoattn::Causal::None, &[evoattn::Shape::new(1, 2, 128, 64)])
    }

    #[test]
    fn an_ncu_that_hangs_is_killed_at_the_timeout_with_why() {
        let dir = tempfile::tempdir().unwrap();
        let ncu = script(dir.path(), "ncu", "exec sleep 30");
        let profiler = Profiler::find(Some(&ncu), Duration::from_millis(300)).unwrap();
        let started = Instant::now();
        let err = profiler.profile(0, &request(), "k").unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10), "waited {:?}", started.elapsed());
        assert!(err.contains("did not finish in 0.3 s and was killed"), "{err}");
    }

    #[test]
    fn what_ncu_writes_past_a_pipe_buffer_is_read_while_it_runs() {
        // 200 KiB on stderr (more than a pipe holds) and then a failure: its last lines are
        // kept in the error, and nothing blocks.
        let dir = tempfile::tempdir().unwrap();
        let ncu = script(
            dir.path(),
            "ncu",
            "cat >/dev/null; i=0; while [ $i -lt 4000 ]; do echo 'filler line of ncu output, fifty bytes long...' >&2; \
             i=$((i+1)); done; echo '==ERROR== the last words' >&2; exit 1",
        );
        let profiler = Profiler::find(Some(&ncu), Duration::from_secs(20)).unwrap();
        let err = profiler.profile(0, &request(), "k").unwrap_err();
        assert!(err.contains("the last words"), "{err}");
    }
}
