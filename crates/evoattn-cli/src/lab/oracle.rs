//! The oracle client: a co-resident Python process (`python/evoattn_oracle`) that times PyTorch
//! SDPA backends, FlashAttention-4 and our kernels through the Python package `evoattn` with the
//! method we time our kernels with, on the same inputs, and returns raw samples; statistics stay
//! on this side. One JSON object per line each way over the child's stdin/stdout (the protocol:
//! `python/evoattn_oracle/PROTOCOL.md`).
//!
//! Environment: `EVOATTN_PYTHON` (the interpreter, default `python3`), `EVOATTN_ORACLE_PATH` (the
//! directory holding `evoattn_oracle`, default: `python/` found above the executable or the
//! current directory), `EVOATTN_ORACLE_FAKE=1` (synthetic answers without torch or a GPU, for
//! tests), `EVOATTN_ORACLE_TIMEOUT` (seconds a request may take, default 300).

use crate::lab::inputs::Draw;
use crate::lab::tensors_io::{bits, dtype_name, safetensors_dtype};
use crate::stores::record::{Mode, Status, Timer};
use anyhow::{anyhow, bail, ensure, Context};
use evoattn::runtime::scratch::ScratchNeed;
use evoattn::runtime::tma::TensorMapGeometry;
use evoattn::{Layout, Problem, TensorName};
use safetensors::SafeTensors;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every peer the oracle knows, in the order `hello` lists them.
pub const PEERS: [&str; 8] =
    ["sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "sdpa-math", "sdpa-auto", "fa4", "evoattn-torch", "cudnn-fp8"];

/// The peers that take E4M3 inputs (and no others): they are what E4M3 cases are measured against.
pub const FP8_PEERS: [&str; 1] = ["cudnn-fp8"];

pub const PYTHON_ENV: &str = "EVOATTN_PYTHON";
pub const PATH_ENV: &str = "EVOATTN_ORACLE_PATH";
pub const FAKE_ENV: &str = "EVOATTN_ORACLE_FAKE";
pub const TIMEOUT_ENV: &str = "EVOATTN_ORACLE_TIMEOUT";

const DEFAULT_PYTHON: &str = "python3";
/// Long enough for a first FlashAttention-4 call (a CuTe DSL compile) or a large math-backend
/// case, short enough that a wedged GPU does not hang a benchmark for ever.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// The protocol version this client speaks (`PROTOCOL_VERSION` in the package).
const PROTOCOL_VERSION: u32 = 5;
const PACKAGE: &str = "evoattn_oracle";
/// Where the package lives relative to the repository root.
const PACKAGE_PARENT: &str = "python";
/// What `hello` says of a peer that can run.
const PEER_AVAILABLE: &str = "available";
/// Lines of the child's stderr kept for error messages.
const STDERR_TAIL: usize = 40;
/// How long a child that closed its stdout may take to exit and to finish its last words on
/// stderr, and how often to look.
const EXIT_GRACE: Duration = Duration::from_secs(2);
const EXIT_POLL: Duration = Duration::from_millis(10);
/// Timed calls behind each ceiling (matmul peak, copy bandwidth); the oracle reports the median.
const CEILING_SAMPLES: usize = 20;

/// How to start the oracle.
#[derive(Clone, Debug, PartialEq)]
pub struct OracleOptions {
    pub python: OsString,
    /// The directory holding the `evoattn_oracle` package; `None` searches for `python/` above
    /// the executable and the current directory.
    pub package_dir: Option<PathBuf>,
    pub fake: bool,
    /// The longest any request may take before the oracle is stopped and the request fails.
    pub timeout: Duration,
}

impl OracleOptions {
    /// Options from the environment variables of the module documentation.
    pub fn from_env() -> anyhow::Result<Self> {
        Self::from_vars(|key| std::env::var_os(key))
    }

    fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> anyhow::Result<Self> {
        let timeout = match var(TIMEOUT_ENV) {
            Some(text) => {
                let text = text.to_string_lossy();
                text.trim()
                    .parse()
                    .ok()
                    .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
                    .filter(|timeout| !timeout.is_zero())
                    .ok_or_else(|| anyhow!("{TIMEOUT_ENV}={text}: expected a positive number of seconds"))?
            }
            None => DEFAULT_TIMEOUT,
        };
        Ok(OracleOptions {
            python: var(PYTHON_ENV).filter(|p| !p.is_empty()).unwrap_or_else(|| DEFAULT_PYTHON.into()),
            package_dir: var(PATH_ENV).filter(|p| !p.is_empty()).map(PathBuf::from),
            // Anything but empty or 0, as the package reads it.
            fake: var(FAKE_ENV).is_some_and(|v| !v.is_empty() && v != "0"),
            timeout,
        })
    }
}

/// What the oracle reports about itself and the machine (`hello`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub fake: bool,
    pub python: String,
    pub torch: Option<String>,
    pub cuda: Option<String>,
    pub cudnn: Option<String>,
    pub driver: Option<String>,
    pub fa4: Option<String>,
    /// The cuDNN frontend's version and its cuDNN's (`cudnn-fp8`), where it imports.
    #[serde(default)]
    pub cudnn_frontend: Option<String>,
    pub gpu: String,
    pub compute_capability: String,
    pub l2_bytes: usize,
    pub sm_count: u32,
    /// Peer name -> `available` or `missing: <reason>`.
    pub peers: BTreeMap<String, String>,
}

impl Hello {
    pub fn peer_available(&self, peer: &str) -> bool {
        self.peers.get(peer).is_some_and(|state| state == PEER_AVAILABLE)
    }
}

/// A peer's timing of one case.
#[derive(Clone, Debug, PartialEq)]
pub enum PeerTiming {
    /// Raw per-call times in µs, in the order taken.
    Samples(Vec<f64>),
    /// The peer is installed but does not run this case (or cannot be captured in a graph).
    Refused(String),
    /// The peer is not installed.
    Missing(String),
}

/// A peer's output of one case.
#[derive(Clone, Debug, PartialEq)]
pub enum PeerOutput {
    /// `o` was written to this file (read it with [`read_output`]).
    Written(PathBuf),
    Refused(String),
    Missing(String),
}

