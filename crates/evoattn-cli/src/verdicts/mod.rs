//! Verdicts on measurements, pure functions of samples: statistics (bootstrap intervals,
//! drift), the gate against a peer and the regression check against the history.

pub mod gate;
pub mod regression;
pub mod stats;
