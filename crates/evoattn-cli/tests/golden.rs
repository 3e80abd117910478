//! Golden files of the CLI's output on the mock backend: for each command a user runs, its
//! stdout, stderr, exit code and (where it writes some) output files, compared byte for byte
//! with `tests/golden/NAME.txt` after the few normalisations below. They pin today's behaviour
//! so that a reorganisation of the CLI can show it changed nothing a user sees.
//!
//! Regenerate every golden file (after a deliberate change of output; review the diff):
//!
//! ```sh
//! EVOATTN_BLESS=1 cargo test -p evoattn-cli --release --test golden
//! ```
//!
//! Without `EVOATTN_BLESS`, a mismatch fails with the golden file, the command that produced the
//! output and its first differing lines. Every command runs with `EVOATTN_BACKEND=mock` (CPU
//! float64, deterministic synthetic timings), `EVOATTN_ORACLE_FAKE=1` (the Python oracle's
//! seeded fake peers; needs `python3`), a fresh cache dir under a temporary directory, and no
//! other `EVOATTN_*` variable but `EVOATTN_NVRTC`. `tune` and `compile` of a kernel need NVRTC
//! 13.0 (`source scripts/nvrtc-env`; register counts are that NVRTC's): without it they print
//! why and are skipped, except under CI.

mod common;

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set (to anything but empty or `0`) to write the golden files instead of comparing.
const BLESS_ENV: &str = "EVOATTN_BLESS";
/// Lines of context shown around the first difference.
const DIFF_CONTEXT: usize = 3;
/// Differing lines shown at most.
const DIFF_LINES: usize = 12;
/// Elements of each output tensor shown besides its digest.
const FIRST_VALUES: usize = 8;
/// Characters of a differing line shown at most (the trace's JSON is one long line).
const CLIP_CHARS: usize = 240;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn repo_root() -> PathBuf {
    manifest_dir().join("../..").canonicalize().expect("the repository root")
}

fn fixture(name: &str) -> String {
    manifest_dir().join("tests/fixtures").join(name).to_str().unwrap().to_string()
}

fn blessing() -> bool {
    std::env::var(BLESS_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// One test's temporary directory (cache dir, records, outputs) and the mismatches found so far.
struct Scene {
    tmp: tempfile::TempDir,
    failures: Vec<String>,
}

impl Scene {
    fn new() -> Self {
        let tmp = tempfile::Builder::new().prefix("evoattn-golden-").tempdir().expect("a temp dir");
        std::fs::create_dir(tmp.path().join("cache")).expect("the cache dir");
        Scene { tmp, failures: Vec::new() }
    }

    /// `name` under the temporary directory, as a string for an argument.
    fn path(&self, name: &str) -> String {
        self.tmp.path().join(name).to_str().unwrap().to_string()
    }

    fn cache(&self) -> PathBuf {
        self.tmp.path().join("cache")
    }

    /// `evoattn ARGS`, to be compared with a golden file by [`Invocation::golden`].
    fn evoattn(&mut self, args: &[&str]) -> Invocation<'_> {
        Invocation { scene: self, args: args.iter().map(|s| s.to_string()).collect(), env: vec![], files: vec![] }
    }

    /// Panics with every mismatch found by this scene's invocations.
    fn finish(mut self) {
        let failures = std::mem::take(&mut self.failures);
        assert!(
            failures.is_empty(),
            "{} golden file(s) differ (regenerate with {BLESS_ENV}=1 if the change is intended):\n\n{}",
            failures.len(),
            failures.join("\n\n")
        );
    }

    /// The text with this machine's paths replaced by placeholders: the temporary directory,
    /// the binary, the repository.
    fn paths(&self, text: &str) -> String {
        let mut pairs: Vec<(String, &str)> = Vec::new();
        let mut add = |path: &Path, placeholder: &'static str| {
            pairs.push((path.to_str().unwrap().to_string(), placeholder));
            if let Ok(canonical) = path.canonicalize() {
                pairs.push((canonical.to_str().unwrap().to_string(), placeholder));
            }
        };
        add(self.tmp.path(), "<TMP>");
        add(Path::new(env!("CARGO_BIN_EXE_evoattn")), "<EVOATTN>");
        add(&repo_root(), "<REPO>");
        add(&manifest_dir(), "<REPO>/crates/evoattn-cli");
        // Longest first: a path inside another is replaced whole.
        pairs.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
        pairs.iter().fold(text.to_string(), |text, (path, placeholder)| text.replace(path.as_str(), placeholder))
    }
}

