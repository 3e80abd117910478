//! No input and no reader makes evoattn panic (issue 34): sizes too large to count are one line
//! and exit 2, and a reader that closes the pipe early (`evoattn check ... | head -1`) ends
//! the command quietly. Against the mock backend, so it runs without a GPU.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Output, Stdio};

const EXIT_COULD_NOT_RUN: i32 = 2;

/// The binary on the mock backend, with its cache, history and tuned store in `cache`.
fn evoattn(cache: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_evoattn"));
    cmd.args(args)
        .env("EVOATTN_BACKEND", "mock")
        .env("EVOATTN_CACHE_DIR", cache)
        .env("EVOATTN_NO_TUNED", "1")
        .env_remove("EVOATTN_IMPL")
        .env_remove("EVOATTN_MOCK_FAULT");
    cmd
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit 2 with exactly one line on stderr, `evoattn: ...` containing `needle`.
fn assert_one_line_exit_2(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(EXIT_COULD_NOT_RUN), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line expected: {err}");
    assert!(err.starts_with("evoattn: ") && err.contains(needle), "want '{needle}' in: {err}");
}

#[test]
fn sizes_past_32_bits_are_one_line_and_exit_2() {
    let cache = tempfile::tempdir().unwrap();
    // The two shapes, which panicked with "capacity overflow" (exit 101).
    let out = evoattn(cache.path(), &["check", "--shape", "18446744073709551615,1,1,64"]).output().unwrap();
    assert_one_line_exit_2(&out, "B=18446744073709551615 is too large: the kernels take sizes up to 2^31-1");
    let bench = ["bench", "--shape", "1,1,1,64,1,18446744073709551615", "--no-history"];
    let out = evoattn(cache.path(), &bench).output().unwrap();
    assert_one_line_exit_2(&out, "Sk=18446744073709551615 is too large");
    // Each size fits 32 bits, Q's extent does not (2^30 batches of 2^29 heads of 64).
    let out = evoattn(cache.path(), &["check", "--shape", "1073741824,536870912,1,64"]).output().unwrap();
    assert_one_line_exit_2(&out, "tensor q: spans more elements than 64-bit arithmetic counts");
    let out = evoattn(cache.path(), &["check", "--shape", "65536,65536,1,64"]).output().unwrap();
    assert_one_line_exit_2(&out, "tensor q: spans 274877906944 elements, over the 2^31-1");
}

#[test]
fn a_problem_without_query_rows_is_checked_not_refused() {
    // Dense strides over 0 rows are 0 above the rows; that shares no address (there is no element).
    let cache = tempfile::tempdir().unwrap();
    let out = evoattn(cache.path(), &["check", "--shape", "2,2,0,64", "--seeds", "1"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed, 0 failed"));
}

#[test]
fn more_samples_than_a_record_holds_are_refused_not_allocated() {
    let cache = tempfile::tempdir().unwrap();
    let args = ["bench", "--shape", "1,1,16,64", "--reps", "18446744073709551615", "--no-history"];
    let out = evoattn(cache.path(), &args).output().unwrap();
    assert_one_line_exit_2(&out, "--reps 18446744073709551615 is more than the 1000000 samples a record holds");
}

/// Runs `args` with stdout's read end closed before the command writes anything (what a reader
/// that has already gone, `| true`, leaves): the status, and everything said on stderr.
fn with_stdout_closed(cache: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child =
        evoattn(cache, args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the evoattn binary runs");
    drop(child.stdout.take());
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (child.wait().unwrap().code(), err)
}

#[test]
fn every_command_ends_quietly_when_stdout_is_closed() {
    let cache = tempfile::tempdir().unwrap();
    let win = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/win.json");
    let (report, store) = (cache.path().join("report"), cache.path().join("tune.sqlite"));
    let commands: [&[&str]; 9] = [
        &["info"],
        &["check", "--preset", "small"],
        &["trace", "--shape", "32,32,512,64", "--dtype", "bf16"],
        &["compile", "--levers"],
        &["bench", "--shape", "1,2,64,64", "--reps", "5", "--peers", "none", "--no-history"],
        &["gate", "--samples", win, "--no-history"],
        &["gate", "--samples", win, "--no-history", "--format", "json"],
        &["report", "--records", win, "--out", report.to_str().unwrap()],
        &["tune", "--show", "--store", store.to_str().unwrap()],
    ];
    for args in commands {
        let (code, err) = with_stdout_closed(cache.path(), args);
        // 0, or the status the command has with a reader (gate on a win: 0); never a panic.
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
        assert!(!err.lines().any(|l| l.starts_with("evoattn: ")), "{args:?}: no error line expected: {err}");
    }
}

#[test]
fn check_stops_when_its_reader_has_read_one_line() {
    // `evoattn check --preset small | head -1`: the first line is read, then the pipe closes
    // while check still has rows to print.
    let cache = tempfile::tempdir().unwrap();
    let mut child = evoattn(cache.path(), &["check", "--preset", "small"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the evoattn binary runs");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("check: 24 cases"), "{first}");
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let code = child.wait().unwrap().code();
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_closed_stderr_as_well_is_no_panic() {
    // `evoattn check ... 2>&1 | head -0`: notes on stderr (the preset's description) go nowhere too.
    let cache = tempfile::tempdir().unwrap();
    let mut child = evoattn(cache.path(), &["check", "--preset", "small"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the evoattn binary runs");
    drop(child.stdout.take());
    drop(child.stderr.take());
    // A panic would be 101 (its message lost with stderr).
    assert_eq!(child.wait().unwrap().code(), Some(0));
}
