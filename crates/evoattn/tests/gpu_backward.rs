//! The backward pass (`mma-bwd`) on a GPU against the float64 reference
//! (`reference::backward`): O and LSE from our planned forward, as a caller has them; dO drawn
//! like an input; dQ, dK and dV NaN-poisoned before the launch so an unwritten element fails.
//! Covers both dtypes, hd64 and hd128, GQA, both layouts, every mask, Sq ≠ Sk both ways, rows
//! that see no key, lengths that are no multiple of a tile, Sk = 1, and every config of the
//! family's space on one problem. Returns with the reason printed when no GPU is usable (CI).

use evoattn::draw::{host_tensor, Stream};
use evoattn::reference::backward::backward_f64;
use evoattn::reference::{compare, grad_tolerance, logical_offsets, Comparison};
use evoattn::{
    Attention, BackwardTensors, BwdConfig, Causal, DeviceTensors, Dtype, Impl, InputViews, KernelConfig, KernelSpec,
    Layout, Problem, Request, Shape, TensorName,
};

fn attention() -> Option<Attention> {
    match Attention::new(0) {
        Ok(a) => Some(a),
        Err(e) => {
            eprintln!("skipped: no usable GPU ({e})");
            None
        }
    }
}

/// The gradients' comparisons (dq, dk, dv) of `problem` under backward `request`.
fn run_case(attention: &mut Attention, problem: &Problem, request: Request) -> Result<[Comparison; 3], String> {
    let e = |x: evoattn::Error| x.to_string();
    let err = |x: cudarc::driver::DriverError| x.to_string();
    let stream = attention.gpu().stream().clone();
    let nan = problem.dtype.to_bits(f64::NAN);
    let [q, k, v] = [TensorName::Q, TensorName::K, TensorName::V]
        .map(|t| host_tensor(problem, t, &Stream::new(21, t as u64, 1.0), nan));
    let d_o = host_tensor(problem, TensorName::O, &Stream::new(22, 9, 1.0), nan);
    let up = |x: &Vec<u16>| stream.clone_htod(&x[..]).map_err(err);
    let (dq_in, dk_in, dv_in, ddo) = (up(&q)?, up(&k)?, up(&v)?, up(&d_o)?);
    let mut o = stream.clone_htod(&vec![nan; problem.extent(TensorName::O).max(1)]).map_err(err)?;
    let mut lse = stream.clone_htod(&vec![f32::NAN; problem.extent(TensorName::Lse).max(1)]).map_err(err)?;
    // The forward as a training step runs it: with LSE, which the backward reads.
    let forward = attention.plan(&problem.clone().with_lse(true), Request::Auto).map_err(e)?;
    attention
        .forward_on(
            &stream,
            &forward,
            DeviceTensors {
                inputs: InputViews::Sixteen { q: dq_in.slice(..), k: dk_in.slice(..), v: dv_in.slice(..) },
                o: o.slice_mut(..),
                lse: Some(lse.slice_mut(..)),
            },
        )
        .map_err(e)?;
    let poisoned = |t: TensorName| stream.clone_htod(&vec![nan; problem.extent(t).max(1)]).map_err(err);
    let (mut dq, mut dk, mut dv) = (poisoned(TensorName::DQ)?, poisoned(TensorName::DK)?, poisoned(TensorName::DV)?);
    let plan = attention.plan_backward(problem, request).map_err(e)?;
    let mut launch = attention.prepare_backward(&plan).map_err(e)?;
    attention
        .run_backward(
            &mut launch,
            &stream,
            BackwardTensors {
                q: dq_in.slice(..),
                k: dk_in.slice(..),
                v: dv_in.slice(..),
                o: o.slice(..),
                lse: lse.slice(..),
                d_o: ddo.slice(..),
                dq: dq.slice_mut(..),
                dk: dk.slice_mut(..),
                dv: dv.slice_mut(..),
            },
        )
        .map_err(e)?;
    stream.synchronize().map_err(err)?;
    let want = backward_f64(problem, &q, &k, &v, &d_o);
    let dense = |t: TensorName, bits: Vec<u16>| -> Vec<f64> {
        logical_offsets(problem, t).map(|off| problem.dtype.from_bits(bits[off])).collect()
    };
    let got = [
        dense(TensorName::DQ, stream.clone_dtoh(&dq).map_err(err)?),
        dense(TensorName::DK, stream.clone_dtoh(&dk).map_err(err)?),
        dense(TensorName::DV, stream.clone_dtoh(&dv).map_err(err)?),
    ];
    Ok([compare(&got[0], &want.dq), compare(&got[1], &want.dk), compare(&got[2], &want.dv)])
}