/// What an invocation leaves to compare besides its output.
enum Extra {
    /// A text file's contents.
    Text(String),
    /// Each tensor of a safetensors file: name, dtype, shape and the SHA-256 of its bytes.
    Tensors(String),
    /// A directory's files: name, size and SHA-256 (for the SVG plots).
    Listing(String),
}

struct Invocation<'a> {
    scene: &'a mut Scene,
    args: Vec<String>,
    env: Vec<(String, String)>,
    files: Vec<Extra>,
}

impl Invocation<'_> {
    /// An environment variable for this invocation only (shown in the golden file's command).
    fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// Also compare this text file the command writes.
    fn file(mut self, path: &str) -> Self {
        self.files.push(Extra::Text(path.to_string()));
        self
    }

    /// Also compare the tensors of this safetensors file the command writes.
    fn tensors(mut self, path: &str) -> Self {
        self.files.push(Extra::Tensors(path.to_string()));
        self
    }

    /// Also compare the files of this directory the command writes (names, sizes, digests).
    fn listing(mut self, dir: &str) -> Self {
        self.files.push(Extra::Listing(dir.to_string()));
        self
    }

    /// Runs the command and compares what it printed and wrote with `tests/golden/NAME.txt`
    /// (writes that file instead when blessing).
    fn golden(self, name: &str) {
        let Invocation { scene, args, env, files } = self;
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_evoattn"));
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("EVOATTN_") && key != "EVOATTN_NVRTC" {
                cmd.env_remove(key.as_ref());
            }
        }
        cmd.args(&args)
            .current_dir(scene.tmp.path())
            .env("EVOATTN_BACKEND", "mock")
            .env("EVOATTN_CACHE_DIR", scene.cache())
            .env("EVOATTN_ORACLE_FAKE", "1")
            .env("EVOATTN_ORACLE_PATH", repo_root().join("python"))
            .envs(env.iter().map(|(k, v)| (k, v)));
        let out = cmd.output().expect("the evoattn binary runs");
        let code = out.status.code().map_or_else(|| format!("none ({})", out.status), |c| c.to_string());

        let quoted: Vec<String> =
            args.iter().map(|a| if a.contains([' ', '\'', '"']) { format!("'{a}'") } else { a.clone() }).collect();
        let env_text: String = env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
        let command = format!("$ {env_text}evoattn {}", quoted.join(" "));
        let mut text = format!("{command}\nexit: {code}\n");
        text += &section("stdout", &out.stdout);
        text += &section("stderr", &out.stderr);
        for extra in &files {
            text += &render_extra(extra);
        }
        let text = normalise(&scene.paths(&text));
        let command = scene.paths(&command);

        let path = manifest_dir().join("tests/golden").join(format!("{name}.txt"));
        if blessing() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
            return;
        }
        match std::fs::read_to_string(&path) {
            Ok(want) if want == text => {}
            Ok(want) => {
                scene.failures.push(format!("{}: {command}\n{}", path.display(), first_differences(&want, &text)))
            }
            Err(e) => scene.failures.push(format!("{}: {e} (create it with {BLESS_ENV}=1)", path.display())),
        }
    }
}

/// `--- NAME` and the output, marking a last line without its newline.
fn section(name: &str, bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let end = if text.is_empty() || text.ends_with('\n') { "" } else { "\n[no newline at the end]\n" };
    format!("--- {name}\n{text}{end}")
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// What the golden file says of an output that cannot be read: `absent` when the command wrote
/// none (as on a failure), else the error's kind.
fn unreadable(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "absent".to_string(),
        kind => format!("unreadable: {kind:?}"),
    }
}

