//! The command's own output. Every line a command prints goes through [`outln!`], which returns
//! the write's error where `println!` panics: a reader that closes the pipe early
//! (`evoattn check ... | head -1`) becomes [`Closed`], on which `main` ends quietly, and any
//! other failure to write (a full disk) is an error like any other. Notes on stderr go through
//! [`errln!`], which drops them when stderr is gone: a note nobody can read stops nothing.

use std::fmt;
use std::io::{self, Write};

/// Stdout's reader went away: nothing more can be shown, and nothing is wrong.
#[derive(Debug)]
pub struct Closed;

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl std::error::Error for Closed {}

/// Writes `args` and a newline to stdout.
pub fn line(args: fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{args}").map_err(failed)
}

/// Writes `text` to stdout as it is (a rendered table that ends in its own newline).
pub fn text(text: &str) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(failed)
}

fn failed(err: io::Error) -> anyhow::Error {
    if err.kind() == io::ErrorKind::BrokenPipe {
        Closed.into()
    } else {
        anyhow::Error::new(err).context("cannot write to standard output")
    }
}

/// True when `err` is, or was caused by, stdout's reader going away.
pub fn is_closed(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| cause.is::<Closed>())
}

/// Writes `text` and a newline to stderr, best effort.
pub fn note(args: fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "{args}");
}

/// `println!` that returns `anyhow::Result<()>` instead of panicking on a closed stdout.
macro_rules! outln {
    () => {
        $crate::out::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}

/// `eprintln!` that drops the line when stderr is closed instead of panicking.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::out::note(format_args!($($arg)*))
    };
}

pub(crate) use {errln, outln};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_told_apart_from_other_write_failures() {
        let closed = failed(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(is_closed(&closed) && is_closed(&closed.context("printing the table")));
        let full = failed(io::Error::from(io::ErrorKind::StorageFull));
        assert!(!is_closed(&full));
        assert!(format!("{full:#}").starts_with("cannot write to standard output"), "{full:#}");
        // A broken pipe to a child (the oracle's stdin) is not stdout closing.
        assert!(!is_closed(&anyhow::Error::new(io::Error::from(io::ErrorKind::BrokenPipe))));
    }
}
