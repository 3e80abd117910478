//! `evoattn tune` end to end on the mock backend (EVOATTN_BACKEND=mock): worker processes,
//! the store, planted faults through a scripted proposer, kill -9 and --resume, and the
//! planner reading the store. Compiles are real (NVRTC, no GPU); without NVRTC the tests say
//! why and return, except under CI.

mod common;

use common::{assert_resumed, have_nvrtc, kill_when_stored, stored_rows};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Two shapes in two buckets, small enough for the float64 CPU reference.
const SHAPES: [&str; 4] = ["--shape", "1,2,128,64", "--shape", "1,2,300,64"];
/// How long the kill test waits for the first stored evaluations.
const KILL_WAIT: Duration = Duration::from_secs(120);
/// Evaluations stored before the kill: the baseline and part of a generation.
const KILL_AFTER_ROWS: usize = 6;

fn command(cache: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_evoattn"));
    cmd.args(args)
        .env("EVOATTN_BACKEND", "mock")
        .env("EVOATTN_CACHE_DIR", cache)
        .env_remove("EVOATTN_IMPL")
        .env_remove("EVOATTN_MOCK_FAULT")
        .env_remove("EVOATTN_NO_TUNED");
    cmd
}

fn run(cache: &Path, args: &[&str]) -> Output {
    command(cache, args).output().expect("the evoattn binary runs")
}

