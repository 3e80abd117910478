//! The run history: every measurement `bench` and `gate` take (and the tuner's, through
//! [`History::insert_tune`]), one SQLite row per implementation and case with its raw samples,
//! so that a later run can be gated against the best ever recorded on the same GPU
//! (`gate --against-history`, which needs the samples for its bootstrap) and the report can
//! draw a case's median across commits.

use crate::out::errln;
use crate::stores::record::{BenchRecord, CaseRecord, Environment, Measurement, Mode};
use crate::tune::store::Machine;
use anyhow::{Context, Result};
use evoattn::Shape;
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use std::path::{Path, PathBuf};

/// File name of the history inside the kernel cache dir, beside the tuner's store.
pub const FILE_NAME: &str = "history.sqlite";

/// The default history: `history.sqlite` in the kernel cache dir (`EVOATTN_CACHE_DIR`).
pub fn default_path() -> PathBuf {
    crate::stores::db::default_path(FILE_NAME)
}

/// The command that took a measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Bench,
    Gate,
    Tune,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Bench => "bench",
            Source::Gate => "gate",
            Source::Tune => "tune",
        }
    }
}

/// Our kernel's row of a case; peers are stored too (`ROLE_PEER`) so that the report can tell
/// a slower kernel from a slower machine, but only ours is ever a baseline.
pub const ROLE_OURS: &str = "ours";
pub const ROLE_PEER: &str = "peer";

/// Kernel names are `evoattn_<impl>_<dtype>_d<hd>_<levers>` (`KernelSpec::name`).
const KERNEL_PREFIX: &str = "evoattn_";

/// The implementation family of a measured name: `mma` for `evoattn_mma_bf16_d128_...`,
/// `hybrid-qk` for `evoattn_hybrid_qk_...` (a family's symbol may hold `_`), a peer's name
/// unchanged. History compares within a family, across configurations, so that a changed
/// default configuration is judged against the old one rather than starting afresh.
pub fn family(name: &str) -> &str {
    let Some(rest) = name.strip_prefix(KERNEL_PREFIX) else { return name };
    match evoattn::Impl::of_symbol(rest) {
        Some(imp) => imp.name(),
        None => rest.split('_').next().unwrap_or(name),
    }
}

/// What makes two measurements comparable: the GPU, the timing mode, the problem and the
/// implementation family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CaseKey {
    pub gpu: String,
    pub mode: String,
    pub shape: Shape,
    pub dtype: String,
    pub causal: String,
    pub layout: String,
    pub family: String,
}

impl CaseKey {
    pub fn of(gpu: &str, mode: Option<Mode>, case: &CaseRecord, name: &str) -> Self {
        CaseKey {
            gpu: gpu.to_string(),
            mode: mode_name(mode).to_string(),
            shape: Shape { b: case.b, h: case.h, hkv: case.hkv, sq: case.sq, sk: case.sk, d: case.d },
            dtype: case.dtype.clone(),
            causal: case.causal.clone(),
            layout: case.layout.clone(),
            family: family(name).to_string(),
        }
    }
}

fn mode_name(mode: Option<Mode>) -> &'static str {
    mode.map_or("unknown", Mode::name)
}

/// Where, when and how a set of measurements was taken.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub source: Source,
    pub date_utc: String,
    pub git_commit: Option<String>,
    pub version: String,
    pub gpu: String,
    pub driver: String,
    pub mode: Option<Mode>,
    /// Samples per interleaved block, the unit the bootstrap resamples (0 when unknown).
    pub block: usize,
}

impl Run {
    /// The run of a bench record: its environment, not this binary's, so that importing an old
    /// record (`gate --samples`) files it under the commit and date it was measured at.
    pub fn of(source: Source, env: &Environment) -> Self {
        Run {
            source,
            date_utc: env.date_utc.clone(),
            git_commit: env.git_commit.clone(),
            version: env.evoattn_version.clone(),
            gpu: env.gpu.clone(),
            driver: env.driver.clone(),
            mode: env.mode,
            block: env.block,
        }
    }
}

