//! The run history through the command line, on the mock backend with the cache dir (and so
//! history.sqlite) in a temporary directory: bench and gate add to it, `gate --against-history`
//! judges against it (no history, unchanged, regressed), a history that cannot be written is a
//! warning, and `report --since` draws it.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const EXIT_PASS: i32 = 0;
const EXIT_FAIL: i32 = 1;
/// One small case, no peers: the mock's timings are deterministic, so two runs are equal.
const MEASURE: [&str; 6] = ["--shape", "1,2,64,64", "--peers", "none", "--reps", "30"];
/// Runs are told apart by their date, to the second; real runs take longer than that.
const BETWEEN_RUNS: std::time::Duration = std::time::Duration::from_millis(1100);

fn evoattn(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evoattn"))
        .args(args)
        .env("EVOATTN_BACKEND", "mock")
        .env("EVOATTN_CACHE_DIR", cache)
        .env_remove("EVOATTN_IMPL")
        .env_remove("EVOATTN_MOCK_FAULT")
        .output()
        .expect("the evoattn binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[track_caller]
fn assert_exit(out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
}

fn gate_history(cache: &Path, extra: &[&str]) -> Output {
    evoattn(cache, &[&["gate", "--against-history"][..], &MEASURE, extra].concat())
}

/// The notes of the one case of a measured `gate --against-history`.
fn notes(cache: &Path, extra: &[&str]) -> Value {
    let out = gate_history(cache, &[extra, &["--format", "json"]].concat());
    assert_exit(&out, EXIT_PASS);
    serde_json::from_str::<Value>(&text(&out.stdout)).unwrap()["cases"][0]["notes"].clone()
}

/// `record` with every sample of ours scaled by `factor` and dated `date`: the same case
/// measured faster or slower in another run.
fn rescaled(record: &Path, factor: f64, date: &str, out: &Path) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(record).unwrap()).unwrap();
    v["env"]["date_utc"] = date.into();
    for r in v["results"].as_array_mut().unwrap() {
        for t in r["ours"]["samples_us"].as_array_mut().unwrap() {
            *t = (t.as_f64().unwrap() * factor).into();
        }
    }
    std::fs::write(out, serde_json::to_string(&v).unwrap()).unwrap();
}

#[test]
fn against_history_passes_new_and_unchanged_cases_and_fails_a_regression() {
    let cache = tempfile::tempdir().unwrap();
    let cache = cache.path();
    let record = cache.join("first.json");

    // Never recorded: passes with the note, and the run goes into the history.
    let out = gate_history(cache, &["--record", record.to_str().unwrap()]);
    assert_exit(&out, EXIT_PASS);
    assert!(text(&out.stdout).contains("1 with no history"), "{}", text(&out.stdout));
    assert!(!text(&out.stderr).contains("warning"), "{}", text(&out.stderr));
    assert!(cache.join("history.sqlite").is_file());

    // The same kernel again: no change against the first run.
    std::thread::sleep(BETWEEN_RUNS);
    let out = gate_history(cache, &["--format", "json"]);
    assert_exit(&out, EXIT_PASS);
    let report: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(report["cases"][0]["change"]["estimate"], 0.0, "{report}");
    assert!(report["cases"][0]["notes"].as_array().unwrap().is_empty(), "{report}");

    // A run 10% faster, imported offline (gate --samples adds the record it re-gates): it is
    // the best now, and the unchanged kernel is 11% slower than it.
    let faster = cache.join("faster.json");
    rescaled(&record, 0.9, "2026-01-01T00:00:00Z", &faster);
    assert_exit(&evoattn(cache, &["gate", "--samples", faster.to_str().unwrap(), "--against-history"]), EXIT_PASS);
    let out = gate_history(cache, &["--format", "markdown"]);
    assert_exit(&out, EXIT_FAIL);
    let md = text(&out.stdout);
    assert!(md.starts_with("### evoattn gate against history: ❌ fail"), "{md}");
    assert!(md.contains("regressed +11.1% against the best"), "{md}");
    // Offline too: the first record re-gated against the history is the same regression.
    let out = evoattn(cache, &["gate", "--samples", record.to_str().unwrap(), "--against-history"]);
    assert_exit(&out, EXIT_FAIL);
    assert!(text(&out.stdout).contains("regressed +11.1%"), "{}", text(&out.stdout));
}

#[test]
fn a_slowdown_inside_the_tolerance_passes() {
    let cache = tempfile::tempdir().unwrap();
    let cache = cache.path();
    let record = cache.join("run.json");
    assert_exit(&evoattn(cache, &[&["bench"][..], &MEASURE, &["--json", record.to_str().unwrap()]].concat()), 0);
    // The best is 1% faster than this run: within 2%, no regression.
    let best = cache.join("best.json");
    rescaled(&record, 0.99, "2026-01-01T00:00:00Z", &best);
    assert_exit(&evoattn(cache, &["gate", "--samples", best.to_str().unwrap(), "--against-history"]), EXIT_PASS);
    let out = evoattn(cache, &["gate", "--samples", record.to_str().unwrap(), "--against-history"]);
    assert_exit(&out, EXIT_PASS);
    assert!(text(&out.stdout).contains("+1.0%"), "{}", text(&out.stdout));
}

#[test]
fn bench_adds_to_the_history_unless_told_not_to() {
    let cache = tempfile::tempdir().unwrap();
    let cache = cache.path();
    let out = evoattn(cache, &[&["bench"][..], &MEASURE, &["--no-history"]].concat());
    assert_exit(&out, EXIT_PASS);
    assert!(!text(&out.stdout).contains("history:"), "{}", text(&out.stdout));
    assert_eq!(notes(cache, &["--no-history"]), serde_json::json!(["no history"]));
    let out = evoattn(cache, &[&["bench"][..], &MEASURE].concat());
    assert_exit(&out, EXIT_PASS);
    assert!(text(&out.stdout).contains("history: 1 measurements added to"), "{}", text(&out.stdout));
    std::thread::sleep(BETWEEN_RUNS);
    assert_eq!(notes(cache, &[]), serde_json::json!([]));
}

#[test]
fn an_unwritable_history_is_a_warning_not_a_failure() {
    // The cache dir is a file: no database can be created under it.
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let a_a = ["--shape", "1,2,64,64", "--peers", "self", "--reps", "30", "--against", "self"];
    for command in ["bench", "gate"] {
        let args = [&[command][..], if command == "bench" { &MEASURE[..] } else { &a_a[..] }].concat();
        let out = evoattn(&blocker, &args);
        let err = text(&out.stderr);
        assert!(err.contains("evoattn: warning: the run was not added to the history"), "{command}: {err}");
        assert_eq!(err.lines().filter(|l| l.contains("warning")).count(), 1, "{err}");
        // bench passes (correct); the A/A gate fails its speed test, exit 1 as without history.
        assert_exit(&out, if command == "bench" { EXIT_PASS } else { EXIT_FAIL });
    }
}
