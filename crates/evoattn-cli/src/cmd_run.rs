//! cmd_run