/// One stored measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub key: CaseKey,
    pub role: String,
    /// The full kernel name (family and levers), or the peer's name.
    pub kernel: String,
    pub source: String,
    pub date_utc: String,
    pub git_commit: Option<String>,
    pub version: String,
    pub driver: String,
    pub block: usize,
    pub median_us: f64,
    /// Raw per-launch times in µs, in the order taken.
    pub samples_us: Vec<f64>,
    pub correct: Option<bool>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    date_utc TEXT NOT NULL,
    git_commit TEXT,
    version TEXT NOT NULL,
    gpu TEXT NOT NULL,
    driver TEXT NOT NULL,
    mode TEXT NOT NULL,
    b INTEGER NOT NULL,
    h INTEGER NOT NULL,
    hkv INTEGER NOT NULL,
    sq INTEGER NOT NULL,
    sk INTEGER NOT NULL,
    d INTEGER NOT NULL,
    dtype TEXT NOT NULL,
    causal TEXT NOT NULL,
    layout TEXT NOT NULL,
    role TEXT NOT NULL,
    family TEXT NOT NULL,
    kernel TEXT NOT NULL,
    block INTEGER NOT NULL,
    median_us REAL NOT NULL,
    samples_us TEXT NOT NULL,
    correct INTEGER,
    -- One run measures a kernel on a case once: re-importing a record adds nothing.
    UNIQUE (gpu, date_utc, mode, b, h, hkv, sq, sk, d, dtype, causal, layout, role, kernel)
);
CREATE INDEX IF NOT EXISTS measurements_by_case ON measurements (gpu, mode, dtype, d, sq, family);
";

const COLUMNS: &str = "gpu, mode, b, h, hkv, sq, sk, d, dtype, causal, layout, family, role, kernel, source, \
                       date_utc, git_commit, version, driver, block, median_us, samples_us, correct";

/// The key columns, in `CaseKey`'s order, as a `WHERE` clause over parameters ?1..?12.
const KEY_MATCH: &str = "gpu = ?1 AND mode = ?2 AND b = ?3 AND h = ?4 AND hkv = ?5 AND sq = ?6 AND sk = ?7 \
                         AND d = ?8 AND dtype = ?9 AND causal = ?10 AND layout = ?11 AND family = ?12";

/// A count as SQLite stores it (a signed 64-bit integer), refused when it does not fit.
fn integer(what: &str, n: usize) -> Result<Value> {
    let n = i64::try_from(n).with_context(|| format!("{what} {n} is too large for the history"))?;
    Ok(Value::Integer(n))
}

/// The key's columns, in `KEY_MATCH`'s order (?1..?12).
fn key_values(k: &CaseKey) -> Result<Vec<Value>> {
    let s = &k.shape;
    let mut values: Vec<Value> = vec![k.gpu.clone().into(), k.mode.clone().into()];
    for (what, n) in [("B", s.b), ("H", s.h), ("Hkv", s.hkv), ("Sq", s.sq), ("Sk", s.sk), ("D", s.d)] {
        values.push(integer(what, n)?);
    }
    values.extend([&k.dtype, &k.causal, &k.layout, &k.family].map(|t| Value::Text(t.clone())));
    Ok(values)
}

fn row(r: &rusqlite::Row) -> rusqlite::Result<Row> {
    // A size or block read back must be a count: a negative one is a damaged row, not 2^64 - n.
    let size = |i: usize| {
        let v = r.get::<_, i64>(i)?;
        usize::try_from(v).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(i, v))
    };
    let samples: String = r.get(21)?;
    Ok(Row {
        key: CaseKey {
            gpu: r.get(0)?,
            mode: r.get(1)?,
            shape: Shape { b: size(2)?, h: size(3)?, hkv: size(4)?, sq: size(5)?, sk: size(6)?, d: size(7)? },
            dtype: r.get(8)?,
            causal: r.get(9)?,
            layout: r.get(10)?,
            family: r.get(11)?,
        },
        role: r.get(12)?,
        kernel: r.get(13)?,
        source: r.get(14)?,
        date_utc: r.get(15)?,
        git_commit: r.get(16)?,
        version: r.get(17)?,
        driver: r.get(18)?,
        block: size(19)?,
        median_us: r.get(20)?,
        samples_us: serde_json::from_str(&samples)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(21, rusqlite::types::Type::Text, Box::new(e)))?,
        correct: r.get(22)?,
    })
}

