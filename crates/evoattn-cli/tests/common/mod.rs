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

/// Asserts a resumed run kept every row stored before the kill, unchanged, evaluated no kernel
/// again (each `tune --show` row's GPU, bucket and kernel appear once) and went on.
pub fn assert_resumed(before: &[String], after: &[String]) {
    assert_eq!(after[..before.len()], before[..], "a stored evaluation changed or vanished");
    let mut kernels: Vec<String> = after.iter().map(|r| r.split(" | ").take(3).collect::<Vec<_>>().join("|")).collect();
    let total = kernels.len();
    kernels.sort();
    kernels.dedup();
    assert_eq!(kernels.len(), total, "a kernel was evaluated twice: {after:#?}");
    assert!(after.len() > before.len(), "the resumed run went on");
}
