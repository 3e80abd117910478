//! `evoattn trace` against the mock backend: which kernels it instruments, the tables it
//! prints from a timeline in the kernel's format, and the JSON of every warp's marks.

use std::process::{Command, Output};

const EXIT_COULD_NOT_RUN: i32 = 2;

fn trace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evoattn"))
        .arg("trace")
        .args(args)
        .env("EVOATTN_BACKEND", "mock")
        .env_remove("EVOATTN_IMPL")
        .env("EVOATTN_NO_TUNED", "1")
        .output()
        .expect("the evoattn binary runs")
}

#[test]
fn the_planned_wgmma_kernel_is_traced_and_its_marks_tabled() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("trace.json");
    let out = trace(&["--shape", "32,32,512,64", "--dtype", "bf16", "--out", json.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // The planner's kernel for the shape, with the instrumentation on and nothing else changed.
    let first = stdout.lines().next().unwrap();
    assert!(
        first.starts_with("evoattn_wgmma_bf16_d64_") && first.contains("_tr1 on 32,32,512,64 bf16 none"),
        "{first}"
    );
    // The mock's schedule: a key block of 40+120+30+280+620+60+90 cycles between turns.
    assert!(stdout.contains("consumer key block (turn to turn): median 1240 cycles"), "{stdout}");
    let softmax = stdout.lines().find(|l| l.contains("S done") && l.contains("softmax done")).unwrap();
    assert_eq!(softmax.split_whitespace().filter(|w| *w == "620").count(), 3, "{softmax}");
    assert!(stdout.contains("producer warp, cycles between consecutive marks:"), "{stdout}");

    let records: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let warps = records[0]["warps"].as_array().unwrap();
    assert_eq!(records[0]["shape"], "32,32,512,64");
    assert!(warps.iter().any(|w| w["events"][0][0] == "ProducerTile"));
    assert!(warps.iter().any(|w| w["events"][0][0] == "Tile"));
}

#[test]
fn config_levers_reach_the_traced_kernel() {
    let out = trace(&["--shape", "4,16,4096,64", "--dtype", "bf16", "--impl", "wgmma", "--config", "stages=3"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.lines().next().unwrap().contains("_s3_") && stdout.contains("_tr1 on"), "{stdout}");
}

#[test]
fn kernels_without_marks_are_refused_with_one_line() {
    for (args, says) in [
        (&["--impl", "mma"][..], "trace instruments the warp-specialised wgmma kernel"),
        (&["--impl", "wgmma", "--config", "pipeline=tma"][..], "trace instruments"),
    ] {
        let out = trace(&[&["--shape", "2,4,256,64"][..], args].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(EXIT_COULD_NOT_RUN), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
