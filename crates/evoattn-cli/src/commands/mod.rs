//! The commands, one file each: their flags (clap) and their run. A command reads its inputs,
//! calls the lab, the verdicts, the stores and the exporters, and prints; no command is used by
//! another.

pub mod bench;
pub mod check;
pub mod compile;
pub mod gate;
pub mod info;
pub mod invert;
pub mod profile;
pub mod quantize;
pub mod report;
pub mod run;
pub mod trace;
pub mod tune;
