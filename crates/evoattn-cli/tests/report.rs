//! `evoattn report` on a committed H100 record: the files it writes, and a bad path.

use std::path::Path;
use std::process::{Command, Output};

const EXIT_COULD_NOT_RUN: i32 = 2;
const RECORD: &str = "../../bench/results/2026-11-22-fa3-grid-hd128-wgmma-tma.json";
const STEM: &str = "2026-11-22-fa3-grid-hd128-wgmma-tma";

fn report(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_evoattn")).arg("report").args(args).output().expect("the evoattn binary runs")
}

#[test]
fn reports_a_committed_record() {
    let record = Path::new(env!("CARGO_MANIFEST_DIR")).join(RECORD);
    let out_dir = tempfile::tempdir().unwrap();
    let out = report(&["--records", record.to_str().unwrap(), "--out", out_dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let read =
        |name: &str| std::fs::read_to_string(out_dir.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let md = read("report.md");
    assert!(md.contains("NVIDIA H100 80GB HBM3"), "{md}");
    assert!(md.contains("Geometric-mean speedup"), "{md}");
    // 12 cases × (ours, sdpa-cudnn, sdpa-flash) + the header
    assert_eq!(read("results.csv").lines().count(), 1 + 12 * 3);
    for plot in ["speedup", "tflops-bf16-d128-none", "tflops-bf16-d128-top-left"] {
        let svg = read(&format!("{STEM}-{plot}.svg"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{plot}");
    }
}

#[test]
fn bad_record_path_exits_2_with_one_line() {
    let out_dir = tempfile::tempdir().unwrap();
    let out = report(&["--records", "/nonexistent/record.json", "--out", out_dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(EXIT_COULD_NOT_RUN));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("evoattn: reading /nonexistent/record.json"), "{stderr}");
}
