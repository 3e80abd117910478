//! The benchmark record: what `bench --json` writes and `gate --samples` re-reads. Raw samples
//! for ours and every peer, so any statistic can be recomputed offline, plus the environment
//! they were taken in.

use serde::{Deserialize, Serialize};

/// Version tag of the record format; bump on incompatible change.
pub const SCHEMA: &str = "evoattn.bench/1";

/// How launches are timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Back-to-back launches as a caller sees them (launch overhead included).
    Eager,
    /// CUDA-graph replays: kernel time without launch overhead.
    Graph,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Eager => "eager",
            Mode::Graph => "graph",
        }
    }
}

/// Where and how the samples were taken.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub gpu: String,
    pub compute_capability: String,
    pub arch: String,
    /// The GPU's SM count: with the arch, what the planner's default for a case depends on (the
    /// short kernel names of tables); `None` in records written before it was kept.
    #[serde(default)]
    pub sm_count: Option<u32>,
    pub driver: String,
    pub nvrtc: String,
    /// SM clock (MHz) read before and after the run, when `nvidia-smi` answers.
    pub sm_clock_mhz: Vec<u32>,
    pub evoattn_version: String,
    pub git_commit: Option<String>,
    pub date_utc: String,
    pub mode: Option<Mode>,
    pub samples: usize,
    /// Samples per interleaved block (the bootstrap resamples whole blocks); 0 when unknown.
    #[serde(default)]
    pub block: usize,
    pub warmup: usize,
    pub flush_bytes: usize,
    pub seed: u64,
    /// The oracle's own report (PyTorch, CUDA, cuDNN, FA4 versions), when it ran.
    pub oracle: Option<serde_json::Value>,
    /// Measured ceilings of this GPU, when known: dense bf16 matmul TFLOP/s and copy GB/s.
    pub matmul_tflops: Option<f64>,
    pub copy_gbps: Option<f64>,
}

/// The problem of one result row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseRecord {
    pub b: usize,
    pub h: usize,
    pub hkv: usize,
    pub sq: usize,
    pub sk: usize,
    pub d: usize,
    pub dtype: String,
    pub causal: String,
    pub layout: String,
    pub flops: f64,
}

/// One implementation's measurement of one case (ours or a peer).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// `evoattn` kernel name, or the peer's name (`sdpa-cudnn`, `fa4`, ...).
    pub name: String,
    pub status: Status,
    pub reason: Option<String>,
    /// Raw per-launch times in microseconds, in the order taken.
    pub samples_us: Vec<f64>,
    /// The SM clock (MHz) each sample's block ran at, one per sample, read by NVML while the
    /// block ran (`lab::clock`); empty when it was not read for every block.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sm_clock_mhz: Vec<f64>,
    /// Output error against the oracle of the same inputs (float64 or the reference kernel).
    pub max_abs: Option<f64>,
    pub rel_l2: Option<f64>,
    /// Whether the output passed the correctness tolerance (ours: `check`'s rule).
    pub correct: Option<bool>,
}

impl Measurement {
    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok && !self.samples_us.is_empty()
    }
}

/// The peer that is our own kernel measured again (A/A).
pub const SELF_PEER: &str = "self";
/// Who times our own kernel in the oracle, launched there from its CUBIN: the cross-checks of
/// our timer, each a control peer. Each must agree with ours within [`TIMER_TOLERANCE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    /// PyTorch's CUDA events around each call, the oracle's method for every peer.
    Events,
    /// Triton's `triton.testing.do_bench` (its warm-up, L2 clear and event pairs).
    DoBench,
    /// PyTorch's profiler: the kernel's own duration as CUPTI records it.
    Profiler,
}

impl Timer {
    pub const ALL: [Timer; 3] = [Timer::Events, Timer::DoBench, Timer::Profiler];

    /// The control peer of our kernel timed this way.
    pub fn peer(self) -> &'static str {
        match self {
            Timer::Events => TORCH_TIMED_PEER,
            Timer::DoBench => "self-do-bench",
            Timer::Profiler => "self-torch-profiler",
        }
    }

    /// The timer's name in the oracle's protocol (`time_kernel`'s `timer`).
    pub fn protocol_name(self) -> &'static str {
        match self {
            Timer::Events => "events",
            Timer::DoBench => "do_bench",
            Timer::Profiler => "profiler",
        }
    }

    pub fn of_peer(name: &str) -> Option<Timer> {
        Timer::ALL.into_iter().find(|t| t.peer() == name)
    }

    /// Whether it times CUDA-graph replays too: do_bench and the profiler time eager calls.
    pub fn times_graphs(self) -> bool {
        self == Timer::Events
    }
}

