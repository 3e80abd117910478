//! Every evaluation the tuner runs, one SQLite row each, written as it completes: a crashed
//! or interrupted run loses nothing, and a new run reads the rows back instead of measuring
//! again. WAL mode so a `tune --show` can read while a run writes.

use super::evolve::{Child, Evaluation, Gate};
use super::proposer::Guidance;
use super::space;
use anyhow::{Context, Result};
use evoattn::config::{Impl, KernelConfig, KernelSpec};
use evoattn::problem::{Causal, Dtype, Shape};
use evoattn::Arch;
use rusqlite::{params, Connection};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// File name of the store inside the kernel cache dir.
pub const FILE_NAME: &str = "tune.sqlite";

/// The default store: next to the compiled kernels it describes.
pub fn default_path() -> PathBuf {
    crate::stores::db::default_path(FILE_NAME)
}

/// Problems that share a best kernel: same compile-time traits and mask, sequence lengths in
/// the same power-of-two range, same GQA ratio.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bucket {
    pub dtype: Dtype,
    pub head_dim: usize,
    pub causal: Causal,
    /// `ceil(log2(Sq))`: Sq in `(2^(k-1), 2^k]`.
    pub sq_log2: u32,
    pub sk_log2: u32,
    /// Query heads per KV head.
    pub group: usize,
}

impl Bucket {
    pub fn of(shape: &Shape, dtype: Dtype, causal: Causal) -> Self {
        let log2 = |n: usize| n.max(1).next_power_of_two().trailing_zeros();
        Bucket {
            dtype,
            head_dim: shape.d,
            causal,
            sq_log2: log2(shape.sq),
            sk_log2: log2(shape.sk),
            group: shape.group(),
        }
    }

    /// The key rows are stored and looked up under.
    pub fn key(&self) -> String {
        format!(
            "{}_d{}_{}_sq2^{}_sk2^{}_g{}",
            self.dtype.name(),
            self.head_dim,
            self.causal.name(),
            self.sq_log2,
            self.sk_log2,
            self.group
        )
    }
}

/// The machine a run measures on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// GPU name and compute capability: the key rows are stored and looked up under.
    pub gpu: String,
    pub driver: String,
    /// The arch and SM count the planner's default for a problem depends on (`tune --show`
    /// names kernels against it); `None` where not known.
    pub arch: Option<Arch>,
    pub sm_count: Option<u32>,
}

impl Machine {
    pub fn of(info: &crate::lab::backend::BackendInfo) -> Self {
        let (major, minor) = info.compute_capability;
        Machine {
            gpu: format!("{} (cc {major}.{minor})", info.gpu),
            driver: info.driver.clone(),
            arch: Arch::parse(&info.arch),
            sm_count: Some(info.sm_count),
        }
    }
}

/// One stored evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub spec: KernelSpec,
    /// A proposed kernel source; `None` for the embedded source with the config's levers.
    pub source: Option<String>,
    pub bucket: String,
    pub shapes: Vec<Shape>,
    pub evaluation: Evaluation,
    /// Geomean speedup over the run's baseline; `None` when a gate failed.
    pub fitness: Option<f64>,
    pub discarded: bool,
    pub gpu: String,
    pub driver: String,
    pub version: String,
    pub git_commit: Option<String>,
    /// The GPU's arch and SM count; `None` in rows written before they were kept.
    pub arch: Option<Arch>,
    pub sm_count: Option<u32>,
    /// What the run's proposer was shown; `None` for runs without a proposer.
    pub guidance: Option<Guidance>,
}

impl Row {
    /// The kernel's short name: the family and the levers that differ from the default the run
    /// was measured against (the planner's default for its first shape on this GPU; the head
    /// dim's where the row does not say the GPU's SM count).
    pub fn short_name(&self) -> String {
        let imp = self.spec.imp();
        let arch = self.arch.unwrap_or_else(|| *imp.archs().last().expect("a family runs on some arch"));
        let causal = self.bucket.split('_').nth(2).and_then(Causal::parse).unwrap_or(Causal::None);
        let default = match (self.shapes.first(), self.sm_count) {
            (Some(&shape), Some(sms)) => {
                let problem =
                    evoattn::Problem::dense(shape, self.spec.dtype, evoattn::Layout::Bhsd).with_causal(causal);
                evoattn::defaults::for_problem(imp, arch, &problem, sms)
            }
            _ => evoattn::defaults::config(imp, arch, self.spec.dtype, self.spec.head_dim),
        };
        self.spec.config.short_name(&default)
    }
}

