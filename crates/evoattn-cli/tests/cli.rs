//! The `evoattn run` and `evoattn quantize` command-line contracts, exercised against the mock
//! backend (CPU float64, rounded to the dtype), so they run on machines without a GPU.

use evoattn::reference::{attention_f64, dense_o, logical_offsets};
use evoattn::{Causal, Dtype, Layout, Problem, Shape, TensorName};
use safetensors::tensor::TensorView;
use safetensors::SafeTensors;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXIT_BAD_INPUT: i32 = 2;

/// Runs the binary on the mock backend with a clean environment for the variables it reads.
fn evoattn(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_evoattn"));
    cmd.args(args).env("EVOATTN_BACKEND", "mock").env_remove("EVOATTN_IMPL").env_remove("EVOATTN_MOCK_FAULT");
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd.output().expect("the evoattn binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One tensor for an input file.
struct Tensor {
    name: &'static str,
    dtype: safetensors::Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl Tensor {
    /// A tensor of 16-bit `dtype` values from a fixed pattern of small values exact in f16 and
    /// bf16 (multiples of 1/8 in [-1.75, 1.75]); `salt` makes q, k and v differ.
    fn pattern(name: &'static str, dtype: Dtype, shape: &[usize], salt: usize) -> Self {
        let n: usize = shape.iter().product();
        let data =
            (0..n).flat_map(|i| dtype.to_bits(((i * 37 + salt) % 29) as f64 / 8.0 - 1.75).to_le_bytes()).collect();
        let dtype = match dtype {
            Dtype::F16 => safetensors::Dtype::F16,
            Dtype::Bf16 => safetensors::Dtype::BF16,
            Dtype::E4m3 | Dtype::E4m3F16 => panic!("the pattern is 16-bit"),
        };
        Tensor { name, dtype, shape: shape.to_vec(), data }
    }

    /// The same shape and values, labelled as another dtype (byte size adjusted).
    fn with_dtype(mut self, dtype: safetensors::Dtype) -> Self {
        let n: usize = self.shape.iter().product();
        self.data = vec![0; n * dtype.bitsize() / 8];
        self.dtype = dtype;
        self
    }
}

/// q, k, v for `shape` in `layout`.
fn qkv(shape: Shape, dtype: Dtype, layout: Layout) -> Vec<Tensor> {
    let Shape { b, h, hkv, sq, sk, d } = shape;
    vec![
        Tensor::pattern("q", dtype, &layout.dims(b, h, sq, d), 1),
        Tensor::pattern("k", dtype, &layout.dims(b, hkv, sk, d), 2),
        Tensor::pattern("v", dtype, &layout.dims(b, hkv, sk, d), 3),
    ]
}

fn write_file(dir: &Path, tensors: &[Tensor]) -> PathBuf {
    let views: Vec<(&str, TensorView)> = tensors
        .iter()
        .map(|t| (t.name, TensorView::new(t.dtype, t.shape.clone(), &t.data).expect("a consistent tensor")))
        .collect();
    let path = dir.join("in.safetensors");
    std::fs::write(&path, safetensors::serialize(views, None).expect("serializable")).expect("writable temp dir");
    path
}

fn u16s(bytes: &[u8]) -> Vec<u16> {
    bytes.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect()
}

/// Runs `evoattn run` on `tensors` with `extra` flags; returns the process output and the
/// output file's bytes (empty when none was written).
fn run_on(tensors: &[Tensor], extra: &[&str], env: &[(&str, &str)]) -> (Output, Vec<u8>) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let input = write_file(dir.path(), tensors);
    let output = dir.path().join("out.safetensors");
    let mut args = vec!["run", "--input", input.to_str().unwrap(), "--output", output.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = evoattn(&args, env);
    (out, std::fs::read(&output).unwrap_or_default())
}

/// Asserts a run succeeded and that `o` equals the float64 reference rounded to the dtype
/// (the mock's exact output), read back through the layout. Returns the output file.
fn assert_round_trip(problem: &Problem, layout: Layout, extra: &[&str]) -> Vec<u8> {
    let tensors = qkv(problem.shape, problem.dtype, layout);
    let (out, file) = run_on(&tensors, extra, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let st = SafeTensors::deserialize(&file).expect("a safetensors output");
    let o = st.tensor("o").expect("an o tensor");
    let s = problem.shape;
    assert_eq!(o.shape(), layout.dims(s.b, s.h, s.sq, s.d));
    assert_eq!(o.dtype(), tensors[0].dtype);
    let [q, k, v] = [0, 1, 2].map(|i| u16s(&tensors[i].data));
    let want: Vec<f64> = attention_f64(problem, &q, &k, &v).o.iter().map(|&x| problem.dtype.round(x)).collect();
    assert_eq!(dense_o(problem, &u16s(o.data())), want);
    file
}

#[test]
fn run_bhsd_gqa_top_left() {
    let shape = Shape { b: 2, h: 4, hkv: 2, sq: 9, sk: 13, d: 64 };
    let problem = Problem::dense(shape, Dtype::F16, Layout::Bhsd).with_causal(Causal::TopLeft);
    assert_round_trip(&problem, Layout::Bhsd, &["--causal"]);
}

#[test]
fn run_bshd_mqa_bottom_right_with_scale() {
    // Sq > Sk: the first rows see no key and must come back as 0.
    let shape = Shape { b: 1, h: 4, hkv: 1, sq: 11, sk: 6, d: 128 };
    let problem =
        Problem::dense(shape, Dtype::Bf16, Layout::Bshd).with_causal(Causal::BottomRight).with_scale(Some(0.3));
    assert_round_trip(&problem, Layout::Bshd, &["--layout", "bshd", "--causal", "bottom-right", "--scale", "0.3"]);
}

#[test]
fn lse_is_f32_bhsq_with_minus_infinity_for_rows_without_keys() {
    let shape = Shape { b: 2, h: 2, hkv: 2, sq: 5, sk: 3, d: 64 };
    let problem = Problem::dense(shape, Dtype::F16, Layout::Bshd).with_causal(Causal::BottomRight).with_lse(true);
    let file = assert_round_trip(&problem, Layout::Bshd, &["--layout", "bshd", "--causal", "bottom-right", "--lse"]);
    let st = SafeTensors::deserialize(&file).unwrap();
    let lse = st.tensor("lse").expect("an lse tensor");
    assert_eq!((lse.dtype(), lse.shape()), (safetensors::Dtype::F32, &[2, 2, 5][..]));
    let got: Vec<f32> = lse.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    let tensors = qkv(shape, Dtype::F16, Layout::Bshd);
    let [q, k, v] = [0, 1, 2].map(|i| u16s(&tensors[i].data));
    let want: Vec<f32> = attention_f64(&problem, &q, &k, &v).lse.iter().map(|&x| x as f32).collect();
    assert_eq!(got, want);
    // offset Sk - Sq = -2: rows 0 and 1 of each head see nothing
    assert_eq!(got.iter().filter(|x| **x == f32::NEG_INFINITY).count(), 2 * 2 * 2);
}

#[test]
fn empty_problem_writes_an_empty_output() {
    let shape = Shape { b: 0, h: 2, hkv: 1, sq: 4, sk: 4, d: 64 };
    let problem = Problem::dense(shape, Dtype::F16, Layout::Bhsd);
    let file = assert_round_trip(&problem, Layout::Bhsd, &[]);
    let st = SafeTensors::deserialize(&file).unwrap();
    assert!(st.tensor("o").unwrap().data().is_empty());
}

#[test]
fn env_override_applies_to_auto_only() {
    let tensors = qkv(Shape::new(1, 2, 8, 64), Dtype::F16, Layout::Bhsd);
    let (out, _) = run_on(&tensors, &["--impl", "auto"], &[("EVOATTN_IMPL", "reference")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("evoattn_reference_f16_d64"), "{}", stderr(&out));
    let (out, _) = run_on(&tensors, &["--impl", "mma"], &[("EVOATTN_IMPL", "reference")]);
    assert!(stderr(&out).contains("evoattn_mma_f16_d64"), "{}", stderr(&out));
    let (out, _) = run_on(&tensors, &[], &[]);
    assert!(stderr(&out).contains("evoattn_wgmma_f16_d64"), "auto on the (H100) mock is wgmma: {}", stderr(&out));
}

#[test]
fn config_overrides_reach_the_kernel() {
    let tensors = qkv(Shape::new(1, 2, 8, 64), Dtype::Bf16, Layout::Bhsd);
    let (out, _) = run_on(&tensors, &["--impl", "mma", "--config", "block_m=64,stages=2"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("evoattn_mma_bf16_d64_bm64_bn64_s2_"), "{}", stderr(&out));
}

/// The config of our kernel in a bench record's first case, read back from its symbol name.
fn config_in_record(path: &std::path::Path) -> String {
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(path).expect("the bench record")).unwrap();
    let name = record["results"][0]["ours"]["name"].as_str().expect("our kernel's name").to_string();
    let spec = evoattn::KernelSpec::from_name(&name).unwrap_or_else(|| panic!("{name} is a kernel's name"));
    spec.config.to_string()
}

#[test]
fn config_on_plan_changes_one_lever_of_the_planners_choice() {
    // On the (H100) mock, the planner gives this short unmasked hd128 problem persistent blocks
    // with 128-key tiles; plain --config starts from the head dim's default (176-key tiles, one
    // tile per block).
    let cache = tempfile::tempdir().unwrap();
    let bench = |extra: &[&str]| {
        let json = cache.path().join("bench.json");
        let args = [
            &["bench", "--shape", "1,2,512,128", "--peers", "none", "--reps", "3", "--impl", "wgmma"][..],
            &["--json", json.to_str().unwrap()],
            extra,
        ];
        let out = evoattn(&args.concat(), &[("EVOATTN_CACHE_DIR", cache.path().to_str().unwrap())]);
        assert!(out.status.success(), "{}", stderr(&out));
        config_in_record(&json)
    };
    let on_plan = bench(&["--config", "o_staging=tile", "--config-on-plan"]);
    let planned = "block_n=128,stages=2,consumer_warpgroups=2,pipeline=pingpong,schedule=persistent,o_staging=tile";
    assert!(on_plan.contains(planned), "{on_plan}");
    let on_default = bench(&["--config", "o_staging=tile"]);
    let default = "block_n=176,stages=2,consumer_warpgroups=2,pipeline=pingpong,schedule=grid,o_staging=tile";
    assert!(on_default.contains(default), "{on_default}");
    let out = evoattn(&["bench", "--shape", "1,2,64,64", "--peers", "none", "--config-on-plan"], &[]);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT), "{}", stderr(&out));
    assert!(stderr(&out).contains("--config"), "{}", stderr(&out));
}

#[test]
fn the_planner_splits_the_tail_of_long_unmasked_persistent_problems_only() {
    // On the (H100) mock: 2048 keys make 16 key blocks of 128 a tile, where the split tail starts;
    // 1024 keys and causal problems keep whole tiles. (`o_staging=tile` on these plans changes
    // nothing but makes the bench print the planned levers.)
    let cache = tempfile::tempdir().unwrap();
    let env = [("EVOATTN_CACHE_DIR", cache.path().to_str().unwrap())];
    let json = cache.path().join("bench.json");
    let bench = |extra: &[&str]| {
        let args =
            [&["bench", "--peers", "none", "--reps", "3", "--impl", "wgmma", "--no-history"][..], extra].concat();
        evoattn(&args, &env)
    };
    let planned = |shape: &[&str]| {
        let out = bench(
            &[shape, &["--config", "o_staging=tile", "--config-on-plan", "--json", json.to_str().unwrap()][..]]
                .concat(),
        );
        assert!(out.status.success(), "{shape:?}: {}", stderr(&out));
        config_in_record(&json)
    };
    assert!(planned(&["--shape", "1,2,128,128,2,2048"]).contains("schedule=split-tail,o_staging=tile"));
    assert!(planned(&["--shape", "1,2,128,128,2,1024"]).contains("schedule=persistent,o_staging=tile"));
    assert!(planned(&["--shape", "1,2,128,128,2,2048", "--causal", "top-left"]).contains("schedule=claimed"));
    // The old switch forced on one tile per block (hd256's plan) is no schedule: refused before
    // anything is timed.
    let out = bench(&["--shape", "1,2,128,256,2,4096", "--config", "split_tail=1", "--config-on-plan"]);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT), "{}", stderr(&out));
    assert!(stderr(&out).contains("split_tail=1 is no schedule of wgmma"), "{}", stderr(&out));
}

#[test]
fn bench_measures_a_case_again_when_its_samples_drift() {
    // The `warming` mock's first timing call is 4x slower: with blocks of 10 of 30 samples the
    // first third drifts, so the case is measured again and the record keeps the steady pass.
    let cache = tempfile::tempdir().unwrap();
    let json = cache.path().join("bench.json");
    let args = ["bench", "--shape", "1,2,256,64", "--peers", "none", "--reps", "30", "--block", "10", "--no-history"];
    let env = [("EVOATTN_CACHE_DIR", cache.path().to_str().unwrap()), ("EVOATTN_MOCK_FAULT", "warming")];
    let out = evoattn(&[&args[..], &["--json", json.to_str().unwrap()]].concat(), &env);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("samples drift from the first third to the last (ours -75%); measuring the case again"),
        "{}",
        stderr(&out)
    );
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let samples: Vec<f64> =
        record["results"][0]["ours"]["samples_us"].as_array().unwrap().iter().map(|s| s.as_f64().unwrap()).collect();
    let (lo, hi) = samples.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    assert_eq!(samples.len(), 30);
    assert!(hi < 1.5 * lo, "the second pass alone, steady: {samples:?}");
    // Without the fault nothing is measured twice.
    let out = evoattn(&args, &env[..1]);
    assert!(out.status.success() && !stderr(&out).contains("measuring the case again"), "{}", stderr(&out));
}

