//! The `evoattn gate` contract: exit 0 pass, 1 fail, 2 could not run. Mostly `--samples`,
//! re-gating recorded bench records with no GPU as CI does, on the committed fixtures in
//! tests/fixtures (regenerate them with `cargo test --test gate -- --ignored`); the measuring
//! path runs on the mock backend.

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, LogNormal};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXIT_PASS: i32 = 0;
const EXIT_FAIL: i32 = 1;
const EXIT_COULD_NOT_RUN: i32 = 2;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// Runs `evoattn gate` on the mock backend (CPU float64, deterministic timings), leaving the
/// history alone (tests/history.rs tests it).
fn gate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evoattn"))
        .args(["gate", "--no-history"])
        .args(args)
        .env("EVOATTN_BACKEND", "mock")
        .env_remove("EVOATTN_IMPL")
        .env_remove("EVOATTN_MOCK_FAULT")
        .output()
        .expect("the evoattn binary runs")
}

fn gate_fixture(name: &str, args: &[&str]) -> Output {
    let path = fixture(name);
    let mut all = vec!["--samples", path.to_str().unwrap()];
    all.extend_from_slice(args);
    gate(&all)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[track_caller]
fn assert_exit(out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "stdout:\n{}\nstderr:\n{}", stdout(out), stderr(out));
}

#[test]
fn a_clear_win_passes() {
    let out = gate_fixture("win.json", &[]);
    assert_exit(&out, EXIT_PASS);
    assert!(stdout(&out).ends_with("gate: pass (2 of 2 cases pass, 0 fail, 0 could not run; against best)\n"));
    assert!(stderr(&out).is_empty());
    // Best is sdpa-cudnn, the faster peer; a named peer works too.
    assert!(stdout(&out).contains("sdpa-cudnn") && !stdout(&out).contains("sdpa-flash"));
    assert_exit(&gate_fixture("win.json", &["--against", "sdpa-flash"]), EXIT_PASS);
}

#[test]
fn a_clear_loss_and_a_tie_fail() {
    let out = gate_fixture("loss.json", &[]);
    assert_exit(&out, EXIT_FAIL);
    assert!(stdout(&out).contains("slower"));
    let out = gate_fixture("tie.json", &["--against", "sdpa-flash"]);
    assert_exit(&out, EXIT_FAIL);
    assert!(stdout(&out).contains("no detectable difference"), "{}", stdout(&out));
}

#[test]
fn a_refused_peer_could_not_run() {
    let out = gate_fixture("refused.json", &["--against", "fa4"]);
    assert_exit(&out, EXIT_COULD_NOT_RUN);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("evoattn: gate could not run: 1,8,512,256 bf16 top-left bhsd: peer fa4 refused:"), "{err}");
    // Against the best peer that did run, the same record passes.
    assert_exit(&gate_fixture("refused.json", &[]), EXIT_PASS);
}

#[test]
fn markdown_is_a_table_for_a_pull_request() {
    let out = gate_fixture("win.json", &["--format", "markdown"]);
    assert_exit(&out, EXIT_PASS);
    let md = stdout(&out);
    assert!(md.starts_with("### evoattn gate: ✅ pass\n"), "{md}");
    assert!(md.contains("**GPU** NVIDIA H100 80GB HBM3 (sm_90a) · **mode** graph · **samples** 100 per kernel"));
    let table: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(table.len(), 4, "header, separator, two cases:\n{md}");
    assert!(table[1].starts_with("|---|"));
    assert!(table[2].starts_with("| ✅ | 1,8,512,64 | f16 | none | bhsd | mma | sdpa-cudnn |"), "{}", table[2]);
    assert!(table[3].starts_with("| ✅ | 2,16,2048,64,4 | bf16 | top-left | bshd |"), "{}", table[3]);
}