/// Runs every case, printing each gradient's errors; fails listing the cases out of tolerance.
fn check(attention: &mut Attention, cases: &[(Problem, Request)]) {
    let mut failures = Vec::new();
    for (problem, request) in cases {
        let what =
            format!("{} {} {:?} {:?} {request}", problem.dtype, problem.shape, problem.causal, layout_of(problem));
        match run_case(attention, problem, *request) {
            Ok(cmps) => {
                let tol = grad_tolerance(problem.dtype);
                let line: Vec<String> = ["dq", "dk", "dv"]
                    .iter()
                    .zip(&cmps)
                    .map(|(n, c)| {
                        format!("{n} max_abs {:.2e} (ref {:.2e}) rel_l2 {:.2e}", c.max_abs, c.ref_max_abs, c.rel_l2)
                    })
                    .collect();
                println!("{what}: {}", line.join(", "));
                if !cmps.iter().all(|c| c.passes(&tol)) {
                    failures.push(format!("{what}: exceeds {tol:?}: {}", line.join(", ")));
                }
            }
            Err(reason) => failures.push(format!("{what}: {reason}")),
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

fn layout_of(problem: &Problem) -> Layout {
    if problem.q_strides == Layout::Bhsd.strides(problem.shape.h, problem.shape.sq, problem.shape.d) {
        Layout::Bhsd
    } else {
        Layout::Bshd
    }
}

fn shape(b: usize, h: usize, hkv: usize, sq: usize, sk: usize, d: usize) -> Shape {
    Shape { b, h, hkv, sq, sk, d }
}

#[test]
fn gradients_match_float64_on_every_mask_layout_and_dtype() {
    let Some(mut attention) = attention() else { return };
    let mut cases = Vec::new();
    for dtype in [Dtype::Bf16, Dtype::F16] {
        for d in [64, 128] {
            for (s, layout) in [
                (shape(1, 2, 2, 128, 128, d), Layout::Bhsd),
                (shape(2, 4, 2, 77, 200, d), Layout::Bshd),
                (shape(1, 4, 1, 300, 45, d), Layout::Bhsd),
                (shape(1, 2, 2, 1, 1, d), Layout::Bhsd),
                (shape(1, 2, 1, 33, 1, d), Layout::Bshd),
            ] {
                for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
                    cases.push((Problem::dense(s, dtype, layout).with_causal(causal), Request::Auto));
                }
            }
        }
    }
    check(&mut attention, &cases);
}

#[test]
fn every_config_of_the_space_computes_the_same_gradients() {
    let Some(mut attention) = attention() else { return };
    let arch = attention.gpu().arch();
    let mut cases = Vec::new();
    for d in [64, 128] {
        let problem =
            Problem::dense(shape(1, 4, 2, 190, 260, d), Dtype::Bf16, Layout::Bhsd).with_causal(Causal::BottomRight);
        for spec in KernelSpec::space(Impl::MmaBwd, Dtype::Bf16, d) {
            // Spilling variants are refused by the resource gate; the space test of `compile` lists them.
            if spec.validate(arch).is_ok() {
                cases.push((problem.clone(), Request::Config(spec.config)));
            }
        }
    }
    let configs: Vec<BwdConfig> = cases
        .iter()
        .filter_map(|(_, r)| if let Request::Config(KernelConfig::MmaBwd(c)) = r { Some(*c) } else { None })
        .collect();
    println!("{} configs: {configs:?}", configs.len());
    let (runs, refused): (Vec<_>, Vec<_>) = cases.into_iter().partition(|(p, r)| {
        attention.plan_backward(p, *r).and_then(|plan| attention.prepare_backward(&plan).map(|_| ())).is_ok()
    });
    for (_, r) in &refused {
        println!("refused by the resource gate: {r}");
    }
    check(&mut attention, &runs);
}

#[test]
fn a_forward_kernel_is_refused_for_the_backward_pass_and_the_reverse() {
    let Some(attention) = attention() else { return };
    let problem = Problem::dense(shape(1, 2, 2, 64, 64, 64), Dtype::Bf16, Layout::Bhsd);
    let err = attention.plan_backward(&problem, Request::Family(Impl::Mma)).unwrap_err().to_string();
    assert!(err.contains("forward pass, not the backward") && err.contains("mma-bwd"), "{err}");
    let err = attention.plan(&problem, Request::Family(Impl::MmaBwd)).unwrap_err().to_string();
    assert!(err.contains("backward pass, not the forward"), "{err}");
}
