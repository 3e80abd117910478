//! Every table and text the CLI prints for people fits a 120-column terminal: each command that
//! prints a table runs against the mock backend (`EVOATTN_BACKEND=mock`, the fake oracle), in
//! its widest forms (`-v`, many peers, errors, long configs), and every line of its stdout is at
//! most 120 characters (not bytes: `µ`, `×`, `Δ` are one column each). Markdown and JSON output
//! are for other programs and pages, not the terminal, and are left out. `tune` and `compile`
//! of a kernel need NVRTC (`source scripts/nvrtc-env`): without it those parts are skipped,
//! except under CI.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Columns of the terminal every line is written for (`text::WIDTH` in the CLI).
const WIDTH: usize = 120;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name).to_str().unwrap().to_string()
}

/// One test's cache directory and scratch files.
struct Lab {
    dir: tempfile::TempDir,
}

impl Lab {
    fn new() -> Self {
        Lab { dir: tempfile::tempdir().expect("a temp dir") }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_evoattn"));
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("EVOATTN_") && key != "EVOATTN_NVRTC" {
                cmd.env_remove(key.as_ref());
            }
        }
        let oracle = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python");
        cmd.args(args)
            .env("EVOATTN_BACKEND", "mock")
            .env("EVOATTN_CACHE_DIR", self.dir.path())
            .env("EVOATTN_ORACLE_FAKE", "1")
            .env("EVOATTN_ORACLE_PATH", oracle)
            .envs(env.iter().copied());
        cmd
    }

    /// Runs `evoattn ARGS` (exit 0, 1 or, for a gate, 2: a table was printed) and returns its stdout, after
    /// asserting that every line fits [`WIDTH`].
    fn fits(&self, args: &[&str]) -> String {
        self.fits_with(args, &[])
    }

    fn fits_with(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let out = self.command(args, env).output().expect("the evoattn binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(out.status.code(), Some(0..=2)), "evoattn {args:?} exited {}: {stderr}", out.status);
        assert!(!stdout.is_empty(), "evoattn {args:?} printed nothing: {stderr}");
        let wide: Vec<String> = stdout
            .lines()
            .filter(|l| l.chars().count() > WIDTH)
            .map(|l| format!("{} columns: {l}", l.chars().count()))
            .collect();
        assert!(
            wide.is_empty(),
            "evoattn {}: lines over {WIDTH} columns:\n{}\n\n{stdout}",
            args.join(" "),
            wide.join("\n")
        );
        stdout
    }
}

#[test]
fn check_tables_fit() {
    let lab = Lab::new();
    lab.fits(&["check", "--preset", "small"]);
    lab.fits(&["check", "--preset", "small", "-v", "--layout", "all", "--dtype", "all", "--causal", "all"]);
    lab.fits(&[
        "check",
        "--shape",
        "1,8,113,128,2,200",
        "--impl",
        "wgmma",
        "--config",
        "block_n=64,stages=3,pipeline=overlap,schedule=persistent,o_staging=registers,lazy_rescale=1,ring_test=1",
        "-v",
    ]);
    lab.fits_with(&["check", "--shape", "2,4,17,64", "--quiet"], &[("EVOATTN_MOCK_FAULT", "wrong")]);
    // No kernel for head dim 96: the same error in every case, said once.
    let out = lab.fits(&["check", "--shape", "1,2,64,96", "--causal", "all"]);
    assert_eq!(out.matches("no kernel is built for head dim 96").count(), 1, "{out}");
    assert_eq!(out.matches("error: as for 1,2,64,96 f16 none bhsd").count(), 2, "{out}");
}

#[test]
fn bench_tables_fit() {
    let lab = Lab::new();
    lab.fits(&["bench", "--preset", "seed", "--reps", "3", "--no-history"]);
    let peers = "sdpa-cudnn,sdpa-flash,sdpa-efficient,sdpa-math,sdpa-auto,fa4,self,self-torch-events,evoattn-torch";
    let args = ["bench", "--shape", "1,2,128,128,2,2048", "--causal", "all", "--layout", "all", "--peers", peers];
    let out = lab.fits(&[&args[..], &["--reps", "3", "--no-history", "--host-cost", "-v"]].concat());
    assert!(out.contains("every peer's median, in µs:"), "nine peers go to a table of their own: {out}");
    let wgmma = ["--impl", "wgmma", "--config", "block_n=64,stages=3,pipeline=overlap,schedule=claimed,lazy_rescale=1"];
    lab.fits(&[&["bench", "--shape", "4,16,1024,64", "--reps", "3", "--no-history", "-v"][..], &wgmma].concat());
}