/// Byte offsets, within a kernel's packed parameter struct, of the device pointers the oracle
/// patches in: its q, k, v and a fresh o of q's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PointerOffsets {
    pub q: usize,
    pub k: usize,
    pub v: usize,
    pub o: usize,
}

/// One of our kernels, compiled, for the oracle to launch and time with PyTorch's events.
#[derive(Clone, Copy, Debug)]
pub struct KernelLaunch<'a> {
    pub cubin: &'a Path,
    pub kernel: &'a str,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Dynamic shared memory in bytes (the oracle opts in above 48 KiB).
    pub smem: u32,
    /// The kernel's single by-value struct parameter, as packed for the device.
    pub params: &'a [u8],
    pub pointer_offsets: PointerOffsets,
    /// The tensor maps the kernel takes after the struct, in order, each for the oracle to encode
    /// over its own tensor.
    pub tensor_maps: &'a [(TensorName, TensorMapGeometry)],
    /// Scratch for the oracle to allocate (counters zeroed) and where its two addresses go.
    pub scratch: ScratchNeed,
    pub scratch_offsets: [usize; 2],
    /// Where to write the `o` the kernel produced, for checking.
    pub output: Option<&'a Path>,
    /// Who times it in the oracle.
    pub timer: Timer,
}

/// A running oracle. Dropping it stops the process.
pub struct Oracle {
    connection: Connection,
    hello: Hello,
    hello_json: Value,
}

impl Oracle {
    /// Starts the oracle as the environment says ([`OracleOptions::from_env`]).
    pub fn start() -> anyhow::Result<Oracle> {
        Self::start_with(&OracleOptions::from_env()?)
    }

    pub fn start_with(options: &OracleOptions) -> anyhow::Result<Oracle> {
        Self::spawn(options).context("cannot start the PyTorch oracle")
    }

    fn spawn(options: &OracleOptions) -> anyhow::Result<Oracle> {
        let package_dir = match &options.package_dir {
            Some(dir) if dir.join(PACKAGE).join("__main__.py").is_file() => dir.clone(),
            Some(dir) => bail!("{PATH_ENV}={} holds no {PACKAGE} package", dir.display()),
            None => find_package_dir()?,
        };
        let mut connection = Connection::spawn(options, &package_dir)?;
        let reply = connection.request("hello", json!({}))?;
        let hello: Hello = decode("hello", &reply)?;
        ensure!(
            hello.protocol == PROTOCOL_VERSION,
            "the oracle in {} speaks protocol {}, this evoattn speaks {PROTOCOL_VERSION}: use the python/ \
             directory of the same checkout",
            package_dir.display(),
            hello.protocol
        );
        Ok(Oracle { connection, hello, hello_json: reply })
    }

    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// The `hello` reply as sent, for the benchmark record's environment.
    pub fn hello_json(&self) -> &Value {
        &self.hello_json
    }

    #[cfg(test)]
    /// Sets the longest a request may take from now on.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.connection.timeout = timeout;
    }

    /// Has the oracle draw `problem`'s q, k and v on its GPU under `id`, dense in `layout`: the
    /// values of `draw`, bit for bit (its generator is `evoattn::draw`'s twin), so no tensor
    /// crosses the host. E4M3 problems send their descales; the oracle divides by them and
    /// rounds as [`Draw::host`] does.
    pub fn draw(&mut self, id: &str, problem: &Problem, layout: Layout, draw: Draw) -> anyhow::Result<()> {
        let dense = Problem::dense(problem.shape, problem.dtype, layout);
        for t in [TensorName::Q, TensorName::K, TensorName::V] {
            ensure!(
                problem.strides(t) == dense.strides(t),
                "the oracle takes dense tensors: {t}'s strides {:?} are not those of dense {layout}",
                problem.strides(t)
            );
        }
        let s = problem.shape;
        let stream = |t| {
            let g = draw.stream(t);
            json!({ "keys": g.keys, "scale": f64::from(g.scale) })
        };
        let mut fields = json!({
            "id": id,
            "shape": { "b": s.b, "h": s.h, "hkv": s.hkv, "sq": s.sq, "sk": s.sk, "d": s.d },
            "dtype": problem.dtype.name(), "layout": layout.name(), "causal": problem.causal.name(),
            "scale": f64::from(problem.softmax_scale()),
            "tensors": { "q": stream(TensorName::Q), "k": stream(TensorName::K), "v": stream(TensorName::V) },
        });
        if let Some(d) = draw.descales(problem) {
            fields["descales"] = json!({ "q": d.q, "k": d.k, "v": d.v });
        }
        self.connection.request("draw", fields).map(drop)
    }

    pub fn unload(&mut self, id: &str) -> anyhow::Result<()> {
        self.connection.request("unload", json!({ "id": id })).map(drop)
    }

    /// `samples` timed calls of `peer` on case `id`, after `warmup` untimed ones, with a
    /// `flush_bytes` buffer overwritten before each (our own kernels' method).
    pub fn time(
        &mut self,
        id: &str,
        peer: &str,
        mode: Mode,
        warmup: usize,
        samples: usize,
        flush_bytes: usize,
    ) -> anyhow::Result<PeerTiming> {
        let fields = json!({
            "id": id, "peer": peer, "mode": mode.name(), "warmup": warmup, "samples": samples,
            "flush_bytes": flush_bytes
        });
        timing(&self.connection.request("time", fields)?, samples)
    }

    /// Runs `peer` once on case `id` and has it write `o` (q's dtype, layout and shape) to `path`.
    pub fn output(&mut self, id: &str, peer: &str, path: &Path) -> anyhow::Result<PeerOutput> {
        let fields = json!({ "id": id, "peer": peer, "path": utf8(path)? });
        peer_output(&self.connection.request("output", fields)?, path)
    }

    /// Dense n×n×n matmul throughput of this GPU in TFLOP/s (median of the oracle's samples);
    /// `dtype` is `f16` or `bf16`, as [`evoattn::Dtype::name`] spells them.
    pub fn matmul_peak(&mut self, n: usize, dtype: &str) -> anyhow::Result<f64> {
        let fields = json!({ "n": n, "dtype": dtype, "samples": CEILING_SAMPLES });
        self.ceiling("matmul_peak", fields, "tflops")
    }

    /// Device-to-device copy bandwidth in GB/s, counting read and write traffic.
    pub fn copy_bandwidth(&mut self, bytes: usize) -> anyhow::Result<f64> {
        self.ceiling("copy_bandwidth", json!({ "bytes": bytes, "samples": CEILING_SAMPLES }), "gbps")
    }

    fn ceiling(&mut self, op: &str, fields: Value, key: &str) -> anyhow::Result<f64> {
        ceiling_value(op, &self.connection.request(op, fields)?, key)
    }

    /// Times one of our kernels inside the oracle, on case `id`'s tensors, with the launch's
    /// timer: the cross-checks of our timer (DESIGN: they agree within 3%).
    pub fn time_kernel(
        &mut self,
        id: &str,
        launch: &KernelLaunch,
        mode: Mode,
        warmup: usize,
        samples: usize,
        flush_bytes: usize,
    ) -> anyhow::Result<Vec<f64>> {
        let fields = json!({
            "id": id, "cubin_path": utf8(launch.cubin)?, "kernel": launch.kernel, "grid": launch.grid,
            "block": launch.block, "smem": launch.smem, "params_b64": base64(launch.params),
            "pointer_offsets": launch.pointer_offsets, "tensor_maps": tensor_maps_json(launch.tensor_maps),
            "scratch": {
                "counters": launch.scratch.counters, "floats": launch.scratch.floats,
                "counters_offset": launch.scratch_offsets[0], "floats_offset": launch.scratch_offsets[1]
            },
            "output": launch.output.map(utf8).transpose()?,
            "mode": mode.name(), "timer": launch.timer.protocol_name(),
            "warmup": warmup, "samples": samples, "flush_bytes": flush_bytes
        });
        kernel_samples(&self.connection.request("time_kernel", fields)?, samples)
    }

    /// Asks the oracle to exit and waits for it.
    pub fn shutdown(mut self) -> anyhow::Result<()> {
        self.connection.request("shutdown", json!({}))?;
        self.connection.child.wait().context("waiting for the oracle to exit")?;
        Ok(())
    }
}