#[test]
fn e4m3_bench_is_measured_against_the_fp8_peer_by_default_and_16_bit_peers_refuse_it() {
    let cache = tempfile::tempdir().unwrap();
    let json = cache.path().join("bench.json");
    let env = [("EVOATTN_CACHE_DIR", cache.path().to_str().unwrap()), ("EVOATTN_ORACLE_FAKE", "1")];
    let base = ["bench", "--shape", "1,4,128,64,2", "--dtype", "e4m3", "--reps", "4", "--no-history"];
    let out = evoattn(&[&base[..], &["--json", json.to_str().unwrap()]].concat(), &env);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("E4M3 inputs get one descale per tensor, as cudnn-fp8 takes no other"),
        "{}",
        stderr(&out)
    );
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let peers = record["results"][0]["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 1, "{peers:?}");
    assert_eq!((peers[0]["name"].as_str(), peers[0]["status"].as_str()), (Some("cudnn-fp8"), Some("ok")));
    assert_eq!(peers[0]["samples_us"].as_array().unwrap().len(), 4);
    // A 16-bit peer asked for by name says why it does not run the case.
    let out =
        evoattn(&[&base[..], &["--peers", "sdpa-cudnn,cudnn-fp8", "--json", json.to_str().unwrap()]].concat(), &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let sdpa = &record["results"][0]["peers"][0];
    assert_eq!(sdpa["status"].as_str(), Some("refused"), "{sdpa}");
    assert!(sdpa["reason"].as_str().unwrap().contains("this case is E4M3"), "{sdpa}");
}

#[test]
fn e4m3_v_held_transposed_is_checked_and_benched_against_v_in_rows_and_refused_where_it_cannot_be() {
    let cache = tempfile::tempdir().unwrap();
    let json = cache.path().join("bench.json");
    let env = [("EVOATTN_CACHE_DIR", cache.path().to_str().unwrap()), ("EVOATTN_ORACLE_FAKE", "1")];
    // Sk = 300: V held as [B, Hkv, D, 304], the planner's wgmma reading it as it is.
    let shape = ["--shape", "1,4,130,128,2,300", "--dtype", "e4m3", "--v-layout", "bhds"];
    let out = evoattn(&[&["check"][..], &shape, &["--causal", "all"]].concat(), &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(table.matches("bhsd/v-bhds").count(), 3, "{table}");
    assert!(table.contains("3 passed, 0 failed"), "{table}");
    // The peers are given the same V in rows; the record names the layout.
    let out = evoattn(
        &[&["bench"][..], &shape, &["--reps", "4", "--no-history", "--json", json.to_str().unwrap()]].concat(),
        &env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(record["results"][0]["case"]["layout"].as_str(), Some("bhsd/v-bhds"));
    assert_eq!(record["results"][0]["peers"][0]["status"].as_str(), Some("ok"), "{record}");
    // 16-bit inputs, a kernel that reads V's rows, and the tuner say why not.
    for (args, message) in [
        (&["check", "--shape", "1,4,130,128", "--dtype", "bf16", "--v-layout", "bhds"][..], "only E4M3 inputs take"),
        (
            &["check", "--shape", "1,4,130,128", "--dtype", "e4m3", "--v-layout", "bhds", "--impl", "mma8"][..],
            "V is given keys-contiguous",
        ),
        (&["tune", "--shape", "1,4,130,128", "--dtype", "e4m3", "--v-layout", "bhds"][..], "the tuner times V in rows"),
        (&["check", "--shape", "1,4,130,128", "--v-layout", "columns"][..], "expected rows or bhds"),
    ] {
        let out = evoattn(args, &env);
        let said = format!("{}{}", stderr(&out), String::from_utf8_lossy(&out.stdout));
        assert!(!out.status.success() && said.contains(message), "{args:?}: {said}");
    }
}

#[test]
fn bench_host_cost_gives_each_case_the_median_of_its_rounds() {
    let cache = tempfile::tempdir().unwrap();
    let args = ["bench", "--shape", "1,8,512,64", "--shape", "2,4,100,128,2", "--peers", "none", "--reps", "3"];
    let out = evoattn(
        &[&args[..], &["--host-cost", "--no-history"]].concat(),
        &[("EVOATTN_CACHE_DIR", cache.path().to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // The host-cost table's rows: shape, dtype, mask, layout, median, p90, round medians, target.
    let after = &text[text.find("host cost of one call").expect("the host-cost table")..];
    let rows: Vec<Vec<&str>> = after
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cells| cells.len() == 8 && cells[0].starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    // The mock's calls cost 3.5 us within +-2%: the median and every round's median lie inside.
    for row in &rows {
        assert_eq!(row[7], "within", "{row:?}");
        let (lo, hi) = row[6].split_once('-').expect("round medians lo-hi");
        for x in [row[4], lo, hi] {
            let x: f64 = x.parse().unwrap();
            assert!((3.43..=3.57).contains(&x), "{x} in {row:?}");
        }
    }
    assert_eq!(rows[1][0], "2,4,100,128,2", "{text}");
    // A config the kernel cannot run is refused before any call is timed.
    let out = evoattn(
        &[&args[..], &["--host-cost", "--no-history", "--impl", "wgmma", "--config", "block_n=100"]].concat(),
        &[],
    );
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT), "{}", stderr(&out));
}

/// Each bad input exits 2 with exactly one line on stderr that contains `needle`, and writes
/// no output file.
fn assert_rejected(tensors: &[Tensor], extra: &[&str], env: &[(&str, &str)], needle: &str) {
    let (out, file) = run_on(tensors, extra, env);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line expected: {err}");
    assert!(err.starts_with("evoattn: ") && err.contains(needle), "want '{needle}' in: {err}");
    assert!(file.is_empty(), "no output file on failure");
}

#[test]
fn bad_inputs_exit_2_with_a_one_line_reason() {
    let shape = Shape { b: 1, h: 4, hkv: 2, sq: 8, sk: 8, d: 64 };
    let good = || qkv(shape, Dtype::F16, Layout::Bhsd);

    let mut rank3 = good();
    rank3[0].shape = vec![4, 8, 64];
    assert_rejected(&rank3, &[], &[], "tensor q: expected rank 4 [B, H, Sq, D], got shape [4, 8, 64]");

    let mut mixed = good();
    mixed[1] = Tensor::pattern("k", Dtype::Bf16, &[1, 2, 8, 64], 2);
    assert_rejected(&mixed, &[], &[], "tensor k: dtype bf16 does not match q's f16");

    let f32s: Vec<Tensor> = good().into_iter().map(|t| t.with_dtype(safetensors::Dtype::F32)).collect();
    assert_rejected(&f32s, &[], &[], "tensor q: dtype f32 is not supported (expected f16, bf16 or e4m3)");

    let heads = qkv(Shape { h: 6, hkv: 4, ..shape }, Dtype::F16, Layout::Bhsd);
    assert_rejected(
        &heads,
        &[],
        &[],
        "number of KV heads (4) must be at least 1 and divide the number of query heads (6)",
    );

    let head_dim = qkv(Shape { d: 100, ..shape }, Dtype::F16, Layout::Bhsd);
    assert_rejected(&head_dim, &[], &[], "head dim D=100 is not supported");

    let mut v_shape = good();
    v_shape[2] = Tensor::pattern("v", Dtype::F16, &[1, 2, 7, 64], 3);
    assert_rejected(&v_shape, &[], &[], "tensor v: expected shape [1, 2, 8, 64], got [1, 2, 7, 64]");

    // k is the odd one out: q and v have 8 rows, k 7. Named, with v's shape expected.
    let mut k_rows = good();
    k_rows[1] = Tensor::pattern("k", Dtype::F16, &[1, 2, 7, 64], 2);
    assert_rejected(&k_rows, &[], &[], "tensor k: expected shape [1, 2, 8, 64], got [1, 2, 7, 64]");
    // Where q backs neither (7 and 6 rows against its 8), both are named.
    let mut both = good();
    both[1] = Tensor::pattern("k", Dtype::F16, &[1, 2, 7, 64], 2);
    both[2] = Tensor::pattern("v", Dtype::F16, &[1, 2, 6, 64], 3);
    assert_rejected(
        &both,
        &[],
        &[],
        "tensors k and v must have the same shape: k is [1, 2, 7, 64], v is [1, 2, 6, 64]",
    );

    let mut k_batch = qkv(shape, Dtype::F16, Layout::Bshd);
    k_batch[1].shape = vec![2, 8, 2, 32];
    assert_rejected(&k_batch, &["--layout", "bshd"], &[], "tensor k: expected shape [1, 8, 2, 64], got [2, 8, 2, 32]");

    let mut no_v = good();
    no_v.pop();
    assert_rejected(&no_v, &[], &[], "has no tensor 'v' (expected q, k and v)");

    assert_rejected(&good(), &["--impl", "cutlass"], &[], "unknown implementation 'cutlass'");
    assert_rejected(&good(), &[], &[("EVOATTN_IMPL", "fast")], "EVOATTN_IMPL: unknown implementation 'fast'");
    assert_rejected(&good(), &["--scale", "0"], &[], "scale 0 must be finite and non-zero");
    assert_rejected(&good(), &["--impl", "mma", "--config", "warps=4"], &[], "--config: 'warps' is not a lever of mma");
    assert_rejected(&good(), &[], &[("EVOATTN_MOCK_FAULT", "bogus")], "EVOATTN_MOCK_FAULT=bogus");
}

#[test]
fn a_negative_scale_reaches_run() {
    let shape = Shape { b: 1, h: 2, hkv: 1, sq: 5, sk: 9, d: 64 };
    assert_round_trip(
        &Problem::dense(shape, Dtype::F16, Layout::Bhsd).with_scale(Some(-0.3)),
        Layout::Bhsd,
        &["--scale", "-0.3"],
    );
}

#[test]
fn check_names_an_unsupported_dtype_mask_or_layout_before_asking_for_problems() {
    // Alone on the line, the bad value is what is wrong, not the missing problems.
    for (args, message) in [
        (&["check", "--dtype", "f32"][..], "dtype 'f32' is not supported: expected f16, bf16, e4m3, e4m3f16 or all"),
        (
            &["check", "--shape", "1,2,33,64", "--dtype", "f32"][..],
            "dtype 'f32' is not supported: expected f16, bf16, e4m3, e4m3f16 or all",
        ),
        (
            &["bench", "--causal", "diagonal"][..],
            "mask 'diagonal' is not supported: expected none, top-left, bottom-right or all",
        ),
        (&["check", "--layout", "sbhd"][..], "layout 'sbhd' is not supported: expected bhsd, bshd or all"),
    ] {
        let out = evoattn(args, &[]);
        assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out).trim_end(), format!("evoattn: {message}"), "{args:?}");
    }
}

#[test]
fn output_files_are_checked_before_anything_runs() {
    // A file in a directory that does not exist: refused at once, before measuring, tuning or
    // tracing (no progress line, nothing added to the history or the tuner's store).
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let absent = dir.path().join("absent/out.json");
    let absent = absent.to_str().unwrap();
    let small = ["--shape", "1,2,64,64"];
    let runs: [(Vec<&str>, &str); 4] = [
        ([&["bench"][..], &small, &["--reps", "10", "--json", absent]].concat(), "--json"),
        (
            [&["gate"][..], &small, &["--peers", "self", "--against", "self", "--reps", "10", "--record", absent]]
                .concat(),
            "--record",
        ),
        ([&["tune"][..], &small, &["--impl", "mma", "--json", absent]].concat(), "--json"),
        ([&["trace"][..], &small, &["--impl", "wgmma", "--out", absent]].concat(), "--out"),
    ];
    for (args, flag) in runs {
        let out = evoattn(&args, &[("EVOATTN_CACHE_DIR", cache.to_str().unwrap()), ("EVOATTN_ORACLE_FAKE", "1")]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line, nothing measured: {err}");
        assert!(
            err.starts_with(&format!("evoattn: {flag} {absent}: the directory ")) && err.contains("does not exist"),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&out.stdout));
        assert!(!cache.join("history.sqlite").exists() && !cache.join("tune.sqlite").exists(), "{args:?}");
    }
    // A directory where a file belongs is refused as such.
    let out = evoattn(&["gate", "--shape", "1,2,64,64", "--record", dir.path().to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT));
    assert!(stderr(&out).contains("names a directory: --record takes a file name"), "{}", stderr(&out));
}

#[test]
fn unreadable_input_files_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.safetensors");
    let missing = dir.path().join("missing.safetensors");
    let out = evoattn(&["run", "--input", missing.to_str().unwrap(), "--output", output.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT));
    assert!(stderr(&out).contains("cannot read --input"), "{}", stderr(&out));
    assert_eq!(stderr(&out).trim_end().lines().count(), 1);

    let garbage = dir.path().join("garbage.safetensors");
    std::fs::write(&garbage, b"not a tensor file").unwrap();
    let out = evoattn(&["run", "--input", garbage.to_str().unwrap(), "--output", output.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT));
    assert!(stderr(&out).contains("is not a safetensors file"), "{}", stderr(&out));
}

#[test]
fn help_teaches_the_flags() {
    let out = evoattn(&["run", "--help"], &[]);
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in ["--causal [<ALIGN>]", "top-left", "bottom-right", "EVOATTN_IMPL", "bshd", "1/sqrt(D)", "Example"] {
        assert!(help.contains(needle), "'{needle}' missing from:\n{help}");
    }
}

/// The input pattern really is laid out by the layout: the same logical q gives the same o in
/// both layouts.
#[test]
fn layouts_agree_on_the_same_logical_data() {
    let shape = Shape { b: 2, h: 2, hkv: 1, sq: 4, sk: 6, d: 64 };
    let outputs: Vec<Vec<f64>> = [Layout::Bhsd, Layout::Bshd]
        .iter()
        .map(|&layout| {
            let problem = Problem::dense(shape, Dtype::F16, layout);
            // Logical values from one dense BHSD pattern, placed by this layout's strides.
            let tensors: Vec<Tensor> = qkv(shape, Dtype::F16, Layout::Bhsd)
                .into_iter()
                .zip([TensorName::Q, TensorName::K, TensorName::V])
                .map(|(mut t, name)| {
                    let dense = u16s(&t.data);
                    let mut placed = vec![0u16; dense.len()];
                    for (off, x) in logical_offsets(&problem, name).zip(dense) {
                        placed[off] = x;
                    }
                    let [b, heads, seq, d] = problem.dims(name);
                    t.shape = layout.dims(b, heads, seq, d).to_vec();
                    t.data = placed.iter().flat_map(|x| x.to_le_bytes()).collect();
                    t
                })
                .collect();
            let (out, file) = run_on(&tensors, &["--layout", layout.name()], &[]);
            assert!(out.status.success(), "{}", stderr(&out));
            let st = SafeTensors::deserialize(&file).unwrap();
            dense_o(&problem, &u16s(st.tensor("o").unwrap().data()))
        })
        .collect();
    assert_eq!(outputs[0], outputs[1]);
}

#[test]
fn without_a_gpu_commands_exit_2_with_one_line() {
    // The real backend: on a machine with a GPU this is a success instead, and says nothing here.
    for args in [&["info"][..], &["check", "--preset", "mission"][..]] {
        let out = Command::new(env!("CARGO_BIN_EXE_evoattn"))
            .args(args)
            .env_remove("EVOATTN_BACKEND")
            .env("EVOATTN_CACHE_DIR", std::env::temp_dir().join("evoattn-cli-test-cache"))
            .output()
            .expect("the evoattn binary runs");
        if out.status.success() {
            println!("skipped: a GPU is usable here");
            return;
        }
        assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT), "{args:?}: {}", stderr(&out));
        // One error line (progress notes such as the preset's description may precede it).
        let err = stderr(&out);
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("evoattn:")).collect();
        assert_eq!(errors.len(), 1, "{args:?}: one error line expected, got:\n{err}");
        assert!(errors[0].starts_with("evoattn: no ") && !err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err.lines().last(), Some(errors[0]), "{args:?}: the error comes last:\n{err}");
    }
}

