//! FP8 (E4M3) kernels on a GPU through the library's API, against the float64 reference on the
//! dequantized inputs: 16-bit inputs quantized by `fp8::quantize`, launched with their
//! descales, O compared under `tolerance(E4m3)` (and the LSE where asked). Each test returns
//! with the reason printed when no GPU is usable (CI has none); on an sm_89+ GPU it runs.

use evoattn::fp8::{quantize, Descales};
use evoattn::reference::{attention_f64_descaled, compare, dense_o, tolerance};
use evoattn::{
    Arch, Attention, Causal, DeviceTensors, Dtype, Impl, InputViews, Layout, Problem, Request, Shape, TensorName,
};

/// The GPU, or why not (printed): none, no driver, or an arch before sm_89.
fn fp8_gpu() -> Option<Attention> {
    match Attention::new(0) {
        Ok(a) if a.gpu().arch() >= Arch::Sm89 => Some(a),
        Ok(a) => {
            eprintln!("skipped: FP8 needs sm_89 or later, this GPU is {}", a.gpu().arch());
            None
        }
        Err(e) => {
            eprintln!("skipped: no usable GPU ({e})");
            None
        }
    }
}

/// Deterministic values in [-1, 1) (a 64-bit LCG), times a factor per (batch, KV head) group so
/// that each group's descale differs and a kernel reading another group's is caught.
fn values(problem: &Problem, t: TensorName, seed: u64, std: f64) -> Vec<u16> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..problem.extent(t))
        .map(|i| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let group = problem.kv_group(t, i / problem.shape.d);
            let x = ((state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * std * (1.0 + group as f64 / 2.0);
            Dtype::Bf16.to_bits(x)
        })
        .collect()
}