pub struct Store {
    conn: Connection,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY,
    gpu TEXT NOT NULL,
    driver TEXT NOT NULL,
    version TEXT NOT NULL,
    git_commit TEXT,
    bucket TEXT NOT NULL,
    shapes TEXT NOT NULL,
    spec_name TEXT NOT NULL,
    impl TEXT NOT NULL,
    dtype TEXT NOT NULL,
    head_dim INTEGER NOT NULL,
    config TEXT NOT NULL,
    gates_passed TEXT NOT NULL,
    failed_gate TEXT,
    error TEXT,
    medians_us TEXT NOT NULL,
    fitness REAL,
    discarded INTEGER NOT NULL,
    source TEXT,
    arch TEXT,
    sm_count INTEGER,
    guidance TEXT,
    counters TEXT
);
CREATE INDEX IF NOT EXISTS evaluations_by_bucket ON evaluations (gpu, bucket);
";

/// What `query` reads after the id; `spec_name` is derived from these, so not read back.
const COLUMNS: &str = "impl, dtype, head_dim, config, bucket, shapes, failed_gate, error, medians_us, \
                       fitness, discarded, gpu, driver, version, git_commit, source, arch, sm_count, guidance, counters";

/// Columns added after the first stores were written (proposed sources; the GPU's arch and SM
/// count; the proposer's guidance; Nsight Compute's counters as JSON), with their types: older
/// stores get them.
const ADDED_COLUMNS: [(&str, &str); 5] =
    [("source", "TEXT"), ("arch", "TEXT"), ("sm_count", "INTEGER"), ("guidance", "TEXT"), ("counters", "TEXT")];

/// A shape in the command line's `B,H,S,D,HKV,SK` syntax (`Shape::parse` reads it back).
pub fn shape_text(s: &Shape) -> String {
    format!("{},{},{},{},{},{}", s.b, s.h, s.sq, s.d, s.hkv, s.sk)
}

/// Shapes as one text, `;`-separated: the resume key.
fn shapes_text(shapes: &[Shape]) -> String {
    shapes.iter().map(shape_text).collect::<Vec<_>>().join(";")
}

impl Store {
    pub fn open(path: &Path) -> Result<Self> {
        let conn = crate::stores::db::open(path, SCHEMA)?;
        for (column, kind) in ADDED_COLUMNS {
            let has: bool = conn.query_row(
                "SELECT COUNT(*) FROM pragma_table_info('evaluations') WHERE name = ?1",
                [column],
                |r| r.get::<_, i64>(0).map(|n| n > 0),
            )?;
            if !has {
                conn.execute_batch(&format!("ALTER TABLE evaluations ADD COLUMN {column} {kind}"))?;
            }
        }
        Ok(Store { conn })
    }