/// The `o` a peer wrote with [`Oracle::output`], as raw bits in dense `layout` order (the
/// problem's strides when it is dense), after checking its dtype and shape.
pub fn read_output(path: &Path, problem: &Problem, layout: Layout) -> anyhow::Result<Vec<u16>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading the oracle's output {}", path.display()))?;
    parse_output(&bytes, path, problem, layout)
}

/// [`read_output`] of a file's `bytes` (read from `path`, named in errors): any bytes give `o`'s
/// bits, as many as the problem's dense `o` has, or a typed error.
pub(crate) fn parse_output(bytes: &[u8], path: &Path, problem: &Problem, layout: Layout) -> anyhow::Result<Vec<u16>> {
    let file =
        SafeTensors::deserialize(bytes).with_context(|| format!("{} is not a safetensors file", path.display()))?;
    let o = file.tensor("o").map_err(|_| anyhow!("{} has no tensor 'o'", path.display()))?;
    let s = problem.shape;
    let shape = layout.dims(s.b, s.h, s.sq, s.d);
    ensure!(
        o.dtype() == safetensors_dtype(problem.dtype.output()) && o.shape() == shape,
        "{}: o is {} {:?}, expected {} {shape:?}",
        path.display(),
        dtype_name(o.dtype()),
        o.shape(),
        problem.dtype.output()
    );
    Ok(bits(&o))
}

/// The directory holding the package: `python/` in the nearest ancestor of the executable's
/// directory, then of the current directory (a checkout's `target/release/evoattn` finds its
/// own `python/`).
fn find_package_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf));
    let cwd = std::env::current_dir().ok();
    let found = [&exe, &cwd]
        .into_iter()
        .flatten()
        .flat_map(|start| start.ancestors())
        .map(|dir| dir.join(PACKAGE_PARENT))
        .find(|dir| dir.join(PACKAGE).join("__main__.py").is_file());
    found.ok_or_else(|| {
        anyhow!(
            "no {PACKAGE_PARENT}/{PACKAGE} above {} or the current directory; set {PATH_ENV} to the repository's \
             {PACKAGE_PARENT}/ directory",
            exe.as_deref().unwrap_or(Path::new("the executable")).display()
        )
    })
}

/// `dir` in front of any PYTHONPATH the caller has.
fn python_path(dir: &Path) -> anyhow::Result<OsString> {
    let existing = std::env::var_os("PYTHONPATH").unwrap_or_default();
    let paths = std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&existing));
    std::env::join_paths(paths).with_context(|| format!("{} cannot be put on PYTHONPATH", dir.display()))
}

/// One reply of `time`, `output` or `time_kernel`.
#[derive(Deserialize)]
struct PeerReply {
    status: Option<String>,
    reason: Option<String>,
    samples_us: Option<Vec<f64>>,
}

/// What a peer did with a request.
enum Outcome {
    Ran,
    Refused(String),
    Missing(String),
}

impl PeerReply {
    fn outcome(&self) -> anyhow::Result<Outcome> {
        // An empty reason is none: a refusal always says something.
        let reason =
            || self.reason.clone().filter(|r| !r.trim().is_empty()).unwrap_or_else(|| "no reason given".into());
        Ok(match self.status.as_deref().and_then(Status::parse) {
            Some(Status::Ok) => Outcome::Ran,
            Some(Status::Refused) => Outcome::Refused(reason()),
            Some(Status::Missing) => Outcome::Missing(reason()),
            None => bail!("the oracle answered with status {:?}", self.status),
        })
    }

