//! The lab's SQLite files (the tuner's evaluations, the run history): one way to open them, so
//! that every store lives in the same directory and behaves the same under concurrent use.

use anyhow::{Context, Result};
use rusqlite::Connection;
use std::path::{Path, PathBuf};

/// `file` in the directory of the compiled kernels (`EVOATTN_CACHE_DIR` moves both): the
/// stores describe those kernels, and tests point the variable at a temporary directory.
pub fn default_path(file: &str) -> PathBuf {
    evoattn::runtime::cache::CubinCache::default_dir().join(file)
}

/// Opens (creating the file and its directory if needed) a store and applies `schema`.
pub fn open(path: &Path, schema: &str) -> Result<Connection> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let conn = Connection::open(path).with_context(|| format!("opening {}", path.display()))?;
    // WAL: readers do not block the writer; NORMAL sync is durable across process crashes.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.execute_batch(schema).with_context(|| format!("creating the tables of {}", path.display()))?;
    Ok(conn)
}
