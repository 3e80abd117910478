//! Property-based tests (issue 34) of the CLI's parsers: `--shape` and its list flags, workload
//! TOML, the `run` command's safetensors input and the oracle's output files, bench records and
//! run-history rows, and the oracle's reply lines; plus the mock backend, which must run every
//! small valid problem and refuse every invalid one. Each property: a typed error or a result,
//! never a panic, and a result only for input the lab may act on. The library's properties are
//! crates/evoattn/tests/properties.rs; docs/fuzzing.md lists both and says how to run more cases.

use crate::lab::backend::{Backend, Kernel};
use crate::lab::inputs::{self, nan_bits, Distribution, Draw, HostInputs};
use crate::lab::mock::MockBackend;
use crate::lab::oracle::{
    ceiling_value, decode, kernel_samples, parse_output, peer_output, reply_fields, timing, Hello, PeerOutput,
    PeerTiming, ReplyError,
};
use crate::lab::presets::{ProblemArgs, VLayout};
use crate::lab::tensors_io::QkvFile;
use crate::stores::history::{History, Source};
use crate::stores::record::{BenchRecord, CaseRecord, Environment, Measurement, Mode, ResultRecord, Status, SCHEMA};
use crate::verdicts::gate::{evaluate, render_json, render_markdown, render_text, GateOptions};
use evoattn::reference::logical_offsets;
use evoattn::{Arch, Causal, Dtype, Layout, Problem, Request, Shape, Strides, TensorName};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};
use std::path::Path;

/// Every property's runner. Cases: `PROPTEST_CASES` when set, else proptest's default of 256 a
/// property, which keeps these properties to seconds of CI's whole test run; docs/fuzzing.md
/// runs 10^5. No failure files: an input that once failed is kept as a named test instead.
fn config() -> ProptestConfig {
    ProptestConfig { failure_persistence: None, ..ProptestConfig::default() }
}

/// Runs `test` on values of `strategy` as `proptest!` does, for properties that share one
/// resource (a history file) across their cases.
fn run_cases<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    if let Err(e) = TestRunner::new(config()).run(&strategy, test) {
        panic!("{e}");
    }
}

const FILE: &str = "input.safetensors";

/// An error as `main` prints it, every context included.
fn message(e: &anyhow::Error) -> String {
    format!("{e:#}")
}

// ---- sizes and problems ----

/// A size as a caller may write one: mostly small, else a power of two give or take two, the
/// 32-bit limits, or anything up to `usize::MAX`.
fn size() -> BoxedStrategy<usize> {
    const MAX_INDEX: usize = evoattn::problem::MAX_INDEX;
    prop_oneof![
        6 => 0usize..=9,
        2 => 0usize..=5000,
        2 => (0..usize::BITS, -2isize..=2).prop_map(|(k, d)| (1usize << k).wrapping_add_signed(d)),
        1 => select(vec![MAX_INDEX, MAX_INDEX + 1, 1 << 32, usize::MAX]),
        1 => any::<usize>(),
    ]
    .boxed()
}

/// Shape text as `--shape` and workload files take it: arbitrary, 2 to 8 fields of sizes and
/// junk, or a small shape of the kernels' head dims.
fn shape_text() -> BoxedStrategy<String> {
    let field = prop_oneof![
        6 => size().prop_map(|n| n.to_string()),
        2 => select(vec!["64", "128", "256", "1", "2", "8"]).prop_map(str::to_string),
        1 => select(vec!["", " 7 ", "+3", "-1", "x", "1e3", "18446744073709551616"]).prop_map(str::to_string),
    ];
    // B,H,S,D[,HKV][,SK] of small sizes and the kernels' head dims: often a valid shape.
    let small = || prop_oneof![0usize..=4, Just(1usize)];
    let valid =
        (small(), 1usize..=4, small(), select(vec![64usize, 128, 256]), prop::option::of((1usize..=4, small())))
            .prop_map(|(b, h, s, d, gqa)| match gqa {
                None => format!("{b},{h},{s},{d}"),
                Some((hkv, sk)) => format!("{b},{},{s},{d},{hkv},{sk}", h * hkv),
            });
    prop_oneof![
        1 => ".{0,20}".boxed(),
        4 => prop::collection::vec(field, 2..=8).prop_map(|f| f.join(",")).boxed(),
        3 => valid.boxed(),
    ]
    .boxed()
}

/// Names the list flags and workload files take: valid ones, `all`, other cases, junk.
fn list_item() -> BoxedStrategy<String> {
    prop_oneof![
        6 => select(vec!["f16", "bf16", "fp16", "none", "top-left", "bottom-right", "bhsd", "bshd", "all", "ALL"])
            .prop_map(str::to_string),
        1 => select(vec!["BF16", "Top-Left", "", "f32", "causal", "bsdh"]).prop_map(str::to_string),
        1 => ".{0,6}",
    ]
    .boxed()
}

