//! `evoattn invert` on the mock backend: every pathology that applies is compiled (NVRTC, no
//! GPU), checked and timed against the original, the rest say why not; the counters through a
//! stand-in ncu; the JSON and the bar chart.

mod common;

use common::have_nvrtc;
use std::path::Path;
use std::process::{Command, Output};

fn invert(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evoattn"))
        .arg("invert")
        .args(args)
        .env("EVOATTN_BACKEND", "mock")
        .env_remove("EVOATTN_IMPL")
        .env_remove("EVOATTN_NO_TUNED")
        .output()
        .expect("the evoattn binary runs")
}

fn text(out: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn every_applicable_pathology_is_checked_timed_and_ranked_with_its_counters() {
    if !have_nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (json, svg) = (dir.path().join("invert.json"), dir.path().join("invert.svg"));
    let ncu = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-ncu.sh");
    let out = invert(&[
        "--shape",
        "1,2,128,64",
        "--impl",
        "mma",
        "--reps",
        "20",
        "--counters",
        "--ncu",
        ncu.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let problems: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let arms = problems[0]["arms"].as_array().unwrap();
    let names: Vec<&str> = arms.iter().map(|a| a["pathology"].as_str().unwrap()).collect();
    assert_eq!(names[0], "original");
    let mut sorted = names[1..].to_vec();
    sorted.sort();
    let all = ["bank-conflicts", "depth-one", "divergent-softmax", "extra-barrier", "tiny-grid", "uncoalesced-loads"];
    assert_eq!(sorted, all);
    for arm in arms {
        let name = arm["pathology"].as_str().unwrap();
        if name == "tiny-grid" {
            // mma launches a block a tile: nothing to shrink, and the run says so.
            assert!(arm["status"].as_str().unwrap().starts_with("not run: mma launches a block a tile"), "{arm}");
            assert!(arm["slowdown"].is_null() && arm["counters"].is_null());
            continue;
        }
        assert_eq!(arm["status"], "timed", "{arm}");
        assert_eq!(arm["samples_us"].as_array().unwrap().len(), 20, "{arm}");
        // The mock's timings follow the config: a define changes nothing there.
        let slowdown = arm["slowdown"].as_f64().unwrap();
        assert!(slowdown > 0.5 && slowdown < 2.0, "{arm}");
        let ci = arm["slowdown_ci"].as_array().unwrap();
        assert!(ci[0].as_f64().unwrap() <= slowdown && slowdown <= ci[1].as_f64().unwrap(), "{arm}");
        assert_eq!(arm["counters"]["tensor_pct"], 60.0, "{arm}");
    }
    let change = |name: &str| arms.iter().find(|a| a["pathology"] == name).unwrap()["change"].clone();
    assert_eq!(change("bank-conflicts"), "-DEVOATTN_PATHOLOGY_BANK_CONFLICTS=1");
    assert_eq!(change("depth-one"), "mma s=1");
    // Ranked: the timed arms by slowdown, largest first, the one not run last.
    let timed: Vec<f64> = arms[1..].iter().filter_map(|a| a["slowdown"].as_f64()).collect();
    assert!(timed.windows(2).all(|w| w[0] >= w[1]), "{timed:?}");
    assert_eq!(names.last(), Some(&"tiny-grid"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("not run: mma launches a block a tile"), "{stdout}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
}

#[test]
fn bad_requests_are_one_line_and_exit_2() {
    let out = invert(&["--shape", "1,2,128,64", "--pathology", "cosmic-rays"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cosmic-rays"), "{}", text(&out));
    let out = invert(&["--shape", "1,2,128,64", "--counters", "--ncu", "/nonexistent/ncu"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ncu /nonexistent/ncu: no such file"), "{}", text(&out));
    let out = invert(&["--shape", "1,2,128,64", "--ncu", "/usr/bin/true"]);
    assert_eq!(out.status.code(), Some(2), "--ncu needs --counters: {}", text(&out));
}

#[test]
fn every_arm_is_measured_again_when_one_drifts() {
    if !have_nvrtc() {
        return;
    }
    // The `warming` mock's first timing call is 4x slower: the original's first block of ten
    // drifts, so every arm is measured again and the ranking comes from the steady pass.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("invert.json");
    let args =
        ["--shape", "1,2,128,64", "--impl", "mma", "--pathology", "extra-barrier", "--reps", "30", "--block", "10"];
    let out = Command::new(env!("CARGO_BIN_EXE_evoattn"))
        .arg("invert")
        .args(args)
        .args(["--json", json.to_str().unwrap()])
        .env("EVOATTN_BACKEND", "mock")
        .env("EVOATTN_MOCK_FAULT", "warming")
        .env_remove("EVOATTN_IMPL")
        .env_remove("EVOATTN_NO_TUNED")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("samples drift from the first third to the last (original -75%); measuring every arm again"),
        "{}",
        text(&out)
    );
    let problems: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let original = &problems[0]["arms"][0];
    let samples: Vec<f64> = original["samples_us"].as_array().unwrap().iter().map(|s| s.as_f64().unwrap()).collect();
    let (lo, hi) = samples.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    assert_eq!(samples.len(), 30);
    assert!(hi < 1.5 * lo, "the second pass alone, steady: {samples:?}");
    // Without the fault nothing is measured twice.
    let out = invert(&args);
    assert!(out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("again"), "{}", text(&out));
}