#[test]
fn check_applies_scale_to_kernel_and_oracle_and_rejects_zero() {
    // The mock computes with the problem's scale, the oracle with its own copy: a scale that
    // reached only one of them would fail the comparison.
    let out = evoattn(&["check", "--shape", "1,2,33,64", "--causal", "all", "--scale", "-0.3", "--seeds", "1"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 passed, 0 failed"));
    let out = evoattn(&["check", "--shape", "1,2,33,64", "--scale", "0"], &[]);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT));
    assert!(stderr(&out).contains("--scale: scale 0 must be finite and non-zero"), "{}", stderr(&out));
}

/// Runs `evoattn quantize` on `tensors`; returns the process output and the output file's bytes.
fn quantize_on(tensors: &[Tensor], extra: &[&str]) -> (Output, Vec<u8>) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let input = write_file(dir.path(), tensors);
    let output = dir.path().join("out.safetensors");
    let mut args = vec!["quantize", "--input", input.to_str().unwrap(), "--output", output.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = evoattn(&args, &[]);
    (out, std::fs::read(&output).unwrap_or_default())
}

#[test]
fn quantize_writes_what_the_library_quantizes_in_the_inputs_layout() {
    let shape = Shape { b: 2, h: 4, hkv: 2, sq: 5, sk: 7, d: 64 };
    let tensors = qkv(shape, Dtype::Bf16, Layout::Bshd);
    let (out, file) = quantize_on(&tensors, &["--layout", "bshd"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let problem = Problem::dense(shape, Dtype::Bf16, Layout::Bshd);
    let st = SafeTensors::deserialize(&file).expect("a safetensors output");
    for (i, t) in [TensorName::Q, TensorName::K, TensorName::V].into_iter().enumerate() {
        let want = evoattn::fp8::quantize(&problem, t, &u16s(&tensors[i].data)).expect("finite inputs");
        let bits = st.tensor(t.name()).expect("each input, quantized");
        assert_eq!((bits.dtype(), bits.shape()), (safetensors::Dtype::F8_E4M3, &tensors[i].shape[..]));
        assert_eq!(bits.data(), &want.bits[..]);
        let descale = st.tensor(&format!("{t}_descale")).expect("each descale");
        assert_eq!((descale.dtype(), descale.shape()), (safetensors::Dtype::F32, &[2, 2][..]));
        let got: Vec<f32> = descale.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(got, want.descale);
    }
    let table = String::from_utf8_lossy(&out.stdout);
    for name in ["q ", "k ", "v "] {
        assert_eq!(table.lines().filter(|l| l.starts_with(name)).count(), 1, "{table}");
    }
}

#[test]
fn quantize_names_a_non_finite_element_and_writes_nothing() {
    let shape = Shape { b: 1, h: 2, hkv: 2, sq: 3, sk: 3, d: 64 };
    let mut tensors = qkv(shape, Dtype::F16, Layout::Bhsd);
    // k element (b=0, h=1, s=2, d=5): BHSD offset 192 + 128 + 5.
    let at = 2 * (192 + 128 + 5);
    tensors[1].data[at..at + 2].copy_from_slice(&half::f16::NAN.to_bits().to_le_bytes());
    let (out, file) = quantize_on(&tensors, &[]);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT));
    assert!(stderr(&out).contains("k: element (b=0, h=1, s=2, d=5) is NaN"), "{}", stderr(&out));
    assert!(file.is_empty());
}