/// A small problem, often valid: Hkv dividing H, the kernels' head dims, each tensor's strides
/// dense in either layout, padded or broadcast, and sometimes one size or stride arbitrary.
fn small_problem() -> BoxedStrategy<Problem> {
    let d = prop_oneof![4 => select(vec![64usize, 128, 256]), 1 => (1usize..=32).prop_map(|k| 8 * k)];
    let base =
        (0usize..=3, 1usize..=3, 1usize..=3, 0usize..=5, 0usize..=5, d).prop_flat_map(|(b, g, hkv, sq, sk, d)| {
            let strides = move |heads: usize, seq: usize| {
                prop_oneof![
                    4 => select(vec![Layout::Bhsd, Layout::Bshd]).prop_map(move |l| l.strides(heads, seq, d)),
                    1 => Just(Strides { batch: heads * seq * (d + 8), head: seq * (d + 8), seq: d + 8, dim: 1 }),
                    1 => Just(Strides { batch: 0, head: 0, seq: 0, dim: 1 }),
                ]
            };
            let shape = Shape { b, h: g * hkv, hkv, sq, sk, d };
            let all = [strides(shape.h, sq), strides(hkv, sk), strides(hkv, sk), strides(shape.h, sq)];
            (Just(shape), all, select(Dtype::SIXTEEN_BIT.to_vec()), select(Causal::ALL.to_vec()), any::<bool>())
        });
    let problem = base.prop_map(|(shape, [q, k, v, o], dtype, causal, lse)| Problem {
        shape,
        dtype,
        causal,
        scale: None,
        q_strides: q,
        k_strides: k,
        v_strides: v,
        o_strides: o,
        with_lse: lse,
    });
    let mutated = (problem.clone(), 0usize..12, size()).prop_map(|(mut p, field, value)| {
        let s = &mut p.shape;
        *[
            &mut s.b,
            &mut s.h,
            &mut s.hkv,
            &mut s.sq,
            &mut s.sk,
            &mut s.d,
            &mut p.q_strides.seq,
            &mut p.k_strides.head,
            &mut p.v_strides.batch,
            &mut p.o_strides.seq,
            &mut p.o_strides.batch,
            &mut p.o_strides.dim,
        ][field] = value;
        p
    });
    prop_oneof![3 => problem, 1 => mutated].boxed()
}

// ---- JSON ----

/// Field names of the records and replies (and some others), so that arbitrary JSON objects hit
/// the fields the parsers read.
const KEYS: [&str; 24] = [
    "schema",
    "env",
    "results",
    "case",
    "ours",
    "peers",
    "name",
    "status",
    "reason",
    "samples_us",
    "b",
    "h",
    "hkv",
    "sq",
    "sk",
    "d",
    "block",
    "mode",
    "ok",
    "error",
    "protocol",
    "peers",
    "tflops",
    "x",
];

fn json_leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![-1e3f64..1e3, any::<f64>()]
            .prop_filter_map("a JSON number", |x| { serde_json::Number::from_f64(x).map(Value::Number) }),
        select(vec!["ok", "refused", "missing", "f16", "none", "bhsd", "graph", SCHEMA, "available"])
            .prop_map(Value::from),
        ".{0,8}".prop_map(Value::from),
    ]
    .boxed()
}

/// Any JSON value, nested a few levels.
fn json_value() -> BoxedStrategy<Value> {
    let key = prop_oneof![3 => select(KEYS.to_vec()).prop_map(str::to_string), 1 => ".{0,6}"];
    json_leaf()
        .prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
        .boxed()
}

/// An edit at one place of a JSON value.
#[derive(Clone, Debug)]
enum Edit {
    Replace(Value),
    Remove,
    Insert(String, Value),
}

/// Up to three edits, each at a path of child choices (taken modulo the children there).
fn edits() -> BoxedStrategy<Vec<(Vec<usize>, Edit)>> {
    let edit = prop_oneof![
        3 => json_leaf().prop_map(Edit::Replace),
        1 => json_value().prop_map(Edit::Replace),
        2 => Just(Edit::Remove),
        1 => (select(KEYS.to_vec()), json_leaf()).prop_map(|(k, v)| Edit::Insert(k.to_string(), v)),
    ];
    prop::collection::vec((prop::collection::vec(any::<usize>(), 0..7), edit), 0..=3).boxed()
}

fn apply(value: &mut Value, path: &[usize], edit: Edit) {
    let children = match value {
        Value::Array(a) => a.len(),
        Value::Object(o) => o.len(),
        _ => 0,
    };
    match (path, edit) {
        ([first, rest @ ..], edit) if children > 0 && !rest.is_empty() => {
            let i = first % children;
            let child = match value {
                Value::Array(a) => &mut a[i],
                Value::Object(o) => o.values_mut().nth(i).expect("i < len"),
                _ => unreachable!("only arrays and objects have children"),
            };
            apply(child, rest, edit);
        }
        ([first, ..], Edit::Remove) if children > 0 => match value {
            Value::Array(a) => {
                a.remove(first % children);
            }
            Value::Object(o) => {
                let key = o.keys().nth(first % children).cloned().expect("i < len");
                o.remove(&key);
            }
            _ => {}
        },
        (_, Edit::Insert(key, new)) => match value {
            Value::Array(a) => a.push(new),
            Value::Object(o) => {
                o.insert(key, new);
            }
            other => *other = new,
        },
        (_, Edit::Replace(new)) => *value = new,
        (_, Edit::Remove) => *value = Value::Null,
    }
}

fn edited(mut value: Value, edits: Vec<(Vec<usize>, Edit)>) -> Value {
    for (path, edit) in edits {
        apply(&mut value, &path, edit);
    }
    value
}

// ---- bench records ----

fn samples() -> BoxedStrategy<Vec<f64>> {
    let sample = prop_oneof![
        6 => 1.0f64..1000.0,
        1 => any::<f64>().prop_filter("finite", |x| x.is_finite()),
        1 => select(vec![0.0, -1.0, 1e-300, 1e300, f64::MAX, f64::MIN_POSITIVE, 5e-324]),
    ];
    prop::collection::vec(sample, 0..40).boxed()
}