pub struct History {
    conn: Connection,
}

/// Stores one measurement; `false` when it is no result (refused, missing, no samples) or the
/// run already holds it.
fn insert(conn: &Connection, run: &Run, case: &CaseRecord, role: &str, m: &Measurement) -> Result<bool> {
    let Some(summary) = m.is_ok().then(|| crate::verdicts::stats::summarize(&m.samples_us)).flatten() else {
        return Ok(false);
    };
    let key = CaseKey::of(&run.gpu, run.mode, case, &m.name);
    let added = conn.execute(
        &format!(
            "INSERT OR IGNORE INTO measurements ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, \
             ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23)"
        ),
        params_from_iter(key_values(&key)?.into_iter().chain([
            Value::from(role.to_string()),
            m.name.clone().into(),
            run.source.name().to_string().into(),
            run.date_utc.clone().into(),
            run.git_commit.clone().into(),
            run.version.clone().into(),
            run.driver.clone().into(),
            integer("block", run.block)?,
            summary.median.into(),
            serde_json::to_string(&m.samples_us)?.into(),
            m.correct.into(),
        ])),
    )?;
    Ok(added == 1)
}

impl History {
    pub fn open(path: &Path) -> Result<Self> {
        Ok(History { conn: crate::stores::db::open(path, SCHEMA)? })
    }

    /// Stores every measurement of a bench record (ours and the peers) in one transaction, so
    /// a failure leaves no half run; returns how many were new.
    pub fn insert_record(&self, source: Source, record: &BenchRecord) -> Result<usize> {
        let run = Run::of(source, &record.env);
        let tx = self.conn.unchecked_transaction()?;
        let mut added = 0;
        for r in &record.results {
            added += usize::from(insert(&tx, &run, &r.case, ROLE_OURS, &r.ours)?);
            for p in &r.peers {
                added += usize::from(insert(&tx, &run, &r.case, ROLE_PEER, p)?);
            }
        }
        tx.commit()?;
        Ok(added)
    }

    /// The tuner's entry: one evaluated kernel (`m.name` its kernel name, `m.samples_us` its
    /// raw samples) on one case, timed now by this binary.
    #[cfg_attr(not(test), expect(dead_code, reason = "called by the tuner's GPU evaluator, the next step of issue 6"))]
    pub fn insert_tune(
        &self,
        machine: &Machine,
        mode: Mode,
        block: usize,
        case: &CaseRecord,
        m: &Measurement,
    ) -> Result<bool> {
        let run = Run {
            source: Source::Tune,
            date_utc: crate::stores::record::utc_now(),
            git_commit: crate::stores::record::git_commit(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            gpu: machine.gpu.clone(),
            driver: machine.driver.clone(),
            mode: Some(mode),
            block,
        };
        insert(&self.conn, &run, case, ROLE_OURS, m)
    }

    /// The baseline of `key`: the lowest median among our correct measurements, runs dated
    /// `exclude_date_utc` left out (the run being gated, when it is already stored).
    pub fn best(&self, key: &CaseKey, exclude_date_utc: &str) -> Result<Option<Row>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM measurements WHERE {KEY_MATCH} AND role = ?13 AND correct = 1 \
             AND date_utc <> ?14 ORDER BY median_us, id LIMIT 1"
        );
        let found = self
            .conn
            .query_row(
                &sql,
                params_from_iter(
                    key_values(key)?
                        .into_iter()
                        .chain([ROLE_OURS.to_string().into(), exclude_date_utc.to_string().into()]),
                ),
                row,
            )
            .optional()?;
        Ok(found)
    }

    /// Every row dated `since` or later (ISO 8601 UTC text compares in time order), oldest first.
    pub fn rows(&self, since: Option<&str>) -> Result<Vec<Row>> {
        let sql = format!("SELECT {COLUMNS} FROM measurements WHERE date_utc >= ?1 ORDER BY date_utc, id");
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map(params![since.unwrap_or("")], row)?.collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// The date of the first run at a commit whose hash starts with `prefix`.
    pub fn first_date_of_commit(&self, prefix: &str) -> Result<Option<String>> {
        let found: Option<String> = self
            .conn
            .query_row(
                "SELECT MIN(date_utc) FROM measurements WHERE substr(git_commit, 1, length(?1)) = ?1",
                params![prefix],
                |r| r.get(0),
            )
            .context("looking the commit up in the history")?;
        Ok(found)
    }
}