#[test]
fn quantized_inputs_run_with_their_descales_writing_o_in_bf16_or_on_request_f16() {
    let shape = Shape { b: 1, h: 4, hkv: 2, sq: 9, sk: 33, d: 64 };
    let tensors = qkv(shape, Dtype::Bf16, Layout::Bhsd);
    let (out, quantized) = quantize_on(&tensors, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = tempfile::tempdir().expect("a temp dir");
    let input = dir.path().join("e4m3.safetensors");
    std::fs::write(&input, &quantized).expect("writable temp dir");
    let output = dir.path().join("o.safetensors");
    let q8 = SafeTensors::deserialize(&quantized).unwrap();
    let bytes = |name: &str| -> Vec<u16> { q8.tensor(name).unwrap().data().iter().map(|&b| u16::from(b)).collect() };
    let floats = |name: &str| -> Vec<f32> {
        q8.tensor(name).unwrap().data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
    };
    let descales = evoattn::fp8::Descales { q: floats("q_descale"), k: floats("k_descale"), v: floats("v_descale") };
    let run = |extra: &[&str]| {
        let args = ["run", "--input", input.to_str().unwrap(), "--output", output.to_str().unwrap(), "--causal"];
        evoattn(&[&args[..], extra].concat(), &[])
    };
    for (extra, o_dtype, stored) in [
        (&[][..], Dtype::Bf16, safetensors::Dtype::BF16),
        (&["--o-dtype", "f16"][..], Dtype::F16, safetensors::Dtype::F16),
    ] {
        let out = run(extra);
        assert!(out.status.success(), "{}", stderr(&out));
        // The mock is an H100: E4M3 runs on wgmma's E4M3 path (the planner's fp8-hopper rule).
        assert!(stderr(&out).contains("wgmma_e4m3"), "E4M3 runs on Hopper's FP8 kernel: {}", stderr(&out));
        // O is in the dtype asked for and equals the float64 reference on the dequantized inputs
        // (the mock's output), rounded to it.
        let file = std::fs::read(&output).expect("an output file");
        let st = SafeTensors::deserialize(&file).expect("a safetensors output");
        let o = st.tensor("o").expect("an o tensor");
        assert_eq!((o.dtype(), o.shape()), (stored, &[1, 4, 9, 64][..]));
        let problem =
            Problem::dense(shape, Dtype::E4m3.with_output(o_dtype).unwrap(), Layout::Bhsd).with_causal(Causal::TopLeft);
        let want = evoattn::reference::attention_f64_descaled(
            &problem,
            &bytes("q"),
            &bytes("k"),
            &bytes("v"),
            Some(&descales),
        );
        let want: Vec<f64> = want.o.iter().map(|&x| o_dtype.round(x)).collect();
        assert_eq!(dense_o(&problem, &u16s(o.data())), want);
    }
    // 16-bit inputs write O in their own dtype; E4M3 ones in bf16 or f16 only.
    let (out, file) = run_on(&tensors, &["--o-dtype", "f16"], &[]);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT));
    assert!(file.is_empty());
    assert!(stderr(&out).contains("--o-dtype: O of bf16 inputs is bf16"), "{}", stderr(&out));
    let out = run(&["--o-dtype", "e4m3"]);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT));
    assert!(stderr(&out).contains("'e4m3': expected bf16 or f16"), "{}", stderr(&out));
}