fn measurement() -> BoxedStrategy<Measurement> {
    let name = prop_oneof![
        select(vec!["evoattn_mma_f16_d64_bm128_bn64_s3_qr1", "sdpa-cudnn", "self", "self-torch-events", "fa4"])
            .prop_map(str::to_string),
        ".{0,10}",
    ];
    let status = select(vec![Status::Ok, Status::Refused, Status::Missing]);
    let error = prop::option::of(prop_oneof![0.0f64..1.0, any::<f64>().prop_filter("finite", |x| x.is_finite())]);
    let clocks = prop::collection::vec(1.0f64..3000.0, 0..40);
    let text = (name, prop::option::of(".{0,10}"));
    (text, status, samples(), clocks, error.clone(), error, prop::option::of(any::<bool>()))
        .prop_map(|((name, reason), status, samples_us, sm_clock_mhz, max_abs, rel_l2, correct)| Measurement {
            name,
            status,
            reason,
            samples_us,
            sm_clock_mhz,
            max_abs,
            rel_l2,
            correct,
        })
        .boxed()
}

fn bench_record() -> BoxedStrategy<BenchRecord> {
    let case = (size(), size(), size(), size(), size(), size(), list_item(), list_item(), list_item(), any::<f64>())
        .prop_map(|(b, h, hkv, sq, sk, d, dtype, causal, layout, flops)| CaseRecord {
            b,
            h,
            hkv,
            sq,
            sk,
            d,
            dtype,
            causal,
            layout,
            flops: if flops.is_finite() { flops } else { 0.0 },
        });
    let result = (case, measurement(), prop::collection::vec(measurement(), 0..4))
        .prop_map(|(case, ours, peers)| ResultRecord { case, ours, peers });
    let env = (".{0,8}", prop::option::of(select(vec![Mode::Eager, Mode::Graph])), size(), size(), ".{0,12}").prop_map(
        |(gpu, mode, samples, block, date_utc)| Environment {
            gpu,
            mode,
            samples,
            block,
            date_utc,
            git_commit: Some("0123abc".into()),
            ..Environment::default()
        },
    );
    (env, prop::collection::vec(result, 0..4))
        .prop_map(|(env, results)| BenchRecord { schema: SCHEMA.into(), env, results })
        .boxed()
}

/// Record text: arbitrary, any JSON, or a valid record with up to three edits.
fn record_text() -> BoxedStrategy<String> {
    prop_oneof![
        1 => ".{0,40}",
        1 => json_value().prop_map(|v| v.to_string()),
        6 => (bench_record(), prop_oneof![Just(Vec::new()), edits()]).prop_map(|(r, e)| {
            edited(serde_json::to_value(r).expect("a record serialises"), e).to_string()
        }),
    ]
    .boxed()
}

// ---- safetensors ----

/// Safetensors dtype names (and junk), for headers.
const DTYPES: [&str; 12] = ["F16", "BF16", "F32", "F64", "I8", "U8", "BOOL", "F8_E4M3", "F4", "I64", "f16", "half"];

/// A header entry: a dtype, a shape of any rank and sizes, and offsets that fit it or not.
fn header_entry() -> BoxedStrategy<(String, Value)> {
    let name = prop_oneof![4 => select(vec!["q", "k", "v", "o"]), 1 => select(vec!["lse", "x", "__metadata__"])];
    let shape = prop::collection::vec(prop_oneof![4 => 0usize..=5, 1 => size()], 0..=6);
    (name, select(DTYPES.to_vec()), shape, any::<bool>(), 0usize..64, 0usize..64)
        .prop_map(|(name, dtype, shape, fits, start, len)| {
            let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).unwrap_or(usize::MAX);
            let bytes = elements.saturating_mul(if dtype.contains("16") { 2 } else { 4 });
            let offsets = if fits { json!([0, bytes]) } else { json!([start, start + len]) };
            (name.to_string(), json!({ "dtype": dtype, "shape": shape, "data_offsets": offsets }))
        })
        .boxed()
}

/// File bytes: arbitrary, a header of [`header_entry`]s with a length prefix that is right or
/// not and data of any length, or a valid file of small q, k, v with one byte changed, cut or added.
fn safetensors_bytes() -> BoxedStrategy<Vec<u8>> {
    let header = (prop::collection::vec(header_entry(), 0..=5), any::<bool>(), any::<u64>(), 0usize..512, any::<u8>())
        .prop_map(|(entries, right_length, length, data, fill)| {
            let header = Value::Object(entries.into_iter().collect()).to_string();
            let prefix = if right_length { header.len() as u64 } else { length % 1024 };
            let mut bytes = prefix.to_le_bytes().to_vec();
            bytes.extend(header.as_bytes());
            bytes.extend(std::iter::repeat_n(fill, data));
            bytes
        });
    // q of rank 4 mostly (3 and 5 else) with the head dim 64; k and v as a BHSD file's (B and D of
    // q's) or any dims; the file unchanged, or one byte changed, cut or added.
    let dims = |rank| prop::collection::vec(0usize..=4, rank);
    let rank = prop_oneof![4 => Just(4usize), 1 => Just(3usize), 1 => Just(5usize)];
    let kv = prop_oneof![3 => (0usize..=3, 0usize..=4).prop_map(Some), 1 => Just(None)];
    let change = prop_oneof![3 => Just(0usize), 1 => 1usize..=3];
    let dtype = select(vec![safetensors::Dtype::F16, safetensors::Dtype::BF16, safetensors::Dtype::F32]);
    let valid = (dtype, rank.prop_flat_map(dims), dims(4), kv, change, any::<usize>(), any::<u8>()).prop_map(
        |(dtype, mut q, other, kv, change, at, byte)| {
            if let Some(d) = q.last_mut() {
                *d = 64;
            }
            let kv = match kv {
                Some((hkv, sk)) if q.len() == 4 => vec![q[0], hkv, sk, q[3]],
                _ => other,
            };
            let data = |shape: &[usize]| vec![0x3cu8; shape.iter().product::<usize>() * dtype.bitsize() / 8];
            let (qd, kd) = (data(&q), data(&kv));
            let views = [("q", &q, &qd), ("k", &kv, &kd), ("v", &kv, &kd)].map(|(name, shape, data)| {
                (name, safetensors::tensor::TensorView::new(dtype, shape.clone(), data).expect("consistent"))
            });
            let mut bytes = safetensors::serialize(views, None).expect("serialises");
            let at = at % bytes.len().max(1);
            match change {
                0 => {}
                1 => bytes[at] = byte,
                2 => bytes.truncate(at),
                _ => bytes.push(byte),
            }
            bytes
        },
    );
    prop_oneof![1 => prop::collection::vec(any::<u8>(), 0..128), 3 => header, 3 => valid].boxed()
}

