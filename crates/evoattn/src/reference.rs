//! The float64 CPU reference every kernel is checked against, and the one place that defines
//! "close enough": how an output is compared with the reference, and the per-dtype tolerances
//! with the error budget behind each number.
//!
//! Conventions, shared with the kernels and FlashAttention: a score is `scale · (q · k)`, with
//! the scale taken as the f32 the kernels receive and applied in f64; a query row that may see
//! no key (a bottom-right mask with Sq > Sk, or Sk = 0) has O = 0 and LSE = -inf.

use crate::config::KernelSpec;
use crate::fp8::{Descales, E4M3_UNIT_ROUNDOFF};
use crate::problem::{Dtype, Problem, TensorName};
use std::num::NonZeroUsize;

pub mod backward;

/// The reference result, dense: `o` is `[B, H, Sq, D]`; `lse` is `[B, H, Sq]`, the natural log
/// of the sum of exp of the row's scaled scores (-inf for a row that sees no key).
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceOutput {
    pub o: Vec<f64>,
    pub lse: Vec<f64>,
}

/// Buffer offsets of tensor `t`'s elements in logical order (b, h, s, d), the order of a dense
/// BHSD array: the i-th offset holds dense element i.
/// Row by row with the strides read once: at 100M elements per tensor this runs several times
/// faster than computing each offset from (b, h, s, d).
pub fn logical_offsets(problem: &Problem, t: TensorName) -> impl Iterator<Item = usize> + '_ {
    let [nb, nh, ns, nd] = problem.dims(t);
    let st = problem.strides(t);
    // Exact for a validated problem (its element counts fit); never wraps for another.
    let rows = nb.saturating_mul(nh).saturating_mul(ns);
    (0..rows).flat_map(move |row| {
        let (b, h, s) = (row / (nh * ns), row / ns % nh, row % ns);
        let start = b * st.batch + h * st.head + s * st.seq;
        (0..nd).map(move |d| start + d * st.dim)
    })
}

/// Attention in float64 on inputs given as raw bits of `problem.dtype`, laid out by the
/// problem's strides. Numerically stable (each row's max score is subtracted before `exp`).
/// Runs the (batch, head) pairs on all cores.
///
/// Panics when a buffer is shorter than the problem's extent, when a non-empty problem has
/// D = 0 or Hkv not dividing H, or when its output is too large to hold (`Problem::validate`
/// rejects all three).
pub fn attention_f64(problem: &Problem, q: &[u16], k: &[u16], v: &[u16]) -> ReferenceOutput {
    attention_f64_descaled(problem, q, k, v, None)
}

/// [`attention_f64`] on E4M3 inputs dequantized by `descales` (each element times its tensor's
/// descale for its batch and KV head; `None`: all 1), the values an FP8 kernel is to attend
/// over. Panics as [`attention_f64`] does, and when `descales` do not fit the problem's
/// `[B, Hkv]`.
pub fn attention_f64_descaled(
    problem: &Problem,
    q: &[u16],
    k: &[u16],
    v: &[u16],
    descales: Option<&Descales>,
) -> ReferenceOutput {
    if let Some(d) = descales {
        let groups = problem.shape.b * problem.shape.hkv;
        assert!(
            [&d.q, &d.k, &d.v].iter().all(|x| x.len() == groups),
            "reference: descales must hold B * Hkv = {groups} values each"
        );
    }
    for (t, buf) in [(TensorName::Q, q), (TensorName::K, k), (TensorName::V, v)] {
        let need = problem.extent(t);
        assert!(buf.len() >= need, "reference: tensor {t} holds {} elements, the problem needs {need}", buf.len());
    }
    let s = problem.shape;
    let rows = problem.elements(TensorName::Lse);
    let mut o = vec![0.0; problem.elements(TensorName::O)];
    let mut lse = vec![f64::NEG_INFINITY; rows];
    if rows == 0 {
        return ReferenceOutput { o, lse };
    }
    assert_heads(s);

    let mut heads: Vec<_> = o.chunks_mut(s.sq * s.d).zip(lse.chunks_mut(s.sq)).enumerate().collect();
    let threads = std::thread::available_parallelism().map_or(1, NonZeroUsize::get).min(heads.len());
    let heads_per_thread = heads.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for group in heads.chunks_mut(heads_per_thread) {
            scope.spawn(move || {
                for (bh, (o_head, lse_head)) in group.iter_mut() {
                    attend_head(problem, [q, k, v], descales, *bh / s.h, *bh % s.h, o_head, lse_head);
                }
            });
        }
    });
    ReferenceOutput { o, lse }
}

/// The reference's precondition on a non-empty problem (`Problem::validate` checks it first).
fn assert_heads(s: crate::problem::Shape) {
    assert!(
        s.d > 0 && s.hkv > 0 && s.h.is_multiple_of(s.hkv),
        "reference: needs D >= 1 and Hkv dividing H, got D={} H={} Hkv={}",
        s.d,
        s.h,
        s.hkv
    );
}