#[test]
fn e4m3_run_takes_v_held_transposed_and_writes_the_same_o() {
    let shape = Shape { b: 2, h: 4, hkv: 2, sq: 9, sk: 32, d: 64 };
    let (out, quantized) = quantize_on(&qkv(shape, Dtype::Bf16, Layout::Bhsd), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let q8 = SafeTensors::deserialize(&quantized).unwrap();
    let tensor = |name: &'static str, shape: Vec<usize>, data: Vec<u8>| Tensor {
        name,
        dtype: q8.tensor(name).unwrap().dtype(),
        shape,
        data,
    };
    let same = |name: &'static str| {
        let t = q8.tensor(name).unwrap();
        tensor(name, t.shape().to_vec(), t.data().to_vec())
    };
    // v [B, Hkv, Sk, D] -> [B, Hkv, D, Sk], byte by byte.
    let (rows, (g, sk, d)) = (q8.tensor("v").unwrap().data().to_vec(), (shape.b * shape.hkv, shape.sk, shape.d));
    let vt: Vec<u8> = (0..g * d * sk).map(|i| rows[(i / (d * sk)) * sk * d + (i % sk) * d + (i / sk) % d]).collect();
    let names = ["q", "k", "q_descale", "k_descale", "v_descale"];
    let mut transposed: Vec<Tensor> = names.into_iter().map(same).collect();
    transposed.push(tensor("v", vec![shape.b, shape.hkv, d, sk], vt));
    let given: Vec<Tensor> = names.into_iter().chain(["v"]).map(same).collect();
    let (out, want) = run_on(&given, &["--causal"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (out, got) = run_on(&transposed, &["--causal", "--v-layout", "bhds"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("_vg1"), "the kernel reads v as given: {}", stderr(&out));
    assert_eq!(got, want);
    // Without the flag the transposed v is a shape error; 16-bit inputs cannot be held so.
    let (out, _) = run_on(&transposed, &["--causal"], &[]);
    assert!(stderr(&out).contains("tensor v"), "{}", stderr(&out));
    let (out, _) = run_on(&qkv(shape, Dtype::Bf16, Layout::Bhsd), &["--v-layout", "bhds"], &[]);
    assert!(stderr(&out).contains("only E4M3 inputs take"), "{}", stderr(&out));
}

#[test]
fn e4m3_inputs_without_valid_descales_are_refused() {
    let shape = Shape { b: 1, h: 2, hkv: 2, sq: 4, sk: 4, d: 64 };
    let tensors = qkv(shape, Dtype::Bf16, Layout::Bhsd);
    let (_, quantized) = quantize_on(&tensors, &[]);
    let st = SafeTensors::deserialize(&quantized).unwrap();
    let mut kept: Vec<Tensor> = Vec::new();
    for (name, view) in st.tensors() {
        let name: &'static str = Box::leak(name.into_boxed_str());
        if name == "v_descale" {
            continue;
        }
        let mut data = view.data().to_vec();
        if name == "k_descale" {
            data[4..8].copy_from_slice(&0f32.to_le_bytes());
        }
        kept.push(Tensor { name, dtype: view.dtype(), shape: view.shape().to_vec(), data });
    }
    let (out, file) = run_on(&kept, &[], &[]);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT));
    assert!(stderr(&out).contains("no tensor 'v_descale'"), "{}", stderr(&out));
    assert!(file.is_empty());
    let v_descale = Tensor {
        name: "v_descale",
        dtype: safetensors::Dtype::F32,
        shape: vec![1, 2],
        data: 1f32.to_le_bytes().repeat(2),
    };
    kept.push(v_descale);
    let (out, _) = run_on(&kept, &[], &[]);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT));
    assert!(stderr(&out).contains("k_descale[b=0, kv_head=1] is 0"), "{}", stderr(&out));
}