// ---- the properties ----

/// `--shape` with the list flags: expansion succeeds exactly when every shape parses and
/// validates and every listed name is one (or `all`), and then gives valid problems only: dense
/// in their layout, with LSE, of the shapes given, as many of each.
fn check_shape_flags(shapes: Vec<String>, lists: [Vec<String>; 3]) -> Result<(), TestCaseError> {
    let [dtype, causal, layout] = lists;
    let args = ProblemArgs { shapes: shapes.clone(), dtype, causal, layout, ..ProblemArgs::default() };
    let parsed: Vec<Result<Shape, String>> = shapes.iter().map(|s| Shape::parse(s)).collect();
    let items_ok =
        |items: &[String], ok: &dyn Fn(&str) -> bool| items.iter().all(|i| i.eq_ignore_ascii_case("all") || ok(i));
    let names_ok = items_ok(&args.dtype, &|s| Dtype::parse(s).is_some())
        && items_ok(&args.causal, &|s| Causal::parse(s).is_some())
        && items_ok(&args.layout, &|s| Layout::parse(s).is_some());
    // A dense problem's validity depends on its shape alone (not dtype, mask or layout).
    let shapes_ok = parsed
        .iter()
        .all(|s| s.as_ref().is_ok_and(|s| Problem::dense(*s, Dtype::F16, Layout::Bhsd).validate().is_ok()));
    match args.expand() {
        Ok(problems) => {
            prop_assert!(names_ok && shapes_ok, "accepted {:?}", args);
            prop_assert!(!problems.is_empty() && problems.len().is_multiple_of(shapes.len()));
            let per_shape = problems.len() / shapes.len();
            for shape in &parsed {
                let given = parsed.iter().filter(|s| *s == shape).count();
                let made = problems.iter().filter(|(p, _)| Ok(p.shape) == *shape).count();
                prop_assert_eq!(made, given * per_shape, "problems of {:?}", shape);
            }
            for (p, layout) in &problems {
                prop_assert!(p.validate().is_ok(), "{p:?}");
                prop_assert_eq!(p, &Problem::dense(p.shape, p.dtype, *layout).with_causal(p.causal).with_lse(true));
                prop_assert!(parsed.contains(&Ok(p.shape)));
            }
        }
        Err(e) => prop_assert!(!(names_ok && shapes_ok), "refused valid flags: {e:#}"),
    }
    Ok(())
}

/// The mock backend runs what the GPU path would launch (a valid problem, a kernel that
/// validates) and writes exactly the output's elements; anything invalid is refused, never run.
fn check_mock_forward(problem: &Problem, seed: u64) -> Result<(), TestCaseError> {
    let mut mock = MockBackend::from_env().map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
    if problem.validate().is_err() {
        let refused =
            mock.forward(problem, Kernel::Reference, inputs::Inputs::Drawn(Draw::new(Distribution::Normal, seed)));
        prop_assert!(refused.is_err(), "ran an invalid problem");
        return Ok(());
    }
    // Tiny problems only: a broadcast K may hold 2^31 keys in a few elements.
    let s = problem.shape;
    let work = [s.b, s.h, s.sq, s.sk.max(1), s.d].iter().try_fold(1usize, |n, &x| n.checked_mul(x));
    let elements = [TensorName::Q, TensorName::K, TensorName::V]
        .iter()
        .map(|&t| problem.elements(t))
        .fold(0, usize::saturating_add);
    if work.is_none_or(|w| w > 1 << 16) || elements > 1 << 16 {
        return Ok(());
    }
    let inputs = Draw::new(Distribution::Normal, seed).host(problem);
    let auto = evoattn::plan::plan(problem, Arch::Sm90a, 132, Request::Auto);
    for kernel in [Kernel::Reference, Kernel::Planned(&auto)] {
        match mock.forward(problem, kernel, inputs::Inputs::Host(&inputs)) {
            Ok(forward) => {
                prop_assert_eq!(forward.o.len(), problem.extent(TensorName::O));
                let mut written = vec![false; forward.o.len()];
                for off in logical_offsets(problem, TensorName::O) {
                    prop_assert!(!written[off], "an output element written twice");
                    written[off] = true;
                    prop_assert!(problem.dtype.output().from_bits(forward.o[off]).is_finite());
                }
                for (bits, written) in forward.o.iter().zip(written) {
                    prop_assert!(written || *bits == nan_bits(problem.dtype), "a padding element written");
                }
                let lse = forward.lse.as_ref().map(Vec::len);
                prop_assert_eq!(lse, problem.with_lse.then(|| problem.elements(TensorName::Lse)));
            }
            Err(e) => prop_assert!(matches!(e, evoattn::Error::Unsupported { .. }), "{e}"),
        }
        // Short buffers are refused before anything is computed.
        if problem.extent(TensorName::Q) > 0 {
            let short = HostInputs { q: inputs.q[..inputs.q.len() - 1].to_vec(), ..inputs.clone() };
            prop_assert!(mock.forward(problem, kernel, inputs::Inputs::Host(&short)).is_err());
        }
    }
    Ok(())
}

