//! The library paths (#38: `cublas`: cuBLASLt Q·Kᵀ into a materialised S, the row kernel,
//! cuBLASLt P·V; `hybrid-qk` and `hybrid-pv`: our GEMM for P·V or for Q·Kᵀ) on a GPU, against
//! the float64 reference under the kernel's tolerance (`tolerance_of`): GQA folded into the
//! GEMMs (BHSD) and head by head (BSHD), every mask, rows that see no key, Sk = 1, hd64 to
//! hd256, both score dtypes, and S cut into chunks by a small budget; each with cuBLASLt, and
//! with cuTENSOR (`gemm=cutensor`) where it is installed and the combination valid. Each test
//! returns with the reason printed when no GPU or no cuBLAS is usable (CI has neither).

use evoattn::draw::{host_tensor, Stream};
use evoattn::reference::{attention_f64, compare, dense_o, tolerance_of};
use evoattn::runtime::launch::Launch;
use evoattn::runtime::library::LibraryLaunch;
use evoattn::{
    Arch, Attention, Causal, CublasConfig, DeviceTensors, Dtype, HybridPvConfig, HybridQkConfig, Impl, InputViews,
    KernelConfig, KernelSpec, Layout, Problem, Provider, Request, Scores, Shape, TensorName,
};

/// The GPU with cuBLAS loaded, or why not (printed).
fn attention_with_cublas() -> Option<Attention> {
    let attention = match Attention::new(0) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("skipped: no usable GPU ({e})");
            return None;
        }
    };
    match evoattn::runtime::cublas::Cublas::get() {
        Ok(_) => Some(attention),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// The GEMM providers to test: cuBLASLt, and cuTENSOR where it loads (else why not, printed).
fn providers() -> Vec<Provider> {
    match evoattn::runtime::cutensor::Cutensor::get() {
        Ok(lib) => {
            println!("cuTENSOR {:?}: {}", lib.version(), lib.library());
            vec![Provider::CublasLt, Provider::Cutensor]
        }
        Err(e) => {
            eprintln!("gemm=cutensor skipped: {e}");
            vec![Provider::CublasLt]
        }
    }
}

/// Runs `problem` through the path with `scores` and `gemm`: planned and launched by `Attention` (S given
/// its share of the free memory), or, with `budget`, prepared here with S given at most those
/// bytes. The failure's description, if any.
fn run_case(
    attention: &mut Attention,
    problem: &Problem,
    imp: Impl,
    (scores, gemm): (Scores, Provider),
    budget: Option<usize>,
) -> Result<String, String> {
    let e = |x: evoattn::Error| x.to_string();
    let config = library_config(imp, scores, gemm).ok_or(format!("{imp} is no library path"))?;
    let plan = attention.plan(problem, Request::Config(config)).map_err(e)?;
    let stream = attention.gpu().stream().clone();
    let err = |x: cudarc::driver::DriverError| x.to_string();
    let nan = problem.dtype.to_bits(f64::NAN);
    let [q, k, v] = [TensorName::Q, TensorName::K, TensorName::V]
        .map(|t| host_tensor(problem, t, &Stream::new(11, t as u64, 1.0), nan));
    let want = attention_f64(problem, &q, &k, &v);
    let (dq, dk, dv) =
        (stream.clone_htod(&q).map_err(err)?, stream.clone_htod(&k).map_err(err)?, stream.clone_htod(&v).map_err(err)?);
    // NaN-poisoned: an element the path does not write fails the comparison.
    let mut o = stream.clone_htod(&vec![nan; problem.extent(TensorName::O).max(1)]).map_err(err)?;
    let mut lse = stream.clone_htod(&vec![f32::NAN; problem.extent(TensorName::Lse).max(1)]).map_err(err)?;
    let tensors = DeviceTensors {
        inputs: InputViews::Sixteen { q: dq.slice(..), k: dk.slice(..), v: dv.slice(..) },
        o: o.slice_mut(..),
        lse: problem.with_lse.then(|| lse.slice_mut(..)),
    };
    let how = match budget {
        None => {
            attention.forward_on(&stream, &plan, tensors).map_err(e)?;
            "planned".to_string()
        }
        Some(bytes) => {
            let compiled = evoattn::runtime::compile::compile(&plan.spec, plan.arch, None).map_err(e)?;
            let kernel = attention.gpu().load(&compiled).map_err(e)?;
            let library = LibraryLaunch::new(attention.gpu(), &kernel, problem, bytes).map_err(e)?;
            let how = format!(
                "{} chunks, {} query heads a unit",
                library.geometry().chunks.len(),
                library.geometry().units.heads
            );
            attention.run_prepared(&mut Launch::Library(Box::new(library)), &stream, tensors).map_err(e)?;
            how
        }
    };
    stream.synchronize().map_err(err)?;
    let mut cmp = compare(&dense_o(problem, &stream.clone_dtoh(&o).map_err(err)?), &want.o);
    if problem.with_lse {
        let got: Vec<f64> = stream.clone_dtoh(&lse).map_err(err)?[..problem.extent(TensorName::Lse)]
            .iter()
            .map(|&x| f64::from(x))
            .collect();
        cmp = cmp.with_lse(&got, &want.lse);
    }
    let tol = tolerance_of(&plan.spec, problem);
    let what = format!(
        "{imp} {} {} {:?} {:?} scores={} gemm={} ({how}): {cmp:?}",
        problem.dtype,
        problem.shape,
        problem.causal,
        layout_of(problem),
        scores.name(),
        gemm.name(),
    );
    if cmp.passes(&tol) {
        Ok(what)
    } else {
        Err(format!("{what} exceeds {tol:?}"))
    }
}

fn library_config(imp: Impl, scores: Scores, gemm: Provider) -> Option<KernelConfig> {
    match imp {
        Impl::Cublas => Some(KernelConfig::Cublas(CublasConfig { scores, gemm })),
        Impl::HybridQk => Some(KernelConfig::HybridQk(HybridQkConfig { scores, gemm })),
        Impl::HybridPv => Some(KernelConfig::HybridPv(HybridPvConfig { scores, gemm })),
        _ => None,
    }
}

fn layout_of(problem: &Problem) -> Layout {
    if problem.q_strides == Layout::Bhsd.strides(problem.shape.h, problem.shape.sq, problem.shape.d) {
        Layout::Bhsd
    } else {
        Layout::Bshd
    }
}

#[test]
fn the_library_paths_match_float64_on_every_layout_mask_and_score_dtype() {
    let Some(mut attention) = attention_with_cublas() else { return };
    let shape = |b, h, hkv, sq, sk, d| Shape { b, h, hkv, sq, sk, d };
    let mut cases = Vec::new();
    let providers = providers();
    let pairs = Scores::ALL.into_iter().flat_map(|s| providers.iter().map(move |&g| (s, g)));
    for imp in [Impl::Cublas, Impl::HybridQk, Impl::HybridPv] {
        for dtype in [Dtype::Bf16, Dtype::F16] {
            for (scores, gemm) in pairs.clone() {
                // cuTENSOR writes no f32 scores from 16-bit inputs: the config refuses it.
                let config = library_config(imp, scores, gemm).expect("a library path");
                if let Err(why) = (KernelSpec { config, dtype, head_dim: 64 }).validate(Arch::Sm90a) {
                    assert!(gemm == Provider::Cutensor && scores == Scores::F32, "{why}");
                    continue;
                }
                let scores = (scores, gemm);
                let p = |s, layout, causal| Problem::dense(s, dtype, layout).with_causal(causal).with_lse(true);
                cases.push((p(shape(2, 8, 2, 300, 257, 64), Layout::Bhsd, Causal::None), imp, scores, None));
                cases.push((p(shape(1, 4, 2, 130, 70, 128), Layout::Bshd, Causal::BottomRight), imp, scores, None));
                cases.push((p(shape(2, 4, 1, 77, 1, 64), Layout::Bhsd, Causal::TopLeft), imp, scores, None));
                cases.push((p(shape(1, 2, 1, 200, 333, 256), Layout::Bshd, Causal::None), imp, scores, None));
                // A budget of one query head's S: chunks of single heads.
                let chunked = p(shape(2, 4, 4, 128, 200, 64), Layout::Bhsd, Causal::TopLeft);
                let one_head = 128 * 200usize.next_multiple_of(8) * scores.0.bytes();
                cases.push((chunked, imp, scores, Some(one_head)));
            }
        }
    }
    let mut failures = Vec::new();
    for (problem, imp, scores, budget) in &cases {
        match run_case(&mut attention, problem, *imp, *scores, *budget) {
            Ok(line) => println!("ok   {line}"),
            Err(line) => {
                println!("FAIL {line}");
                failures.push(line);
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
