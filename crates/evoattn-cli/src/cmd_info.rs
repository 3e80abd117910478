//! cmd_info