/// `run`'s input: any bytes give q, k, v whose lengths are their shapes' or a typed error; what
/// parses and validates runs on the mock as `run` runs it.
fn check_run_input(bytes: &[u8], layout: Layout, v_layout: VLayout) -> Result<(), TestCaseError> {
    let Ok(inputs) = QkvFile::parse_with_v(bytes, Path::new(FILE), layout, v_layout) else { return Ok(()) };
    let problem = inputs.problem(layout);
    for (t, buf) in [(TensorName::Q, &inputs.q), (TensorName::K, &inputs.k), (TensorName::V, &inputs.v)] {
        prop_assert_eq!(buf.len(), problem.elements(t), "{}'s data against its shape", t);
        prop_assert_eq!(buf.len(), problem.extent(t), "{} of a dense problem", t);
    }
    if problem.validate().is_ok() {
        let mut mock = MockBackend::from_env().map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
        let auto = evoattn::plan::plan(&problem, Arch::Sm90a, 132, Request::Auto);
        if auto.spec.validate(Arch::Sm90a).is_ok() {
            let host = HostInputs {
                q: inputs.q.clone(),
                k: inputs.k.clone(),
                v: inputs.v.clone(),
                descales: inputs.descales.clone(),
            };
            let forward = mock.forward(&problem, Kernel::Planned(&auto), inputs::Inputs::Host(&host));
            prop_assert!(forward.is_ok(), "{:?}", forward.err());
        }
    }
    Ok(())
}

/// A bench record: parsed, it re-serialises to itself, the gate judges it, and the history
/// stores it and reads it back, each a typed error or a result.
fn check_record(text: &str, history: &History, raw: &rusqlite::Connection) -> Result<(), TestCaseError> {
    let path = Path::new("record.json");
    let record = match BenchRecord::parse(text, path) {
        Ok(record) => record,
        Err(e) => {
            prop_assert!(!message(&e).is_empty());
            return Ok(());
        }
    };
    let again = BenchRecord::parse(&serde_json::to_string_pretty(&record).expect("a record serialises"), path);
    prop_assert_eq!(again.as_ref().ok(), Some(&record), "{:?}", again.as_ref().err());
    let opts = GateOptions { resamples: 16, ..GateOptions::default() };
    let report = evaluate(&record, &opts);
    prop_assert_eq!(report.cases.len(), record.results.len());
    prop_assert!(!report.summary().is_empty());
    for rendered in [render_text(&report, true), render_markdown(&report), render_json(&report)] {
        prop_assert!(!rendered.is_empty());
    }
    raw.execute("DELETE FROM measurements", []).expect("the history's table");
    if let Ok(added) = history.insert_record(Source::Bench, &record) {
        let rows = history.rows(None).map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
        prop_assert_eq!(rows.len(), added);
        let measured: Vec<&Measurement> =
            record.results.iter().flat_map(|r| std::iter::once(&r.ours).chain(&r.peers)).collect();
        for row in &rows {
            prop_assert!(measured.iter().any(|m| m.name == row.kernel && m.samples_us == row.samples_us));
            let median = crate::verdicts::stats::summarize(&row.samples_us).map(|s| s.median);
            prop_assert_eq!(median.map(f64::to_bits), Some(row.median_us.to_bits()));
        }
    }
    Ok(())
}

/// A SQLite value for a damaged history row.
fn sql_value() -> BoxedStrategy<rusqlite::types::Value> {
    use rusqlite::types::Value as V;
    prop_oneof![
        1 => Just(V::Null),
        3 => prop_oneof![0i64..=9, any::<i64>()].prop_map(V::Integer),
        1 => any::<f64>().prop_map(V::Real),
        2 => prop_oneof![".{0,8}", samples().prop_map(|s| serde_json::to_string(&s).expect("numbers"))].prop_map(V::Text),
        1 => prop::collection::vec(any::<u8>(), 0..8).prop_map(V::Blob),
    ]
    .boxed()
}

/// The columns of a history row, in the table's order after `id`.
const HISTORY_COLUMNS: &str = "source, date_utc, git_commit, version, gpu, driver, mode, b, h, hkv, sq, sk, d, \
                               dtype, causal, layout, role, family, kernel, block, median_us, samples_us, correct";

proptest! {
    #![proptest_config(config())]

    /// `--shape` (repeatable) with `--dtype`, `--causal` and `--layout` lists.
    #[test]
    fn shape_flags_expand_to_valid_problems_only(
        shapes in prop::collection::vec(shape_text(), 1..=3),
        lists in [
            prop::collection::vec(list_item(), 0..=3),
            prop::collection::vec(list_item(), 0..=3),
            prop::collection::vec(list_item(), 0..=3),
        ],
    ) {
        check_shape_flags(shapes, lists)?;
    }

    #[test]
    fn the_mock_backend_runs_valid_problems_and_refuses_the_rest(p in small_problem(), seed in any::<u64>()) {
        check_mock_forward(&p, seed)?;
    }

    #[test]
    fn run_input_files_parse_to_their_shapes_or_a_typed_error(
        bytes in safetensors_bytes(),
        layout in select(vec![Layout::Bhsd, Layout::Bshd]),
        v_layout in select(vec![VLayout::Rows, VLayout::Bhds]),
    ) {
        check_run_input(&bytes, layout, v_layout)?;
    }

    /// The oracle's output file: `o`'s bits, as many as the problem's dense `o`, or an error.
    #[test]
    fn oracle_output_files_parse_to_the_problems_o_or_a_typed_error(
        bytes in safetensors_bytes(),
        p in small_problem(),
        layout in select(vec![Layout::Bhsd, Layout::Bshd]),
    ) {
        if let Ok(bits) = parse_output(&bytes, Path::new("o.safetensors"), &p, layout) {
            let s = p.shape;
            let dense: Option<usize> = layout.dims(s.b, s.h, s.sq, s.d).iter().try_fold(1usize, |n, &d| n.checked_mul(d));
            prop_assert_eq!(Some(bits.len()), dense);
        }
    }

    /// The oracle's reply lines, arbitrary and valid ones edited, through the decoders of every op.
    #[test]
    fn oracle_replies_decode_or_fail_typed(line in reply_line(), wanted in prop_oneof![3 => Just(3usize), 1 => 0usize..50]) {
        check_reply(&line.0, &line.1, wanted)?;
    }
}

