//! cmd_check