#[test]
fn without_the_oracle_its_error_is_said_once() {
    // The real oracle on a Python that does not exist: every peer of every case is missing for
    // the same reason, written once with the count instead of once per peer and case.
    let lab = Lab::new();
    let env = [("EVOATTN_ORACLE_FAKE", "0"), ("EVOATTN_PYTHON", "/nonexistent/python3")];
    let mut cmd = lab.command(&["bench", "--preset", "seed", "--reps", "3", "--no-history"], &env);
    cmd.env_remove("EVOATTN_ORACLE_FAKE");
    let out = cmd.output().expect("the evoattn binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.lines().all(|l| l.chars().count() <= WIDTH), "{stdout}");
    let notes: Vec<&str> = stdout.lines().filter(|l| l.starts_with("not measured")).collect();
    assert_eq!(notes.len(), 1, "{stdout}");
    assert!(notes[0].starts_with("not measured: sdpa-cudnn, sdpa-flash in all 10 cases: "), "{stdout}");
}

#[test]
fn gate_tables_fit() {
    let lab = Lab::new();
    for record in ["win.json", "loss.json", "tie.json", "refused.json"] {
        for extra in [&[][..], &["-v"], &["--p90", "--speedup", "2", "--against", "sdpa-cudnn"]] {
            lab.fits(&[&["gate", "--no-history", "--samples", &fixture(record)][..], extra].concat());
        }
    }
    let peers = "sdpa-cudnn,sdpa-flash,fa4,self";
    lab.fits(&["gate", "--preset", "small", "--peers", peers, "--reps", "10", "--no-history", "-v"]);
    lab.fits(&["gate", "--shape", "1,2,64,64", "--peers", "self", "--reps", "30", "--against", "self", "--no-history"]);
    // Against the history: first no history, then a regression against the run just stored.
    let first = lab.path("first.json");
    let slower = lab.path("slower.json");
    rescaled(&fixture("win.json"), "2026-01-01T00:00:00Z", 1.0, &first);
    rescaled(&fixture("win.json"), "2026-01-02T00:00:00Z", 1.2, &slower);
    lab.fits(&["gate", "--samples", &first, "--against-history", "-v"]);
    let out = lab.fits(&["gate", "--samples", &slower, "--against-history"]);
    assert!(out.contains("regressed: speedup vs the best run"), "{out}");
}

/// A copy of the record at `from` dated `date` with ours' samples scaled by `factor`.
fn rescaled(from: &str, date: &str, factor: f64, to: &str) {
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(from).unwrap()).unwrap();
    v["env"]["date_utc"] = date.into();
    v["env"]["git_commit"] = "1234567890abcdef".into();
    for r in v["results"].as_array_mut().unwrap() {
        for t in r["ours"]["samples_us"].as_array_mut().unwrap() {
            *t = (t.as_f64().unwrap() * factor).into();
        }
    }
    std::fs::write(to, v.to_string()).unwrap();
}

#[test]
fn report_info_and_trace_fit() {
    let lab = Lab::new();
    let record = lab.path("bench.json");
    lab.fits(&["bench", "--preset", "small", "--reps", "3", "--json", &record]);
    let out: PathBuf = lab.dir.path().join("report");
    lab.fits(&["report", "--records", &record, &fixture("win.json"), "--history", "--out", out.to_str().unwrap()]);
    lab.fits(&["info"]);
    lab.fits(&["trace", "--shape", "2,4,512,64", "--dtype", "bf16"]);
}

#[test]
fn profile_fits() {
    use std::os::unix::fs::PermissionsExt;
    let lab = Lab::new();
    // A stand-in ncu that prints a real H100 capture.
    let ncu = lab.path("ncu");
    let capture = fixture("ncu/h100-ncu-mma-metrics.csv");
    std::fs::write(&ncu, format!("#!/bin/sh\ncat '{capture}'\n")).unwrap();
    std::fs::set_permissions(&ncu, std::fs::Permissions::from_mode(0o755)).unwrap();
    let args = ["profile", "--shape", "4,16,4096,128", "--dtype", "bf16", "--impl", "mma", "--ncu", &ncu];
    lab.fits(&[&args[..], &["--out", &lab.path("profile")]].concat());
}

#[test]
fn tune_and_compile_tables_fit() {
    let lab = Lab::new();
    lab.fits(&["compile", "--levers"]);
    let rejected = ["compile", "--impl", "wgmma", "--arch", "sm_90a", "--dtype", "f16", "--head-dim", "256"];
    lab.fits(&[&rejected[..], &["--config", "block_n=192,stages=4,consumer_warpgroups=3", "-v"]].concat());
    if !common::have_nvrtc() {
        return;
    }
    lab.fits(&["compile", "--impl", "mma", "--arch", "sm_80", "--dtype", "f16", "-v"]);
    let shapes = ["--shape", "1,2,128,64", "--shape", "1,2,300,64"];
    lab.fits(&[&["tune", "--impl", "mma", "--gpus", "0", "--generations", "1", "-v"][..], &shapes].concat());
    lab.fits(&["tune", "--show"]);
    lab.fits(&["tune", "--show", "-v"]);
    lab.fits(&["info"]);
}