/// Workload files: any TOML, or cases with any values, expand to valid problems (at least one
/// per case) or a typed error.
#[test]
fn workload_files_expand_to_valid_problems_only() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("workload.toml");
    let value = prop_oneof![
        4 => list_item().prop_map(toml::Value::String),
        2 => prop::collection::vec(list_item(), 0..=3)
            .prop_map(|v| toml::Value::Array(v.into_iter().map(toml::Value::String).collect())),
        1 => any::<i64>().prop_map(toml::Value::Integer),
        1 => any::<bool>().prop_map(toml::Value::Boolean),
    ];
    let key = prop_oneof![8 => select(vec!["dtype", "causal", "layout"]), 1 => select(vec!["dtpye", "shape", "x"])];
    let case = (prop::option::of(shape_text()), prop::collection::vec((key, value), 0..=3));
    let file = prop_oneof![
        1 => ".{0,40}".boxed(),
        1 => "(\\[\\[case\\]\\]\n)?(shape|dtype|case) = (\"[0-9,]{0,12}\"|\\[\\]|1|true)\n".boxed(),
        6 => prop::collection::vec(case, 0..=3).prop_map(|cases| {
            cases.into_iter().map(|(shape, items)| {
                let mut table = toml::Table::new();
                if let Some(shape) = shape {
                    table.insert("shape".into(), toml::Value::String(shape));
                }
                for (key, value) in items {
                    table.insert(key.to_string(), value);
                }
                format!("[[case]]\n{}\n", toml::to_string(&table).expect("a table serialises"))
            }).collect::<String>()
        }).boxed(),
    ];
    run_cases(file, |text| {
        std::fs::write(&path, &text).expect("a writable temp dir");
        let args = ProblemArgs { workloads: vec![path.clone()], ..ProblemArgs::default() };
        match args.expand() {
            Ok(problems) => {
                let cases = toml::from_str::<toml::Table>(&text)
                    .ok()
                    .and_then(|t| t.get("case").and_then(|c| c.as_array()).map(Vec::len))
                    .unwrap_or_default();
                prop_assert!(problems.len() >= cases.max(1), "{} problems of {} cases", problems.len(), cases);
                for (p, _) in &problems {
                    prop_assert!(p.validate().is_ok(), "{p:?}");
                }
            }
            Err(e) => prop_assert!(!message(&e).is_empty()),
        }
        Ok(())
    });
}

/// Bench records (`gate --samples`, `report`): arbitrary JSON and valid records edited.
#[test]
fn bench_records_parse_to_records_that_reserialise_or_fail_typed() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("history.sqlite");
    let history = History::open(&path).expect("a history");
    let raw = rusqlite::Connection::open(&path).expect("the history's file");
    run_cases(record_text(), |text| check_record(&text, &history, &raw));
}

/// History rows as another writer (an older binary, a damaged file) may have left them: any
/// value in any column reads back as a row or a typed error, and a row's samples re-serialise.
#[test]
fn history_rows_read_back_or_fail_typed() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("history.sqlite");
    let history = History::open(&path).expect("a history");
    let raw = rusqlite::Connection::open(&path).expect("the history's file");
    let placeholders = vec!["?"; HISTORY_COLUMNS.split(',').count()].join(", ");
    let insert = format!("INSERT INTO measurements ({HISTORY_COLUMNS}) VALUES ({placeholders})");
    run_cases(prop::collection::vec(prop::collection::vec(sql_value(), 23), 1..=3), |rows| {
        raw.execute("DELETE FROM measurements", []).expect("the history's table");
        for row in &rows {
            // A value the table's constraints refuse is no row.
            let _ = raw.execute(&insert, rusqlite::params_from_iter(row.iter()));
        }
        // `rows(None)` reads every row dated at or after '' (SQLite orders numbers before text).
        let dated: usize = raw
            .query_row("SELECT COUNT(*) FROM measurements WHERE date_utc >= ''", [], |r| r.get::<_, i64>(0))
            .expect("a count") as usize;
        match history.rows(None) {
            Ok(read) => {
                prop_assert_eq!(read.len(), dated);
                for row in &read {
                    let text = serde_json::to_string(&row.samples_us).expect("numbers");
                    prop_assert_eq!(&serde_json::from_str::<Vec<f64>>(&text).ok(), &Some(row.samples_us.clone()));
                    if let Err(e) = history.best(&row.key, "") {
                        prop_assert!(!message(&e).is_empty());
                    }
                }
            }
            Err(e) => prop_assert!(!message(&e).is_empty()),
        }
        let _ = history.first_date_of_commit("0");
        Ok(())
    });
}

// ---- oracle replies ----

