//! Helpers shared by the CLI test binaries.
// Each test binary compiles this module and uses its own subset of it.
#![allow(dead_code)]

/// False (after saying why) when NVRTC is missing outside CI; panics when missing under CI.
pub fn have_nvrtc() -> bool {
    match evoattn::runtime::nvrtc::Nvrtc::get() {
        Ok(_) => true,
        Err(err) if std::env::var_os("CI").is_some() => panic!("NVRTC is required under CI: {err}"),
        Err(err) => {
            println!("skipped: {err}");
            false
        }
    }
}

/// Spawns `tuner` (a tuning run) and SIGKILLs it once `stored()` counts at least `rows` rows,
/// waiting at most `wait`. Its stderr goes to a file so that a run which exits early or stalls
/// fails the test with the tuner's own words, not only a count.
pub fn kill_when_stored(
    mut tuner: std::process::Command,
    stored: impl Fn() -> usize,
    rows: usize,
    wait: std::time::Duration,
) {
    let log = tempfile::NamedTempFile::new().expect("a file for the tuner's stderr");
    let mut child = tuner
        .stdout(std::process::Stdio::null())
        .stderr(log.reopen().expect("reopen the stderr file"))
        .spawn()
        .expect("spawn the tuner");
    let said = || {
        let text = std::fs::read_to_string(log.path()).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    };
    let deadline = std::time::Instant::now() + wait;
    while stored() < rows {
        if let Some(status) = child.try_wait().expect("poll the tuner") {
            panic!("the tuner exited ({status}) with fewer than {rows} evaluations stored; its stderr:\n{}", said());
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            panic!(
                "fewer than {rows} evaluations stored in {wait:?} (found {}); the tuner's stderr:\n{}",
                stored(),
                said()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().expect("SIGKILL the tuner"); // no destructor runs, nothing is flushed
    child.wait().expect("reap the tuner");
}

/// The tuner's stored evaluations, oldest first, one line each, from the JSON `show` (an
/// `evoattn tune --show` command) writes with `--json` into `dir`: `GPU | bucket | kernel
/// [proposed source] | fitness F[ discarded]` or `... | failed GATE: the error's first line`.
pub fn stored_rows(mut show: std::process::Command, dir: &std::path::Path) -> Vec<String> {
    let json = dir.join("tune-show.json");
    let out = show.arg("--json").arg(&json).output().expect("the evoattn binary runs");
    assert!(out.status.success(), "tune --show: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&json).expect("tune --show --json writes its file");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text).expect("a JSON array of evaluations");
    rows.iter()
        .map(|r| {
            let source = if r["proposed_source"] == true { " [proposed source]" } else { "" };
            let result = match (r["failed_gate"].as_str(), r["fitness"].as_f64()) {
                (Some(gate), _) => {
                    format!("failed {gate}: {}", r["error"].as_str().unwrap_or("").lines().next().unwrap_or(""))
                }
                (None, Some(f)) => format!("fitness {f:.3}{}", if r["discarded"] == true { " discarded" } else { "" }),
                (None, None) => "passed".to_string(),
            };
            let (gpu, bucket, kernel) = (&r["gpu"], &r["bucket"], &r["kernel"]);
            format!(
                "{} | {} | {}{source} | {result}",
                gpu.as_str().unwrap(),
                bucket.as_str().unwrap(),
                kernel.as_str().unwrap()
            )
        })
        .collect()
}

/// Asserts a resumed run kept every row stored before the kill, unchanged, evaluated no kernel
/// again (each stored row's GPU, bucket and kernel appear once; [`stored_rows`]) and went on.
pub fn assert_resumed(before: &[String], after: &[String]) {
    assert_eq!(after[..before.len()], before[..], "a stored evaluation changed or vanished");
    let mut kernels: Vec<String> = after.iter().map(|r| r.split(" | ").take(3).collect::<Vec<_>>().join("|")).collect();
    let total = kernels.len();
    kernels.sort();
    kernels.dedup();
    assert_eq!(kernels.len(), total, "a kernel was evaluated twice: {after:#?}");
    assert!(after.len() > before.len(), "the resumed run went on");
}