fn text(out: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The stored evaluations, one line each ([`stored_rows`]).
fn stored(cache: &Path) -> Vec<String> {
    stored_rows(command(cache, &["tune", "--show"]), cache)
}

/// The command line of a scripted proposer in tests/fixtures, counting its calls in `cache`.
fn scripted_proposer(script: &str, cache: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(script);
    format!("sh {} {}", script.display(), cache.join("calls").display())
}

fn tune(cache: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["tune", "--impl", "mma"];
    args.extend(SHAPES);
    args.extend(extra);
    run(cache, &args)
}

#[test]
fn tuning_finds_the_mock_optimum_and_the_planner_then_uses_it() {
    if !have_nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path();
    let json = cache.join("elite.json");
    // Two workers on the mock's one device: the work queue spreads candidates over both.
    let out = tune(cache, &["--gpus", "0,0", "--generations", "6", "--json", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("baseline (planner default): block_m=128,block_n=64,stages=3,q_in_regs=1"), "{stdout}");

    let runs: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let first = &runs[0];
    let best = &first["elites"][0];
    // The mock's synthetic optimum (block_n=128, stages=2) is 1.25x faster than the default.
    assert_eq!(best["config"], "block_m=128,block_n=128,stages=2,q_in_regs=1", "{first}");
    assert!((best["fitness"].as_f64().unwrap() - 1.25).abs() < 1e-9, "{first}");
    assert_eq!(best["speedups"].as_array().unwrap().len(), 2);
    let evaluated = first["evaluated"].as_u64().unwrap();
    let per_worker: Vec<u64> =
        first["workers"].as_array().unwrap().iter().map(|w| w["evaluations"].as_u64().unwrap()).collect();
    assert_eq!(per_worker.len(), 2);
    assert!(per_worker.iter().all(|&n| n > 0), "both workers were busy: {first}");
    assert_eq!(per_worker.iter().sum::<u64>(), evaluated, "{first}");
    // Every evaluation is stored once per bucket of the two shapes.
    assert_eq!(stored(cache).len() as u64, 2 * evaluated);

    // -v: where each case's config came from, with its levers.
    let bench = ["bench", "--impl", "mma", "--peers", "none", "--reps", "5", "--shape", "1,2,300,64", "-v"];
    let out = run(cache, &bench);
    assert!(out.status.success(), "{}", text(&out));
    let tuned =
        "config of ours for 1,2,300,64 f16 none bhsd: tuned store (block_m=128,block_n=128,stages=2,q_in_regs=1)";
    assert!(String::from_utf8_lossy(&out.stdout).contains(tuned), "{}", text(&out));
    // The table names the kernel by the levers the tuned config changed.
    assert!(String::from_utf8_lossy(&out.stdout).contains(" mma bn=128 s=2 "), "{}", text(&out));
    let default = "config of ours for 1,2,300,64 f16 none bhsd: default";
    let out = run(cache, &[&bench[..], &["--no-tuned"]].concat());
    assert!(String::from_utf8_lossy(&out.stdout).contains(default), "{}", text(&out));
    let out = command(cache, &bench).env("EVOATTN_NO_TUNED", "1").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains(default), "{}", text(&out));
    // A bucket the run did not cover keeps the default.
    let out = run(cache, &["bench", "--impl", "mma", "--peers", "none", "--reps", "5", "--shape", "1,2,1000,64", "-v"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("1,2,1000,64 f16 none bhsd: default"), "{}", text(&out));
    let out = run(cache, &["info"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("configs:    tuned store for 2 problem buckets"),
        "{}",
        text(&out)
    );
}

#[test]
fn planted_faults_and_a_broken_source_are_recorded_and_the_run_completes() {
    if !have_nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path();
    let proposer = scripted_proposer("planted-faults-proposer.sh", cache);
    let started = Instant::now();
    let out = tune(cache, &["--generations", "4", "--timeout", "3s", "--proposer", &proposer]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(started.elapsed() < Duration::from_secs(120), "the hang was not cut off");
    let rows = stored(cache);
    let variants: Vec<&String> = rows.iter().filter(|r| r.contains("[proposed source]")).collect();
    // Three sources, each stored under both buckets.
    assert_eq!(variants.len(), 6, "{rows:#?}");
    let has = |what: &str| variants.iter().filter(|r| r.contains(what)).count() == 2;
    assert!(has("failed correctness: the worker exited"), "out-of-bounds write: {variants:#?}");
    assert!(has("planted out-of-bounds write"), "the worker's stderr is kept: {variants:#?}");
    assert!(has("failed correctness: no answer within 3 s: killed"), "infinite loop: {variants:#?}");
    assert!(has("failed compile: NVRTC failed to compile"), "broken source: {variants:#?}");
    // The workers were restarted: configs after the faults were still timed.
    assert!(rows.iter().filter(|r| r.contains("| fitness ") && !r.contains("proposed")).count() > 10, "{rows:#?}");
    // The proposer's later config lines reached the gates (block_n=128,stages=2 on the baseline).
    assert!(rows.iter().any(|r| r.contains("evoattn_mma_f16_d64_bm128_bn128_s2_qr1 | fitness 1.250")), "{rows:#?}");
}

#[test]
fn planted_cheats_pass_correctness_and_timing_then_fail_integrity_and_the_run_completes() {
    if !have_nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path();
    // The mock's ceilings, as `evoattn info` caches a GPU's: its honest kernels run above 80% of
    // this roofline's time on SHAPES, an empty timed stream (1 µs) below it.
    let ceilings =
        r#"{"mock (CPU float64) / driver none (mock backend)": {"matmul_tflops": 400.0, "copy_gbps": 80.0}}"#;
    std::fs::write(cache.join("ceilings.json"), ceilings).unwrap();
    let proposer = scripted_proposer("planted-cheats-proposer.sh", cache);
    let out = tune(cache, &["--generations", "6", "--gpus", "0", "--proposer", &proposer]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("without its roofline"), "{}", text(&out));
    let rows = stored(cache);
    let variants: Vec<&String> = rows.iter().filter(|r| r.contains("[proposed source]")).collect();
    // Five sources, each stored under both buckets, each past correctness and timing.
    assert_eq!(variants.len(), 10, "{rows:#?}");
    assert!(variants.iter().all(|r| r.contains("failed integrity: ")), "{variants:#?}");
    let count = |what: &str| variants.iter().filter(|r| r.contains(what)).count();
    // Cached output, partial write, skipped key blocks.
    assert_eq!(count("on fresh inputs after the timed launches"), 6, "{variants:#?}");
    // Work moved off the timed stream.
    assert_eq!(count("80% of the roofline's time"), 2, "{variants:#?}");
    assert_eq!(count("the kernel wrote its inputs: K changed"), 2, "{variants:#?}");
    // The honest candidates passed all five gates and the run went on to the proposer's config.
    assert!(rows.iter().any(|r| r.contains("evoattn_mma_f16_d64_bm128_bn128_s2_qr1 | fitness ")), "{rows:#?}");
}

#[test]
fn a_composite_run_profiles_each_candidate_gates_it_and_stores_the_counters() {
    if !have_nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path();
    let ncu = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-ncu.sh");
    let json = cache.join("elites.json");
    let flags = ["--fitness", "composite", "--ncu-gate", "--ncu", ncu.to_str().unwrap()];
    let out =
        tune(cache, &[&["--generations", "2", "--gpus", "0", "--json", json.to_str().unwrap()][..], &flags].concat());
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fitness composite, NCU sanity gate"), "{}", text(&out));
    // Every candidate past integrity has the fake ncu's readings, and passed the sanity gate.
    let show = cache.join("show.json");
    assert!(command(cache, &["tune", "--show", "--json", show.to_str().unwrap()]).output().unwrap().status.success());
    let rows: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&show).unwrap()).unwrap();
    let timed: Vec<&serde_json::Value> = rows.iter().filter(|r| r["fitness"].is_number()).collect();
    assert!(timed.len() > 2, "{rows:#?}");
    for r in &timed {
        assert_eq!(r["counters"]["tensor_pct"], 60.0, "{r}");
        assert_eq!(r["counters"]["registers"], 128.0, "{r}");
        // 1000 × speedup + 2 × 60 + 70 − 10 × 0.5 − 0.1 × 128.
        let expected = 1000.0 * r["fitness"].as_f64().unwrap() + 120.0 + 70.0 - 5.0 - 12.8;
        assert!((r["composite"].as_f64().unwrap() - expected).abs() < 1e-6, "{r}");
    }
    let runs: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        (&runs[0]["fitness"], &runs[0]["ncu_gate"]),
        (&serde_json::json!("composite"), &serde_json::json!(true))
    );
    let best = &runs[0]["elites"][0];
    assert!(best["fitness"].as_f64().unwrap() > 1000.0 && best["speedup"].as_f64().unwrap() >= 1.0, "{best}");
    // An ncu that is not there stops the run before any worker starts.
    let out = tune(cache, &["--fitness", "composite", "--ncu", "/nonexistent/ncu"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ncu /nonexistent/ncu: no such file"), "{}", text(&out));
}

#[test]
fn guidance_decides_what_the_proposer_sees_and_is_stored_with_each_evaluation() {
    if !have_nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path();
    let insights = cache.join("insights.txt");
    std::fs::write(&insights, "tensor pipe 41%, compute-bound\n").unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/proposers/offline.py");
    let proposer = format!("python3 {}", script.display());
    let log = cache.join("seen.jsonl");
    let mut parts_by_mode = Vec::new();
    for mode in ["free", "insight", "full"] {
        let _ = std::fs::remove_file(&log);
        let json = cache.join(format!("{mode}.json"));
        let extra = ["--generations", "2", "--gpus", "0", "--proposer", &proposer, "--guidance", mode];
        let more = ["--insights", insights.to_str().unwrap(), "--json", json.to_str().unwrap()];
        let mut cmd =
            command(cache, &[&["tune", "--impl", "mma", "--shape", "1,2,128,64"][..], &extra, &more].concat());
        let out = cmd.env("EVOATTN_PROPOSER_LOG", &log).output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let calls: Vec<serde_json::Value> =
            std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert!(!calls.is_empty() && calls.iter().all(|c| c["guidance"] == mode), "{calls:?}");
        parts_by_mode.push(calls[0]["parts"].clone());
        let run: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(run[0]["guidance"], mode, "{run}");
    }
    assert_eq!(
        parts_by_mode,
        [serde_json::json!(["I1"]), serde_json::json!(["I1", "I3"]), serde_json::json!(["I1", "I2", "I3"])]
    );
    // Every stored evaluation says which mode its run's proposer had.
    let json = cache.join("show.json");
    assert!(command(cache, &["tune", "--show", "--json", json.to_str().unwrap()]).output().unwrap().status.success());
    let rows: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for mode in ["free", "insight", "full"] {
        assert!(rows.iter().any(|r| r["guidance"] == mode), "no row of the {mode} run");
    }
    assert!(rows.iter().all(|r| r["guidance"].is_string()), "each run had a proposer");
    // Guidance shapes a proposer's prompt: without one it is refused.
    let out = run(cache, &["tune", "--impl", "mma", "--shape", "1,2,128,64", "--guidance", "free"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--proposer"), "{}", text(&out));
}

#[test]
fn kill_9_then_resume_loses_no_completed_evaluation() {
    if !have_nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path();
    let mut args = vec!["tune", "--impl", "mma", "--gpus", "0", "--generations", "50"];
    args.extend(SHAPES);
    kill_when_stored(command(cache, &args), || stored(cache).len(), 2 * KILL_AFTER_ROWS, KILL_WAIT);
    let before = stored(cache);

    let out = tune(cache, &["--generations", "2", "--resume"]);
    assert!(out.status.success(), "{}", text(&out));
    let reused = format!("{} stored evaluations reused", before.len() / 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains(&reused), "{}", text(&out));
    assert_resumed(&before, &stored(cache));
}

/// A tuning run and the `tune --show` that polls it may open a fresh store at the same moment;
/// SQLite refuses the loser of the switch to WAL at once, and the open must wait, not fail (a
/// CI run's tuner died of exactly this, before its first evaluation).
#[test]
fn processes_opening_a_fresh_store_at_once_all_succeed() {
    // The race is lost about once in a hundred rounds of 8 processes without the fix.
    const ROUNDS: usize = 200;
    const PROCESSES: usize = 8;
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let children: Vec<_> = (0..PROCESSES)
            .map(|_| {
                command(dir.path(), &["tune", "--show"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "round {round}: {}", text(&out));
        }
    }
}

#[test]
fn tune_any_searches_every_family_that_runs_the_group_from_the_planners_choice() {
    if !have_nvrtc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path();
    let json = cache.join("any.json");
    let out = run(
        cache,
        &["tune", "--impl", "any", "--shape", "1,2,128,64", "--generations", "3", "--json", json.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out));
    let runs: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &runs[0];
    let families: Vec<&str> = run["families"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    // The mock is an sm_90a GPU: the fused families of f16 hd64, the planner's (wgmma) first.
    assert_eq!(run["imp"], "wgmma", "{run}");
    for family in ["mma", "wgmma", "splitkv", "resident"] {
        assert!(families.contains(&family), "{family} not searched: {families:?}");
    }
    assert!(!families.contains(&"reference") && !families.contains(&"mma8"), "{families:?}");
    // The library paths where cuBLAS loads; said when it does not.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        families.contains(&"cublas"),
        !stderr.contains("--impl any leaves the library paths (cublas, hybrid-qk, hybrid-pv) out"),
        "{}",
        text(&out)
    );
    assert!(stderr.contains("tune: any of "), "{}", text(&out));
    // Every family is evaluated: its start (the planner's config of it for the shape) before
    // the first generation, so the baseline and one start each come first.
    let rows = stored(cache);
    let family_of =
        |row: &String| families.iter().copied().find(|f| row.contains(&format!("evoattn_{}_", f.replace('-', "_"))));
    let searched: std::collections::HashSet<&str> = rows.iter().filter_map(family_of).collect();
    assert_eq!(searched.len(), families.len(), "{rows:#?}");
    let first: std::collections::HashSet<&str> = rows[..families.len()].iter().filter_map(family_of).collect();
    assert_eq!(first.len(), families.len(), "{rows:#?}");
    let generation_0 = stderr.lines().find(|l| l.starts_with("tune: generation 0: ")).expect("a plain progress line");
    assert!(generation_0.contains(&format!(", {} evaluated,", families.len())), "{}", text(&out));
    // Which family wins the shape: each family's best median, and the least of them.
    let best = run["family_best"].as_array().unwrap();
    let named: Vec<&str> = best.iter().map(|f| f["imp"].as_str().unwrap()).collect();
    assert_eq!(named, families, "{run}");
    let timed: Vec<(&str, f64)> =
        best.iter().filter_map(|f| Some((f["imp"].as_str().unwrap(), f["medians_us"][0].as_f64()?))).collect();
    assert!(timed.len() > 1, "{run}");
    let fastest = timed.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap().0;
    assert_eq!(run["winners"], serde_json::json!([fastest]), "{run}");
    for f in best {
        assert_eq!(f["medians_us"][0].is_number(), f["configs"][0].is_string(), "{f}");
    }
    // The table says so after the elites: a row for the shape, a column per family.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let row = stdout.lines().find(|l| l.starts_with("1,2,128,64,2,128 ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(row.trim_end().ends_with(fastest), "{row}");
    assert_eq!(row.split_whitespace().count(), 2 + families.len(), "{row}");
}