/// A valid reply of each op (with `ok`), as the protocol writes them.
fn valid_replies() -> Vec<(&'static str, Value)> {
    let peers: serde_json::Map<String, Value> =
        crate::lab::oracle::PEERS.iter().map(|p| (p.to_string(), Value::from("available"))).collect();
    vec![
        (
            "hello",
            json!({"ok": true, "protocol": 1, "fake": true, "python": "3.12", "torch": null, "cuda": null,
                   "cudnn": null, "driver": null, "fa4": null, "evoattn": null, "gpu": "fake",
                   "compute_capability": "9.0", "l2_bytes": 52428800, "sm_count": 132, "peers": peers}),
        ),
        ("time", json!({"ok": true, "status": "ok", "samples_us": [12.5, 12.25, 13.0]})),
        ("time", json!({"ok": true, "status": "refused", "reason": "sdpa-flash does not take bottom-right"})),
        ("time", json!({"ok": true, "status": "missing", "reason": "no flash_attn"})),
        ("output", json!({"ok": true, "status": "ok", "path": "/tmp/o.safetensors"})),
        ("time_kernel", json!({"ok": true, "samples_us": [4.0, 4.5, 4.25]})),
        ("matmul_peak", json!({"ok": true, "tflops": 650.5, "samples_us": [1.0, 2.0]})),
        ("copy_bandwidth", json!({"ok": true, "gbps": 3000.0, "samples_us": [1.0]})),
        ("load", json!({"ok": false, "error": "no case 'a'"})),
    ]
}

/// (op, line): arbitrary text, any JSON, or a valid reply with up to three edits.
fn reply_line() -> BoxedStrategy<(String, String)> {
    let ops = vec!["hello", "time", "output", "time_kernel", "matmul_peak", "copy_bandwidth", "load"];
    prop_oneof![
        1 => (select(ops.clone()), ".{0,40}").prop_map(|(op, line)| (op.to_string(), line)),
        1 => (select(ops), json_value()).prop_map(|(op, v)| (op.to_string(), v.to_string())),
        6 => (select(valid_replies()), prop_oneof![Just(Vec::new()), edits()])
            .prop_map(|((op, reply), e)| (op.to_string(), edited(reply, e).to_string())),
    ]
    .boxed()
}

/// A reply line: its fields (never `ok`) only for an object with `"ok": true`, the oracle's
/// message for `"ok": false`, else broken; each op's decoder then gives a typed result or error,
/// and a result only within the protocol (the samples asked for, each a time; positive ceilings).
fn check_reply(op: &str, line: &str, wanted: usize) -> Result<(), TestCaseError> {
    let parsed: Option<serde_json::Map<String, Value>> = serde_json::from_str(line).ok();
    let ok = parsed.as_ref().and_then(|m| m.get("ok"));
    let fields = match reply_fields(op, line) {
        Ok(fields) => fields,
        Err(ReplyError::Refused(message)) => {
            prop_assert_eq!(ok, Some(&Value::Bool(false)));
            prop_assert!(!message.is_empty());
            return Ok(());
        }
        Err(ReplyError::Broken(why)) => {
            prop_assert!(ok.is_none_or(|ok| !ok.is_boolean()), "{why}");
            return Ok(());
        }
    };
    prop_assert_eq!(ok, Some(&Value::Bool(true)));
    prop_assert!(fields.is_object() && fields.get("ok").is_none());
    let sampled = |samples: &[f64]| samples.len() == wanted && samples.iter().all(|x| x.is_finite() && *x >= 0.0);
    match op {
        "hello" => {
            if let Ok(hello) = decode::<Hello>("hello", &fields) {
                let again = serde_json::to_value(&hello).expect("hello serialises");
                prop_assert_eq!(decode::<Hello>("hello", &again).ok(), Some(hello));
            }
        }
        "time" => match timing(&fields, wanted) {
            Ok(PeerTiming::Samples(samples)) => prop_assert!(sampled(&samples), "{samples:?}"),
            Ok(PeerTiming::Refused(reason) | PeerTiming::Missing(reason)) => prop_assert!(!reason.is_empty()),
            Err(e) => prop_assert!(message(&e).contains("the oracle"), "{}", message(&e)),
        },
        "output" => {
            let path = Path::new("o.safetensors");
            if let Ok(PeerOutput::Written(written)) = peer_output(&fields, path) {
                prop_assert_eq!(written, path);
            }
        }
        "time_kernel" => {
            if let Ok(samples) = kernel_samples(&fields, wanted) {
                prop_assert!(sampled(&samples), "{samples:?}");
            }
        }
        "matmul_peak" | "copy_bandwidth" => {
            let key = if op == "matmul_peak" { "tflops" } else { "gbps" };
            if let Ok(x) = ceiling_value(op, &fields, key) {
                prop_assert!(x.is_finite() && x > 0.0);
            }
        }
        _ => {}
    }
    Ok(())
}

// ---- regressions: inputs the properties found, kept by name ----

/// `bench_records_...` found it: serde_json's default parser read this sample back one ULP off
/// (…052e-233 as …054e-233, then …056e-233), so a record re-read by `gate --samples` or stored
/// in the history was not the one measured. Fixed by serde_json's `float_roundtrip`.
#[test]
fn regression_a_recorded_sample_reads_back_as_written() {
    let x: f64 = serde_json::from_str("1.4517454832706052e-233").expect("a number");
    let again: f64 = serde_json::from_str(&serde_json::to_string(&x).expect("a number")).expect("a number");
    assert_eq!(again.to_bits(), x.to_bits());
    let text = r#"{"env":{"arch":"","block":0,"compute_capability":"","copy_gbps":null,"date_utc":"","driver":"",
        "evoattn_version":"","flush_bytes":0,"git_commit":"0123abc","gpu":"","matmul_tflops":null,"mode":null,
        "nvrtc":"","oracle":null,"samples":0,"seed":0,"sm_clock_mhz":[],"warmup":0},"results":[{"case":{"b":0,
        "causal":"f16","d":0,"dtype":"f16","flops":0.0,"h":0,"hkv":0,"layout":"f16","sk":0,"sq":0},"ours":{
        "correct":null,"max_abs":null,"name":"evoattn_mma_f16_d64_bm128_bn64_s3_qr1","reason":null,"rel_l2":null,
        "samples_us":[],"status":"ok"},"peers":[{"correct":null,"max_abs":null,
        "name":"evoattn_mma_f16_d64_bm128_bn64_s3_qr1","reason":null,"rel_l2":null,
        "samples_us":[1.4517454832706052e-233],"status":"ok"}]}],"schema":"evoattn.bench/1"}"#;
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("history.sqlite");
    let history = History::open(&path).expect("a history");
    let raw = rusqlite::Connection::open(&path).expect("the history's file");
    check_record(text, &history, &raw).expect("the record re-reads as itself");
}