fn render_extra(extra: &Extra) -> String {
    match extra {
        Extra::Text(path) => match std::fs::read_to_string(path) {
            Ok(text) => format!("--- file {path}\n{text}{}", if text.ends_with('\n') { "" } else { "\n" }),
            Err(e) => format!("--- file {path}\n{}\n", unreadable(&e)),
        },
        Extra::Tensors(path) => {
            let mut text = format!("--- tensors {path}\n");
            match std::fs::read(path) {
                Ok(bytes) => {
                    let file = safetensors::SafeTensors::deserialize(&bytes).expect("a safetensors file");
                    let mut names = file.names();
                    names.sort();
                    for name in names {
                        let t = file.tensor(name).unwrap();
                        let (dtype, shape) = (t.dtype(), t.shape());
                        text += &format!("{name} {dtype:?} {shape:?} sha256 {}\n", sha256(t.data()));
                        text += &format!("  first values {:?}\n", first_values(t.dtype(), t.data()));
                    }
                }
                Err(e) => text += &format!("{}\n", unreadable(&e)),
            }
            text
        }
        Extra::Listing(dir) => {
            let mut text = format!("--- files in {dir}\n");
            let mut entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
                Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
                Err(e) => return text + &format!("{}\n", unreadable(&e)),
            };
            entries.sort();
            for entry in entries {
                let bytes = std::fs::read(&entry).unwrap();
                let name = entry.file_name().unwrap().to_string_lossy().into_owned();
                text += &format!("{name} {} bytes sha256 {}\n", bytes.len(), sha256(&bytes));
            }
            text
        }
    }
}

/// The first [`FIRST_VALUES`] elements of a tensor's little-endian bytes, as f32.
fn first_values(dtype: safetensors::Dtype, data: &[u8]) -> Vec<f32> {
    let values: Vec<f32> = match dtype {
        safetensors::Dtype::F16 => {
            data.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect()
        }
        safetensors::Dtype::BF16 => {
            data.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect()
        }
        safetensors::Dtype::F32 => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        other => panic!("no values shown for {other:?}"),
    };
    values.into_iter().take(FIRST_VALUES).collect()
}

/// The first lines where `want` and `got` differ, with a little context, as `-` (golden) and
/// `+` (now) lines; long lines are clipped around their first differing character.
fn first_differences(want: &str, got: &str) -> String {
    let want: Vec<&str> = want.lines().collect();
    let got: Vec<&str> = got.lines().collect();
    let first = (0..want.len().max(got.len())).find(|&i| want.get(i) != got.get(i)).unwrap_or(0);
    let mut text =
        format!("first difference at line {} (golden {} lines, now {}):\n", first + 1, want.len(), got.len());
    for line in &want[first.saturating_sub(DIFF_CONTEXT)..first.min(want.len())] {
        text += &format!("  {}\n", clip(line, 0));
    }
    let mut shown = 0;
    for i in first..want.len().max(got.len()) {
        let (w, g) = (want.get(i), got.get(i));
        if w == g {
            continue;
        }
        if shown == DIFF_LINES {
            text += "  ...\n";
            break;
        }
        let column = match (w, g) {
            (Some(w), Some(g)) => w.chars().zip(g.chars()).take_while(|(a, b)| a == b).count(),
            _ => 0,
        };
        w.iter().for_each(|w| text += &format!("- {}\n", clip(w, column)));
        g.iter().for_each(|g| text += &format!("+ {}\n", clip(g, column)));
        shown += 1;
    }
    text
}

/// At most [`CLIP_CHARS`] characters of `line` around character `column`.
fn clip(line: &str, column: usize) -> String {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= CLIP_CHARS {
        return line.to_string();
    }
    let start = column.saturating_sub(CLIP_CHARS / 4).min(chars.len() - CLIP_CHARS);
    let body: String = chars[start..start + CLIP_CHARS].iter().collect();
    let head = if start > 0 { format!("[from char {}] …", start + 1) } else { String::new() };
    let tail = if start + CLIP_CHARS < chars.len() { "…" } else { "" };
    format!("{head}{body}{tail}")
}

// Normalisation: each rule masks one kind of volatile value and nothing else; table layout,
// deterministic numbers and verdicts stay as printed.

/// Applies every normalisation rule to the rendered output.
fn normalise(text: &str) -> String {
    let text = mask_number_between(text, " in ", " s\n", "<secs>");
    let text = mask_number_between(&text, " in ", " s (", "<secs>");
    let text = mask_number_between(&text, " in ", " s, ", "<secs>");
    let text = mask_number_between(&text, ", ", " s of it outside", "<secs>");
    let text = mask_number_between(&text, "(checking ours ", " s, ", "<secs>");
    let text = mask_number_between(&text, " the peers ", " s)", "<secs>");
    let text = compile_summary_seconds(&text);
    let text = compile_time_column(&text);
    let text = mask_json_string(&text, "date_utc", "<DATE>");
    let text = mask_json_string(&text, "git_commit", "<COMMIT>");
    let text = mask_json_string(&text, "python", "<PYTHON>");
    let text = mask_json_string(&text, "evoattn_version", "<VERSION>");
    own_version(&text)
}