    /// Writes one evaluation (called as each completes), once under each bucket of the run's
    /// shapes: the planner looks configs up per bucket, and a run's shapes may span several.
    /// `guidance`: what the run's proposer was shown (none without a proposer).
    #[allow(clippy::too_many_arguments)]
    pub fn insert(
        &mut self,
        machine: &Machine,
        buckets: &[Bucket],
        shapes: &[Shape],
        child: &Child,
        evaluation: &Evaluation,
        fitness: Option<f64>,
        discarded: bool,
        guidance: Option<Guidance>,
    ) -> Result<()> {
        let spec = &child.spec;
        let passed: Vec<&str> = evaluation.passed().iter().map(|g| g.name()).collect();
        let (failed, error) = match &evaluation.failure {
            Some((gate, e)) => (Some(gate.name()), Some(e.as_str())),
            None => (None, None),
        };
        let tx = self.conn.transaction()?;
        for bucket in buckets {
            tx.execute(
                "INSERT INTO evaluations (gpu, driver, version, git_commit, bucket, shapes, spec_name, impl, dtype, \
             head_dim, config, gates_passed, failed_gate, error, medians_us, fitness, discarded, source, arch, \
             sm_count, guidance, counters) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, \
             ?16, ?17, ?18, ?19, ?20, ?21, ?22)",
                params![
                    machine.gpu,
                    machine.driver,
                    env!("CARGO_PKG_VERSION"),
                    option_env!("EVOATTN_GIT_COMMIT"),
                    bucket.key(),
                    shapes_text(shapes),
                    spec.name(),
                    spec.imp().name(),
                    spec.dtype.name(),
                    spec.head_dim as i64,
                    spec.config.to_string(),
                    passed.join(","),
                    failed,
                    error,
                    serde_json::to_string(&evaluation.medians_us)?,
                    fitness,
                    discarded,
                    child.source,
                    machine.arch.map(Arch::name),
                    machine.sm_count,
                    guidance.map(Guidance::name),
                    evaluation.counters.map(|c| serde_json::to_string(&c)).transpose()?,
                ],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn query(&self, sql: &str, args: impl rusqlite::Params) -> Result<Vec<Row>> {
        let mut stmt = self.conn.prepare(sql)?;
        let raw = stmt.query_map(args, |r| {
            Ok((
                (r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, i64>(3)?, r.get::<_, String>(4)?),
                (r.get::<_, String>(5)?, r.get::<_, String>(6)?),
                (r.get::<_, Option<String>>(7)?, r.get::<_, Option<String>>(8)?, r.get::<_, String>(9)?),
                (r.get::<_, Option<f64>>(10)?, r.get::<_, bool>(11)?),
                (r.get::<_, String>(12)?, r.get::<_, String>(13)?, r.get::<_, String>(14)?),
                (r.get::<_, Option<String>>(15)?, r.get::<_, Option<String>>(16)?),
                (r.get::<_, Option<String>>(17)?, r.get::<_, Option<u32>>(18)?, r.get::<_, Option<String>>(19)?),
                r.get::<_, Option<String>>(20)?,
            ))
        })?;
        let mut rows = Vec::new();
        for item in raw {
            let (
                (imp, dtype, head_dim, config),
                (bucket, shapes),
                (failed, error, medians),
                (fitness, discarded),
                m,
                (c, source),
                (arch, sm_count, guidance),
                counters,
            ) = item?;
            let imp = Impl::parse(&imp).with_context(|| format!("stored impl '{imp}'"))?;
            let config: KernelConfig = space::parse(imp, &config).map_err(anyhow::Error::msg)?;
            let dtype = Dtype::parse(&dtype).with_context(|| format!("stored dtype '{dtype}'"))?;
            let shapes = if shapes.is_empty() {
                Vec::new()
            } else {
                shapes.split(';').map(Shape::parse).collect::<Result<_, _>>().map_err(anyhow::Error::msg)?
            };
            let failure = match failed {
                Some(g) => {
                    Some((Gate::parse(&g).with_context(|| format!("stored gate '{g}'"))?, error.unwrap_or_default()))
                }
                None => None,
            };
            rows.push(Row {
                spec: KernelSpec { config, dtype, head_dim: head_dim as usize },
                source,
                bucket,
                shapes,
                evaluation: Evaluation {
                    failure,
                    medians_us: serde_json::from_str(&medians)?,
                    counters: counters.map(|c| serde_json::from_str(&c)).transpose()?,
                },
                fitness,
                discarded,
                gpu: m.0,
                driver: m.1,
                version: m.2,
                git_commit: c,
                arch: arch.as_deref().and_then(Arch::parse),
                sm_count,
                guidance: match guidance {
                    Some(g) => Some(Guidance::parse(&g).with_context(|| format!("stored guidance '{g}'"))?),
                    None => None,
                },
            });
        }
        Ok(rows)
    }

    /// Every row, oldest first.
    pub fn all(&self) -> Result<Vec<Row>> {
        self.query(&format!("SELECT id, {COLUMNS} FROM evaluations ORDER BY id"), [])
    }

    /// The fastest kept configuration of `imp` measured on `gpu` for `bucket`, never worse
    /// than its run's baseline (the default then). Proposed sources are excluded: the planner
    /// can only run the embedded ones.
    pub fn best(&self, gpu: &str, bucket: &Bucket, imp: Impl) -> Result<Option<Row>> {
        let sql = format!(
            "SELECT id, {COLUMNS} FROM evaluations WHERE gpu = ?1 AND bucket = ?2 AND impl = ?3 \
             AND failed_gate IS NULL AND discarded = 0 AND source IS NULL AND fitness >= 1.0 \
             ORDER BY fitness DESC, id LIMIT 1"
        );
        Ok(self.query(&sql, params![gpu, bucket.key(), imp.name()])?.into_iter().next())
    }

    /// Buckets with a config `best` would return on `gpu`.
    pub fn tuned_buckets(&self, gpu: &str) -> Result<usize> {
        let n: i64 = self.conn.query_row(
            "SELECT COUNT(DISTINCT bucket) FROM evaluations WHERE gpu = ?1 AND failed_gate IS NULL \
             AND discarded = 0 AND source IS NULL AND fitness >= 1.0",
            [gpu],
            |r| r.get(0),
        )?;
        Ok(n as usize)
    }

    /// Evaluations already stored for this GPU, bucket and shape set, by config: what a resumed
    /// run must not measure again.
    pub fn completed(
        &self,
        gpu: &str,
        bucket: &Bucket,
        shapes: &[Shape],
        imp: Impl,
    ) -> Result<HashMap<KernelConfig, Evaluation>> {
        let sql = format!(
            "SELECT id, {COLUMNS} FROM evaluations WHERE gpu = ?1 AND bucket = ?2 AND shapes = ?3 AND impl = ?4 \
             AND source IS NULL ORDER BY id"
        );
        let rows = self.query(&sql, params![gpu, bucket.key(), shapes_text(shapes), imp.name()])?;
        Ok(rows.into_iter().map(|r| (r.spec.config, r.evaluation)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::evolve::tests::{baseline, params, shapes, Mock, NoHooks};
    use super::super::evolve::{evolve, Outcome};
    use super::*;

    fn machine() -> Machine {
        Machine {
            gpu: "NVIDIA H100 80GB HBM3".into(),
            driver: "580.65".into(),
            arch: Some(Arch::Sm90a),
            sm_count: Some(132),
        }
    }

    fn bucket() -> Bucket {
        Bucket::of(&shapes()[1], Dtype::Bf16, Causal::None)
    }

    fn run(store: &mut Store, mock: &mut Mock, generations: usize) -> Outcome {
        let known = store.completed(&machine().gpu, &bucket(), &shapes(), Impl::Wgmma).unwrap();
        let p = super::super::evolve::Params { generations, ..params() };
        evolve(mock, baseline(), &shapes(), &p, &known, &mut NoHooks, |child, eval, fitness, discarded| {
            store.insert(&machine(), &[bucket()], &shapes(), child, eval, fitness, discarded, None).unwrap()
        })
        .unwrap()
    }

    #[test]
    fn bucket_groups_by_power_of_two_and_gqa() {
        let b = |sq, sk, hkv| Bucket::of(&Shape { b: 1, h: 8, hkv, sq, sk, d: 128 }, Dtype::F16, Causal::TopLeft);
        assert_eq!(b(1024, 1024, 8), b(513, 1000, 8));
        assert_ne!(b(1024, 1024, 8), b(1025, 1024, 8));
        assert_ne!(b(1024, 1024, 8), b(1024, 1024, 2));
        assert_eq!(b(4096, 1, 2).key(), "f16_d128_top-left_sq2^12_sk2^0_g4");
    }

    #[test]
    fn round_trip_best_and_resume_without_re_evaluating() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join(FILE_NAME);
        let mut store = Store::open(&path).unwrap();
        let failing = Evaluation::failed(Gate::Resources, "spills 96 bytes");
        store.insert(&machine(), &[bucket()], &shapes(), &Child::of(baseline()), &failing, None, false, None).unwrap();
        let variant = Child { spec: baseline(), source: Some("// proposed".into()) };
        let timed = Evaluation { failure: None, medians_us: vec![1.0, 2.0], counters: None };
        store
            .insert(&machine(), &[bucket()], &shapes(), &variant, &timed, Some(9.0), false, Some(Guidance::Insight))
            .unwrap();
        let rows = store.all().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].source.as_deref(), Some("// proposed"));
        assert_eq!((rows[0].guidance, rows[1].guidance), (None, Some(Guidance::Insight)));
        assert_eq!(rows[0].source, None);
        assert_eq!(rows[0].spec, baseline());
        assert_eq!(rows[0].evaluation, failing);
        assert_eq!(rows[0].shapes, shapes());
        assert_eq!(rows[0].version, env!("CARGO_PKG_VERSION"));
        let best = store.best(&machine().gpu, &bucket(), Impl::Wgmma).unwrap();
        assert_eq!(best, None, "failed rows and proposed sources are never best");
        assert!(store.completed(&machine().gpu, &bucket(), &shapes(), Impl::Wgmma).unwrap().len() == 1);
        drop(store);

        // A fresh store for the loop: the first run stops early, the resumed one goes on.
        let path = dir.path().join("resume.sqlite");
        let mut store = Store::open(&path).unwrap();
        let mut first = Mock::new();
        run(&mut store, &mut first, 2);
        let stored = store.all().unwrap();
        assert_eq!(stored.len(), first.calls.len());
        drop(store);

        let mut store = Store::open(&path).unwrap();
        let mut second = Mock::new();
        let out = run(&mut store, &mut second, params().generations);
        assert!(second.calls.iter().all(|c| !first.calls.contains(c)), "a stored config was evaluated again");
        assert_eq!(store.all().unwrap().len(), first.calls.len() + second.calls.len());
        let best = store.best(&machine().gpu, &bucket(), Impl::Wgmma).unwrap().unwrap();
        assert_eq!(best.spec.config, out.elites[0].spec.config);
        assert_eq!(best.fitness, Some(out.elites[0].fitness));
        assert!(store.best("NVIDIA L4", &bucket(), Impl::Wgmma).unwrap().is_none());
        assert!(store.best(&machine().gpu, &bucket(), Impl::Mma).unwrap().is_none());
    }

    #[test]
    fn a_store_from_before_proposed_sources_gains_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let old_schema = SCHEMA.replace(
            ",\n    source TEXT,\n    arch TEXT,\n    sm_count INTEGER,\n    guidance TEXT,\n    counters TEXT",
            "",
        );
        assert!(!old_schema.contains("source") && !old_schema.contains("sm_count") && !old_schema.contains("guidance"));
        Connection::open(&path).unwrap().execute_batch(&old_schema).unwrap();
        let mut store = Store::open(&path).unwrap();
        let timed = Evaluation { failure: None, medians_us: vec![1.0, 2.0], counters: None };
        store
            .insert(&machine(), &[bucket()], &shapes(), &Child::of(baseline()), &timed, Some(1.0), false, None)
            .unwrap();
        let row = &store.all().unwrap()[0];
        assert_eq!((&row.source, row.arch, row.sm_count, row.guidance), (&None, Some(Arch::Sm90a), Some(132), None));
        // Named against the planner's default for the first shape on the GPU the row says.
        let problem = evoattn::Problem::dense(shapes()[0], Dtype::Bf16, evoattn::Layout::Bhsd);
        let default = evoattn::defaults::for_problem(Impl::Wgmma, Arch::Sm90a, &problem, 132);
        assert_eq!(row.short_name(), baseline().config.short_name(&default));
        assert!(row.short_name().starts_with("wgmma "), "{}", row.short_name());
    }
}
