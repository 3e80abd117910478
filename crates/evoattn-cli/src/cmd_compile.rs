//! cmd_compile