/// `workload_files_...` found it: an empty list dropped its case without a word (0 problems
/// from 1 case, and `check` passed on nothing). Now a typed error.
#[test]
fn regression_an_empty_list_in_a_workload_case_is_refused() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("w.toml");
    std::fs::write(&path, "[[case]]\ndtype = []\nshape = \"0,0,0,0\"\n\n").expect("a writable temp dir");
    let err = ProblemArgs { workloads: vec![path], ..ProblemArgs::default() }.expand().expect_err("refused");
    assert!(message(&err).contains("an empty dtype list"), "{err:#}");
}

/// `shape_flags_...` found it: `--dtype all,none` ran every dtype, the unknown `none` unread.
#[test]
fn regression_all_in_a_list_flag_does_not_hide_an_unknown_name() {
    let args = ProblemArgs {
        shapes: vec!["0,1,0,64".into()],
        dtype: vec!["all".into(), "none".into()],
        ..ProblemArgs::default()
    };
    assert!(message(&args.expand().expect_err("refused")).contains("dtype 'none' is not supported"));
    let all = ProblemArgs { dtype: vec!["f16".into(), "ALL".into()], ..args };
    assert_eq!(all.expand().expect("valid flags").len(), Dtype::SIXTEEN_BIT.len());
}

/// Written with `oracle_replies_...`: a `time` or `time_kernel` reply of other than the samples
/// asked for (or with a negative one) was taken as the peer's timing; the protocol promises
/// exactly `samples` times.
#[test]
fn regression_a_reply_with_other_samples_than_asked_for_is_refused() {
    let reply = json!({"status": "ok", "samples_us": [12.5, 12.25, 13.0]});
    assert!(matches!(timing(&reply, 3), Ok(PeerTiming::Samples(s)) if s.len() == 3));
    assert!(message(&timing(&reply, 5).unwrap_err()).contains("3 samples, not the 5 asked for"));
    let negative = json!({"status": "ok", "samples_us": [1.0, -2.0]});
    assert!(message(&timing(&negative, 2).unwrap_err()).contains("a sample of -2"));
    assert!(kernel_samples(&json!({"samples_us": []}), 1).is_err());
    assert!(ceiling_value("matmul_peak", &json!({"tflops": -1.0}), "tflops").is_err());
}

/// Share of `n` values of `strategy` (drawn deterministically) that `accepted` accepts.
fn share<T: std::fmt::Debug>(strategy: BoxedStrategy<T>, n: usize, accepted: impl Fn(&T) -> bool) -> f64 {
    use proptest::strategy::ValueTree;
    let mut runner = TestRunner::deterministic();
    let hits = (0..n).filter(|_| accepted(&strategy.new_tree(&mut runner).expect("a value").current())).count();
    hits as f64 / n as f64
}

/// The strategies reach both verdicts of each parser often enough that the properties test
/// something: were every generated input refused, they would pass vacuously.
#[test]
fn the_strategies_reach_both_verdicts() {
    const N: usize = 400;
    let path = Path::new(FILE);
    let shape_ok =
        |t: &String| Shape::parse(t).is_ok_and(|s| Problem::dense(s, Dtype::F16, Layout::Bhsd).validate().is_ok());
    let runs = |p: &Problem| {
        p.validate().is_ok()
            && p.shape.d == 64
            && p.elements(TensorName::K) < 1 << 12
            && p.elements(TensorName::Q) < 1 << 12
    };
    let shares = [
        ("valid shape text", share(shape_text(), N, shape_ok)),
        ("small problem that runs", share(small_problem(), N, runs)),
        ("run input", share(safetensors_bytes(), N, |b| QkvFile::parse(b, path, Layout::Bhsd).is_ok())),
        (
            "run input that validates",
            share(safetensors_bytes(), N, |b| {
                QkvFile::parse(b, path, Layout::Bhsd).is_ok_and(|i| i.problem(Layout::Bhsd).validate().is_ok())
            }),
        ),
        ("bench record", share(record_text(), N, |t| BenchRecord::parse(t, path).is_ok())),
        (
            "record with a stored result",
            share(record_text(), N, |t| {
                BenchRecord::parse(t, path)
                    .is_ok_and(|r| r.results.iter().any(|r| r.ours.is_ok() && r.case.b < 1 << 62))
            }),
        ),
        ("reply with fields", share(reply_line(), N, |(op, line)| reply_fields(op, line).is_ok())),
        (
            "timed reply",
            share(reply_line(), N, |(op, line)| {
                op == "time"
                    && reply_fields(op, line).is_ok_and(|f| matches!(timing(&f, 3), Ok(PeerTiming::Samples(_))))
            }),
        ),
    ];
    for (what, share) in shares {
        assert!((0.02..=0.98).contains(&share), "{what}: {share} accepted");
    }
}

/// `oracle_replies_...` found it at 10^5 cases: a refusal whose `error` (or a peer's `reason`)
/// was empty became "the oracle refused 'load': " with nothing after it. Now "no message" (and
/// "no reason given"), as for a refusal without the field.
#[test]
fn regression_an_empty_refusal_still_says_something() {
    assert_eq!(reply_fields("load", r#"{"error":"","ok":false}"#), Err(ReplyError::Refused("no message".into())));
    let reply = json!({"status": "refused", "reason": " "});
    assert_eq!(timing(&reply, 3).unwrap(), PeerTiming::Refused("no reason given".into()));
}