/// Adds `record` to the default history. Never fails the command: a history that cannot be
/// written costs the run nothing but its row, so the reason is a warning on stderr.
pub fn save_or_warn(source: Source, record: &BenchRecord) -> Option<usize> {
    let path = default_path();
    match History::open(&path).and_then(|h| h.insert_record(source, record)) {
        Ok(added) => Some(added),
        Err(e) => {
            errln!("evoattn: warning: the run was not added to the history {}: {e:#}", path.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::record::tests::ok_measurement;
    use crate::stores::record::{ResultRecord, Status, SCHEMA};

    const GPU: &str = "NVIDIA H100 80GB HBM3";

    fn case(sq: usize) -> CaseRecord {
        CaseRecord {
            b: 1,
            h: 8,
            hkv: 8,
            sq,
            sk: sq,
            d: 128,
            dtype: "bf16".into(),
            causal: "top-left".into(),
            layout: "bhsd".into(),
            flops: 1e9,
        }
    }

    /// One case measured by `kernel` at `median` (three samples around it) and a peer, at `date`.
    fn record(date: &str, commit: &str, kernel: &str, median: f64, correct: Option<bool>) -> BenchRecord {
        let missing = Measurement { status: Status::Missing, ..ok_measurement("fa4", &[], None) };
        let env = Environment {
            gpu: GPU.into(),
            driver: "580.65".into(),
            evoattn_version: "0.1.0".into(),
            git_commit: Some(commit.into()),
            date_utc: date.into(),
            mode: Some(Mode::Graph),
            block: 20,
            ..Environment::default()
        };
        let ours = ok_measurement(kernel, &[median - 1.0, median, median + 1.0], correct);
        let peers = vec![ok_measurement("sdpa-cudnn", &[90.0, 91.0, 92.0], None), missing];
        BenchRecord { schema: SCHEMA.into(), env, results: vec![ResultRecord { case: case(4096), ours, peers }] }
    }

    fn key() -> CaseKey {
        CaseKey::of(GPU, Some(Mode::Graph), &case(4096), "evoattn_wgmma_bf16_d128_bn128_s2_wg2_ldtma")
    }

    #[test]
    fn family_is_the_impl_of_a_kernel_name_and_a_peer_name_itself() {
        assert_eq!(family("evoattn_mma_bf16_d64_bm128_bn64_s3_qr1"), "mma");
        assert_eq!(family("evoattn_reference_f16_d64"), "reference");
        // The two hybrids are two families (their symbols hold `_`).
        assert_eq!(family("evoattn_hybrid_qk_bf16_d64_scf"), "hybrid-qk");
        assert_eq!(family("evoattn_hybrid_pv_bf16_d64_scin_gmct"), "hybrid-pv");
        assert_eq!(family("evoattn_cublas_f16_d128_scf"), "cublas");
        // A family no longer built keeps its first word.
        assert_eq!(family("evoattn_retired_f16_d64"), "retired");
        assert_eq!(family("sdpa-cudnn"), "sdpa-cudnn");
        assert_eq!(key().shape.to_string(), "1,8,4096,128");
    }

    #[test]
    fn round_trip_best_and_idempotent_import() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join(FILE_NAME);
        let history = History::open(&path).unwrap();
        let kernel = "evoattn_wgmma_bf16_d128_bn128_s2_wg2_ldtma";
        let first = record("2026-11-20T10:00:00Z", "aaaaaaa111", kernel, 100.0, Some(true));
        // Ours and the peer that ran; the missing peer is no result.
        assert_eq!(history.insert_record(Source::Bench, &first).unwrap(), 2);
        assert_eq!(history.insert_record(Source::Gate, &first).unwrap(), 0, "the same run again adds nothing");
        let rows = history.rows(None).unwrap();
        assert_eq!(rows.len(), 2);
        let ours = &rows[0];
        assert_eq!(ours.key, key());
        assert_eq!((ours.role.as_str(), ours.kernel.as_str(), ours.source.as_str()), (ROLE_OURS, kernel, "bench"));
        assert_eq!(ours.samples_us, [99.0, 100.0, 101.0]);
        assert_eq!((ours.median_us, ours.block, ours.correct), (100.0, 20, Some(true)));
        assert_eq!(ours.git_commit.as_deref(), Some("aaaaaaa111"));
        assert_eq!((ours.version.as_str(), ours.driver.as_str()), ("0.1.0", "580.65"));
        assert_eq!(rows[1].role, ROLE_PEER);
        drop(history);

        // Reopened: a faster run with another configuration of the family is the new best; a
        // faster but incorrect one never is; the run being gated is left out by its date.
        let history = History::open(&path).unwrap();
        let faster =
            record("2026-11-21T10:00:00Z", "bbbbbbb222", "evoattn_wgmma_bf16_d128_bn64_s2_wg2_ldtma", 90.0, Some(true));
        history.insert_record(Source::Gate, &faster).unwrap();
        let wrong = record("2026-11-22T10:00:00Z", "ccccccc333", kernel, 50.0, Some(false));
        history.insert_record(Source::Bench, &wrong).unwrap();
        let best = history.best(&key(), "").unwrap().unwrap();
        assert_eq!((best.median_us, best.git_commit.as_deref()), (90.0, Some("bbbbbbb222")));
        let best = history.best(&key(), "2026-11-21T10:00:00Z").unwrap().unwrap();
        assert_eq!(best.median_us, 100.0);
        let other_gpu = CaseKey { gpu: "NVIDIA L4".into(), ..key() };
        assert!(history.best(&other_gpu, "").unwrap().is_none());
        let eager = CaseKey { mode: "eager".into(), ..key() };
        assert!(history.best(&eager, "").unwrap().is_none());

        assert_eq!(history.rows(Some("2026-11-21")).unwrap().len(), 4);
        assert_eq!(history.first_date_of_commit("bbbbbbb").unwrap().as_deref(), Some("2026-11-21T10:00:00Z"));
        assert_eq!(history.first_date_of_commit("fffffff").unwrap(), None);
    }

    #[test]
    fn the_tuner_stores_its_measurements_as_ours() {
        let dir = tempfile::tempdir().unwrap();
        let history = History::open(&dir.path().join(FILE_NAME)).unwrap();
        let machine = Machine { gpu: GPU.into(), driver: "580.65".into(), arch: None, sm_count: None };
        let m = ok_measurement("evoattn_wgmma_bf16_d128_bn128_s2_wg2_ldtma", &[10.0, 11.0, 12.0], Some(true));
        assert!(history.insert_tune(&machine, Mode::Graph, 20, &case(4096), &m).unwrap());
        let rows = history.rows(None).unwrap();
        assert_eq!((rows[0].source.as_str(), rows[0].median_us), ("tune", 11.0));
        assert_eq!(rows[0].version, env!("CARGO_PKG_VERSION"));
        assert_eq!(history.best(&key(), "").unwrap().unwrap().median_us, 11.0);
    }
}
