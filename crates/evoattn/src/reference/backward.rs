//! The float64 reference of attention's backward pass: dQ, dK and dV of a loss L whose
//! gradient with respect to O is dO, for the same scores, scale and masks as the forward
//! reference (`reference::attention_f64`).
//!
//! With P the row softmax of S = scale · Q·Kᵀ over the visible keys:
//! dV = Pᵀ·dO, dP = dO·Vᵀ, delta_i = Σ_j P_ij dP_ij (= dO_i · O_i), dS = P ∘ (dP - delta),
//! dQ = scale · dS·K, dK = scale · dSᵀ·Q; under GQA a KV head's dK and dV sum over its group's
//! query heads. A row that sees no key contributes nothing.

use crate::problem::{Problem, Shape, TensorName};
use std::num::NonZeroUsize;

/// Gradients, dense: `dq` is `[B, H, Sq, D]`, `dk` and `dv` are `[B, Hkv, Sk, D]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceGrads {
    pub dq: Vec<f64>,
    pub dk: Vec<f64>,
    pub dv: Vec<f64>,
}

/// The backward pass in float64 on inputs given as raw bits of `problem.dtype` laid out by the
/// problem's strides; `d_o` (the gradient of O) in the output dtype, laid out by O's strides.
/// Runs the (batch, KV head) pairs on all cores.
///
/// Panics when a buffer is shorter than the problem's extent, or when a non-empty problem has
/// D = 0 or Hkv not dividing H (`Problem::validate` rejects both).
pub fn backward_f64(problem: &Problem, q: &[u16], k: &[u16], v: &[u16], d_o: &[u16]) -> ReferenceGrads {
    for (t, buf) in [(TensorName::Q, q), (TensorName::K, k), (TensorName::V, v), (TensorName::O, d_o)] {
        let need = problem.extent(t);
        assert!(buf.len() >= need, "reference: tensor {t} holds {} elements, the problem needs {need}", buf.len());
    }
    let dense = |t: TensorName, buf: &[u16], dtype: crate::problem::Dtype| -> Vec<f64> {
        crate::reference::logical_offsets(problem, t).map(|off| dtype.from_bits(buf[off])).collect()
    };
    let inputs = DenseInputs {
        q: dense(TensorName::Q, q, problem.dtype),
        k: dense(TensorName::K, k, problem.dtype),
        v: dense(TensorName::V, v, problem.dtype),
        d_o: dense(TensorName::O, d_o, problem.dtype.output()),
    };
    let scale = f64::from(problem.softmax_scale());
    backward_dense(problem.shape, problem.causal.offset(problem.shape.sq, problem.shape.sk), scale, &inputs)
}

/// Dense `[B, H, Sq, D]` Q and dO, `[B, Hkv, Sk, D]` K and V.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseInputs {
    pub q: Vec<f64>,
    pub k: Vec<f64>,
    pub v: Vec<f64>,
    pub d_o: Vec<f64>,
}

/// [`backward_f64`] on dense float64 inputs; `diagonal` is the causal offset (key j is visible
/// to query i iff j <= i + offset), `None` without a mask.
pub fn backward_dense(s: Shape, diagonal: Option<i64>, scale: f64, x: &DenseInputs) -> ReferenceGrads {
    let mut grads = ReferenceGrads {
        dq: vec![0.0; s.b * s.h * s.sq * s.d],
        dk: vec![0.0; s.b * s.hkv * s.sk * s.d],
        dv: vec![0.0; s.b * s.hkv * s.sk * s.d],
    };
    if grads.dq.is_empty() || grads.dk.is_empty() {
        return grads;
    }
    super::assert_heads(s);
    let group = s.h / s.hkv;
    // One (batch, KV head) a job: its group's dQ rows are contiguous, as are its dK and dV rows.
    let mut jobs: Vec<_> = grads
        .dq
        .chunks_mut(group * s.sq * s.d)
        .zip(grads.dk.chunks_mut(s.sk * s.d))
        .zip(grads.dv.chunks_mut(s.sk * s.d))
        .enumerate()
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, NonZeroUsize::get).min(jobs.len());
    let per_thread = jobs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for chunk in jobs.chunks_mut(per_thread) {
            scope.spawn(move || {
                for (bkv, ((dq, dk), dv)) in chunk.iter_mut() {
                    kv_head_grads(s, diagonal, scale, x, *bkv, [dq, dk, dv]);
                }
            });
        }
    });
    grads
}