/// `BEFORE<number>AFTER` becomes `BEFORE<placeholder>AFTER`: wall-clock durations such as bench's
/// `[1/4] ... in 0.5 s, 0.4 s of it outside the timed samples` and tune's `9 evaluations in 3 s (`.
fn mask_number_between(text: &str, before: &str, after: &str, placeholder: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(before) {
        let start = at + before.len();
        let digits = rest[start..].find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len() - start);
        let is_number = digits > 0 && rest[start..start + digits].parse::<f64>().is_ok();
        if is_number && rest[start + digits..].starts_with(after) {
            out += &rest[..start];
            out += placeholder;
            rest = &rest[start + digits..];
        } else {
            out += &rest[..start];
            rest = &rest[start..];
        }
    }
    out + rest
}

/// `compile`'s summary line ends with its wall-clock time: `...; NVRTC 13.0; 0.5 s`.
fn compile_summary_seconds(text: &str) -> String {
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| match line.rsplit_once("; ") {
            Some((head, tail)) if line.contains(" variants: ") && tail.ends_with(" s") => format!("{head}; <secs> s"),
            _ => line.to_string(),
        })
        .collect();
    lines.join("\n")
}

/// `compile`'s table: the compile column holds a wall-clock time (`513 ms`, `0.43 ms cached`),
/// and the column's width follows the longest time. The time becomes `<ms>` and the column's
/// padding two spaces; every other column keeps its layout. A table without times (every
/// variant rejected) is left as printed.
fn compile_time_column(text: &str) -> String {
    const VERDICTS: [&str; 5] = ["  gate", "  PASS", "  FAIL: ", "  rejected: ", "  COMPILE ERROR: "];
    let mut timed = false;
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| {
            let is_row = line.starts_with("sm_") || (line.starts_with("arch ") && line.contains("smem st+dyn"));
            let verdict = VERDICTS.iter().filter_map(|v| line.find(v)).min();
            let (Some(at), true) = (verdict, is_row) else { return line.to_string() };
            let Some((left, cell)) = line[..at].trim_end().rsplit_once("  ") else { return line.to_string() };
            let cell = match cell.trim_start().split_once(" ms") {
                Some((ms, rest)) if ms.parse::<f64>().is_ok() => {
                    timed = true;
                    format!("<ms> ms{rest}")
                }
                _ => cell.trim_start().to_string(),
            };
            format!("{}  {cell}{}", left.trim_end(), &line[at..])
        })
        .collect();
    if timed {
        lines.join("\n")
    } else {
        text.to_string()
    }
}

/// A JSON string member `"KEY": "..."` gets `placeholder` as its value: the run's date, the
/// build's commit, the oracle's Python version and our version in a bench record.
fn mask_json_string(text: &str, key: &str, placeholder: &str) -> String {
    let lead = format!("\"{key}\": \"");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&lead) {
        let start = at + lead.len();
        let Some(len) = rest[start..].find('"') else { break };
        out += &rest[..start];
        out += placeholder;
        rest = &rest[start + len..];
    }
    out + rest
}

/// `info`'s first line names our version: `evoattn 0.1.0`.
fn own_version(text: &str) -> String {
    text.replace(&format!("\nevoattn {}\n", env!("CARGO_PKG_VERSION")), "\nevoattn <VERSION>\n")
}

// Inputs.

