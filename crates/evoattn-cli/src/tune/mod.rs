//! The EvoEngineer tuner (issue 6): search space, evolution loop, evaluation store, the
//! worker processes that run candidates on the GPUs, the proposer hook, and the store's
//! configs as the planner sees them.

pub mod evaluator;
pub mod evolve;
pub mod pool;
pub mod profiler;
pub mod progress;
pub mod proposer;
pub mod protocol;
pub mod space;
pub mod store;
pub mod tuned;
pub mod worker;
