//! The planner's view of the tuner's store: the best stored config per GPU and problem bucket,
//! handed to `evoattn::plan::plan_with` as a [`ConfigSource`] so the library needs no SQLite.

use super::store::{self, Bucket, Store};
use crate::lab::backend::BackendInfo;
use evoattn::plan::{ConfigSource, Untuned};
use evoattn::{Impl, KernelConfig, Problem};

/// Environment variable that makes the planner ignore the store (`1`), for before/after runs.
pub const NO_TUNED_ENV: &str = "EVOATTN_NO_TUNED";

/// The store of this machine's GPU.
pub struct StoreSource {
    store: Store,
    gpu: String,
}

impl ConfigSource for StoreSource {
    fn tuned(&self, problem: &Problem, imp: Impl) -> Option<KernelConfig> {
        let bucket = Bucket::of(&problem.shape, problem.dtype, problem.causal);
        // A store that cannot be read is no tuning, not an error: the defaults still run.
        self.store.best(&self.gpu, &bucket, imp).ok().flatten().map(|row| row.spec.config)
    }
}

fn disabled(ignore: bool) -> bool {
    ignore || std::env::var(NO_TUNED_ENV).is_ok_and(|v| v == "1")
}

/// Where the planner's configs come from on this GPU, in words (`evoattn info`).
pub fn describe(info: &BackendInfo) -> String {
    let path = store::default_path();
    if disabled(false) {
        return format!("defaults ({NO_TUNED_ENV}=1: the tuned store is ignored)");
    }
    let gpu = store::Machine::of(info).gpu;
    if !path.exists() {
        return format!("defaults (no tuned store at {})", path.display());
    }
    match Store::open(&path).and_then(|s| s.tuned_buckets(&gpu)) {
        Ok(0) | Err(_) => format!("defaults (no tuned configs for {gpu} in {})", path.display()),
        Ok(n) => format!("tuned store for {n} problem buckets of {gpu} ({}), defaults elsewhere", path.display()),
    }
}

/// The tuned configs for the backend's GPU, or none when `ignore` (`--no-tuned`), when
/// `EVOATTN_NO_TUNED=1`, or when no store exists yet.
pub fn source(info: &BackendInfo, ignore: bool) -> Box<dyn ConfigSource> {
    let path = store::default_path();
    if disabled(ignore) || !path.exists() {
        return Box::new(Untuned);
    }
    match Store::open(&path) {
        Ok(store) => Box::new(StoreSource { store, gpu: store::Machine::of(info).gpu }),
        Err(_) => Box::new(Untuned),
    }
}