/// Writes q, k, v (f16, BHSD, `[B, H, S, D]` and `[B, Hkv, S, D]`) from a fixed pattern of values
/// exact in f16 to `path`; `k_shape` overrides k's shape (for a bad input).
fn write_qkv(path: &str, q_shape: [usize; 4], kv_shape: [usize; 4], k_shape: Option<Vec<usize>>) {
    let tensor = |shape: &[usize], salt: usize| -> Vec<u8> {
        let n: usize = shape.iter().product();
        (0..n)
            .flat_map(|i| evoattn::Dtype::F16.to_bits(((i * 37 + salt) % 29) as f64 / 8.0 - 1.75).to_le_bytes())
            .collect()
    };
    let k_shape = k_shape.unwrap_or(kv_shape.to_vec());
    let data = [tensor(&q_shape, 1), tensor(&k_shape, 2), tensor(&kv_shape, 3)];
    let shapes = [q_shape.to_vec(), k_shape, kv_shape.to_vec()];
    let views: Vec<(&str, safetensors::tensor::TensorView)> = ["q", "k", "v"]
        .iter()
        .zip(shapes.iter().zip(&data))
        .map(|(name, (shape, data))| {
            (*name, safetensors::tensor::TensorView::new(safetensors::Dtype::F16, shape.clone(), data).unwrap())
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

/// A copy of the fixture record `name` dated `date`, at `commit`, with every sample of ours
/// scaled by `factor`: the same cases measured in another run.
fn rerun_record(name: &str, date: &str, commit: &str, factor: f64, out: &str) {
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap();
    v["env"]["date_utc"] = date.into();
    v["env"]["git_commit"] = commit.into();
    for r in v["results"].as_array_mut().unwrap() {
        for t in r["ours"]["samples_us"].as_array_mut().unwrap() {
            *t = ((t.as_f64().unwrap() * factor * 100.0).round() / 100.0).into();
        }
    }
    std::fs::write(out, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

// The goldens, one test per command (or story of commands sharing a cache dir).

#[test]
fn help() {
    let mut s = Scene::new();
    s.evoattn(&["--help"]).golden("help");
    for command in ["info", "run", "check", "bench", "compile", "gate", "profile", "trace", "invert", "report", "tune"]
    {
        s.evoattn(&[command, "--help"]).golden(&format!("help-{command}"));
    }
    s.finish();
}

#[test]
fn info() {
    let mut s = Scene::new();
    s.evoattn(&["info"]).golden("info");
    s.finish();
}

#[test]
fn check() {
    let mut s = Scene::new();
    s.evoattn(&["check", "--preset", "small"]).golden("check-preset-small");
    s.evoattn(&["check", "--shape", "1,2,64,64", "--impl", "mma", "--config", "block_n=128,stages=2", "-v"])
        .golden("check-impl-config");
    // No kernel for head dim 96: the error is written under its first case, the others point to it.
    s.evoattn(&["check", "--shape", "1,2,64,96", "--causal", "all"]).golden("check-error-said-once");
    s.evoattn(&["check", "--shape", "2,4,100,128,2,160", "--causal", "all", "--layout", "bshd", "--dtype", "bf16"])
        .golden("check-gqa-causal-bshd");
    s.evoattn(&["check", "--shape", "1,2,33,64", "--impl", "wgmma", "--config", "block_n=64", "--config-on-plan"])
        .golden("check-config-on-plan");
    s.evoattn(&["check", "--shape", "1,2,33,64", "--scale", "-0.3", "--seeds", "1", "--seed", "5"])
        .golden("check-scale-seed");
    s.evoattn(&["check", "--shape", "1,2,40,64", "--causal", "all"])
        .env("EVOATTN_MOCK_FAULT", "wrong")
        .golden("check-fail-wrong");
    s.evoattn(&["check", "--shape", "1,2,40,64", "--quiet"])
        .env("EVOATTN_MOCK_FAULT", "unwritten")
        .golden("check-fail-unwritten-quiet");
    s.finish();
}

#[test]
fn run() {
    let mut s = Scene::new();
    let input = s.path("qkv.safetensors");
    write_qkv(&input, [1, 4, 16, 64], [1, 2, 16, 64], None);
    let output = s.path("o.safetensors");
    s.evoattn(&["run", "--input", &input, "--output", &output]).tensors(&output).golden("run");
    let lse = s.path("o-lse.safetensors");
    s.evoattn(&["run", "--input", &input, "--output", &lse, "--causal", "bottom-right", "--lse", "--scale", "0.3"])
        .tensors(&lse)
        .golden("run-causal-lse-scale");
    let mma = s.path("o-mma.safetensors");
    s.evoattn(&["run", "--input", &input, "--output", &mma, "--impl", "mma", "--config", "block_m=64,stages=2"])
        .tensors(&mma)
        .golden("run-impl-config");
    let bshd = s.path("o-bshd.safetensors");
    s.evoattn(&["run", "--input", &input, "--output", &bshd, "--layout", "bshd", "--causal"])
        .tensors(&bshd)
        .golden("run-bshd");
    let env = s.path("o-env.safetensors");
    s.evoattn(&["run", "--input", &input, "--output", &env]).env("EVOATTN_IMPL", "reference").golden("run-env-impl");

    let bad = s.path("bad-k.safetensors");
    write_qkv(&bad, [1, 4, 16, 64], [1, 2, 16, 64], Some(vec![1, 2, 15, 64]));
    // Each error leaves no output file behind.
    let out = s.path("never.safetensors");
    s.evoattn(&["run", "--input", &bad, "--output", &out]).tensors(&out).golden("run-error-kv-shape-mismatch");
    s.evoattn(&["run", "--input", &input, "--output", &out, "--impl", "mma", "--config", "warps=4"])
        .tensors(&out)
        .golden("run-error-lever");
    s.evoattn(&["run", "--input", &input, "--output", &out, "--scale", "0"]).tensors(&out).golden("run-error-scale");
    s.evoattn(&["run", "--input", &s.path("missing.safetensors"), "--output", &out])
        .tensors(&out)
        .golden("run-error-missing-input");
    s.finish();
}

#[test]
fn bench() {
    let mut s = Scene::new();
    let record = s.path("bench.json");
    s.evoattn(&[
        "bench",
        "--shape",
        "1,4,256,64",
        "--shape",
        "2,4,100,128,2",
        "--causal",
        "none,bottom-right",
        "--reps",
        "10",
        "--block",
        "5",
        "--json",
        &record,
    ])
    .file(&record)
    .golden("bench-peers-json");
    // The measured record re-gated offline.
    s.evoattn(&["gate", "--samples", &record, "--no-history"]).golden("bench-record-regated");
    s.evoattn(&["bench", "--shape", "1,4,256,64", "--peers", "none", "--reps", "5", "--host-cost", "--no-history"])
        .golden("bench-host-cost");
    s.evoattn(&[
        "bench",
        "--shape",
        "1,2,512,128",
        "--impl",
        "wgmma",
        "--config",
        "tma_store=1",
        "--config-on-plan",
        "--peers",
        "sdpa-cudnn,self",
        "--mode",
        "graph",
        "--reps",
        "6",
        "--no-history",
        "-v",
    ])
    .golden("bench-config-on-plan-graph");
    // No oracle (its Python is absent): every peer of every case is missing for one reason, said once.
    s.evoattn(&[
        "bench",
        "--shape",
        "1,2,64,64",
        "--shape",
        "1,2,80,64",
        "--causal",
        "all",
        "--reps",
        "3",
        "--no-history",
    ])
    .env("EVOATTN_ORACLE_FAKE", "0")
    .env("EVOATTN_PYTHON", "/nonexistent/python3")
    .golden("bench-no-oracle-said-once");
    s.evoattn(&["bench", "--shape", "1,2,256,64", "--peers", "none", "--reps", "30", "--block", "10", "--no-history"])
        .env("EVOATTN_MOCK_FAULT", "warming")
        .golden("bench-drift-measured-again");
    s.finish();
}

#[test]
fn gate_fixtures() {
    let mut s = Scene::new();
    let gate = |s: &mut Scene, name: &str, extra: &[&str], golden: &str| {
        let path = fixture(name);
        s.evoattn(&[&["gate", "--no-history", "--samples", &path][..], extra].concat()).golden(golden);
    };
    gate(&mut s, "win.json", &[], "gate-win");
    gate(&mut s, "win.json", &["--format", "markdown"], "gate-win-markdown");
    gate(&mut s, "win.json", &["--against", "sdpa-flash", "--format", "json"], "gate-win-json-against-flash");
    gate(&mut s, "win.json", &["--speedup", "2"], "gate-win-strict-speedup-fails");
    gate(&mut s, "loss.json", &[], "gate-loss");
    gate(&mut s, "loss.json", &["--format", "json", "--p90"], "gate-loss-json-p90");
    gate(&mut s, "tie.json", &["--against", "sdpa-flash", "--format", "markdown"], "gate-tie-markdown");
    gate(&mut s, "refused.json", &[], "gate-refused-best");
    gate(&mut s, "refused.json", &["--against", "fa4"], "gate-refused-could-not-run");
    gate(&mut s, "win.json", &["--confidence", "1"], "gate-error-confidence");
    gate(&mut s, "win.json", &["--reps", "10"], "gate-error-samples-with-reps");
    s.finish();
}

#[test]
fn gate_measured() {
    let mut s = Scene::new();
    let record = s.path("gate.json");
    s.evoattn(&["gate", "--shape", "1,4,256,64", "--causal", "none,bottom-right", "--reps", "10", "--record", &record])
        .golden("gate-measured-pass");
    s.evoattn(&["gate", "--samples", &record, "--against", "sdpa-flash", "--no-history", "-v"])
        .golden("gate-measured-record-against-flash");
    s.evoattn(&[
        "gate",
        "--shape",
        "1,2,64,64",
        "--peers",
        "self",
        "--reps",
        "30",
        "--against",
        "self",
        "--no-history",
    ])
    .golden("gate-measured-a-a-fails");
    s.evoattn(&["gate", "--shape", "1,2,64,64", "--peers", "none", "--reps", "10", "--no-history"])
        .golden("gate-measured-no-peer");
    s.finish();
}

#[test]
fn history_and_report() {
    let mut s = Scene::new();
    let [first, slower, steady] = ["first.json", "slower.json", "steady.json"].map(|n| s.path(n));
    rerun_record("win.json", "2026-01-01T00:00:00Z", "1111111111111111111111111111111111111111", 1.0, &first);
    rerun_record("win.json", "2026-01-02T00:00:00Z", "2222222222222222222222222222222222222222", 1.2, &slower);
    rerun_record("win.json", "2026-01-03T00:00:00Z", "3333333333333333333333333333333333333333", 1.01, &steady);
    s.evoattn(&["gate", "--samples", &first, "--against-history"]).golden("history-gate-no-history");
    s.evoattn(&["gate", "--samples", &slower, "--against-history"]).golden("history-gate-regressed");
    s.evoattn(&["gate", "--samples", &steady, "--against-history", "--format", "markdown"])
        .golden("history-gate-within-tolerance-markdown");
    s.evoattn(&["gate", "--samples", &slower, "--against-history", "--no-history", "--format", "json"])
        .golden("history-gate-regressed-json");
    let all = s.path("report-history");
    s.evoattn(&["report", "--out", &all])
        .file(&format!("{all}/report.md"))
        .file(&format!("{all}/history.csv"))
        .listing(&all)
        .golden("report-history");
    let since = s.path("report-since");
    s.evoattn(&["report", "--out", &since, "--since", "2222222"])
        .file(&format!("{since}/report.md"))
        .listing(&since)
        .golden("report-history-since-commit");
    s.evoattn(&["report", "--out", &since, "--since", "deadbeef"]).golden("report-error-unknown-commit");
    s.finish();
}

#[test]
fn report_records() {
    let mut s = Scene::new();
    let out = s.path("report");
    s.evoattn(&[
        "report",
        "--records",
        &fixture("win.json"),
        &fixture("loss.json"),
        &fixture("refused.json"),
        "--out",
        &out,
    ])
    .file(&format!("{out}/report.md"))
    .file(&format!("{out}/results.csv"))
    .listing(&out)
    .golden("report-fixtures");
    let h100 = repo_root().join("bench/results/2026-11-22-fa3-grid-hd128-wgmma-tma.json");
    let out = s.path("report-h100");
    s.evoattn(&["report", "--records", h100.to_str().unwrap(), "--out", &out])
        .file(&format!("{out}/report.md"))
        .file(&format!("{out}/results.csv"))
        .listing(&out)
        .golden("report-committed-h100-record");
    s.evoattn(&["report", "--records", &s.path("absent.json"), "--out", &out]).golden("report-error-missing-record");
    s.finish();
}

#[test]
fn tune() {
    let mut s = Scene::new();
    if !common::have_nvrtc() {
        return;
    }
    let elites = s.path("elites.json");
    let shapes = ["--shape", "1,2,128,64", "--shape", "1,2,300,64"];
    s.evoattn(
        &[&["tune", "--impl", "mma", "--gpus", "0", "--generations", "1", "--json", &elites][..], &shapes].concat(),
    )
    .file(&elites)
    .golden("tune-mma");
    s.evoattn(&["tune", "--show"]).golden("tune-show");
    s.evoattn(&["tune", "--show", "-v"]).golden("tune-show-verbose");
    // The planner now plans with the stored best.
    s.evoattn(&["info"]).golden("tune-then-info");
    s.evoattn(&["bench", "--impl", "mma", "--shape", "1,2,300,64", "--peers", "none", "--reps", "5", "--no-history"])
        .golden("tune-then-bench");
    s.evoattn(&["tune", "--impl", "reference", "--shape", "1,2,64,64"]).golden("tune-error-reference");
    s.finish();
}

#[test]
fn compile() {
    let mut s = Scene::new();
    s.evoattn(&["compile", "--levers"]).golden("compile-levers");
    // Rejected before NVRTC is needed.
    s.evoattn(&[
        "compile",
        "--impl",
        "mma",
        "--arch",
        "sm_89",
        "--dtype",
        "f16",
        "--config",
        "block_m=128,block_n=128,stages=3",
    ])
    .golden("compile-rejected");
    s.evoattn(&["compile", "--impl", "mma", "--arch", "sm_89", "--config", "warps=4"]).golden("compile-error-lever");
    if !common::have_nvrtc() {
        return s.finish();
    }
    let one = ["compile", "--impl", "mma", "--arch", "sm_80", "--dtype", "f16", "--head-dim", "64"];
    s.evoattn(&one).golden("compile-one-kernel");
    s.evoattn(&one).golden("compile-one-kernel-cached");
    s.finish();
}

#[test]
fn profile() {
    use std::os::unix::fs::PermissionsExt;
    let mut s = Scene::new();
    // A stand-in ncu: records its arguments, prints the real H100 capture.
    let ncu = s.path("ncu");
    let args = s.path("ncu-args.txt");
    let capture = fixture("ncu/h100-ncu-mma-metrics.csv");
    std::fs::write(&ncu, format!("#!/bin/sh\necho \"$@\" > '{args}'\ncat '{capture}'\n")).unwrap();
    std::fs::set_permissions(&ncu, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = s.path("profile");
    s.evoattn(&[
        "profile",
        "--shape",
        "4,16,4096,128",
        "--dtype",
        "bf16",
        "--impl",
        "mma",
        "--ncu",
        &ncu,
        "--out",
        &out,
    ])
    .file(&args)
    .file(&format!("{out}/profile.json"))
    .listing(&out)
    .golden("profile-fake-ncu");
    s.evoattn(&["profile", "--shape", "1,2,64,64", "--ncu", &s.path("no-ncu")]).golden("profile-error-missing-ncu");
    s.finish();
}

#[test]
fn trace() {
    let mut s = Scene::new();
    let json = s.path("trace.json");
    s.evoattn(&["trace", "--shape", "2,4,512,64", "--dtype", "bf16", "--out", &json]).file(&json).golden("trace");
    s.evoattn(&["trace", "--shape", "1,4,1024,64", "--impl", "wgmma", "--config", "stages=3"]).golden("trace-config");
    s.evoattn(&["trace", "--shape", "1,4,1024,128", "--impl", "wgmma", "--config", "stages=3"])
        .golden("trace-error-smem");
    s.evoattn(&["trace", "--shape", "2,4,256,64", "--impl", "mma"]).golden("trace-error-mma");
    s.finish();
}

#[test]
fn bad_inputs() {
    let mut s = Scene::new();
    s.evoattn(&["frobnicate"]).golden("error-unknown-command");
    s.evoattn(&["check"]).golden("error-check-no-problems");
    s.evoattn(&["check", "--shape", "1,2,3"]).golden("error-check-shape");
    s.evoattn(&["check", "--shape", "1,2,33,100"]).golden("error-check-head-dim");
    s.evoattn(&["check", "--preset", "nope"]).golden("error-check-preset");
    s.evoattn(&["check", "--shape", "1,2,33,64", "--dtype", "f32"]).golden("error-check-dtype");
    s.evoattn(&["check", "--shape", "1,4,33,64,3"]).golden("error-check-kv-heads");
    s.evoattn(&["bench", "--shape", "1,2,64,64", "--peers", "none", "--config-on-plan"])
        .golden("error-bench-config-on-plan");
    s.evoattn(&["bench", "--shape", "1,2,64,64", "--peers", "cutlass"]).golden("error-bench-peer");
    s.evoattn(&["check", "--shape", "1,2,64,64"]).env("EVOATTN_BACKEND", "bogus").golden("error-backend");
    s.evoattn(&["check", "--shape", "1,2,64,64"]).env("EVOATTN_IMPL", "fast").golden("error-env-impl");
    s.finish();
}