#[test]
fn rotate_changes_q_and_k_and_keeps_their_scores() {
    let shape = Shape { b: 1, h: 2, hkv: 1, sq: 6, sk: 5, d: 64 };
    let tensors = qkv(shape, Dtype::Bf16, Layout::Bhsd);
    let (plain_out, plain) = quantize_on(&tensors, &[]);
    let (rotated_out, rotated) = quantize_on(&tensors, &["--rotate"]);
    assert!(plain_out.status.success() && rotated_out.status.success(), "{}", stderr(&rotated_out));
    let (p, r) = (SafeTensors::deserialize(&plain).unwrap(), SafeTensors::deserialize(&rotated).unwrap());
    let values = |st: &SafeTensors, name: &str| -> Vec<f64> {
        let scale = f64::from(f32::from_le_bytes(
            st.tensor(&format!("{name}_descale")).unwrap().data()[..4].try_into().unwrap(),
        ));
        st.tensor(name).unwrap().data().iter().map(|&b| Dtype::E4m3.from_bits(u16::from(b)) * scale).collect()
    };
    assert_ne!(p.tensor("q").unwrap().data(), r.tensor("q").unwrap().data());
    assert_ne!(p.tensor("k").unwrap().data(), r.tensor("k").unwrap().data());
    assert_eq!(p.tensor("v").unwrap().data(), r.tensor("v").unwrap().data(), "v is never rotated");
    // Each score q_i · k_j of the rotated tensors is the original one, up to E4M3's rounding.
    let (q, k) = (values(&r, "q"), values(&r, "k"));
    let bf16 = |t: usize| -> Vec<f64> { u16s(&tensors[t].data).iter().map(|&x| Dtype::Bf16.from_bits(x)).collect() };
    let (q0, k0) = (bf16(0), bf16(1));
    for (i, j) in [(0, 0), (3, 4), (11, 2)] {
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let abs = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x * y).abs()).sum::<f64>();
        let (qi, kj) = (&q[64 * i..64 * (i + 1)], &k[64 * j..64 * (j + 1)]);
        let err = (dot(qi, kj) - dot(&q0[64 * i..64 * (i + 1)], &k0[64 * j..64 * (j + 1)])).abs();
        assert!(err <= 2.0 * evoattn::fp8::E4M3_UNIT_ROUNDOFF * abs(qi, kj) + 1e-2, "score ({i}, {j}) off by {err}");
    }
}

