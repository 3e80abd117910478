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
    assert!(md.contains("regressed: speedup vs the best run 0.900× (best/ours)"), "{md}");
    // Offline too: the first record re-gated against the history is the same regression.
    let out = evoattn(cache, &["gate", "--samples", record.to_str().unwrap(), "--against-history"]);
    assert_exit(&out, EXIT_FAIL);
    assert!(text(&out.stdout).contains("regressed: speedup vs the best run 0.900×"), "{}", text(&out.stdout));
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
    // Its speedup against the best (best/ours) is 0.99×, above the tolerance's 0.980×.
    assert!(text(&out.stdout).contains("0.990× ["), "{}", text(&out.stdout));
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

/// The committed H100 records of one grid: wgmma step 1 (13:51), mma (13:55) and wgmma with
/// TMA loads (14:25, commit b4f86e8), imported into the history as `gate --samples` does.
fn committed_history(cache: &Path) {
    for record in ["fa3-grid-wgmma-step1", "fa3-grid-mma", "fa3-grid-hd128-wgmma-tma"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../bench/results/2026-11-22-{record}.json"));
        let out = evoattn(cache, &["gate", "--samples", path.to_str().unwrap(), "--format", "json"]);
        assert!(!text(&out.stderr).contains("warning"), "{}", text(&out.stderr));
    }
}

fn csv_dates(dir: &Path) -> Vec<String> {
    let csv = std::fs::read_to_string(dir.join("history.csv")).unwrap();
    csv.lines().skip(1).map(|l| l.split(',').next().unwrap().to_string()).collect()
}

#[test]
fn report_draws_the_history_and_since_filters_it() {
    let cache = tempfile::tempdir().unwrap();
    let cache = cache.path();
    committed_history(cache);
    let report =
        |dir: &Path, extra: &[&str]| evoattn(cache, &[&["report", "--out", dir.to_str().unwrap()][..], extra].concat());
    const PLOT: &str = "history-nvidia-h100-80gb-hbm3-eager-4x16x4096x128-bf16-none-bhsd.svg";

    // No record given: the history alone, every problem of the three runs.
    let all = tempfile::tempdir().unwrap();
    assert_exit(&report(all.path(), &[]), EXIT_PASS);
    let md = std::fs::read_to_string(all.path().join("report.md")).unwrap();
    assert!(md.contains("## History") && md.contains(&format!("![{PLOT}]({PLOT})")), "{md}");
    let svg = std::fs::read_to_string(all.path().join(PLOT)).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("ours (wgmma)") && svg.contains("b4f86e8 11-22 14:25"));
    // 36 cases × (ours + 2 peers) for each grid run, 12 × 3 for the hd128 one.
    assert_eq!(csv_dates(all.path()).len(), 2 * 36 * 3 + 12 * 3);

    // From 13:55 on: the mma and TMA runs.
    let since = tempfile::tempdir().unwrap();
    assert_exit(&report(since.path(), &["--since", "2026-11-22T13:55:00Z"]), EXIT_PASS);
    let dates = csv_dates(since.path());
    assert_eq!(dates.len(), 36 * 3 + 12 * 3);
    assert!(dates.iter().all(|d| d.as_str() >= "2026-11-22T13:55:00Z"));
    assert!(since.path().join(PLOT).is_file(), "two runs of 4,16,4096,128 remain");

    // From the first run of commit b4f86e8: one run, so no problem has a history to draw.
    let commit = tempfile::tempdir().unwrap();
    assert_exit(&report(commit.path(), &["--since", "b4f86e8"]), EXIT_PASS);
    assert_eq!(csv_dates(commit.path()).len(), 12 * 3);
    let md = std::fs::read_to_string(commit.path().join("report.md")).unwrap();
    assert!(md.contains("No problem of ours was measured in 2 or more runs"), "{md}");

    // Records and history together; --dir keeps working.
    let both = tempfile::tempdir().unwrap();
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/results");
    assert_exit(
        &report(both.path(), &["--dir", results.to_str().unwrap(), "--history", "--since", "b4f86e8"]),
        EXIT_PASS,
    );
    let md = std::fs::read_to_string(both.path().join("report.md")).unwrap();
    assert!(
        md.contains("## 2026-11-22-fa3-grid-hd128-wgmma-tma") && !md.contains("## 2026-11-22-fa3-grid-mma"),
        "{md}"
    );

    for (since, message) in [
        ("yesterday", "is neither a date"),
        ("deadbeef", "--since deadbeef: no run in the history or the records was measured at that commit"),
    ] {
        let out = report(all.path(), &["--since", since]);
        assert_exit(&out, 2);
        assert!(text(&out.stderr).contains(message), "{since}: {}", text(&out.stderr));
    }
}
