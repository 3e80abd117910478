//! A per-process scratch directory for files another process reads (CUBINs for the oracle and
//! the tuner's workers, peers' outputs), removed when dropped.

use anyhow::Context;
use std::path::{Path, PathBuf};

pub struct Scratch(PathBuf);

impl Scratch {
    /// `evoattn-{what}-{pid}` in the system's temporary directory, created.
    pub fn new(what: &str) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("evoattn-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Scratch(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
