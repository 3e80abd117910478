//! Every `--help` ends with an `Examples:` section of one to three invocations; this test runs
//! each of them, in the order the helps list them (`evoattn --help`, then each command), on the
//! mock backend and the fake oracle in a fresh directory, and asserts exit 0, so an example
//! cannot rot.
//!
//! What the directory holds, as on a user's machine: `qkv.safetensors` (q, k, v saved from
//! PyTorch), `bench/results` (a link to the committed records), and an `ncu` first on PATH that
//! prints a real H100 capture (tests/fixtures/ncu). Files one example writes, later ones read
//! (`bench ... --json run.json`, then `gate --samples run.json`). Sizes shrink to what the CPU
//! mock computes at once: a preset beyond [`SMALL_PRESETS`] becomes `mission`, a shape's batch
//! at most [`MAX_BATCH`] and its lengths at most [`MAX_LENGTH`], and `tune` runs one generation
//! unless the example says how many; every flag and value is otherwise run as written.
//! Examples that compile kernels (`info`, `compile`, `tune`) need NVRTC: without it they are
//! skipped with the reason, except under CI.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// Presets the mock runs as they are.
const SMALL_PRESETS: [&str; 3] = ["mission", "small", "sanitize"];
/// The preset a larger one becomes.
const SHRUNK_PRESET: &str = "mission";
const MAX_BATCH: usize = 2;
const MAX_LENGTH: usize = 64;
/// Most examples a help may end with.
const MAX_EXAMPLES: usize = 3;
/// Commands whose examples compile kernels with NVRTC on the mock backend too.
const NEED_NVRTC: [&str; 3] = ["info", "compile", "tune"];

fn evoattn(dir: &Path, args: &[String]) -> Output {
    let path = format!("{}:{}", dir.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    Command::new(env!("CARGO_BIN_EXE_evoattn"))
        .args(args)
        .current_dir(dir)
        .env("EVOATTN_BACKEND", "mock")
        .env("EVOATTN_ORACLE_FAKE", "1")
        .env("EVOATTN_CACHE_DIR", dir.join("cache"))
        .env("PATH", path)
        .env_remove("EVOATTN_IMPL")
        .env_remove("EVOATTN_MOCK_FAULT")
        .env_remove("EVOATTN_NO_TUNED")
        .output()
        .expect("the evoattn binary runs")
}

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_evoattn")).args(args).output().expect("the evoattn binary runs");
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).expect("UTF-8 help")
}

/// The commands `evoattn --help` lists, `help` aside.
fn commands(top: &str) -> Vec<String> {
    top.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The invocations of the `Examples:` section `help` ends with, comments dropped. Everything
/// after the heading must be an example.
fn examples(what: &str, help: &str) -> Vec<String> {
    let lines: Vec<&str> = help.trim_end().lines().collect();
    let heading = lines.iter().rposition(|l| *l == "Examples:").unwrap_or_else(|| panic!("{what}: no Examples:"));
    let found: Vec<String> = lines[heading + 1..]
        .iter()
        .map(|l| {
            assert!(l.starts_with("  evoattn "), "{what}: the help must end with its examples, found '{l}'");
            l.split(" # ").next().unwrap_or_default().trim().to_string()
        })
        .collect();
    assert!((1..=MAX_EXAMPLES).contains(&found.len()), "{what}: {} examples", found.len());
    found
}

/// A command line split into words as `sh` splits these: blanks, '...' and "..." quoting.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => out.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    assert!(quote.is_none(), "unbalanced quotes in: {line}");
    out.extend(word);
    out
}

