//! The lab's SQLite files (the tuner's evaluations, the run history): one way to open them, so
//! that every store lives in the same directory and behaves the same under concurrent use.

use anyhow::{Context, Result};
use rusqlite::{Connection, ErrorCode};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `file` in the directory of the compiled kernels (`EVOATTN_CACHE_DIR` moves both): the
/// stores describe those kernels, and tests point the variable at a temporary directory.
pub fn default_path(file: &str) -> PathBuf {
    evoattn::runtime::cache::CubinCache::default_dir().join(file)
}

/// How long an open waits for another process that is creating or converting the same file.
const OPEN_WAIT: Duration = Duration::from_secs(10);
/// Pause between tries while another process holds the lock.
const OPEN_RETRY: Duration = Duration::from_millis(20);

/// Opens (creating the file and its directory if needed) a store and applies `schema`.
///
/// Two processes opening a fresh file at once (a tuning run and a `tune --show` polling it)
/// race to switch it to WAL; SQLite answers the loser "database is locked" at once, without
/// its busy handler, so the setup is retried here until `OPEN_WAIT`.
pub fn open(path: &Path, schema: &str) -> Result<Connection> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let deadline = Instant::now() + OPEN_WAIT;
    loop {
        match set_up(path, schema) {
            Err(e) if is_busy(&e) && Instant::now() < deadline => std::thread::sleep(OPEN_RETRY),
            done => return done.with_context(|| format!("opening {}", path.display())),
        }
    }
}

fn set_up(path: &Path, schema: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    // WAL: readers do not block the writer; NORMAL sync is durable across process crashes.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.execute_batch(schema)?;
    Ok(conn)
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}