/// The gradients of (batch, KV head) `bkv` = b · Hkv + kv_head: its group's dQ rows, its dK
/// and dV rows (all zero on entry).
fn kv_head_grads(s: Shape, diagonal: Option<i64>, scale: f64, x: &DenseInputs, bkv: usize, out: [&mut [f64]; 3]) {
    let [dq, dk, dv] = out;
    let (d, group) = (s.d, s.h / s.hkv);
    let keys = &x.k[bkv * s.sk * d..][..s.sk * d];
    let values = &x.v[bkv * s.sk * d..][..s.sk * d];
    let mut p = Vec::with_capacity(s.sk);
    let mut dp = Vec::with_capacity(s.sk);
    for g in 0..group {
        // Query head bkv · group + g: dense rows start where the group's first head's do.
        let head_rows = (bkv * group + g) * s.sq * d;
        for i in 0..s.sq {
            let query = &x.q[head_rows + i * d..][..d];
            let d_out = &x.d_o[head_rows + i * d..][..d];
            let visible = match diagonal {
                None => s.sk,
                Some(offset) => (i as i64 + offset + 1).clamp(0, s.sk as i64) as usize,
            };
            p.clear();
            p.extend(keys.chunks_exact(d).take(visible).map(|key| scale * dot(query, key)));
            let Some(max) = p.iter().copied().reduce(f64::max) else {
                continue;
            };
            p.iter_mut().for_each(|x| *x = (*x - max).exp());
            let sum: f64 = p.iter().sum();
            p.iter_mut().for_each(|x| *x /= sum);
            dp.clear();
            dp.extend(values.chunks_exact(d).take(visible).map(|value| dot(d_out, value)));
            let delta: f64 = p.iter().zip(&dp).map(|(p, dp)| p * dp).sum();
            let dq_row = &mut dq[(g * s.sq + i) * d..][..d];
            for (j, (&pj, &dpj)) in p.iter().zip(&dp).enumerate() {
                let ds = pj * (dpj - delta);
                let key = &keys[j * d..][..d];
                for (acc, kx) in dq_row.iter_mut().zip(key) {
                    *acc += scale * ds * kx;
                }
                for (acc, qx) in dk[j * d..][..d].iter_mut().zip(query) {
                    *acc += scale * ds * qx;
                }
                for (acc, ox) in dv[j * d..][..d].iter_mut().zip(d_out) {
                    *acc += pj * ox;
                }
            }
        }
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Causal, Dtype, Layout};

    /// B, H, Sq, D, Hkv, Sk: the command line's order.
    fn shape(b: usize, h: usize, sq: usize, d: usize, hkv: usize, sk: usize) -> Shape {
        Shape { b, h, hkv, sq, sk, d }
    }

    /// A deterministic pseudo-random value in [-1, 1) for element `i` of tensor `seed`.
    fn value(seed: u64, i: usize) -> f64 {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x ^= x >> 31;
        x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 29;
        (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }

    fn inputs(s: Shape) -> DenseInputs {
        let fill = |seed, n| (0..n).map(|i| value(seed, i)).collect::<Vec<_>>();
        DenseInputs {
            q: fill(1, s.b * s.h * s.sq * s.d),
            k: fill(2, s.b * s.hkv * s.sk * s.d),
            v: fill(3, s.b * s.hkv * s.sk * s.d),
            d_o: fill(4, s.b * s.h * s.sq * s.d),
        }
    }

    /// L = Σ dO ∘ O with O from a direct (unfused, unshared) softmax attention.
    fn loss(s: Shape, diagonal: Option<i64>, scale: f64, x: &DenseInputs) -> f64 {
        let d = s.d;
        let mut total = 0.0;
        for bh in 0..s.b * s.h {
            let kv = bh / s.h * s.hkv + bh % s.h / (s.h / s.hkv);
            for i in 0..s.sq {
                let q = &x.q[(bh * s.sq + i) * d..][..d];
                let visible = diagonal.map_or(s.sk, |o| (i as i64 + o + 1).clamp(0, s.sk as i64) as usize);
                let scores: Vec<f64> = (0..visible).map(|j| scale * dot(q, &x.k[(kv * s.sk + j) * d..][..d])).collect();
                let z: f64 = scores.iter().map(|e| e.exp()).sum();
                for c in 0..d {
                    let o: f64 =
                        scores.iter().enumerate().map(|(j, e)| e.exp() / z * x.v[(kv * s.sk + j) * d + c]).sum();
                    total += x.d_o[(bh * s.sq + i) * d + c] * o;
                }
            }
        }
        total
    }

    /// Central differences of `loss` along every element of every input, against the gradients.
    fn check_against_finite_differences(s: Shape, diagonal: Option<i64>) {
        let scale = 0.7;
        let x = inputs(s);
        let grads = backward_dense(s, diagonal, scale, &x);
        let h = 1e-5;
        fn field(x: &mut DenseInputs, t: usize) -> &mut Vec<f64> {
            match t {
                0 => &mut x.q,
                1 => &mut x.k,
                _ => &mut x.v,
            }
        }
        for (t, want) in [&grads.dq, &grads.dk, &grads.dv].into_iter().enumerate() {
            for (i, &gradient) in want.iter().enumerate() {
                let mut plus = x.clone();
                field(&mut plus, t)[i] += h;
                let mut minus = x.clone();
                field(&mut minus, t)[i] -= h;
                let numeric = (loss(s, diagonal, scale, &plus) - loss(s, diagonal, scale, &minus)) / (2.0 * h);
                assert!(
                    (numeric - gradient).abs() < 1e-7,
                    "shape {s:?} mask {diagonal:?}: d{} element {i}: finite difference {numeric}, gradient {gradient}",
                    ["q", "k", "v"][t],
                );
            }
        }
    }

    #[test]
    fn gradients_are_the_loss_derivatives_without_a_mask() {
        check_against_finite_differences(shape(1, 2, 5, 4, 2, 7), None);
    }

    #[test]
    fn gradients_are_the_loss_derivatives_under_gqa_and_both_causal_alignments() {
        // Two query heads a KV head; bottom-right with Sq > Sk leaves rows that see no key.
        let s = shape(2, 4, 6, 4, 2, 4);
        check_against_finite_differences(s, Some(0));
        check_against_finite_differences(s, Some(4 - 6));
    }

    #[test]
    fn each_row_of_ds_sums_to_zero_so_dq_is_unchanged_by_a_shift_of_every_key() {
        // Adding one vector to every key adds a constant to each row's scores, which the
        // softmax ignores: dQ must not depend on it, and the dK rows must sum to zero.
        let s = shape(1, 1, 3, 4, 1, 5);
        let x = inputs(s);
        let mut shifted = x.clone();
        shifted
            .k
            .chunks_exact_mut(4)
            .for_each(|key| key.iter_mut().zip([0.3, -0.2, 0.1, 0.5]).for_each(|(a, b)| *a += b));
        let (a, b) = (backward_dense(s, None, 0.5, &x), backward_dense(s, None, 0.5, &shifted));
        for (x, y) in a.dq.iter().zip(&b.dq) {
            assert!((x - y).abs() < 1e-12, "dq moved: {x} vs {y}");
        }
        for c in 0..4 {
            let column: f64 = a.dk.chunks_exact(4).map(|row| row[c]).sum();
            assert!(column.abs() < 1e-12, "dK's column {c} sums to {column}");
        }
    }

    #[test]
    fn the_bits_entry_reads_strides_and_matches_the_dense_one() {
        let p = Problem::dense(shape(1, 2, 3, 8, 1, 4), Dtype::Bf16, Layout::Bshd).with_causal(Causal::TopLeft);
        let bits = |t: TensorName, seed| {
            let mut buf = vec![0u16; p.extent(t)];
            for (i, off) in crate::reference::logical_offsets(&p, t).enumerate() {
                buf[off] = Dtype::Bf16.to_bits(value(seed, i));
            }
            buf
        };
        let (q, k, v, d_o) =
            (bits(TensorName::Q, 1), bits(TensorName::K, 2), bits(TensorName::V, 3), bits(TensorName::O, 4));
        let got = backward_f64(&p, &q, &k, &v, &d_o);
        let dense =
            |t, buf: &[u16]| crate::reference::logical_offsets(&p, t).map(|o| Dtype::Bf16.from_bits(buf[o])).collect();
        let x = DenseInputs {
            q: dense(TensorName::Q, &q),
            k: dense(TensorName::K, &k),
            v: dense(TensorName::V, &v),
            d_o: dense(TensorName::O, &d_o),
        };
        assert_eq!(got, backward_dense(p.shape, Some(0), f64::from(p.softmax_scale()), &x));
        assert!(got.dq.iter().any(|&g| g != 0.0));
    }
}