    /// The samples of a reply that ran: exactly the `wanted` number the request asked for (the
    /// protocol's promise), each a time, finite and not negative.
    fn samples(self, op: &str, wanted: usize) -> anyhow::Result<Vec<f64>> {
        let samples = self.samples_us.with_context(|| format!("the oracle's '{op}' reply has no samples"))?;
        ensure!(
            samples.len() == wanted,
            "the oracle's '{op}' reply has {} samples, not the {wanted} asked for",
            samples.len()
        );
        if let Some(bad) = samples.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
            bail!("the oracle's '{op}' reply has a sample of {bad} µs");
        }
        Ok(samples)
    }
}

/// A `time` reply (its fields, [`reply_fields`]) to a request for `wanted` samples.
pub(crate) fn timing(reply: &Value, wanted: usize) -> anyhow::Result<PeerTiming> {
    let reply: PeerReply = decode("time", reply)?;
    Ok(match reply.outcome()? {
        Outcome::Ran => PeerTiming::Samples(reply.samples("time", wanted)?),
        Outcome::Refused(reason) => PeerTiming::Refused(reason),
        Outcome::Missing(reason) => PeerTiming::Missing(reason),
    })
}

/// An `output` reply to a request to write `path`.
pub(crate) fn peer_output(reply: &Value, path: &Path) -> anyhow::Result<PeerOutput> {
    let reply: PeerReply = decode("output", reply)?;
    Ok(match reply.outcome()? {
        Outcome::Ran => PeerOutput::Written(path.to_path_buf()),
        Outcome::Refused(reason) => PeerOutput::Refused(reason),
        Outcome::Missing(reason) => PeerOutput::Missing(reason),
    })
}

/// A `time_kernel` reply to a request for `wanted` samples.
pub(crate) fn kernel_samples(reply: &Value, wanted: usize) -> anyhow::Result<Vec<f64>> {
    decode::<PeerReply>("time_kernel", reply)?.samples("time_kernel", wanted)
}

/// A ceiling's figure (`key` of an `op` reply): finite and positive.
pub(crate) fn ceiling_value(op: &str, reply: &Value, key: &str) -> anyhow::Result<f64> {
    reply
        .get(key)
        .and_then(Value::as_f64)
        .filter(|x| x.is_finite() && *x > 0.0)
        .with_context(|| format!("the oracle's '{op}' reply has no positive '{key}'"))
}

/// Why a reply line gives no fields.
#[derive(Debug, PartialEq)]
pub(crate) enum ReplyError {
    /// `"ok": false`: the oracle refused the request (its message) and serves on.
    Refused(String),
    /// Not a reply of the protocol (why): the oracle is not to be asked again.
    Broken(String),
}

/// The fields of the oracle's reply `line` to `op` (without `ok`), or why there are none.
pub(crate) fn reply_fields(op: &str, line: &str) -> Result<Value, ReplyError> {
    let mut reply: serde_json::Map<String, Value> = serde_json::from_str(line)
        .map_err(|_| ReplyError::Broken(format!("it answered '{op}' with a line that is not JSON: {line}")))?;
    match reply.remove("ok") {
        Some(Value::Bool(true)) => Ok(Value::Object(reply)),
        Some(Value::Bool(false)) => {
            let error = reply.get("error").and_then(Value::as_str).filter(|e| !e.trim().is_empty());
            Err(ReplyError::Refused(error.unwrap_or("no message").to_string()))
        }
        _ => Err(ReplyError::Broken(format!("its reply to '{op}' has no \"ok\" field: {line}"))),
    }
}

/// A path as the protocol's JSON carries it.
fn utf8(path: &Path) -> anyhow::Result<&str> {
    path.to_str().with_context(|| format!("the oracle takes UTF-8 paths, not {}", path.display()))
}

pub(crate) fn decode<T: DeserializeOwned>(op: &str, reply: &Value) -> anyhow::Result<T> {
    T::deserialize(reply).with_context(|| format!("the oracle's '{op}' reply does not fit the protocol: {reply}"))
}

/// Standard base64 with padding (RFC 4648), for the kernel's parameter bytes.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, &b)| acc | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() { char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]) } else { '=' });
        }
    }
    out
}

/// The child process and its pipes: stdout lines arrive through a channel (so a request can time
/// out), stderr lines go to a short tail for error messages.
struct Connection {
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<String>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    stderr_done: Receiver<()>,
    timeout: Duration,
    /// Why the oracle can no longer answer (it timed out, exited or broke the protocol).
    broken: Option<String>,
}