#[test]
fn json_is_the_full_report() {
    let out = gate_fixture("loss.json", &["--format", "json", "--p90"]);
    assert_exit(&out, EXIT_FAIL);
    let report: Value = serde_json::from_str(&stdout(&out)).expect("valid JSON on stdout");
    assert_eq!(report["outcome"], "fail");
    assert_eq!(report["p90"], true);
    let case = &report["cases"][0];
    assert_eq!(case["verdict"], "regression");
    assert_eq!(case["checks"]["p90"], false);
    assert_eq!(case["ours_us"]["n"], 100);
}

#[test]
fn thresholds_come_from_the_flags() {
    // A lenient threshold (ours may be 30% slower) does not rescue a loss: the interval of the
    // difference is above 0.
    assert_exit(&gate_fixture("loss.json", &["--speedup", "0.7"]), EXIT_FAIL);
    // A strict one fails a win: 95.68 µs / 79.88 µs = 1.198× is not above 2×.
    let out = gate_fixture("win.json", &["--speedup", "2"]);
    assert_exit(&out, EXIT_FAIL);
    assert!(stdout(&out).contains("speedup 1.198× (median peer / median ours) is not above 2×"), "{}", stdout(&out));
}

#[test]
fn unusable_inputs_could_not_run_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let record: Value = serde_json::from_str(&std::fs::read_to_string(fixture("win.json")).unwrap()).unwrap();
    let write = |name: &str, value: &Value| {
        let path = dir.path().join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path.to_str().unwrap().to_string()
    };
    let mut wrong_schema = record.clone();
    wrong_schema["schema"] = json!("evoattn.bench/0");
    let mut empty = record.clone();
    empty["results"] = json!([]);
    let not_json = dir.path().join("not.json");
    std::fs::write(&not_json, "samples: 1 2 3").unwrap();
    let cases = [
        (dir.path().join("absent.json").to_str().unwrap().to_string(), "evoattn: reading "),
        (not_json.to_str().unwrap().to_string(), "is not a bench record"),
        (write("schema.json", &wrong_schema), "schema 'evoattn.bench/0', expected 'evoattn.bench/1'"),
        (write("empty.json", &empty), "evoattn: gate could not run: the record has no cases"),
    ];
    for (path, message) in cases {
        let out = gate(&["--samples", &path]);
        assert_exit(&out, EXIT_COULD_NOT_RUN);
        let err = stderr(&out);
        assert!(err.contains(message) && err.lines().count() <= 2, "{path}: {err}");
    }
}

#[test]
fn measured_a_a_fails_the_speed_test_and_re_gates_the_same() {
    // Our kernel against itself measured again (the lab's `self` control) on the mock.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("aa.json");
    let path = path.to_str().unwrap();
    let measure = ["--shape", "1,2,64,64", "--peers", "self", "--reps", "30", "--against", "self"];
    let out = gate(&[&measure[..], &["--record", path, "--format", "json"]].concat());
    assert_exit(&out, EXIT_FAIL);
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let case = &report["cases"][0];
    assert_eq!((&case["checks"]["ci_below_zero"], &case["equal"]), (&json!(false), &json!(true)), "{case}");
    // The record it wrote gates to the same report without measuring.
    let again = gate(&["--samples", path, "--against", "self", "--format", "json"]);
    assert_eq!(stdout(&again), stdout(&out));
    // Against the best peer there is none: a control is not a peer.
    let out = gate(&measure[..6]);
    assert_exit(&out, EXIT_COULD_NOT_RUN);
    assert!(stderr(&out).contains("no peer ran this case"), "{}", stderr(&out));
}

#[test]
fn bad_flags_could_not_run() {
    let win = fixture("win.json");
    let win = win.to_str().unwrap();
    for args in [
        vec!["--samples", win, "--confidence", "1"],
        vec!["--samples", win, "--speedup", "0"],
        vec!["--samples", win, "--format", "html"],
        // A record decides its own cases: measurement flags make no sense beside it.
        vec!["--samples", win, "--preset", "mission"],
        vec!["--samples", win, "--reps", "10"],
        vec!["--samples", win, "--no-tuned"],
    ] {
        assert_exit(&gate(&args), EXIT_COULD_NOT_RUN);
    }
}