#[test]
fn every_timer_control_times_a_tma_kernel_with_scratch_through_the_oracle() {
    // wgmma with claimed tiles takes tensor maps and claim counters: the launch image carries
    // both, the (fake) oracle checks every field of them, and one output check serves the three
    // controls, each of which then has its samples.
    let cache = tempfile::tempdir().unwrap();
    let json = cache.path().join("bench.json");
    let controls = ["self-torch-events", "self-do-bench", "self-torch-profiler"];
    let peers = controls.join(",");
    let args = [
        "bench",
        "--shape",
        "2,16,1024,128",
        "--dtype",
        "bf16",
        "--impl",
        "wgmma",
        "--config-on-plan",
        "--config",
        "schedule=claimed",
        "--reps",
        "10",
        "--peers",
        &peers,
        "--no-history",
    ];
    let env = [("EVOATTN_CACHE_DIR", cache.path().to_str().unwrap()), ("EVOATTN_ORACLE_FAKE", "1")];
    let out = evoattn(&[&args[..], &["--json", json.to_str().unwrap()]].concat(), &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let result = &record["results"][0];
    let kernel = result["ours"]["name"].as_str().unwrap();
    assert!(kernel.starts_with("evoattn_wgmma_") && kernel.contains("_sccl_"), "claimed tiles: {kernel}");
    for control in controls {
        let row = result["peers"].as_array().unwrap().iter().find(|p| p["name"] == control).unwrap();
        assert_eq!(row["status"], "ok", "{control}: {row}");
        assert_eq!(row["samples_us"].as_array().unwrap().len(), 10, "{control}");
    }
}

#[test]
fn blocks_spread_by_a_power_cap_give_the_timer_controls_four_times_the_samples() {
    // The `power-cap` mock's every other block is 12% slower: with a timer control asked for,
    // the case takes 4 x 10 samples a side and says why; without one it keeps 10.
    let cache = tempfile::tempdir().unwrap();
    let env = [
        ("EVOATTN_CACHE_DIR", cache.path().to_str().unwrap()),
        ("EVOATTN_ORACLE_FAKE", "1"),
        ("EVOATTN_MOCK_FAULT", "power-cap"),
    ];
    let samples = |peers: &str| {
        let json = cache.path().join(format!("{peers}.json"));
        let args =
            ["bench", "--shape", "2,16,1024,128", "--reps", "10", "--block", "5", "--peers", peers, "--no-history"];
        let out = evoattn(&[&args[..], &["--json", json.to_str().unwrap()]].concat(), &env);
        assert!(out.status.success(), "{}", stderr(&out));
        let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let result = &record["results"][0];
        let counts: Vec<usize> = std::iter::once(&result["ours"])
            .chain(result["peers"].as_array().unwrap())
            .map(|m| m["samples_us"].as_array().unwrap().len())
            .collect();
        (counts, stderr(&out))
    };
    let (counts, err) = samples("sdpa-cudnn,self-torch-events");
    assert_eq!(counts, [40, 40, 40], "{err}");
    assert!(err.contains("our block medians spread 12%") && err.contains("40 samples a side"), "{err}");
    let (counts, err) = samples("sdpa-cudnn");
    assert_eq!(counts, [10, 10], "{err}");
    assert!(!err.contains("spread"), "{err}");
}

#[test]
fn check_pass_backward_checks_the_gradients_and_names_what_it_cannot_check() {
    let stdout = |out: &Output| String::from_utf8_lossy(&out.stdout).into_owned();
    let out =
        evoattn(&["check", "--pass", "backward", "--shape", "1,4,33,64,2,50", "--causal", "all", "--seeds", "1"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.matches("mma-bwd").count(), 3, "{text}");
    assert!(text.contains("evoattn::reference::grad_tolerance") && text.contains("3 passed, 0 failed"), "{text}");

    // Both passes: each case twice, the forward's row first; --impl then must be auto.
    let out = evoattn(&["check", "--pass", "both", "--shape", "1,2,40,128", "--seeds", "1"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("forward f16: 1 case") && text.contains("backward f16: 1 case"), "{text}");
    let out = evoattn(&["check", "--pass", "both", "--impl", "mma", "--shape", "1,2,40,128"], &[]);
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT));
    assert!(stderr(&out).contains("--pass both runs each pass's planned kernel"), "{}", stderr(&out));

    // A forward family, a head dim mma-bwd lacks, and a case past the float64 limit each fail
    // with the reason.
    let out = evoattn(&["check", "--pass", "backward", "--impl", "wgmma", "--shape", "1,2,40,64", "--seeds", "1"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("computes the forward pass, not the backward"), "{}", stdout(&out));
    let out = evoattn(
        &["check", "--pass", "backward", "--shape", "1,1,40,256", "--shape", "1,2,4096,128", "--seeds", "1"],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out).replace("\n      ", " ");
    assert!(text.contains("supports head dims [64, 128], not 256"), "{text}");
    assert!(text.contains("checked against float64 on the CPU only"), "{text}");
}