impl Connection {
    fn spawn(options: &OracleOptions, package_dir: &Path) -> anyhow::Result<Connection> {
        let mut command = Command::new(&options.python);
        command.arg("-m").arg(PACKAGE).env("PYTHONPATH", python_path(package_dir)?);
        // The options decide, not an EVOATTN_ORACLE_FAKE the child would inherit.
        if options.fake {
            command.arg("--fake");
        } else {
            command.env_remove(FAKE_ENV);
        }
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let python = Path::new(&options.python).display().to_string();
        let mut child = command.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                anyhow!("no Python interpreter '{python}': install Python 3 with PyTorch, or set {PYTHON_ENV} to one")
            }
            _ => anyhow!("running '{python}': {e}"),
        })?;
        let (stdin, stdout, stderr) = match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => (i, o, e),
            _ => bail!("the oracle's pipes were not set up"),
        };

        let (reply_tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if reply_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL)));
        let (done_tx, stderr_done) = mpsc::channel();
        let sink = Arc::clone(&tail);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut tail = sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if tail.len() == STDERR_TAIL {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
            let _ = done_tx.send(());
        });
        Ok(Connection { child, stdin, replies, stderr: tail, stderr_done, timeout: options.timeout, broken: None })
    }

    /// Sends one request and waits for its reply: the reply's fields (without `ok`), or an error
    /// carrying the oracle's message, or why it stopped answering.
    fn request(&mut self, op: &str, mut fields: Value) -> anyhow::Result<Value> {
        if let Some(why) = &self.broken {
            bail!("the oracle cannot answer '{op}': {why}");
        }
        fields["op"] = op.into();
        let line = format!("{fields}\n");
        if self.stdin.write_all(line.as_bytes()).and_then(|()| self.stdin.flush()).is_err() {
            // The child has closed its end: it is exiting; its reason comes below.
            return Err(self.died(op));
        }
        let line = match self.replies.recv_timeout(self.timeout) {
            Ok(line) => line,
            Err(RecvTimeoutError::Disconnected) => return Err(self.died(op)),
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let why = format!(
                    "it did not answer '{op}' within {:.0} s and was stopped (set {TIMEOUT_ENV} to wait longer)",
                    self.timeout.as_secs_f64()
                );
                return Err(self.break_with(why));
            }
        };
        match reply_fields(op, &line) {
            Ok(fields) => Ok(fields),
            Err(ReplyError::Refused(error)) => bail!("the oracle refused '{op}': {error}"),
            Err(ReplyError::Broken(why)) => Err(self.break_with(why)),
        }
    }

    /// The child's exit status, once it has exited; killed if it does not within the grace.
    fn exit_status(&mut self) -> String {
        let deadline = Instant::now() + EXIT_GRACE;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status.to_string(),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(EXIT_POLL),
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return "killed: it closed its output but did not exit".into();
                }
                Err(e) => return format!("status unknown: {e}"),
            }
        }
    }

    fn break_with(&mut self, why: String) -> anyhow::Error {
        let error = anyhow!("the oracle {why}");
        self.broken = Some(why);
        error
    }

    /// The child exited (or closed stdout): its status and the last thing it said on stderr.
    fn died(&mut self, op: &str) -> anyhow::Error {
        let status = self.exit_status();
        let _ = self.stderr_done.recv_timeout(EXIT_GRACE);
        let tail = self.stderr.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let last = tail.iter().rev().find(|line| !line.trim().is_empty()).map_or("it said nothing", |l| l.trim());
        let why = format!("exited during '{op}' ({status}): {last}");
        drop(tail);
        self.break_with(why)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Already exited after `shutdown` or a failure: kill fails harmlessly and wait reaps.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tensor maps of a launch as the oracle encodes them: `cuTensorMapEncodeTiled`'s arguments
/// apart from the address, its enums as the driver's numbers (one choice, made in
/// `TensorMapGeometry::encoding`).
fn tensor_maps_json(maps: &[(TensorName, TensorMapGeometry)]) -> Value {
    let maps: Vec<Value> = maps
        .iter()
        .map(|(tensor, g)| {
            let e = g.encoding();
            json!({
                "tensor": tensor.name(), "data_type": e.data_type as u32, "dims": g.dims,
                "strides_bytes": g.strides_bytes, "box_dims": g.box_dims, "element_strides": e.element_strides,
                "interleave": e.interleave as u32, "swizzle": e.swizzle as u32,
                "l2_promotion": e.l2_promotion as u32, "oob_fill": e.oob_fill as u32
            })
        })
        .collect();
    Value::Array(maps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::inputs::{Distribution, Draw};
    use evoattn::reference::{attention_f64, compare, dense_o, tolerance};
    use evoattn::{Causal, Dtype, Shape};

    const TEST_TIMEOUT: Duration = Duration::from_secs(60);
    const WARMUP: usize = 2;
    const SAMPLES: usize = 9;
    const FLUSH: usize = 1 << 20;

    /// The fake oracle of this checkout, found as `evoattn` finds it (also on the GPU machine,
    /// where the prebuilt test binary runs from another directory than it was built in).
    fn fake_options() -> OracleOptions {
        OracleOptions { python: DEFAULT_PYTHON.into(), package_dir: None, fake: true, timeout: TEST_TIMEOUT }
    }

    fn start_fake() -> Oracle {
        Oracle::start_with(&fake_options()).expect("the fake oracle starts (python3 on PATH)")
    }

    /// Has the oracle draw random inputs of `problem` in `layout` under `id`.
    fn draw(oracle: &mut Oracle, id: &str, problem: &Problem, layout: Layout) -> Draw {
        let draw = Draw::new(Distribution::Normal, 1);
        oracle.draw(id, problem, layout, draw).expect("draw");
        draw
    }

    fn gqa(causal: Causal, layout: Layout) -> Problem {
        Problem::dense(Shape { b: 2, h: 4, hkv: 2, sq: 16, sk: 48, d: 64 }, Dtype::Bf16, layout).with_causal(causal)
    }

    /// Options whose "package" is a stand-in script in `dir`, to make the oracle misbehave.
    fn stand_in(dir: &Path, main_py: &str) -> OracleOptions {
        let package = dir.join(PACKAGE);
        std::fs::create_dir_all(&package).unwrap();
        std::fs::write(package.join("__main__.py"), main_py).unwrap();
        OracleOptions { package_dir: Some(dir.to_path_buf()), fake: false, ..fake_options() }
    }

    /// A `hello` reply line for stand-ins, speaking `protocol`.
    fn hello_line(protocol: u32) -> String {
        let peers = PEERS.iter().map(|p| (p.to_string(), PEER_AVAILABLE.to_string())).collect();
        let hello = Hello {
            protocol,
            fake: true,
            python: "3".into(),
            torch: None,
            cuda: None,
            cudnn: None,
            driver: None,
            fa4: None,
            cudnn_frontend: None,
            gpu: "stand-in".into(),
            compute_capability: "9.0".into(),
            l2_bytes: 1,
            sm_count: 1,
            peers,
        };
        let mut value = serde_json::to_value(hello).unwrap();
        value["ok"] = true.into();
        value.to_string()
    }

    fn one_line(err: &anyhow::Error) -> String {
        let text = format!("{err:#}");
        assert!(!text.contains('\n'), "not one line: {text}");
        text
    }

    #[test]
    fn hello_lists_every_peer_and_the_machine() {
        let oracle = start_fake();
        let hello = oracle.hello();
        assert!(hello.fake);
        assert_eq!(hello.peers.keys().map(String::as_str).collect::<Vec<_>>(), {
            let mut peers = PEERS.to_vec();
            peers.sort();
            peers
        });
        assert!(hello.peer_available("sdpa-cudnn") && hello.peer_available("sdpa-auto"));
        assert!(!hello.peer_available("fa4") && hello.peers["fa4"].starts_with("missing: "));
        // The fake runs ours through the Python package like the SDPA peers.
        assert!(hello.peer_available("evoattn-torch"));
        assert!(hello.l2_bytes > 0 && hello.sm_count > 0);
        assert_eq!(oracle.hello_json()["gpu"], hello.gpu.as_str());
        assert!(oracle.hello_json().get("ok").is_none());
    }

    #[test]
    fn load_and_time_return_the_samples_asked_for() {
        let mut oracle = start_fake();
        let problem = gqa(Causal::TopLeft, Layout::Bhsd);
        draw(&mut oracle, "a", &problem, Layout::Bhsd);
        for mode in [Mode::Eager, Mode::Graph] {
            let first = oracle.time("a", "sdpa-cudnn", mode, WARMUP, SAMPLES, FLUSH).unwrap();
            let PeerTiming::Samples(samples) = &first else { panic!("{first:?}") };
            assert_eq!(samples.len(), SAMPLES);
            assert!(samples.iter().all(|&s| s > 0.0));
            assert_eq!(oracle.time("a", "sdpa-cudnn", mode, WARMUP, SAMPLES, FLUSH).unwrap(), first);
        }
        let PeerTiming::Samples(math) = oracle.time("a", "sdpa-math", Mode::Eager, 0, 3, 0).unwrap() else {
            panic!("sdpa-math should run in the fake oracle")
        };
        assert_eq!(math.len(), 3);
        oracle.unload("a").unwrap();
        assert!(format!("{:#}", oracle.time("a", "sdpa-math", Mode::Eager, 0, 3, 0).unwrap_err()).contains("no case"));
    }

    #[test]
    fn refused_and_missing_come_through_typed() {
        let dir = tempfile::tempdir().unwrap();
        let mut oracle = start_fake();
        let problem = gqa(Causal::BottomRight, Layout::Bshd);
        draw(&mut oracle, "br", &problem, Layout::Bshd);
        let flash = oracle.time("br", "sdpa-flash", Mode::Eager, WARMUP, SAMPLES, FLUSH).unwrap();
        assert!(matches!(&flash, PeerTiming::Refused(reason) if reason.contains("bottom-right")), "{flash:?}");
        let fa4 = oracle.time("br", "fa4", Mode::Graph, WARMUP, SAMPLES, FLUSH).unwrap();
        assert!(matches!(&fa4, PeerTiming::Missing(reason) if !reason.is_empty()), "{fa4:?}");
        let out = dir.path().join("o.safetensors");
        assert!(matches!(oracle.output("br", "fa4", &out).unwrap(), PeerOutput::Missing(_)));
        assert!(matches!(oracle.output("br", "sdpa-flash", &out).unwrap(), PeerOutput::Refused(_)));
        assert!(!out.exists());
    }

    #[test]
    fn output_writes_o_with_q_dtype_layout_and_shape() {
        let dir = tempfile::tempdir().unwrap();
        let mut oracle = start_fake();
        for layout in [Layout::Bhsd, Layout::Bshd] {
            let problem = gqa(Causal::None, layout);
            let id = layout.name();
            draw(&mut oracle, id, &problem, layout);
            let path = dir.path().join(format!("o-{id}.safetensors"));
            assert_eq!(oracle.output(id, "sdpa-math", &path).unwrap(), PeerOutput::Written(path.clone()));
            // The fake writes zeros as o, in q's dtype and shape.
            assert_eq!(read_output(&path, &problem, layout).unwrap(), vec![0; problem.extent(TensorName::Q)]);
            let other = Problem::dense(Shape { sq: 17, ..problem.shape }, problem.dtype, layout);
            assert!(format!("{:#}", read_output(&path, &other, layout).unwrap_err()).contains("expected bf16"));
        }
    }

    #[test]
    fn e4m3_cases_go_to_the_fp8_peers_with_their_descales_and_come_back_in_bf16() {
        use crate::lab::inputs::DescaleGrain;
        let dir = tempfile::tempdir().unwrap();
        let mut oracle = start_fake();
        let problem = Problem::dense(gqa(Causal::None, Layout::Bshd).shape, Dtype::E4m3, Layout::Bshd);
        let per_tensor = Draw::new(Distribution::Normal, 1).with_descales(DescaleGrain::PerTensor);
        oracle.draw("t", &problem, Layout::Bshd, per_tensor).unwrap();
        let path = dir.path().join("o.safetensors");
        assert_eq!(oracle.output("t", "cudnn-fp8", &path).unwrap(), PeerOutput::Written(path.clone()));
        assert_eq!(read_output(&path, &problem, Layout::Bshd).unwrap().len(), problem.extent(TensorName::O));
        let sdpa = oracle.time("t", "sdpa-cudnn", Mode::Eager, WARMUP, SAMPLES, FLUSH).unwrap();
        assert!(matches!(&sdpa, PeerTiming::Refused(r) if r.contains("E4M3")), "{sdpa:?}");
        // The lab's default draws (one descale per group) are more than cuDNN takes.
        oracle.draw("g", &problem, Layout::Bshd, Draw::new(Distribution::Normal, 1)).unwrap();
        let grouped = oracle.time("g", "cudnn-fp8", Mode::Eager, WARMUP, SAMPLES, FLUSH).unwrap();
        assert!(matches!(&grouped, PeerTiming::Refused(r) if r.contains("one descale per tensor")), "{grouped:?}");
    }

    #[test]
    fn bad_requests_are_errors_and_the_oracle_answers_on() {
        let mut oracle = start_fake();
        let problem = gqa(Causal::None, Layout::Bhsd);
        let any = Draw::new(Distribution::Normal, 0);
        draw(&mut oracle, "a", &problem, Layout::Bhsd);
        let mut uneven = problem.clone();
        uneven.shape.hkv = 3;
        uneven.k_strides = Layout::Bhsd.strides(3, uneven.shape.sk, uneven.shape.d);
        uneven.v_strides = uneven.k_strides;
        let errors = [
            oracle.time("nope", "sdpa-math", Mode::Eager, 0, 1, 0).unwrap_err(),
            oracle.time("a", "sdpa-nope", Mode::Eager, 0, 1, 0).unwrap_err(),
            oracle.time("a", "sdpa-math", Mode::Eager, 0, 0, 0).unwrap_err(),
            oracle.draw("a", &problem, Layout::Bhsd, any).unwrap_err(),
            oracle.draw("b", &uneven, Layout::Bhsd, any).unwrap_err(),
        ];
        for (err, needle) in errors.iter().zip(["no case", "sdpa-nope", "'samples'", "already loaded", "do not divide"])
        {
            let text = one_line(err);
            assert!(text.starts_with("the oracle refused") && text.contains(needle), "{text}");
        }
        assert!(matches!(oracle.time("a", "sdpa-math", Mode::Eager, 0, 1, 0).unwrap(), PeerTiming::Samples(_)));
    }

    #[test]
    fn ceilings_are_plausible() {
        let mut oracle = start_fake();
        let tflops = oracle.matmul_peak(8192, Dtype::Bf16.name()).unwrap();
        assert!(one_line(&oracle.matmul_peak(64, "f32").unwrap_err()).contains("'dtype'"));
        assert!((100.0..2000.0).contains(&tflops), "{tflops}");
        let gbps = oracle.copy_bandwidth(1 << 30).unwrap();
        assert!((1000.0..10000.0).contains(&gbps), "{gbps}");
    }

    #[test]
    fn time_kernel_sends_a_launch_the_oracle_accepts() {
        let dir = tempfile::tempdir().unwrap();
        let mut oracle = start_fake();
        let problem = gqa(Causal::None, Layout::Bhsd);
        draw(&mut oracle, "a", &problem, Layout::Bhsd);
        let cubin = dir.path().join("k.cubin");
        std::fs::write(&cubin, b"\x7fELF").unwrap();
        let out = dir.path().join("o.safetensors");
        let params = [0u8; 48];
        let mut launch = KernelLaunch {
            cubin: &cubin,
            kernel: "evoattn_mma",
            grid: [4, 2, 2],
            block: [128, 1, 1],
            smem: 96 * 1024,
            params: &params,
            pointer_offsets: PointerOffsets { q: 0, k: 8, v: 16, o: 24 },
            tensor_maps: &[],
            scratch: ScratchNeed { counters: 2, floats: 0 },
            scratch_offsets: [32, 40],
            output: Some(&out),
            timer: Timer::Events,
        };
        let samples = oracle.time_kernel("a", &launch, Mode::Graph, WARMUP, SAMPLES, FLUSH).unwrap();
        assert_eq!(samples.len(), SAMPLES);
        assert!(read_output(&out, &problem, Layout::Bhsd).is_ok());
        // Every timer of the cross-check speaks the same request.
        for timer in [Timer::DoBench, Timer::Profiler] {
            let timed = KernelLaunch { timer, ..launch };
            let samples = oracle.time_kernel("a", &timed, Mode::Eager, WARMUP, SAMPLES, FLUSH).unwrap();
            assert_eq!(samples.len(), SAMPLES, "{timer:?}");
        }
        // A TMA kernel's tensor maps travel with it, for the oracle to encode over its tensors.
        let maps = tensor_maps(&problem);
        let tma = KernelLaunch { tensor_maps: &maps, ..launch };
        assert_eq!(oracle.time_kernel("a", &tma, Mode::Eager, WARMUP, SAMPLES, FLUSH).unwrap().len(), SAMPLES);
        launch.pointer_offsets.o = 44;
        let err = oracle.time_kernel("a", &launch, Mode::Eager, WARMUP, SAMPLES, FLUSH).unwrap_err();
        assert!(one_line(&err).contains("pointer offset of o"), "{err:#}");
    }

    /// K's and V's maps of the `wgmma` kernel for `problem`, as our launch encodes them.
    fn tensor_maps(problem: &Problem) -> Vec<(TensorName, TensorMapGeometry)> {
        [TensorName::K, TensorName::V]
            .map(|t| (t, TensorMapGeometry::new(problem, t, 128, evoattn::Impl::Wgmma).unwrap()))
            .to_vec()
    }

    #[test]
    fn tensor_maps_go_to_the_oracle_as_the_drivers_arguments() {
        let problem = Problem::dense(Shape::new(1, 2, 130, 128), Dtype::Bf16, Layout::Bhsd);
        let json = tensor_maps_json(&tensor_maps(&problem));
        // cuTensorMapEncodeTiled's numbers: BFLOAT16 = 9, SWIZZLE_128B = 3 (a 128-byte row of
        // 64 bf16), L2_256B = 3, no interleave, zero fill.
        assert_eq!(
            json[1],
            json!({
                "tensor": "v", "data_type": 9, "dims": [128, 130, 2, 1], "strides_bytes": [256, 33280, 66560],
                "box_dims": [64, 128, 1, 1], "element_strides": [1, 1, 1, 1], "interleave": 0, "swizzle": 3,
                "l2_promotion": 3, "oob_fill": 0
            })
        );
    }

    #[test]
    fn shutdown_ends_the_process_and_drop_kills_it() {
        let oracle = start_fake();
        let pid = oracle.connection.child.id();
        oracle.shutdown().unwrap();
        assert!(!Path::new(&format!("/proc/{pid}")).exists());

        let oracle = start_fake();
        let pid = oracle.connection.child.id();
        assert!(Path::new(&format!("/proc/{pid}")).exists());
        drop(oracle);
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "the oracle outlived its client");
    }

    /// Where PyTorch and a GPU are (the GPU machine), the real oracle runs every peer on a GQA
    /// bottom-right case and agrees with the float64 reference; elsewhere (CI) it cannot start,
    /// and says why in one line.
    #[test]
    fn the_real_oracle_agrees_with_the_reference_or_says_why_it_cannot_start() {
        let mut oracle = match Oracle::start_with(&OracleOptions { fake: false, ..fake_options() }) {
            Ok(oracle) => oracle,
            Err(err) => {
                let text = one_line(&err);
                assert!(text.contains("PyTorch"), "{text}");
                println!("skipped: {text}");
                return;
            }
        };
        assert!(!oracle.hello().fake && oracle.hello().torch.is_some());
        let dir = tempfile::tempdir().unwrap();
        let problem = gqa(Causal::BottomRight, Layout::Bshd);
        let inputs = draw(&mut oracle, "real", &problem, Layout::Bshd).host(&problem);
        let want = attention_f64(&problem, &inputs.q, &inputs.k, &inputs.v).o;
        for peer in PEERS {
            let path = dir.path().join(format!("{peer}.safetensors"));
            match oracle.output("real", peer, &path).unwrap() {
                PeerOutput::Written(path) => {
                    let got = dense_o(&problem, &read_output(&path, &problem, Layout::Bshd).unwrap());
                    let comparison = compare(&got, &want);
                    assert!(comparison.passes(&tolerance(problem.dtype)), "{peer}: {comparison:?}");
                }
                other => println!("{peer}: {other:?}"),
            }
            for mode in [Mode::Eager, Mode::Graph] {
                match oracle.time("real", peer, mode, WARMUP, SAMPLES, oracle.hello().l2_bytes * 2).unwrap() {
                    PeerTiming::Samples(samples) => {
                        assert_eq!(samples.len(), SAMPLES);
                        println!("{peer} {}: {:.2} us", mode.name(), samples[SAMPLES / 2]);
                    }
                    other => println!("{peer} {}: {other:?}", mode.name()),
                }
            }
        }
    }

    #[test]
    fn a_missing_interpreter_is_a_one_line_error() {
        let vars = |key: &str| (key == PYTHON_ENV).then(|| OsString::from("/nonexistent/python3"));
        let options = OracleOptions::from_vars(vars).unwrap();
        let err = Oracle::start_with(&options).err().expect("no such interpreter");
        let text = one_line(&err);
        assert!(text.contains("/nonexistent/python3") && text.contains(PYTHON_ENV), "{text}");
    }

    #[test]
    fn a_directory_without_the_package_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let options = OracleOptions { package_dir: Some(dir.path().to_path_buf()), ..fake_options() };
        let text = one_line(&Oracle::start_with(&options).err().expect("no package there"));
        assert!(text.contains(PATH_ENV), "{text}");
    }

    #[test]
    fn a_crash_at_start_reports_its_last_words() {
        let dir = tempfile::tempdir().unwrap();
        let options =
            stand_in(dir.path(), "import sys\nsys.stdin.readline()\nraise RuntimeError('the GPU is on fire')\n");
        let text = one_line(&Oracle::start_with(&options).err().expect("the stand-in crashes"));
        assert!(text.contains("exited during 'hello' (exit status: 1)"), "{text}");
        assert!(text.ends_with("RuntimeError: the GPU is on fire"), "{text}");
    }

    #[test]
    fn a_request_that_hangs_times_out_and_stops_the_oracle() {
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "import sys, time\nsys.stdin.readline()\nprint({:?}, flush=True)\nsys.stdin.readline()\ntime.sleep(600)\n",
            hello_line(PROTOCOL_VERSION)
        );
        let mut oracle = Oracle::start_with(&stand_in(dir.path(), &script)).unwrap();
        oracle.set_timeout(Duration::from_millis(500));
        let pid = oracle.connection.child.id();
        let text = one_line(&oracle.unload("a").unwrap_err());
        assert!(text.contains("did not answer 'unload'") && text.contains(TIMEOUT_ENV), "{text}");
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        let text = one_line(&oracle.unload("a").unwrap_err());
        assert!(text.contains("cannot answer 'unload'"), "{text}");
    }

    #[test]
    fn another_protocol_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let script = format!("import sys\nsys.stdin.readline()\nprint({:?}, flush=True)\n", hello_line(99));
        let text = one_line(&Oracle::start_with(&stand_in(dir.path(), &script)).err().expect("wrong protocol"));
        assert!(text.contains("speaks protocol 99"), "{text}");
    }

    #[test]
    fn options_come_from_the_environment() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| OsString::from(v))
        };
        let defaults = OracleOptions::from_vars(vars(&[])).unwrap();
        assert_eq!(
            defaults,
            OracleOptions { python: "python3".into(), package_dir: None, fake: false, timeout: DEFAULT_TIMEOUT }
        );
        let set = OracleOptions::from_vars(vars(&[
            (PYTHON_ENV, "/opt/py/bin/python"),
            (PATH_ENV, "/repo/python"),
            (FAKE_ENV, "1"),
            (TIMEOUT_ENV, "2.5"),
        ]))
        .unwrap();
        assert_eq!(set.python, "/opt/py/bin/python");
        assert_eq!(set.package_dir.as_deref(), Some(Path::new("/repo/python")));
        assert!(set.fake);
        assert_eq!(set.timeout, Duration::from_millis(2500));
        assert!(!OracleOptions::from_vars(vars(&[(FAKE_ENV, "0")])).unwrap().fake);
        assert!(!OracleOptions::from_vars(vars(&[(FAKE_ENV, "")])).unwrap().fake);
        for bad in ["soon", "0", "-1", "1e300", "NaN"] {
            let pairs: &'static [(&str, &str)] = Box::leak(Box::new([(TIMEOUT_ENV, bad)]));
            assert!(one_line(&OracleOptions::from_vars(vars(pairs)).unwrap_err()).contains(TIMEOUT_ENV));
        }
    }

    #[test]
    fn draw_takes_only_dense_tensors() {
        let mut oracle = start_fake();
        let mut problem = gqa(Causal::None, Layout::Bhsd);
        let any = Draw::new(Distribution::Normal, 0);
        let err = oracle.draw("x", &problem, Layout::Bshd, any).unwrap_err();
        assert!(format!("{err:#}").contains("not those of dense bshd"), "{err:#}");
        problem.k_strides.batch += 8;
        assert!(format!("{:#}", oracle.draw("x", &problem, Layout::Bhsd, any).unwrap_err()).contains("k's strides"));
    }

    #[test]
    fn base64_matches_rfc_4648() {
        for (input, encoded) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("foobar", "Zm9vYmFy")]
        {
            assert_eq!(base64(input.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }
}