/// The peer that is our own kernel launched and timed by the oracle with PyTorch's events.
pub const TORCH_TIMED_PEER: &str = "self-torch-events";

/// How far another harness's median of our kernel may be from our timer's (DESIGN: within 3%,
/// and [`TIMER_FLOOR_US`] for the shortest kernels): a case past both is flagged by `bench` and
/// not judged by `gate`.
pub const TIMER_TOLERANCE: f64 = 0.03;
/// The disagreement always allowed, in µs: two processes' event timers on the same 9-12 µs
/// kernel differed by up to 0.49 µs (3-5%) on an H200 (perf log, session 34, the seed preset).
pub const TIMER_FLOOR_US: f64 = 0.5;

/// The peer that is our own kernel called through the Python package (`evoattn.attention` on
/// PyTorch tensors, timed by the oracle): what a PyTorch caller sees, beside the Rust path.
pub const PYTHON_PEER: &str = "evoattn-torch";

/// True for the peers that are our own kernel measured another way: they are controls, never
/// "the best peer" a speedup is claimed against.
pub fn is_control(name: &str) -> bool {
    name == SELF_PEER || name == PYTHON_PEER || Timer::of_peer(name).is_some()
}

/// Whether an implementation ran a case; written in records as `ok`, `refused` or `missing`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// It ran (samples may still be empty when it then failed).
    Ok,
    /// The peer does not run this case (its own limits: head dim, mask, dtype).
    Refused,
    /// The peer is not installed, or the oracle could not start.
    Missing,
}

impl Status {
    const ALL: [Status; 3] = [Status::Ok, Status::Refused, Status::Missing];

    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Refused => "refused",
            Status::Missing => "missing",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Status::ALL.into_iter().find(|x| x.name() == s)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One case: ours and every peer asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    pub case: CaseRecord,
    pub ours: Measurement,
    pub peers: Vec<Measurement>,
}

/// A whole `bench` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchRecord {
    pub schema: String,
    pub env: Environment,
    pub results: Vec<ResultRecord>,
}

impl BenchRecord {
    pub fn read(path: &std::path::Path) -> anyhow::Result<Self> {
        use anyhow::Context;
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text, path)
    }

    /// The record in `text` (read from `path`, named in errors): any text gives a record of
    /// this schema or a typed error.
    pub fn parse(text: &str, path: &std::path::Path) -> anyhow::Result<Self> {
        use anyhow::Context;
        let record: BenchRecord =
            serde_json::from_str(text).with_context(|| format!("{} is not a bench record", path.display()))?;
        if record.schema != SCHEMA {
            anyhow::bail!("{}: schema '{}', expected '{SCHEMA}'", path.display(), record.schema);
        }
        Ok(record)
    }

    pub fn write(&self, path: &std::path::Path) -> anyhow::Result<()> {
        use anyhow::Context;
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    }
}

/// The commit the binary was built from (`build.rs`; `-dirty` when the tree had changes).
pub fn git_commit() -> Option<String> {
    option_env!("EVOATTN_GIT_COMMIT").map(str::to_string)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format_utc(secs)
}

fn format_utc(secs: u64) -> String {
    const DAY: u64 = 86_400;
    let (days, rem) = ((secs / DAY) as i64, secs % DAY);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An `ok` measurement with no error figures. Shared with the gate, history and report tests.
    pub(crate) fn ok_measurement(name: &str, samples_us: &[f64], correct: Option<bool>) -> Measurement {
        Measurement {
            name: name.into(),
            status: Status::Ok,
            reason: None,
            samples_us: samples_us.to_vec(),
            sm_clock_mhz: Vec::new(),
            max_abs: None,
            rel_l2: None,
            correct,
        }
    }

    /// B=1, H=8, Sq=Sk=512, D=64 f16, no mask: the case both gates' tests judge.
    pub(crate) fn gate_case() -> CaseRecord {
        CaseRecord {
            b: 1,
            h: 8,
            hkv: 8,
            sq: 512,
            sk: 512,
            d: 64,
            dtype: "f16".into(),
            causal: "none".into(),
            layout: "bhsd".into(),
            flops: 4.0 * 8.0 * 512.0 * 512.0 * 64.0,
        }
    }

    #[test]
    fn utc_formatting_matches_known_instants() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 12:34:56 UTC, a leap day
        assert_eq!(format_utc(951_827_696), "2000-02-29T12:34:56Z");
        // 2026-11-22 00:00:00 UTC
        assert_eq!(format_utc(1_795_305_600), "2026-11-22T00:00:00Z");
    }
}
