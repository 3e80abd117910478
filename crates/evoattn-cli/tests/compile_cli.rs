//! `evoattn compile`, run as a user would: table, exit codes, one-line errors. Needs NVRTC
//! but no GPU; without NVRTC the tests print "skipped: <reason>", except under CI (`CI` set).

mod common;

use common::have_nvrtc;
use std::process::{Command, Output};

/// Runs `evoattn compile ARGS` with its own cache directory.
fn compile(cache: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evoattn"))
        .arg("compile")
        .args(args)
        .env("EVOATTN_CACHE_DIR", cache)
        .output()
        .expect("run evoattn")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The row of kernel `name` in `-v` output (its symbol on the line after the row), its wrapped
/// cells' continuation lines joined to its first line by single spaces.
fn row_of(stdout: &str, name: &str) -> String {
    let lines: Vec<&str> = stdout.lines().collect();
    let symbol = lines.iter().position(|l| l.trim() == name).unwrap_or_else(|| panic!("no {name}:\n{stdout}"));
    let first = (0..symbol).rev().find(|&i| !lines[i].starts_with(' ')).expect("the row's first line");
    let parts: Vec<&str> = lines[first..symbol].iter().map(|l| l.trim()).collect();
    parts.join(" ").split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn reference_for_sm80_compiles_passes_the_gate_and_is_cached_the_second_time() {
    if !have_nvrtc() {
        return;
    }
    let cache = tempfile::tempdir().expect("temp dir");
    let out = compile(cache.path(), &["--impl", "reference", "--arch", "sm_80"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    // With -v each row is followed by its kernel's symbol name.
    let verbose = text(&compile(cache.path(), &["--impl", "reference", "--arch", "sm_80", "-v"]).stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    // A two-line header: the column names on its second line.
    assert!(lines[1].starts_with("arch") && lines[1].contains("kernel") && lines[1].contains("gate"), "{stdout}");
    // Four dtypes (the oracle takes E4M3 too, with O in bf16 or f16) times three head dims, then
    // the summary.
    assert_eq!(lines.len(), 2 + 12 + 1, "{stdout}");
    for dtype in ["f16", "bf16", "e4m3", "e4m3f16"] {
        for d in [64, 128, 256] {
            let name = format!("evoattn_reference_{dtype}_d{d}_t128");
            let row = row_of(&verbose, &name);
            assert!(row.starts_with("sm_80 reference ") && row.ends_with("PASS") && row.contains(" ms "), "{row}");
            assert!(row.contains(&format!(" {dtype} {d} ")), "{row}");
        }
    }
    let summary = lines[lines.len() - 1];
    assert!(summary.starts_with("12 variants: 12 compiled (0 from cache), 12 pass the gate"), "{summary}");

    let again = compile(cache.path(), &["--impl", "reference", "--arch", "sm_80", "--dtype", "f16"]);
    let stdout = text(&again.stdout);
    assert_eq!(again.status.code(), Some(0), "{stdout}");
    assert!(stdout.lines().nth(2).is_some_and(|row| row.contains("cached")), "{stdout}");
    assert!(stdout.contains("3 variants: 3 compiled (3 from cache)"), "{stdout}");
}

#[test]
fn a_config_over_the_shared_memory_limit_is_rejected_not_compiled() {
    // Rejection happens before NVRTC is needed.
    let cache = tempfile::tempdir().expect("temp dir");
    let out = compile(
        cache.path(),
        &["--impl", "mma", "--arch", "sm_89", "--dtype", "f16", "--config", "block_m=128,block_n=128,stages=3", "-v"],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    let row = row_of(&stdout, "evoattn_mma_f16_d64_bm128_bn128_s3_qr1");
    // (128 + 2*3*128) rows * (64 + 8) elements * 2 bytes = 129024, over sm_89's 99 KiB.
    assert!(row.contains("rejected: needs 129024 bytes of shared memory, over sm_89's 101376 per block"), "{row}");
    assert!(stdout.lines().last().is_some_and(|l| l.starts_with("3 variants: 0 compiled") && l.contains("3 rejected")));
}

#[test]
fn an_unknown_lever_is_a_one_line_error_with_exit_2() {
    let cache = tempfile::tempdir().expect("temp dir");
    let out = compile(cache.path(), &["--impl", "mma", "--arch", "sm_89", "--config", "warps=4"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("'warps' is not a lever of mma; levers: block_m, block_n, stages, q_in_regs"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_missing_nvrtc_is_a_one_line_error_with_exit_2() {
    let cache = tempfile::tempdir().expect("temp dir");
    let missing = cache.path().join("no-such-libnvrtc.so.13");
    let out = Command::new(env!("CARGO_BIN_EXE_evoattn"))
        .args(["compile", "--impl", "reference", "--arch", "sm_80"])
        .env("EVOATTN_CACHE_DIR", cache.path())
        .env("EVOATTN_NVRTC", &missing)
        .output()
        .expect("run evoattn");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("evoattn: EVOATTN_NVRTC=") && stderr.contains("cannot load it"), "{stderr}");
}

#[test]
fn levers_lists_every_lever_config_takes_and_compiles_nothing() {
    let cache = tempfile::tempdir().expect("temp dir");
    let out = compile(cache.path(), &["--impl", "wgmma", "--levers"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(stdout.starts_with("wgmma: Hopper"), "{stdout}");
    // Every lever a wgmma config renders, each value of its typed axes, and the levers it renders
    // only when on.
    for lever in [
        "block_n",
        "pipeline",
        "pipeline=pingpong",
        "schedule=claimed",
        "o_staging=q-rows",
        "q_in_regs",
        "vt_producer",
        "vt_given",
        "trace",
    ] {
        assert!(stdout.lines().any(|l| l.trim_start().starts_with(lever)), "no {lever} in:\n{stdout}");
    }
    assert_eq!(stdout.lines().count(), 1 + 16 + (5 + 4 + 4), "{stdout}");
    assert!(std::fs::read_dir(cache.path()).expect("cache dir").next().is_none(), "--levers compiled something");
}