// The fixture generator: seeded lognormal timings, rounded to 0.01 µs to keep the files small.

/// Timed launches per implementation, as `bench`'s default.
const N: usize = 100;
/// Lognormal jitter of a quiet GPU: about 3% spread around the median.
const SIGMA: f64 = 0.03;

fn timings(median_us: f64, seed: u64) -> Vec<f64> {
    let dist = LogNormal::new(median_us.ln(), SIGMA).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    (0..N).map(|_| (dist.sample(&mut rng) * 100.0).round() / 100.0).collect()
}

fn ok(name: &str, median_us: f64, seed: u64) -> Value {
    json!({"name": name, "status": "ok", "reason": null, "samples_us": timings(median_us, seed),
           "max_abs": 0.00049, "rel_l2": 0.00021, "correct": true})
}

fn refused(name: &str, reason: &str) -> Value {
    json!({"name": name, "status": "refused", "reason": reason, "samples_us": [],
           "max_abs": null, "rel_l2": null, "correct": null})
}

fn case(shape: [usize; 6], dtype: &str, causal: &str, layout: &str) -> Value {
    let [b, h, hkv, sq, sk, d] = shape;
    let flops = 4.0 * (b * h * sq * sk * d) as f64 / if causal == "none" { 1.0 } else { 2.0 };
    json!({"b": b, "h": h, "hkv": hkv, "sq": sq, "sk": sk, "d": d, "dtype": dtype, "causal": causal,
           "layout": layout, "flops": flops})
}

fn bench_record(results: Vec<Value>) -> Value {
    json!({
        "schema": "evoattn.bench/1",
        "env": {"gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "arch": "sm_90a",
                "driver": "13.0", "nvrtc": "13.0", "sm_clock_mhz": [1980, 1980], "evoattn_version": "0.1.0",
                "git_commit": null, "date_utc": "2026-01-01T00:00:00Z", "mode": "graph", "samples": N,
                "warmup": 5, "flush_bytes": 104857600, "seed": 0, "oracle": null,
                "matmul_tflops": null, "copy_gbps": null},
        "results": results,
    })
}

fn result(case: Value, ours: Value, peers: Vec<Value>) -> Value {
    json!({"case": case, "ours": ours, "peers": peers})
}

#[test]
#[ignore = "rewrites tests/fixtures; run when the record schema changes"]
fn regenerate_fixtures() {
    let mission = || case([1, 8, 8, 512, 512, 64], "f16", "none", "bhsd");
    let fixtures = [
        (
            "win.json",
            bench_record(vec![
                result(mission(), ok("mma", 80.0, 1), vec![ok("sdpa-cudnn", 95.0, 2), ok("sdpa-flash", 105.0, 3)]),
                result(
                    case([2, 16, 4, 2048, 2048, 64], "bf16", "top-left", "bshd"),
                    ok("mma", 410.0, 4),
                    vec![ok("sdpa-cudnn", 520.0, 5), ok("sdpa-flash", 560.0, 6)],
                ),
            ]),
        ),
        ("loss.json", bench_record(vec![result(mission(), ok("mma", 120.0, 7), vec![ok("sdpa-flash", 100.0, 8)])])),
        ("tie.json", bench_record(vec![result(mission(), ok("mma", 100.0, 13), vec![ok("sdpa-flash", 100.0, 14)])])),
        (
            "refused.json",
            bench_record(vec![result(
                case([1, 8, 8, 512, 512, 256], "bf16", "top-left", "bhsd"),
                ok("mma", 150.0, 11),
                vec![refused("fa4", "head dim 256 is not supported"), ok("sdpa-flash", 190.0, 12)],
            )]),
        ),
    ];
    for (name, record) in fixtures {
        std::fs::write(fixture(name), serde_json::to_string_pretty(&record).unwrap() + "\n").unwrap();
    }
}
