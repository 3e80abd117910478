//! Reports of records and the history, one exporter per format.

pub mod history;
pub mod report;
