//! GPU tests: the real backend on the machine's GPU. Each test first asks `evoattn info`
//! whether a GPU is usable and, if not, prints why and returns (CI has no GPU). On the GPU
//! machine, which has no Rust toolchain, the prebuilt test binary runs with EVOATTN_BIN
//! pointing at the prebuilt `evoattn`.

use std::process::{Command, Output};

fn bin() -> String {
    std::env::var("EVOATTN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_evoattn").to_string())
}

fn evoattn(args: &[&str]) -> Output {
    Command::new(bin()).args(args).env_remove("EVOATTN_BACKEND").output().expect("evoattn runs")
}

/// None when a GPU is usable, else the reason to skip.
fn no_gpu() -> Option<String> {
    let out = evoattn(&["info"]);
    if out.status.success() {
        return None;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Some(err.lines().next().unwrap_or("evoattn info failed").to_string())
}

macro_rules! require_gpu {
    () => {
        if let Some(reason) = no_gpu() {
            println!("skipped: no usable GPU: {reason}");
            return;
        }
    };
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn mma_passes_the_small_set_against_float64() {
    require_gpu!();
    let out = evoattn(&["check", "--preset", "small", "--impl", "mma"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("0 failed"), "{text}");
    assert!(text.contains("evoattn_mma_"), "{text}");
}

#[test]
fn reference_kernel_matches_float64() {
    require_gpu!();
    let out = evoattn(&["check", "--preset", "small", "--preset", "sanitize", "--impl", "reference", "--seeds", "1"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("against the reference kernel") && text.contains(" 0 against"), "{text}");
}

#[test]
fn non_default_mma_levers_are_correct() {
    require_gpu!();
    for config in ["block_m=64,block_n=32,stages=1,q_in_regs=0", "block_m=128,block_n=128,stages=3"] {
        let out = evoattn(&[
            "check",
            "--shape",
            "1,4,300,64,2,517",
            "--dtype",
            "all",
            "--causal",
            "all",
            "--impl",
            "mma",
            "--config",
            config,
        ]);
        assert!(out.status.success(), "{config}: {}", stdout(&out));
    }
}

#[test]
fn large_cases_use_the_reference_kernel_and_pass() {
    require_gpu!();
    let out =
        evoattn(&["check", "--shape", "1,8,4097,128,2", "--dtype", "bf16", "--causal", "bottom-right", "--seeds", "1"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("reference-gpu"), "{text}");
}

#[test]
fn an_impossible_config_fails_the_check_without_a_launch() {
    require_gpu!();
    // 1 MiB of shared memory at D=256 fits no GPU: the case must fail with the reason.
    let out =
        evoattn(&["check", "--shape", "1,1,64,256", "--impl", "mma", "--config", "block_m=128,block_n=128,stages=3"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("shared memory"), "{}", stdout(&out));
}
