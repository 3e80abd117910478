//! What outlives a run: bench records (JSON), the run history (SQLite) and the database
//! plumbing they share. The tuner's own store is `tune::store`.

pub mod db;
pub mod history;
pub mod output;
pub mod record;
