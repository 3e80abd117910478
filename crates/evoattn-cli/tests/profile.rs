//! `evoattn profile` without a GPU: a missing ncu, and a stand-in ncu that prints the real
//! H100 capture, so the parse, classification, table and output files run end to end.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const EXIT_COULD_NOT_RUN: i32 = 2;
const SHAPE: &[&str] = &["profile", "--shape", "4,16,4096,128", "--dtype", "bf16", "--impl", "mma"];

fn profile(extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evoattn"))
        .args(SHAPE)
        .args(extra)
        .env("EVOATTN_BACKEND", "mock")
        .env_remove("EVOATTN_IMPL")
        .output()
        .expect("the evoattn binary runs")
}

/// A shell script standing in for ncu: records its arguments, prints `stdout`.
fn fake_ncu(dir: &Path, stdout_file: &Path) -> String {
    let script = dir.join("ncu");
    let args_file = dir.join("args.txt");
    let body = format!("#!/bin/sh\necho \"$@\" > '{}'\ncat '{}'\n", args_file.display(), stdout_file.display());
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script.display().to_string()
}

#[test]
fn missing_ncu_exits_2_with_one_line() {
    let out = profile(&["--ncu", "/nonexistent/ncu"]);
    assert_eq!(out.status.code(), Some(EXIT_COULD_NOT_RUN));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("evoattn: cannot run ncu at /nonexistent/ncu"), "{stderr}");
}

#[test]
fn counter_permission_error_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let denied = dir.path().join("denied.txt");
    std::fs::write(&denied, "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n").unwrap();
    let out = profile(&["--ncu", &fake_ncu(dir.path(), &denied)]);
    assert_eq!(out.status.code(), Some(EXIT_COULD_NOT_RUN));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("ERR_NVGPUCTRPERM"), "{stderr}");
}

#[test]
fn fixture_capture_prints_the_classification_and_writes_files() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ncu/h100-ncu-mma-metrics.csv");
    let out_dir = dir.path().join("out");
    let out = profile(&["--ncu", &fake_ncu(dir.path(), &fixture), "--out", out_dir.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("evoattn_mma_bf16_d128_bm128_bn64_s2_qr1 (launch 0)"), "{stdout}");
    assert!(stdout.contains("37.56 %") && stdout.contains("2319.3 us"), "{stdout}");
    assert_eq!(stdout.matches("latency-bound:").count(), 2, "{stdout}");

    let args = std::fs::read_to_string(dir.path().join("args.txt")).unwrap();
    assert!(args.starts_with("--clock-control none --csv --metrics "), "{args}");
    // Only the named family: never the reference kernel the correctness check runs first.
    assert!(args.contains("-k regex:^evoattn_(mma)_ -c 1 "), "{args}");
    assert!(args.ends_with(
        "bench --shape=4,16,4096,128 --dtype=bf16 --impl=mma --peers=none --reps=2 --warmup=1 --no-history\n"
    ));

    assert_eq!(
        std::fs::read_to_string(out_dir.join("profile.csv")).unwrap(),
        std::fs::read_to_string(&fixture).unwrap()
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("profile.json")).unwrap()).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2);
    assert_eq!(json[0]["bound"], "latency-bound");
    assert_eq!(json[0]["ncu_terms"]["tensor_pct"], 37.56);
    assert_eq!(json[0]["metrics"]["launch__registers_per_thread"], 210.0);
    assert!(json[0]["metrics"]["sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"].is_null());
}