/// One (batch, head): writes the head's dense O rows and LSE entries. `o_head` starts at 0
/// and `lse_head` at -inf, which rows that see no key keep.
fn attend_head(
    problem: &Problem,
    [q, k, v]: [&[u16]; 3],
    descales: Option<&Descales>,
    b: usize,
    h: usize,
    o_head: &mut [f64],
    lse_head: &mut [f64],
) {
    let s = problem.shape;
    let kv_head = h / s.group();
    let load = |t: TensorName, buf: &[u16], head: usize, rows: usize| -> Vec<f64> {
        // Q's descale too is indexed by the KV head (FlashAttention-3's convention).
        let descale = descales.map_or(1.0, |d| f64::from(d.of(t)[b * s.hkv + kv_head]));
        (0..rows)
            .flat_map(|r| {
                (0..s.d).map(move |d| problem.dtype.from_bits(buf[problem.offset(t, b, head, r, d)]) * descale)
            })
            .collect()
    };
    let queries = load(TensorName::Q, q, h, s.sq);
    let keys = load(TensorName::K, k, kv_head, s.sk);
    let values = load(TensorName::V, v, kv_head, s.sk);
    let scale = f64::from(problem.softmax_scale());
    let diagonal = problem.causal.offset(s.sq, s.sk);

    let mut scores = Vec::with_capacity(s.sk);
    let rows = queries.chunks_exact(s.d).zip(o_head.chunks_exact_mut(s.d)).zip(lse_head.iter_mut());
    for (i, ((query, out), lse)) in rows.enumerate() {
        let visible = match diagonal {
            None => s.sk,
            // key j is visible iff j <= i + offset, so keys 0..=i+offset, clamped to 0..Sk
            Some(offset) => (i as i64 + offset + 1).clamp(0, s.sk as i64) as usize,
        };
        scores.clear();
        scores.extend(keys.chunks_exact(s.d).take(visible).map(|key| scale * dot(query, key)));
        let Some(max) = scores.iter().copied().reduce(f64::max) else {
            continue;
        };
        let mut sum = 0.0;
        for (score, value) in scores.iter().zip(values.chunks_exact(s.d)) {
            let p = (score - max).exp();
            sum += p;
            for (acc, x) in out.iter_mut().zip(value) {
                *acc += p * x;
            }
        }
        out.iter_mut().for_each(|x| *x /= sum);
        *lse = max + sum.ln();
    }
}

