//! What FP8 costs in accuracy: attention on bf16 inputs computed four ways on the GPU, each
//! against float64 on those bf16 inputs (what the user has): the bf16 kernel; E4M3 inputs from
//! `fp8::quantize` on the FP8 kernel (O in bf16, and O in f16: `e4m3f16`); and the former with Q
//! and K rotated by the Hadamard matrix first. Normal inputs, and inputs with outliers (0.1% of the entries of q, k and v times 10).
//! Prints a markdown table (docs/fp8-error.md keeps the measured one).
//!
//! cargo run --release --example fp8_error   (needs an sm_89+ GPU; says why and exits otherwise)

use evoattn::fp8::{quantize_with, Descales, Rotation};
use evoattn::reference::{attention_f64, compare, dense_o, Comparison};
use evoattn::{Attention, DeviceTensors, Dtype, InputViews, Layout, Problem, Request, Shape, TensorName};

/// Share of entries made outliers, and their factor.
const OUTLIER_SHARE: f64 = 0.001;
const OUTLIER_FACTOR: f64 = 10.0;

/// Standard normals (SplitMix64 and Box-Muller), `outliers` of them times OUTLIER_FACTOR.
fn inputs(n: usize, seed: u64, outliers: bool) -> Vec<u16> {
    let mut state = seed;
    let mut uniform = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| {
            let (u1, u2, u3) = (1.0 - uniform(), uniform(), uniform());
            let x = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            Dtype::Bf16.to_bits(if outliers && u3 < OUTLIER_SHARE { x * OUTLIER_FACTOR } else { x })
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut attention = match Attention::new(0) {
        Ok(a) if a.gpu().arch() >= evoattn::Arch::Sm89 => a,
        Ok(a) => return Err(format!("FP8 needs sm_89 or later; this GPU is {}", a.gpu().arch()).into()),
        Err(e) => return Err(format!("no usable GPU: {e}").into()),
    };
    let stream = attention.gpu().stream().clone();
    println!("GPU: {}", attention.gpu().name());
    println!(
        "| shape | inputs | bf16 kernel rel_l2 | max_abs | E4M3 rel_l2 | max_abs | E4M3, f16 O rel_l2 | max_abs | \
         E4M3 + Hadamard rel_l2 | max_abs |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for shape in [Shape::new(2, 8, 1024, 64), Shape::new(2, 8, 1024, 128), Shape::new(1, 8, 2048, 128)] {
        for outliers in [false, true] {
            let bf16 = Problem::dense(shape, Dtype::Bf16, Layout::Bhsd);
            let [q, k, v] =
                [TensorName::Q, TensorName::K, TensorName::V].map(|t| inputs(bf16.extent(t), t as u64 + 1, outliers));
            let truth = attention_f64(&bf16, &q, &k, &v).o;

            // The bf16 kernel.
            let plan = attention.plan(&bf16, Request::Auto)?;
            let [dq, dk, dv] = [&q, &k, &v].map(|x| stream.clone_htod(x));
            let (dq, dk, dv) = (dq?, dk?, dv?);
            let mut o = stream.alloc_zeros::<u16>(bf16.extent(TensorName::O))?;
            let views = InputViews::Sixteen { q: dq.slice(..), k: dk.slice(..), v: dv.slice(..) };
            attention.forward_on(&stream, &plan, DeviceTensors { inputs: views, o: o.slice_mut(..), lse: None })?;
            let sixteen = compare(&dense_o(&bf16, &stream.clone_dtoh(&o)?), &truth);

            let mut fp8 = |dtype: Dtype, rotation: Rotation| -> Result<Comparison, Box<dyn std::error::Error>> {
                let rotate = |t: TensorName| if t == TensorName::V { Rotation::None } else { rotation };
                let [qq, qk, qv] = [(TensorName::Q, &q), (TensorName::K, &k), (TensorName::V, &v)]
                    .map(|(t, x)| quantize_with(&bf16, t, x, rotate(t)));
                let (qq, qk, qv) = (qq?, qk?, qv?);
                let descales = Descales { q: qq.descale, k: qk.descale, v: qv.descale };
                let problem = Problem::dense(shape, dtype, Layout::Bhsd);
                let plan = attention.plan(&problem, Request::Auto)?;
                let (bq, bk, bv, bd) = (
                    stream.clone_htod(&qq.bits)?,
                    stream.clone_htod(&qk.bits)?,
                    stream.clone_htod(&qv.bits)?,
                    stream.clone_htod(&descales.concat())?,
                );
                let mut o = stream.alloc_zeros::<u16>(problem.extent(TensorName::O))?;
                let views =
                    InputViews::Fp8 { q: bq.slice(..), k: bk.slice(..), v: bv.slice(..), descale: bd.slice(..) };
                attention.forward_on(&stream, &plan, DeviceTensors { inputs: views, o: o.slice_mut(..), lse: None })?;
                Ok(compare(&dense_o(&problem, &stream.clone_dtoh(&o)?), &truth))
            };
            let plain = fp8(Dtype::E4m3, Rotation::None)?;
            let f16_o = fp8(Dtype::E4m3F16, Rotation::None)?;
            let rotated = fp8(Dtype::E4m3, Rotation::Hadamard)?;
            println!(
                "| {shape} | {} | {:.2e} | {:.2e} | {:.2e} | {:.2e} | {:.2e} | {:.2e} | {:.2e} | {:.2e} |",
                if outliers { "0.1% outliers x10" } else { "normal" },
                sixteen.rel_l2,
                sixteen.max_abs,
                plain.rel_l2,
                plain.max_abs,
                f16_o.rel_l2,
                f16_o.max_abs,
                rotated.rel_l2,
                rotated.max_abs
            );
        }
    }
    Ok(())
}