fn shrink_shape(shape: &str) -> String {
    let mut n: Vec<usize> = shape.split(',').map(|x| x.parse().expect("a shape's numbers")).collect();
    assert!(n.len() >= 4, "a shape B,H,S,D[,HKV][,SK]: {shape}");
    n[0] = n[0].min(MAX_BATCH);
    n[2] = n[2].min(MAX_LENGTH);
    if n.len() == 6 {
        n[5] = n[5].min(MAX_LENGTH);
    }
    n.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// The example's words with its sizes shrunk (the module documentation says how).
fn shrink(example: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut words = example.into_iter();
    while let Some(word) = words.next() {
        let value = match word.as_str() {
            "--preset" | "--shape" => words.next(),
            _ => None,
        };
        match (word.as_str(), value) {
            ("--preset", Some(name)) if SMALL_PRESETS.contains(&name.as_str()) => out.extend([word, name]),
            ("--preset", Some(_)) => out.extend([word, SHRUNK_PRESET.to_string()]),
            ("--shape", Some(shape)) => out.extend([word, shrink_shape(&shape)]),
            (_, None) => out.push(word),
            (_, Some(value)) => out.extend([word, value]),
        }
    }
    let has = |flag: &str| out.iter().any(|w| w == flag);
    if out.get(1).is_some_and(|c| c == "tune") && !has("--generations") && !has("--show") {
        out.extend(["--generations".to_string(), "1".to_string()]);
    }
    out
}

/// q, k, v of one shape that reads as [B, H, S, D] or as [B, S, H, D]: 1 x 16 x 4 x 64.
fn write_qkv(path: &Path) {
    let shape = vec![1, 16, 4, 64];
    let n: usize = shape.iter().product();
    let data: Vec<Vec<u8>> = (0..3)
        .map(|salt| {
            (0..n)
                .flat_map(|i| evoattn::Dtype::F16.to_bits(((i * 37 + salt) % 29) as f64 / 8.0 - 1.75).to_le_bytes())
                .collect()
        })
        .collect();
    let views: Vec<(&str, safetensors::tensor::TensorView)> = ["q", "k", "v"]
        .into_iter()
        .zip(&data)
        .map(|(name, data)| {
            (name, safetensors::tensor::TensorView::new(safetensors::Dtype::F16, shape.clone(), data).unwrap())
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

/// The directory the examples run in (the module documentation lists what it holds).
fn scene(dir: &Path) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    write_qkv(&dir.join("qkv.safetensors"));
    std::fs::create_dir_all(dir.join("bench")).unwrap();
    std::os::unix::fs::symlink(manifest.join("../../bench/results"), dir.join("bench/results")).unwrap();
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let capture = manifest.join("tests/fixtures/ncu/h100-ncu-mma-metrics.csv");
    let ncu = bin.join("ncu");
    std::fs::write(&ncu, format!("#!/bin/sh\ncat '{}'\n", capture.display())).unwrap();
    std::fs::set_permissions(&ncu, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[test]
fn every_help_ends_with_examples_that_run_as_written() {
    let dir = tempfile::tempdir().unwrap();
    scene(dir.path());
    let top = help(&["--help"]);
    let mut helps = vec![(String::new(), top.clone())];
    for command in commands(&top) {
        let text = help(&[&command, "--help"]);
        helps.push((command, text));
    }
    assert!(helps.len() > 10, "every command: {:?}", helps.iter().map(|(c, _)| c).collect::<Vec<_>>());
    // Says once why compiling examples are skipped (and fails under CI) when NVRTC is missing.
    let nvrtc = evoattn::runtime::nvrtc::Nvrtc::get().is_ok() || common::have_nvrtc();
    let mut ran = 0;
    for (command, text) in &helps {
        let what = if command.is_empty() { "evoattn --help".to_string() } else { format!("evoattn {command} --help") };
        for example in examples(&what, text) {
            let args = shrink(words(&example));
            assert_eq!(args[0], "evoattn", "{what}: {example}");
            if !command.is_empty() {
                assert_eq!(&args[1], command, "{what}: an example of another command: {example}");
            }
            if NEED_NVRTC.contains(&args[1].as_str()) && !nvrtc {
                println!("skipped (it compiles kernels): {example}");
                continue;
            }
            let out = evoattn(dir.path(), &args[1..]);
            assert!(
                out.status.success(),
                "{what}: '{example}' (run as '{}') exited {:?}\nstdout:\n{}\nstderr:\n{}",
                args.join(" "),
                out.status.code(),
                tail(&out.stdout),
                tail(&out.stderr)
            );
            ran += 1;
        }
    }
    println!("{ran} examples ran");
}

#[test]
fn shrinking_keeps_every_flag_and_only_cuts_sizes() {
    let line = "evoattn tune --preset seed --shape 4,16,4096,128,8,32768 --preset small --proposer 'echo a=1'";
    assert_eq!(
        shrink(words(line)),
        [
            "evoattn",
            "tune",
            "--preset",
            SHRUNK_PRESET,
            "--shape",
            "2,16,64,128,8,64",
            "--preset",
            "small",
            "--proposer",
            "echo a=1",
            "--generations",
            "1"
        ]
    );
    assert_eq!(shrink(words("evoattn tune --show")), ["evoattn", "tune", "--show"]);
}