/// Dot product with independent partial sums: one f64 add chain is latency-bound, four keep
/// the FPU busy; the changed summation order is far below the dtypes' precision.
fn dot(a: &[f64], b: &[f64]) -> f64 {
    const LANES: usize = 4;
    let (a_lanes, b_lanes) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f64 = a_lanes.remainder().iter().zip(b_lanes.remainder()).map(|(x, y)| x * y).sum();
    let mut acc = [0.0; LANES];
    for (xs, ys) in a_lanes.zip(b_lanes) {
        for ((acc, x), y) in acc.iter_mut().zip(xs).zip(ys) {
            *acc += x * y;
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// An output buffer laid out by `problem.o_strides`, as dense `[B, H, Sq, D]` f64. NaN bits
/// (unwritten elements of a NaN-poisoned buffer) stay NaN.
pub fn dense_o(problem: &Problem, o_bits: &[u16]) -> Vec<f64> {
    let need = problem.extent(TensorName::O);
    assert!(o_bits.len() >= need, "dense_o: buffer holds {} elements, the problem needs {need}", o_bits.len());
    logical_offsets(problem, TensorName::O).map(|off| problem.dtype.output().from_bits(o_bits[off])).collect()
}

/// How far an output is from the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// Largest |got - want| over the finite elements of `got`.
    pub max_abs: f64,
    /// ‖got - want‖₂ / ‖want‖₂ over the finite elements of `got`; when the reference is all
    /// zero (every row empty, or V = 0) this is ‖got‖₂ itself, so only an exact 0 scores 0.
    pub rel_l2: f64,
    /// NaN or infinite elements of `got`: unwritten (NaN-poisoned) or overflowed.
    pub nonfinite: usize,
    /// Largest |want|: the scale `max_abs` is judged against.
    pub ref_max_abs: f64,
    /// Largest LSE error, once [`Comparison::with_lse`] has compared the LSE.
    pub lse_max_abs: Option<f64>,
    /// Largest |LSE| of the reference over rows that see a key (0 until compared).
    pub lse_ref_max_abs: f64,
}

/// Compares an output with the reference, element by element (both dense, same order).
pub fn compare(got: &[f64], want: &[f64]) -> Comparison {
    assert_eq!(got.len(), want.len(), "compare: output and reference differ in length");
    let mut c = Comparison {
        max_abs: 0.0,
        rel_l2: 0.0,
        nonfinite: 0,
        ref_max_abs: 0.0,
        lse_max_abs: None,
        lse_ref_max_abs: 0.0,
    };
    let (mut err_sq, mut ref_sq) = (0.0, 0.0);
    for (&g, &w) in got.iter().zip(want) {
        c.ref_max_abs = c.ref_max_abs.max(w.abs());
        if !g.is_finite() {
            c.nonfinite += 1;
            continue;
        }
        let err = (g - w).abs();
        c.max_abs = c.max_abs.max(err);
        err_sq += err * err;
        ref_sq += w * w;
    }
    c.rel_l2 = if ref_sq > 0.0 { (err_sq / ref_sq).sqrt() } else { err_sq.sqrt() };
    c
}

impl Comparison {
    /// Adds the LSE comparison (both `[B, H, Sq]`). A row whose reference is -inf (it sees no
    /// key) must be exactly -inf; any other non-finite value counts as an infinite error.
    pub fn with_lse(mut self, got: &[f64], want: &[f64]) -> Self {
        assert_eq!(got.len(), want.len(), "with_lse: output and reference LSE differ in length");
        let mut max_err = 0.0f64;
        for (&g, &w) in got.iter().zip(want) {
            let err = if w == f64::NEG_INFINITY {
                if g == w {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                self.lse_ref_max_abs = self.lse_ref_max_abs.max(w.abs());
                if g.is_finite() {
                    (g - w).abs()
                } else {
                    f64::INFINITY
                }
            };
            max_err = max_err.max(err);
        }
        self.lse_max_abs = Some(max_err);
        self
    }

    /// True when every element was written and each error is within `tol`. Written so that a
    /// NaN error fails.
    pub fn passes(&self, tol: &Tolerance) -> bool {
        self.nonfinite == 0
            && self.max_abs <= tol.max_abs * self.ref_max_abs.max(1.0)
            && self.rel_l2 <= tol.rel_l2
            && self.lse_max_abs.is_none_or(|err| err <= tol.lse * self.lse_ref_max_abs.max(1.0))
    }
}

/// Acceptance bounds for one dtype against the float64 reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Bound on [`Comparison::max_abs`], relative to max(1, |reference|max).
    pub max_abs: f64,
    /// Bound on [`Comparison::rel_l2`].
    pub rel_l2: f64,
    /// Bound on [`Comparison::lse_max_abs`], relative to max(1, |reference LSE|max).
    pub lse: f64,
}

/// f16 unit roundoff, 2^-11 (11-bit significand): the relative error of one rounding.
pub const F16_UNIT_ROUNDOFF: f64 = 1.0 / 2048.0;
/// bf16 unit roundoff, 2^-8 (8-bit significand).
pub const BF16_UNIT_ROUNDOFF: f64 = 1.0 / 256.0;

/// The relative error of one rounding to `dtype`: for E4M3 that of P, the dominant rounding
/// of an FP8 kernel (its inputs are exact after dequantization and its O is bf16).
pub fn unit_roundoff(dtype: Dtype) -> f64 {
    match dtype {
        Dtype::F16 => F16_UNIT_ROUNDOFF,
        Dtype::Bf16 => BF16_UNIT_ROUNDOFF,
        Dtype::E4m3 | Dtype::E4m3F16 => E4M3_UNIT_ROUNDOFF,
    }
}

/// `max_abs` bound in units of the dtype's roundoff u. A correct kernel rounds twice on the
/// way to O: P to the dtype before P·V (each weight off by ≤ u, so O by ≤ u·Σp|v|, which is
/// ≈ u·|O| for rows dominated by few keys and far less than u for spread rows, whose errors
/// cancel), and O itself on the store (≤ u·|O|). That is 2u relative to max(1, |O|max). On
/// top, fp32 error: dot products of D ≤ 256 terms and sums over Sk ≤ 16k keys stay below
/// ~3e-4 absolute on our inputs (0.6u for f16, 0.08u for bf16), and `ex2.approx` is 2^-22
/// relative. The remaining ~1.4u is headroom for the tail over millions of elements and many
/// seeds; a real bug (missed key tile, wrong mask row, stale rescale) errs by ≫ 4u.
/// f16: 1.95e-3, bf16: 1.56e-2.
const MAX_ABS_UNITS: f64 = 4.0;

/// `rel_l2` bound in units of u. Roundings are unbiased, so the norm sees their rms, not the
/// worst case: each of the two roundings is uniform within ±u relative (rms u/√3), together
/// ≈ 0.8u; fp32 error adds ≲ 1e-4 relative. 2.5u is three times the expected value, below
/// `max_abs`'s worst-case budget because one element's tail barely moves a norm.
/// f16: 1.22e-3, bf16: 9.77e-3.
const REL_L2_UNITS: f64 = 2.5;

/// LSE bound relative to max(1, |LSE|max); independent of the dtype since the LSE is fp32 all
/// the way (dtype inputs are exact in fp32). Its error is the scores' fp32 dot-product error,
/// ≤ D·2^-24·Σ|q_d k_d|·scale, and for random data Σ|q_d k_d| ≈ 0.64·√D·|score|max, so at
/// D = 256 the worst case (all roundings one way, as truncating tensor-core accumulation can
/// approach) is 1.6e-4 relative; the row sum's fp32 error (≲ 1e-5) and the f32 store (6e-8)
/// are below it. 3e-4 is about twice the worst case at the largest head dim.
const LSE_RELATIVE: f64 = 3e-4;

/// LSE bound of E4M3 kernels, relative to max(1, |LSE|max). An E4M3 product is exact, but
/// Hopper's FP8 tensor cores (`QGMMA`, sm_90a) do not accumulate in full float32: they keep
/// about 14 bits (DeepSeek-V3, arXiv 2412.19437 §3.3.2), i.e. each k32 group's products are
/// aligned to the largest and kept to 13 fraction bits, an error of up to 2^-12·max|p| per
/// product (the max's ulp, the max rounded up). All one way over a score's D products, with
/// the group max ≈ 2.5·mean|p| for 32 random products and Σ|q_d k_d| ≈ 0.64·√D·|score|max (as
/// for [`LSE_RELATIVE`]): 2^-12·2.5·0.64·√D relative, 2.5e-3 at D = 128 and 3.1e-3 at D = 256.
/// The bound is that worst case at the largest head dim. Measured on an H200 (session 31, the
/// `wgmma` E4M3 kernel): 2.3e-4 to 4.4e-4 on the check grid and the library test (LSE up to
/// 157). `mma8` on sm_89 (`QMMA`) and the reference kernel (fp32 FMAs) stay far inside it. A
/// softmax bug errs by far more: P's 2^8 scale left in is 8·ln 2 = 5.5 absolute.
const FP8_LSE_RELATIVE: f64 = 3.1e-3;

/// FP8 bounds, in units of u = 2^-4 (E4M3's roundoff), against float64 on the dequantized
/// inputs. Those inputs are exact in the kernel and an E4M3 product is exact, so the scores
/// carry only the tensor cores' accumulation error ([`FP8_LSE_RELATIVE`]). The roundings are
/// P's, scaled by 2^8 into E4M3's normal range and rounded before P·V (each weight off by ≤ u
/// relative while the row sum keeps the unrounded weights, so O is off by ≤ u·Σp|v|/Σp), and
/// O's to bf16 (2^-8 = u/16).
/// - `max_abs`: a row dominated by few keys errs by ≈ u·|O| (its weights' errors do not
///   cancel), plus u/16 for the store: 1.06u at worst relative to max(1, |O|max); spread rows
///   err by far less. 2u leaves the same headroom for the tail as the 16-bit bound: 0.125.
/// - `rel_l2`: roundings to nearest are unbiased; over mantissas spread log-uniformly a
///   3-bit rounding's rms relative error is 2^-3/√12·√(3/(8 ln 2)) = 0.42u, which weights
///   carry to O's norm unchanged (O and its error both scale as √Σp²v²/Σp), and the store adds
///   0.04u: ≈ 0.43u expected. Three times that, as for 16 bits: 1.3u = 0.081.
///
/// A wrong descale, a dropped key of a row dominated by few keys or a dropped n8 tile of a
/// spread row exceeds these (the test below plants each); one dropped key of a row spread over
/// hundreds hides in the rounding noise (rel_l2 0.057 for one of 257 keys, 0.023 without).
const FP8_MAX_ABS_UNITS: f64 = 2.0;
const FP8_REL_L2_UNITS: f64 = 1.3;

/// The acceptance bounds for `dtype`; the only place tolerances are defined.
pub fn tolerance(dtype: Dtype) -> Tolerance {
    let u = unit_roundoff(dtype);
    if dtype.is_fp8() {
        return Tolerance { max_abs: FP8_MAX_ABS_UNITS * u, rel_l2: FP8_REL_L2_UNITS * u, lse: FP8_LSE_RELATIVE };
    }
    Tolerance { max_abs: MAX_ABS_UNITS * u, rel_l2: REL_L2_UNITS * u, lse: LSE_RELATIVE }
}

/// Bounds of the backward pass's gradients (dQ, dK, dV; `reference::backward`), in units of
/// u. dV = Pᵀ·dO rounds twice as O does (P to the dtype, dV on the store). dQ and dK round dS
/// and themselves, and inherit delta's error: the kernel takes delta = dO·O from the forward's
/// O, which carries O's two roundings, and an error in delta_i shifts every dS_ij of the row
/// by -P_ij·δdelta_i, which does not cancel along the row (dQ_i moves by δdelta_i·(P·K)_i). With
/// |δdelta_i| ≲ 2u·|dO_i·O_i|, that adds about O's own error again: rms ≈ √(2·u²/3 + u²) ≈
/// 1.3u expected, so `rel_l2` 4u is three times it; `max_abs` 8u is twice O's worst-case
/// budget, for the second source. fp32 sums over Sq·(H/Hkv) queries (dK, dV) and the dQ
/// atomics' order stay below 1e-6 relative. A dropped key or query tile, a wrong mask or LSE
/// errs by orders more. f16: max_abs 3.9e-3, rel_l2 2.0e-3; bf16: 3.1e-2, 1.6e-2.
const GRAD_MAX_ABS_UNITS: f64 = 8.0;
const GRAD_REL_L2_UNITS: f64 = 4.0;

/// The acceptance bounds of the backward pass's gradients for 16-bit `dtype` (no LSE: the
/// backward writes none).
pub fn grad_tolerance(dtype: Dtype) -> Tolerance {
    let u = unit_roundoff(dtype);
    Tolerance { max_abs: GRAD_MAX_ABS_UNITS * u, rel_l2: GRAD_REL_L2_UNITS * u, lse: LSE_RELATIVE }
}

/// The bounds of `spec`'s kernel on `problem`: the dtype's, with the LSE's widened where the
/// kernel rounds the scores to a 16-bit dtype before the softmax (`cublas` with
/// `scores=input`). Each score is then off by ≤ u·|s_j|, so the LSE, Σ_j p_j s_j's
/// derivative, moves by ≤ u·Σ_j p_j|s_j|. As s_j = LSE + ln p_j, |s_j| ≤ |LSE| + ln(1/p_j) and
/// Σ_j p_j|s_j| ≤ |LSE| + H(p) ≤ |LSE| + ln Sk (the entropy of Sk weights). Relative to
/// max(1, |LSE|max): u·(1 + ln Sk), all roundings one way; it adds to the fp32 bound. O's
/// bounds stay the dtype's: the roundings are unbiased there, and a lever that misses them is
/// one the gate rejects.
pub fn tolerance_of(spec: &KernelSpec, problem: &Problem) -> Tolerance {
    let tol = tolerance(problem.dtype);
    match spec.config.rounds_scores_to(problem.dtype) {
        Some(scores) => {
            Tolerance { lse: tol.lse + unit_roundoff(scores) * (1.0 + (problem.shape.sk.max(1) as f64).ln()), ..tol }
        }
        None => tol,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_offsets_walk_b_h_s_d_by_the_strides() {
        let shape = Shape { b: 2, h: 3, hkv: 1, sq: 4, sk: 5, d: 8 };
        let mut p = Problem::dense(shape, Dtype::F16, Layout::Bshd);
        p.k_strides = crate::problem::Strides { batch: 1000, head: 16, seq: 96, dim: 1 };
        for t in [TensorName::Q, TensorName::K] {
            let [nb, nh, ns, nd] = p.dims(t);
            let mut naive = Vec::new();
            for b in 0..nb {
                for h in 0..nh {
                    for s in 0..ns {
                        for d in 0..nd {
                            naive.push(p.offset(t, b, h, s, d));
                        }
                    }
                }
            }
            assert_eq!(logical_offsets(&p, t).collect::<Vec<_>>(), naive, "{t}");
        }
        let empty = Problem::dense(Shape { sq: 0, ..shape }, Dtype::F16, Layout::Bhsd);
        assert_eq!(logical_offsets(&empty, TensorName::Q).count(), 0);
    }
    use crate::problem::{Causal, Layout, Shape};

    const D: usize = 8;
    /// Exact enough for closed forms evaluated in f64 in a different order.
    const CLOSE: f64 = 1e-12;

    fn bits(dtype: Dtype, xs: &[f64]) -> Vec<u16> {
        xs.iter().map(|&x| dtype.to_bits(x)).collect()
    }

    /// A D-wide row with `head` in its first elements and zeros after.
    fn row(head: &[f64]) -> Vec<f64> {
        let mut r = vec![0.0; D];
        r[..head.len()].copy_from_slice(head);
        r
    }

    /// V rows that are exact in f16 and bf16: row r is [r+1, r+2, ..., r+D].
    fn v_rows(n: usize) -> Vec<f64> {
        (0..n).flat_map(|r| (0..D).map(move |d| (r + d + 1) as f64)).collect()
    }

    fn single_head(sq: usize, sk: usize) -> Problem {
        Problem::dense(Shape { b: 1, h: 1, hkv: 1, sq, sk, d: D }, Dtype::F16, Layout::Bhsd)
    }

    fn run(p: &Problem, q: &[f64], k: &[f64], v: &[f64]) -> ReferenceOutput {
        attention_f64(p, &bits(p.dtype, q), &bits(p.dtype, k), &bits(p.dtype, v))
    }

    fn assert_close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() <= CLOSE, "element {i}: got {g}, want {w}");
        }
    }

    #[test]
    fn one_key_returns_its_value_row_and_lse_is_the_score() {
        // q·k = 1·2 = 2, scale 0.5: score 1; softmax over one key is 1, so O = V exactly.
        let p = single_head(1, 1).with_scale(Some(0.5));
        let out = run(&p, &row(&[1.0]), &row(&[2.0]), &v_rows(1));
        assert_eq!(out.o, v_rows(1));
        assert_eq!(out.lse, vec![1.0]);
    }

    #[test]
    fn equal_scores_average_the_values_and_add_ln2() {
        // Both keys give q·k = 1; default scale 1/sqrt(8) as the kernels' f32.
        let p = single_head(1, 2);
        let k = [row(&[1.0]), row(&[1.0, 5.0])].concat();
        let out = run(&p, &row(&[1.0, 0.0]), &k, &v_rows(2));
        let score = f64::from(1.0 / (D as f32).sqrt());
        let mean: Vec<f64> = (0..D).map(|d| (d + 1) as f64 + 0.5).collect();
        assert_close(&out.o, &mean);
        assert_close(&out.lse, &[score + 2f64.ln()]);
    }

    #[test]
    fn top_left_causal_two_by_two() {
        // scale 1. Row 0 sees key 0 only: O = v0, LSE = q0·k0 = 3.
        // Row 1 sees both: scores 0 and 1, weights 1/(1+e) and e/(1+e).
        let p = single_head(2, 2).with_scale(Some(1.0)).with_causal(Causal::TopLeft);
        let q = [row(&[3.0]), row(&[0.0, 1.0])].concat();
        let k = [row(&[1.0]), row(&[1.0, 1.0])].concat();
        let v = v_rows(2);
        let out = run(&p, &q, &k, &v);
        let e = 1f64.exp();
        let row1: Vec<f64> = (0..D).map(|d| (v[d] + e * v[D + d]) / (1.0 + e)).collect();
        assert_close(&out.o, &[&v[..D], &row1[..]].concat());
        assert_close(&out.lse, &[3.0, (1.0 + e).ln()]);
        // Without the mask row 0 also sees key 1 (score 3): the mean of both rows.
        let out = run(&p.clone().with_causal(Causal::None), &q, &k, &v);
        assert_close(&out.o[..D], &(0..D).map(|d| (d + 1) as f64 + 0.5).collect::<Vec<_>>());
    }

    #[test]
    fn bottom_right_with_more_queries_than_keys_leaves_empty_rows() {
        // Sq=3, Sk=2: offset -1, so row 0 sees nothing, row 1 key 0, row 2 keys 0 and 1.
        let p = single_head(3, 2).with_scale(Some(1.0)).with_causal(Causal::BottomRight);
        let q = [row(&[1.0]), row(&[2.0]), row(&[0.0])].concat();
        let k = [row(&[1.0]), row(&[1.0])].concat();
        let v = v_rows(2);
        let out = run(&p, &q, &k, &v);
        let mean: Vec<f64> = (0..D).map(|d| (d + 1) as f64 + 0.5).collect();
        assert_close(&out.o, &[&[0.0; D][..], &v[..D], &mean].concat());
        assert_close(&out.lse[1..], &[2.0, 2f64.ln()]);
        assert_eq!(out.lse[0], f64::NEG_INFINITY);
    }

    #[test]
    fn no_keys_or_no_rows() {
        let p = single_head(2, 0);
        let out = run(&p, &[row(&[1.0]), row(&[1.0])].concat(), &[], &[]);
        assert_eq!(out.o, vec![0.0; 2 * D]);
        assert_eq!(out.lse, vec![f64::NEG_INFINITY; 2]);
        let empty = Problem::dense(Shape { b: 0, h: 4, hkv: 2, sq: 3, sk: 3, d: D }, Dtype::Bf16, Layout::Bshd);
        let out = attention_f64(&empty, &[], &[], &[]);
        assert!(out.o.is_empty() && out.lse.is_empty());
    }

    #[test]
    fn gqa_heads_read_their_group_kv_head() {
        // H=4, Hkv=2, one key: O of head h is the V row of KV head h/2 (1s, then 2s).
        let p = Problem::dense(Shape { b: 1, h: 4, hkv: 2, sq: 1, sk: 1, d: D }, Dtype::Bf16, Layout::Bhsd);
        let q = vec![1.0; 4 * D];
        let k = vec![1.0; 2 * D];
        let v = [vec![1.0; D], vec![2.0; D]].concat();
        let out = run(&p, &q, &k, &v);
        let want: Vec<f64> = [1.0, 1.0, 2.0, 2.0].iter().flat_map(|&x| vec![x; D]).collect();
        assert_eq!(out.o, want);
    }

    #[test]
    fn bshd_strides_give_the_same_result_as_bhsd() {
        let shape = Shape { b: 2, h: 4, hkv: 2, sq: 5, sk: 7, d: D };
        let bhsd = Problem::dense(shape, Dtype::F16, Layout::Bhsd).with_causal(Causal::BottomRight);
        let bshd = Problem { o_strides: bhsd.o_strides, ..Problem::dense(shape, Dtype::F16, Layout::Bshd) }
            .with_causal(Causal::BottomRight);
        // Logical data: a fixed pattern of small exact values, laid out by each problem.
        let pattern = |n: usize, salt: usize| -> Vec<u16> {
            (0..n).map(|i| Dtype::F16.to_bits(((i * 37 + salt) % 17) as f64 / 8.0 - 1.0)).collect()
        };
        let layout = |p: &Problem, t: TensorName, dense: &[u16]| -> Vec<u16> {
            let mut buf = vec![0; p.extent(t)];
            for (off, &x) in logical_offsets(p, t).zip(dense) {
                buf[off] = x;
            }
            buf
        };
        let (q, k, v) = (pattern(2 * 4 * 5 * D, 1), pattern(2 * 2 * 7 * D, 2), pattern(2 * 2 * 7 * D, 3));
        let a = attention_f64(&bhsd, &q, &k, &v);
        let b = attention_f64(
            &bshd,
            &layout(&bshd, TensorName::Q, &q),
            &layout(&bshd, TensorName::K, &k),
            &layout(&bshd, TensorName::V, &v),
        );
        assert_eq!(a, b);
        assert!(a.lse.iter().all(|x| x.is_finite()), "bottom-right with Sk > Sq leaves no row empty");
    }

    #[test]
    fn scale_is_honoured() {
        // Scores q·k = 0 and 2. Scale 0.5: LSE = ln(1 + e); default 1/sqrt(8) differs.
        let q = row(&[1.0]);
        let k = [row(&[0.0]), row(&[2.0])].concat();
        let out = run(&single_head(1, 2).with_scale(Some(0.5)), &q, &k, &v_rows(2));
        assert_close(&out.lse, &[(1.0 + 1f64.exp()).ln()]);
        let default = run(&single_head(1, 2), &q, &k, &v_rows(2));
        let s = 2.0 * f64::from(1.0 / (D as f32).sqrt());
        assert_close(&default.lse, &[(1.0 + s.exp()).ln()]);
    }

    #[test]
    fn dense_o_reorders_bshd_and_keeps_nan() {
        let p = Problem::dense(Shape { b: 1, h: 2, hkv: 2, sq: 2, sk: 2, d: D }, Dtype::Bf16, Layout::Bshd);
        // BSHD buffer: element (s, h, d) holds 100·h + 10·s + d; one element left NaN.
        let mut buf: Vec<u16> = (0..2 * 2 * D)
            .map(|i| {
                let (s, h, d) = (i / (2 * D), (i / D) % 2, i % D);
                Dtype::Bf16.to_bits((100 * h + 10 * s + d) as f64)
            })
            .collect();
        buf[p.offset(TensorName::O, 0, 1, 0, 3)] = Dtype::Bf16.to_bits(f64::NAN);
        let dense = dense_o(&p, &buf);
        // Dense BHSD index of (h, s, d) is (h·2 + s)·D + d.
        assert_eq!(dense[(2 + 1) * D + 5], 115.0);
        assert_eq!(dense[D + 7], 17.0);
        assert!(dense[2 * D + 3].is_nan());
        assert_eq!(dense.iter().filter(|x| x.is_nan()).count(), 1);
    }

    #[test]
    fn compare_counts_nonfinite_and_measures_the_rest() {
        let c = compare(&[1.0, 2.5, f64::NAN, f64::INFINITY], &[1.0, 2.0, 3.0, -4.0]);
        assert_eq!(c.nonfinite, 2);
        assert_eq!(c.max_abs, 0.5);
        assert_close(&[c.rel_l2], &[0.5 / 5f64.sqrt()]);
        assert_eq!(c.ref_max_abs, 4.0);
        assert!(!c.passes(&tolerance(Dtype::Bf16)), "non-finite elements always fail");
    }

    #[test]
    fn compare_against_an_all_zero_reference_uses_the_absolute_norm() {
        assert_eq!(compare(&[0.0, 0.0], &[0.0, 0.0]).rel_l2, 0.0);
        assert_close(&[compare(&[0.3, 0.4], &[0.0, 0.0]).rel_l2], &[0.5]);
        let empty = compare(&[], &[]);
        assert_eq!((empty.max_abs, empty.rel_l2, empty.nonfinite), (0.0, 0.0, 0));
        assert!(empty.passes(&tolerance(Dtype::F16)));
    }

    #[test]
    fn lse_rows_without_keys_must_stay_minus_infinity() {
        let want = [f64::NEG_INFINITY, 2.0, -30.0];
        let c = compare(&[], &[]).with_lse(&[f64::NEG_INFINITY, 2.001, -30.0], &want);
        assert_close(&[c.lse_max_abs.unwrap()], &[0.001]);
        assert_eq!(c.lse_ref_max_abs, 30.0);
        let tol = tolerance(Dtype::F16);
        // 1e-3 is within 3e-4 · 30 = 9e-3
        assert!(c.passes(&tol));
        for got in [[0.0, 2.0, -30.0], [f64::NEG_INFINITY, f64::NAN, -30.0], [f64::NEG_INFINITY; 3]] {
            let c = compare(&[], &[]).with_lse(&got, &want);
            assert_eq!(c.lse_max_abs, Some(f64::INFINITY), "{got:?}");
            assert!(!c.passes(&tol));
        }
    }

    #[test]
    fn tolerances_are_multiples_of_the_unit_roundoff() {
        let f16 = tolerance(Dtype::F16);
        assert_eq!((f16.max_abs, f16.rel_l2), (4.0 / 2048.0, 2.5 / 2048.0));
        let bf16 = tolerance(Dtype::Bf16);
        assert_eq!((bf16.max_abs, bf16.rel_l2), (4.0 / 256.0, 2.5 / 256.0));
        assert_eq!(f16.lse, bf16.lse);
    }

    #[test]
    fn scores_rounded_to_16_bits_widen_only_the_lse_bound_by_u_times_one_plus_ln_sk() {
        let problem = |dtype, sk| {
            Problem::dense(crate::problem::Shape { b: 1, h: 2, hkv: 2, sq: 4, sk, d: 64 }, dtype, Layout::Bhsd)
        };
        let spec = |scores, dtype| KernelSpec {
            config: crate::config::KernelConfig::Cublas(crate::CublasConfig {
                scores,
                gemm: crate::Provider::CublasLt,
            }),
            dtype,
            head_dim: 64,
        };
        for dtype in [Dtype::F16, Dtype::Bf16] {
            let plain = tolerance(dtype);
            assert_eq!(tolerance_of(&spec(crate::Scores::F32, dtype), &problem(dtype, 4096)), plain);
            for sk in [1, 4096] {
                let got = tolerance_of(&spec(crate::Scores::Input, dtype), &problem(dtype, sk));
                let widened = unit_roundoff(dtype) * (1.0 + (sk as f64).ln());
                assert_eq!((got.max_abs, got.rel_l2), (plain.max_abs, plain.rel_l2));
                assert!((got.lse - plain.lse - widened).abs() < 1e-15, "{dtype} {sk}: {got:?}");
            }
        }
    }

    #[test]
    fn the_widened_lse_bound_holds_when_every_score_rounds_the_same_way() {
        // The derivation's worst case, on rows from a fixed generator: each score moved by
        // u·|s| away from zero, rows spread and peaked, LSE positive and negative.
        let lse = |s: &[f64]| {
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            m + s.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
        };
        let u = unit_roundoff(Dtype::Bf16);
        let mut state = 12345u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for (sk, spread, shift) in
            [(1, 1.0, 3.0), (64, 1.0, 0.0), (4096, 8.0, -40.0), (4096, 0.1, 5.0), (300, 20.0, 0.0)]
        {
            let s: Vec<f64> = (0..sk).map(|_| shift + spread * (2.0 * next() - 1.0)).collect();
            let rounded: Vec<f64> = s.iter().map(|x| x * (1.0 + u)).collect();
            let (want, got) = (lse(&s), lse(&rounded));
            // Sk = 1 reaches the bound: the LSE is the one score.
            let bound = u * (1.0 + (sk as f64).ln()) * want.abs().max(1.0) * (1.0 + 1e-12);
            assert!((got - want).abs() <= bound, "sk {sk}: {} > {bound}", (got - want).abs());
        }
    }

    #[test]
    fn max_abs_is_relative_to_the_reference_scale_with_a_floor_of_one() {
        let tol = tolerance(Dtype::F16);
        let at = |max_abs: f64, ref_max_abs: f64| Comparison {
            max_abs,
            rel_l2: 0.0,
            nonfinite: 0,
            ref_max_abs,
            lse_max_abs: None,
            lse_ref_max_abs: 0.0,
        };
        assert!(at(1.9e-3, 0.1).passes(&tol));
        assert!(!at(2.0e-3, 0.1).passes(&tol), "floor of 1: the bound is 1.95e-3");
        assert!(at(1.9e-2, 10.0).passes(&tol));
        assert!(!at(2.0e-2, 10.0).passes(&tol));
        assert!(!at(f64::NAN, 1.0).passes(&tol));
        assert!(!Comparison { rel_l2: 1.3e-3, ..at(0.0, 1.0) }.passes(&tol));
    }

    /// Deterministic standard normals (SplitMix64 + Box-Muller): the library has no RNG.
    fn normals(n: usize, seed: u64) -> Vec<f64> {
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
                let (u1, u2) = (1.0 - uniform(), uniform());
                (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
            })
            .collect()
    }

    /// FP8 kernels scale P by 2^8 into E4M3's normal range before rounding it (FlashAttention-3).
    const FP8_P_SCALE: f32 = 256.0;

    /// A model of a correct kernel's numerics (dense BHSD, no mask, Hkv = H): f32 scores and
    /// row sums, P rounded to the dtype before an f32 P·V, O rounded to the output dtype. For
    /// E4M3: inputs dequantized by `descales`, P scaled by 2^8 and rounded to E4M3, the row
    /// sum of the unrounded P (FlashAttention-3's numerics).
    fn emulate_kernel(p: &Problem, [q, k, v]: [&[u16]; 3], descales: &Descales, dropped_keys: usize) -> Vec<f64> {
        let Shape { b, h, sq, sk, d, .. } = p.shape;
        let f = |x: u16, t: TensorName, bh: usize| p.dtype.from_bits(x) as f32 * descales.of(t)[bh];
        let scale = p.softmax_scale();
        let keys = sk - dropped_keys;
        let mut o = Vec::with_capacity(b * h * sq * d);
        for bh in 0..b * h {
            for i in 0..sq {
                let qi = &q[(bh * sq + i) * d..][..d];
                let scores: Vec<f32> = (0..keys)
                    .map(|j| {
                        let kj = &k[(bh * sk + j) * d..][..d];
                        let dot: f32 =
                            qi.iter().zip(kj).map(|(&x, &y)| f(x, TensorName::Q, bh) * f(y, TensorName::K, bh)).sum();
                        dot * scale
                    })
                    .collect();
                let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let p_scale = if p.dtype.is_fp8() { FP8_P_SCALE } else { 1.0 };
                let weights: Vec<f32> = scores.iter().map(|s| (s - max).exp() * p_scale).collect();
                let sum: f32 = weights.iter().sum();
                let mut acc = vec![0f32; d];
                for (j, w) in weights.iter().enumerate() {
                    let w = p.dtype.round(f64::from(*w)) as f32;
                    for (a, &x) in acc.iter_mut().zip(&v[(bh * sk + j) * d..][..d]) {
                        *a += w * f(x, TensorName::V, bh);
                    }
                }
                o.extend(acc.iter().map(|a| p.dtype.output().round(f64::from(a / sum))));
            }
        }
        o
    }

    #[test]
    fn a_model_of_a_correct_kernel_passes_and_a_dropped_key_fails() {
        let shape = Shape { b: 1, h: 2, hkv: 2, sq: 256, sk: 257, d: 64 };
        // std 1 (spread rows) and std 3 for Q and K (scores std 9: rows dominated by few keys)
        for dtype in Dtype::ALL {
            for (seed, qk_std) in [(1u64, 1.0), (2, 3.0)] {
                let p = Problem::dense(shape, dtype, Layout::Bhsd);
                // E4M3 inputs carry a descale per head: stored values 16x the inputs, so that
                // the E4M3 values sit mid-range, undone by descales of 1/16 and 1/32.
                let (gain, descales) = if dtype.is_fp8() {
                    (16.0, Descales { q: vec![1.0 / 16.0, 1.0 / 32.0], k: vec![1.0 / 16.0; 2], v: vec![1.0 / 32.0; 2] })
                } else {
                    (1.0, Descales::ones(1, 2))
                };
                let gen = |n, salt: u64, std: f64| -> Vec<u16> {
                    normals(n, seed * 10 + salt).iter().map(|x| dtype.to_bits(gain * std * x)).collect()
                };
                let q = gen(p.extent(TensorName::Q), 1, qk_std);
                let k = gen(p.extent(TensorName::K), 2, qk_std);
                let v = gen(p.extent(TensorName::V), 3, 1.0);
                let want = attention_f64_descaled(&p, &q, &k, &v, Some(&descales)).o;
                let tol = tolerance(dtype);
                let good = compare(&emulate_kernel(&p, [&q, &k, &v], &descales, 0), &want);
                assert!(good.passes(&tol), "{dtype} std {qk_std}: {good:?} vs {tol:?}");
                // E4M3's rounding noise hides one key of 257 in rows spread over all of them
                // (rel_l2 0.057 against 0.023 without it); a dropped n8 tile is caught there.
                let dropped = if dtype.is_fp8() && qk_std == 1.0 { 8 } else { 1 };
                let bad = compare(&emulate_kernel(&p, [&q, &k, &v], &descales, dropped), &want);
                assert!(!bad.passes(&tol), "{dtype} std {qk_std}: {dropped} dropped keys went unnoticed: {bad:?}");
                if dtype.is_fp8() {
                    let mut swapped = descales.clone();
                    swapped.v.swap(0, 1);
                    swapped.v[0] *= 1.25; // head 0's V read with a neighbour's descale
                    let bad = compare(&emulate_kernel(&p, [&q, &k, &v], &swapped, 0), &want);
                    assert!(!bad.passes(&tol), "std {qk_std}: a wrong descale went unnoticed: {bad:?}");
                }
            }
        }
    }
}