struct Case {
    shape: Shape,
    causal: Causal,
    lse: bool,
    /// Q and K's spread: 1 gives rows spread over many keys, 4 rows dominated by few.
    qk_std: f64,
    /// `None`: the planner's choice; else this family with these levers off its default.
    config: Option<(Impl, &'static str)>,
    /// V held transposed, `[B, Hkv, D, Sk']` (Sk' = Sk padded to 16, the pad NaN), as a caller
    /// holding Vᵀ passes it.
    v_given: bool,
}

/// Runs one case; returns a description of the failure, if any.
fn run_case(attention: &mut Attention, case: &Case, seed: u64) -> Result<String, String> {
    let sixteen = Problem::dense(case.shape, Dtype::Bf16, Layout::Bhsd);
    let rows = Problem::dense(case.shape, Dtype::E4m3, Layout::Bhsd).with_causal(case.causal).with_lse(case.lse);
    let problem = if case.v_given { rows.clone().with_v_keys_contiguous() } else { rows.clone() };
    let quantized: Vec<_> = [(TensorName::Q, case.qk_std), (TensorName::K, case.qk_std), (TensorName::V, 1.0)]
        .into_iter()
        .enumerate()
        .map(|(i, (t, std))| quantize(&sixteen, t, &values(&sixteen, t, seed * 3 + i as u64, std)).expect("finite"))
        .collect();
    let descales =
        Descales { q: quantized[0].descale.clone(), k: quantized[1].descale.clone(), v: quantized[2].descale.clone() };
    let bits: Vec<Vec<u16>> = quantized.iter().map(|q| q.bits.iter().map(|&b| u16::from(b)).collect()).collect();
    // The answer on V in rows: the same logical V.
    let want = attention_f64_descaled(&rows, &bits[0], &bits[1], &bits[2], Some(&descales));

    let request = match case.config {
        None => Request::Auto,
        Some((imp, text)) => {
            let base = evoattn::defaults::config(imp, attention.gpu().arch(), Dtype::E4m3, case.shape.d);
            Request::Config(base.with_overrides(text).map_err(|e| e.to_string())?)
        }
    };
    let plan = attention.plan(&problem, request).map_err(|e| e.to_string())?;
    let stream = attention.gpu().stream().clone();
    let err = |e: cudarc::driver::DriverError| e.to_string();
    let q = stream.clone_htod(&quantized[0].bits).map_err(err)?;
    let k = stream.clone_htod(&quantized[1].bits).map_err(err)?;
    let v_bytes = if case.v_given {
        // Each logical element at its place in the transposed buffer; E4M3's NaN (0x7F) in the pad.
        let mut buffer = vec![0x7Fu8; problem.extent(TensorName::V)];
        let s = case.shape;
        for (i, &byte) in quantized[2].bits.iter().enumerate() {
            let (group, key, d) = (i / (s.sk * s.d), i / s.d % s.sk, i % s.d);
            buffer[problem.offset(TensorName::V, group / s.hkv, group % s.hkv, key, d)] = byte;
        }
        buffer
    } else {
        quantized[2].bits.clone()
    };
    let v = stream.clone_htod(&v_bytes).map_err(err)?;
    let descale = stream.clone_htod(&descales.concat()).map_err(err)?;
    let o_len = problem.extent(TensorName::O);
    // NaN-poisoned: an element the kernel does not write fails the comparison.
    let mut o = stream.clone_htod(&vec![Dtype::Bf16.to_bits(f64::NAN); o_len.max(1)]).map_err(err)?;
    let lse_len = problem.extent(TensorName::Lse).max(1);
    let mut lse = stream.clone_htod(&vec![f32::NAN; lse_len]).map_err(err)?;
    let tensors = DeviceTensors {
        inputs: InputViews::Fp8 { q: q.slice(..), k: k.slice(..), v: v.slice(..), descale: descale.slice(..) },
        o: o.slice_mut(..),
        lse: case.lse.then(|| lse.slice_mut(..)),
    };
    attention.forward_on(&stream, &plan, tensors).map_err(|e| e.to_string())?;
    stream.synchronize().map_err(err)?;
    let o_host = stream.clone_dtoh(&o).map_err(err)?;
    let mut cmp = compare(&dense_o(&problem, &o_host), &want.o);
    if case.lse {
        let lse_host = stream.clone_dtoh(&lse).map_err(err)?;
        let got: Vec<f64> = lse_host[..problem.extent(TensorName::Lse)].iter().map(|&x| f64::from(x)).collect();
        cmp = cmp.with_lse(&got, &want.lse);
    }
    let tol = tolerance(Dtype::E4m3);
    let what = format!("{} {} {:?}: {:?}", plan.spec.name(), case.shape, case.causal, cmp);
    if cmp.passes(&tol) {
        Ok(what)
    } else {
        Err(format!("{what} exceeds {tol:?}"))
    }
}

fn cases() -> Vec<Case> {
    let shape = |b, h, hkv, sq, sk, d| Shape { b, h, hkv, sq, sk, d };
    let case = |s, causal, lse, qk_std, config| Case { shape: s, causal, lse, qk_std, config, v_given: false };
    let mut out = Vec::new();
    for d in [64, 128, 256] {
        out.push(case(shape(2, 4, 2, 300, 300, d), Causal::None, true, 1.0, None));
        out.push(case(shape(1, 4, 1, 257, 129, d), Causal::TopLeft, true, 4.0, None));
        out.push(case(shape(2, 2, 2, 70, 200, d), Causal::BottomRight, false, 1.0, None));
        out.push(case(shape(1, 2, 2, 130, 40, d), Causal::BottomRight, true, 4.0, None));
    }
    // mma8's defaults (the planner's choice off Hopper; on Hopper it picks wgmma).
    for d in [64, 128, 256] {
        out.push(case(shape(1, 4, 2, 257, 300, d), Causal::BottomRight, true, 4.0, Some((Impl::Mma8, ""))));
    }
    // wgmma's E4M3 levers, each off its default at least once (sm_90a only: elsewhere the case
    // reports that wgmma does not run there).
    for (d, causal, config) in [
        (128, Causal::None, "pipeline=overlap"),
        (64, Causal::None, "consumer_warpgroups=2,stages=1"),
        (128, Causal::BottomRight, "stages=3,q_in_regs=1"),
        (64, Causal::TopLeft, "q_in_regs=1,ring_test=1,exp2_poly=4"),
        (256, Causal::None, "schedule=persistent"),
        (64, Causal::None, "schedule=split-tail"),
        (128, Causal::None, "consumer_warpgroups=1,pipeline=overlap"),
        (128, Causal::TopLeft, "lazy_rescale=1"),
        (256, Causal::BottomRight, "lazy_rescale=1,schedule=persistent"),
    ] {
        out.push(case(shape(2, 4, 2, 333, 397, d), causal, true, 4.0, Some((Impl::Wgmma, config))));
    }
    // mma8's levers, each off its default at least once.
    for config in
        ["block_m=64", "block_n=32", "block_n=128", "stages=1", "stages=3", "q_in_regs=0", "q_in_regs=1,d_split=2"]
    {
        out.push(case(shape(1, 2, 1, 190, 333, 64), Causal::TopLeft, true, 1.0, Some((Impl::Mma8, config))));
    }
    out.push(case(shape(1, 2, 1, 190, 333, 128), Causal::None, true, 4.0, Some((Impl::Mma8, "d_split=2,block_m=64"))));
    // The GPU oracle of E4M3 problems too large for the CPU.
    for d in [64, 128, 256] {
        out.push(case(shape(2, 4, 2, 100, 150, d), Causal::BottomRight, true, 4.0, Some((Impl::Reference, ""))));
    }
    out
}

/// Runs `cases`, printing a line each; panics naming every failure.
fn run_all(cases: &[Case]) {
    let Some(mut attention) = fp8_gpu() else { return };
    let mut failures = Vec::new();
    let hopper = Impl::Wgmma.archs().contains(&attention.gpu().arch());
    for (i, case) in cases.iter().enumerate() {
        if !hopper && (case.v_given || matches!(case.config, Some((Impl::Wgmma, _)))) {
            eprintln!("skipped: {} {} needs sm_90a", Impl::Wgmma, case.shape);
            continue;
        }
        match run_case(&mut attention, case, i as u64 + 1) {
            Ok(line) => eprintln!("pass {line}"),
            Err(line) => {
                eprintln!("FAIL {line}");
                failures.push(line);
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn e4m3_kernels_match_float64_on_dequantized_inputs() {
    run_all(&cases());
}

/// wgmma's claimed tiles apart: racecheck reports its scheduler's tile slot, written by the
/// producer and read by the consumers in the order mbarriers give (which racecheck does not
/// follow; kernels/wgmma/wgmma_ws.cuh), so sanitizer runs skip this test by name.
#[test]
fn e4m3_claimed_tiles_match_float64() {
    let shape = Shape { b: 2, h: 4, hkv: 2, sq: 333, sk: 397, d: 128 };
    let config = Some((Impl::Wgmma, "schedule=claimed"));
    run_all(&[Case { shape, causal: Causal::TopLeft, lse: true, qk_std: 4.0, config, v_given: false }]);
}

/// E4M3 V held transposed (a `vt.transpose(-1, -2)` view's strides), read as it is by the
/// planner's wgmma: its keys permuted in the kernel up to `FP8_VT_PERMUTE_MAX_KEYS` (2048) and by
/// the permute kernel past it (skipped off Hopper, where no kernel reads V so).
#[test]
fn e4m3_v_held_transposed_matches_float64() {
    let mut cases = Vec::new();
    for d in [64, 128, 256] {
        for (sk, causal) in [(300, Causal::TopLeft), (2100, Causal::BottomRight), (1, Causal::None)] {
            let shape = Shape { b: 2, h: 4, hkv: 2, sq: 70, sk, d };
            cases.push(Case { shape, causal, lse: true, qk_std: 4.0, config: None, v_given: true });
        }
    }
    run_all(&cases);
}
