//! The tuner's side of its worker processes: one per GPU, each started as
//! `evoattn tune-worker --gpu N`. A worker that crashes or does not answer within the timeout
//! is killed, its candidate is recorded as failed at the gate it was in, and a fresh worker
//! is started for the next candidate.

use super::evolve::{Evaluation, Gate};
use super::protocol::{Reply, Request};
use anyhow::{bail, Context};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

/// The hidden subcommand a worker runs.
pub const WORKER_COMMAND: &str = "tune-worker";
/// Lines of a worker's stderr kept for the error text of a crash.
const STDERR_TAIL: usize = 20;
/// How long a new worker may take to open its GPU (driver and context start-up).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// A running worker process.
struct Process {
    child: Child,
    stdin: ChildStdin,
    /// Stdout lines; disconnected when the process exits.
    replies: Receiver<String>,
    /// Collects the last lines of stderr; returns them once the process has closed it.
    stderr: JoinHandle<VecDeque<String>>,
}

impl Process {
    fn spawn(gpu: usize) -> anyhow::Result<(Self, Reply)> {
        let exe = std::env::current_exe().context("locating the evoattn binary for its workers")?;
        let mut child = Command::new(exe)
            .args([WORKER_COMMAND, "--gpu", &gpu.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting a tune worker")?;
        let (stdin, stdout, stderr) = match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => (i, o, e),
            _ => bail!("a tune worker's pipes were not opened"),
        };
        let (tx, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut tail = VecDeque::with_capacity(STDERR_TAIL);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tail.len() == STDERR_TAIL {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
            tail
        });
        let mut process = Process { child, stdin, replies, stderr };
        match process.next(STARTUP_TIMEOUT) {
            Ok(ready @ Reply::Ready { .. }) => Ok((process, ready)),
            Ok(other) => bail!("tune worker on GPU {gpu} answered {other:?} before it was ready"),
            Err(e) => {
                let why = process.end(&e);
                bail!("tune worker on GPU {gpu} did not start: {why}")
            }
        }
    }

    /// The next reply, or why none came: "timeout" or "exited".
    fn next(&mut self, timeout: Duration) -> Result<Reply, String> {
        match self.replies.recv_timeout(timeout) {
            Ok(line) => serde_json::from_str(&line).map_err(|e| format!("unreadable reply '{line}': {e}")),
            Err(RecvTimeoutError::Timeout) => Err(format!("no answer within {} s: killed", timeout.as_secs_f64())),
            Err(RecvTimeoutError::Disconnected) => Err("the worker exited".to_string()),
        }
    }

    /// Kills the process (if still running) and returns `what` with its exit status and the
    /// last lines of its stderr.
    fn end(mut self, what: &str) -> String {
        let _ = self.child.kill();
        let status = self.child.wait().map_or_else(|e| e.to_string(), |s| s.to_string());
        // The process is gone, so its stderr is closed and the reader thread returns.
        let tail: Vec<String> = self.stderr.join().map(Vec::from).unwrap_or_default();
        let mut text = format!("{what} (worker {status})");
        if !tail.is_empty() {
            text.push_str(&format!("; its stderr: {}", tail.join(" | ")));
        }
        text
    }
}

/// The worker slot of one GPU, restarted as needed.
pub struct Worker {
    pub gpu: usize,
    process: Option<Process>,
    timeout: Duration,
    /// Evaluations this GPU ran (the closing note's load balance).
    pub evaluations: usize,
    pub restarts: usize,
}

impl Worker {
    /// Starts the worker of `gpu` and returns it with its `Ready` reply.
    pub fn start(gpu: usize, timeout: Duration) -> anyhow::Result<(Self, Reply)> {
        let (process, ready) = Process::spawn(gpu)?;
        Ok((Worker { gpu, process: Some(process), timeout, evaluations: 0, restarts: 0 }, ready))
    }

    /// Correctness and timing of one candidate. After any failure the worker is replaced: a
    /// faulting kernel leaves its CUDA context unusable, and a restart costs about a second.
    pub fn evaluate(&mut self, request: &Request) -> Evaluation {
        self.evaluations += 1;
        let mut process = match self.process.take() {
            Some(p) => p,
            None => match Process::spawn(self.gpu) {
                Ok((p, _)) => {
                    self.restarts += 1;
                    p
                }
                Err(e) => return Evaluation::failed(Gate::Correctness, format!("{e:#}")),
            },
        };
        let sent = serde_json::to_string(request).map_err(|e| e.to_string()).and_then(|line| {
            writeln!(process.stdin, "{line}").and_then(|_| process.stdin.flush()).map_err(|e| e.to_string())
        });
        if let Err(e) = sent {
            return Evaluation::failed(Gate::Correctness, process.end(&format!("could not send the candidate: {e}")));
        }
        // Charged to the gate the worker last said it entered.
        let mut gate = Gate::Correctness;
        loop {
            match process.next(self.timeout) {
                Ok(Reply::Gate { gate: g, .. }) => gate = Gate::parse(&g).unwrap_or(gate),
                Ok(Reply::Passed { medians_us, .. }) => {
                    self.process = Some(process);
                    return Evaluation { failure: None, medians_us, counters: None };
                }
                Ok(Reply::Failed { gate: g, error, .. }) => {
                    process.end("");
                    return Evaluation::failed(Gate::parse(&g).unwrap_or(gate), error);
                }
                Ok(Reply::Ready { .. }) => {}
                Err(why) => return Evaluation::failed(gate, process.end(&why)),
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(p) = self.process.take() {
            // Closing stdin ends the worker's loop; kill in case it is stuck.
            p.end("done");
        }
    }
}
