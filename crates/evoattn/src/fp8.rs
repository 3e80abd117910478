//! FP8 E4M3: the codec the kernels' conversions follow, and the quantizer that turns 16-bit
//! Q, K and V into E4M3 with one float32 descale per (batch, KV head).
//!
//! E4M3 here is the OCP "E4M3FN" format of NVIDIA's `__nv_fp8_e4m3` and PTX's `e4m3`: a sign,
//! four exponent bits (bias 7) and three mantissa bits; no infinities; `S.1111.111` is NaN. The
//! largest finite value is 448 (1.75·2^8), the smallest normal 2^-6 and the subnormals m·2^-9
//! (m = 1..7). With three mantissa bits, one rounding is off by at most 2^-4 of the value
//! ([`E4M3_UNIT_ROUNDOFF`]) for normal values and by at most 2^-10 in absolute terms below 2^-6.
//!
//! Scales follow FlashAttention-3's convention: a dequantized element is `e4m3 · descale`, with
//! `descale` of shape `[B, Hkv]` for each of q, k and v. Q's descale is indexed by the KV head
//! its query head reads (the query heads of one GQA group share one), so that a kernel folds
//! `q_descale · k_descale` into the softmax scale once per tile. A per-tensor scale is the
//! broadcast case.

use crate::error::ProblemError;
use crate::problem::{Dtype, Problem, TensorName};
use crate::reference::logical_offsets;

/// Largest finite E4M3 magnitude.
pub const E4M3_MAX: f32 = 448.0;

/// The encoding `cvt` gives a NaN input (either sign's `S.1111.111` decodes as NaN).
pub const E4M3_NAN: u8 = 0x7f;

/// Relative error of one rounding to a normal E4M3 value: half of the 2^-3 mantissa step.
pub const E4M3_UNIT_ROUNDOFF: f64 = 1.0 / 16.0;

/// Largest E4M3 encoding of a finite positive value (448).
const E4M3_MAX_BITS: u8 = 0x7e;
/// Exponent of the smallest normal value, 2^-6; below it the step stays 2^-9.
const MIN_NORMAL_EXP: i32 = -6;
const MANTISSA_BITS: i32 = 3;
const EXP_BIAS: i32 = 7;

/// The value of one E4M3 byte.
pub fn e4m3_to_f32(bits: u8) -> f32 {
    let magnitude = bits & 0x7f;
    if magnitude == E4M3_NAN {
        return f32::NAN;
    }
    let exp = i32::from(magnitude >> MANTISSA_BITS);
    let mantissa = f32::from(magnitude & 0x7);
    let value = if exp == 0 {
        mantissa * 2f32.powi(MIN_NORMAL_EXP - MANTISSA_BITS)
    } else {
        (1.0 + mantissa / 8.0) * 2f32.powi(exp - EXP_BIAS)
    };
    if bits & 0x80 != 0 {
        -value
    } else {
        value
    }
}

/// `x` in E4M3 as `cvt.rn.satfinite.e4m3x2.f32` converts it: to nearest, ties to even;
/// magnitudes past 448 (infinities too) saturate to ±448; NaN gives [`E4M3_NAN`].
pub fn e4m3_from_f32(x: f32) -> u8 {
    if x.is_nan() {
        return E4M3_NAN;
    }
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    // Every f32 is exact in f64, and so are the power-of-two scalings below.
    let a = f64::from(x.abs());
    if a >= f64::from(E4M3_MAX) {
        return sign | E4M3_MAX_BITS;
    }
    // The exponent of a's binade, held at the smallest normal's below it (the subnormal step).
    let exp = if a < 2f64.powi(MIN_NORMAL_EXP) { MIN_NORMAL_EXP } else { binade(a) };
    // Steps of 2^(exp-3): 8..=16 for a normal binade (16 carries into the next), 0..=8 below.
    let steps = (a / 2f64.powi(exp - MANTISSA_BITS)).round_ties_even() as u8;
    let (exp, steps) = if steps == 16 { (exp + 1, 8) } else { (exp, steps) };
    if steps < 8 {
        return sign | steps; // subnormal (exp field 0) or zero
    }
    // a < 448 rounds to at most 448 = 14 steps of 2^5, so the field stays below the NaN code.
    let field = (exp + EXP_BIAS) as u8;
    sign | (field << MANTISSA_BITS) | (steps - 8)
}

/// floor(log2(a)) for a positive normal f64.
fn binade(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// A tensor in E4M3 with its descales.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    /// E4M3 bytes at the source tensor's element offsets (the same strides, so an E4M3 problem
    /// keeps the 16-bit one's strides); bytes the tensor does not cover are zero.
    pub bits: Vec<u8>,
    /// `[B, Hkv]`, dense: element (b, g) scales the heads of KV group g in batch b.
    pub descale: Vec<f32>,
}

/// The descales of an FP8 problem's q, k and v, each `[B, Hkv]` dense (a dequantized element
/// is its E4M3 value times its tensor's descale for its batch and KV head).
#[derive(Clone, Debug, PartialEq)]
pub struct Descales {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
}

/// Why descales cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DescaleError {
    #[error("{tensor}_descale holds {held} values; it must hold B * Hkv = {needed} ([B, Hkv])")]
    Length { tensor: TensorName, held: usize, needed: usize },
    #[error(
        "{tensor}_descale[b={batch}, kv_head={kv_head}] is {value}: a descale must be finite and positive \
         (evoattn quantize gives an all-zero head 1.0)"
    )]
    Value { tensor: TensorName, batch: usize, kv_head: usize, value: f32 },
}

impl Descales {
    /// Every descale 1.0: the E4M3 values are the inputs.
    pub fn ones(b: usize, hkv: usize) -> Self {
        let one = vec![1.0; b * hkv];
        Descales { q: one.clone(), k: one.clone(), v: one }
    }

    /// q's, k's, then v's descales in one `[3, B, Hkv]` array: the layout the FP8 kernels read
    /// (`TensorName::Descale`).
    pub fn concat(&self) -> Vec<f32> {
        [&self.q, &self.k, &self.v].into_iter().flatten().copied().collect()
    }

    /// Tensor `t`'s descales (q, k or v; panics for another).
    pub fn of(&self, t: TensorName) -> &[f32] {
        match t {
            TensorName::Q => &self.q,
            TensorName::K => &self.k,
            TensorName::V => &self.v,
            _ => panic!("descales are q's, k's and v's, not {t}'s"),
        }
    }

    /// Each tensor holds B * Hkv values, each finite and positive: a zero descale would make
    /// the head's scores 0 and a negative one flip them, which no quantizer produces.
    pub fn validate(&self, b: usize, hkv: usize) -> Result<(), DescaleError> {
        for tensor in [TensorName::Q, TensorName::K, TensorName::V] {
            let values = self.of(tensor);
            if values.len() != b * hkv {
                return Err(DescaleError::Length { tensor, held: values.len(), needed: b * hkv });
            }
            if let Some(i) = values.iter().position(|x| !(x.is_finite() && *x > 0.0)) {
                let (batch, kv_head) = (i / hkv, i % hkv);
                return Err(DescaleError::Value { tensor, batch, kv_head, value: values[i] });
            }
        }
        Ok(())
    }
}

/// Why a tensor cannot be quantized.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuantizeError {
    #[error(
        "{tensor}: element (b={batch}, h={head}, s={seq}, d={dim}) is {value}; E4M3 holds finite values only, \
         so the tensor cannot be quantized"
    )]
    NonFinite { tensor: TensorName, batch: usize, head: usize, seq: usize, dim: usize, value: f64 },
    #[error("{0} is not one of q, k, v: only the inputs are quantized")]
    NotAnInput(TensorName),
    #[error("{tensor} holds {held} elements, the problem needs {needed}")]
    Short { tensor: TensorName, held: usize, needed: usize },
    #[error(
        "{tensor}: one address holds elements of two (batch, KV head) groups whose descales differ (the \
         strides overlap); quantize a dense copy"
    )]
    SharedAcrossGroups { tensor: TensorName },
    #[error(
        "{tensor} cannot be rotated: the Hadamard rotation applies to q and k with a power-of-two head dim (D = {d})"
    )]
    NotRotatable { tensor: TensorName, d: usize },
    #[error(transparent)]
    Invalid(#[from] ProblemError),
}

/// A transform applied to each row (head-dim vector) of Q and K before quantizing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    None,
    /// The orthonormal Walsh-Hadamard matrix H/√D on each row ("incoherent processing", as in
    /// QuIP# and FlashAttention-3's FP8 study): Q·Kᵀ = (QH)(KH)ᵀ exactly, while an outlier
    /// coordinate spreads over all D, so one value no longer sets a group's scale. For Q and K
    /// only (rotating V would rotate O); the head dim must be a power of two.
    Hadamard,
}

/// Quantizes input `t` of `problem` (given as raw bits of `problem.dtype`, laid out by the
/// problem's strides) to E4M3 with one descale per (batch, KV head): the group's absolute
/// maximum maps to 448, so `descale = amax / 448`, and each element becomes
/// `e4m3(x · (448 / amax))`, rounded as [`e4m3_from_f32`] rounds. A group of zeros gets
/// descale 1.0 (all its bytes encode 0), so no scale is ever 0 or infinite; a NaN or infinite
/// element is an error naming its position.
pub fn quantize(problem: &Problem, t: TensorName, bits: &[u16]) -> Result<Quantized, QuantizeError> {
    quantize_with(problem, t, bits, Rotation::None)
}

/// [`quantize`] after `rotation` of each row (in float32, before the group maxima).
pub fn quantize_with(
    problem: &Problem,
    t: TensorName,
    bits: &[u16],
    rotation: Rotation,
) -> Result<Quantized, QuantizeError> {
    quantize_values(problem, t, &input_values(problem, t, bits, rotation)?)
}

/// The quantizer on [`input_values`]' output (`values` in logical order, finite, of a valid
/// problem's input `t`): for a caller that also keeps the values.
pub fn quantize_values(problem: &Problem, t: TensorName, values: &[f32]) -> Result<Quantized, QuantizeError> {
    let nd = problem.shape.d.max(1);
    let mut amax = vec![0f32; problem.shape.b * problem.shape.hkv];
    for (row, chunk) in values.chunks_exact(nd).enumerate() {
        let g = problem.kv_group(t, row);
        amax[g] = chunk.iter().fold(amax[g], |m, x| m.max(x.abs()));
    }
    let descale: Vec<f32> = amax.iter().map(|&m| if m == 0.0 { 1.0 } else { m / E4M3_MAX }).collect();
    let scale: Vec<f32> = amax.iter().map(|&m| if m == 0.0 { 1.0 } else { E4M3_MAX / m }).collect();
    let needed = problem.extent(t);
    let mut out = vec![0u8; needed];
    // Strides may repeat an address (a broadcast input); it must encode alike in each group.
    let mut written = vec![false; needed];
    for (i, (offset, &x)) in logical_offsets(problem, t).zip(values).enumerate() {
        let byte = e4m3_from_f32(x * scale[problem.kv_group(t, i / nd)]);
        if written[offset] && out[offset] != byte {
            return Err(QuantizeError::SharedAcrossGroups { tensor: t });
        }
        (out[offset], written[offset]) = (byte, true);
    }
    Ok(Quantized { bits: out, descale })
}

/// The values [`quantize_with`] quantizes: input `t`'s elements in logical (b, h, s, d) order as
/// float32, each row rotated by `rotation`; or why they cannot be quantized.
pub fn input_values(
    problem: &Problem,
    t: TensorName,
    bits: &[u16],
    rotation: Rotation,
) -> Result<Vec<f32>, QuantizeError> {
    problem.validate()?;
    if !matches!(t, TensorName::Q | TensorName::K | TensorName::V) {
        return Err(QuantizeError::NotAnInput(t));
    }
    if rotation == Rotation::Hadamard && (t == TensorName::V || !problem.shape.d.is_power_of_two()) {
        return Err(QuantizeError::NotRotatable { tensor: t, d: problem.shape.d });
    }
    let needed = problem.extent(t);
    if bits.len() < needed {
        return Err(QuantizeError::Short { tensor: t, held: bits.len(), needed });
    }
    let dtype: Dtype = problem.dtype;
    let [_, nh, ns, nd] = problem.dims(t);
    let mut values = Vec::with_capacity(problem.elements(t));
    for (i, offset) in logical_offsets(problem, t).enumerate() {
        let x = dtype.from_bits(bits[offset]) as f32;
        if !x.is_finite() {
            let row = i / nd;
            let (batch, head, seq) = (row / (nh * ns), row / ns % nh, row % ns);
            return Err(QuantizeError::NonFinite { tensor: t, batch, head, seq, dim: i % nd, value: f64::from(x) });
        }
        values.push(x);
    }
    if rotation == Rotation::Hadamard {
        values.chunks_exact_mut(nd.max(1)).for_each(hadamard);
    }
    Ok(values)
}

/// `row` times the orthonormal Walsh-Hadamard matrix H/√n (n a power of two): the fast
/// transform's butterflies, then the normalisation.
fn hadamard(row: &mut [f32]) {
    let n = row.len();
    let mut half = 1;
    while half < n {
        for block in row.chunks_exact_mut(2 * half) {
            let (lo, hi) = block.split_at_mut(half);
            for (a, b) in lo.iter_mut().zip(hi) {
                (*a, *b) = (*a + *b, *a - *b);
            }
        }
        half *= 2;
    }
    let norm = 1.0 / (n as f32).sqrt();
    row.iter_mut().for_each(|x| *x *= norm);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Layout, Shape};

    #[test]
    fn every_code_decodes_to_the_formats_value() {
        assert_eq!(e4m3_to_f32(0x00), 0.0);
        assert!(e4m3_to_f32(0x80).is_sign_negative());
        assert_eq!(e4m3_to_f32(0x01), 2f32.powi(-9), "smallest subnormal");
        assert_eq!(e4m3_to_f32(0x07), 7.0 * 2f32.powi(-9), "largest subnormal");
        assert_eq!(e4m3_to_f32(0x08), 2f32.powi(-6), "smallest normal");
        assert_eq!(e4m3_to_f32(0x38), 1.0);
        assert_eq!(e4m3_to_f32(0x7e), 448.0);
        assert_eq!(e4m3_to_f32(0xfe), -448.0);
        assert!(e4m3_to_f32(0x7f).is_nan() && e4m3_to_f32(0xff).is_nan());
        // Values increase with the code: 127 distinct non-negative finite values, 0 to 448.
        let values: Vec<f32> = (0..=0x7e).map(e4m3_to_f32).collect();
        assert!(values.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn every_finite_code_round_trips() {
        for bits in 0..=255u8 {
            if bits & 0x7f == E4M3_NAN {
                continue;
            }
            assert_eq!(e4m3_from_f32(e4m3_to_f32(bits)), bits, "code {bits:#04x}");
        }
    }

    #[test]
    fn rounding_is_to_nearest_with_ties_to_even() {
        // Between 1.0 (0x38) and 1.125 (0x39): the midpoint goes to the even mantissa.
        assert_eq!(e4m3_from_f32(1.0625), 0x38);
        assert_eq!(e4m3_from_f32(1.0626), 0x39);
        // Between 1.125 and 1.25: the midpoint goes up to the even 0x3a.
        assert_eq!(e4m3_from_f32(1.1875), 0x3a);
        // Half the smallest subnormal ties to zero; just above it rounds up.
        assert_eq!(e4m3_from_f32(2f32.powi(-10)), 0x00);
        assert_eq!(e4m3_from_f32(2f32.powi(-10) * 1.01), 0x01);
        // A carry out of the mantissa moves to the next binade: 1.96875 = 1.9375 + half a step.
        assert_eq!(e4m3_from_f32(1.96875), 0x40);
        assert_eq!(e4m3_to_f32(0x40), 2.0);
        // The subnormal step carries into the smallest normal.
        assert_eq!(e4m3_from_f32(7.5 * 2f32.powi(-9)), 0x08);
    }

    #[test]
    fn each_rounding_errs_by_at_most_half_a_step() {
        // Exhaustive over a dense sweep of f32 in [2^-12, 448): the error never exceeds
        // 2^-4 of the value for normals, or 2^-10 absolute below 2^-6.
        let mut x = 2f32.powi(-12);
        while x < 448.0 {
            let got = f64::from(e4m3_to_f32(e4m3_from_f32(x)));
            let err = (got - f64::from(x)).abs();
            let bound = if x >= 2f32.powi(-6) { E4M3_UNIT_ROUNDOFF * f64::from(x) } else { 2f64.powi(-10) };
            assert!(err <= bound, "x={x} got={got}");
            x *= 1.0009;
        }
    }

    #[test]
    fn out_of_range_saturates_and_nan_stays_nan() {
        assert_eq!(e4m3_from_f32(448.0), 0x7e);
        assert_eq!(e4m3_from_f32(463.9), 0x7e);
        assert_eq!(e4m3_from_f32(1e6), 0x7e);
        assert_eq!(e4m3_from_f32(f32::INFINITY), 0x7e);
        assert_eq!(e4m3_from_f32(f32::NEG_INFINITY), 0xfe);
        assert_eq!(e4m3_from_f32(f32::NAN), E4M3_NAN);
        assert_eq!(e4m3_from_f32(-0.0), 0x80);
    }

    fn problem(b: usize, h: usize, hkv: usize, s: usize, d: usize, layout: Layout) -> Problem {
        Problem::dense(Shape { b, h, hkv, sq: s, sk: s, d }, Dtype::Bf16, layout)
    }

    fn bits_of(values: &[f64]) -> Vec<u16> {
        values.iter().map(|&x| Dtype::Bf16.to_bits(x)).collect()
    }

    #[test]
    fn each_group_maps_its_absolute_maximum_to_448() {
        // GQA: 4 query heads on 2 KV heads; head h holds (h + 1) * (j - 2.5) / 10, j = 0..5 repeating.
        let p = problem(1, 4, 2, 3, 8, Layout::Bhsd);
        let values: Vec<f64> = (0..96).map(|i| ((i / 24 + 1) as f64) * ((i % 6) as f64 - 2.5) / 10.0).collect();
        let q = quantize(&p, TensorName::Q, &bits_of(&values)).unwrap();
        // Group 0 holds heads 0 and 1 (max |x| = 2 * 2.5 / 10), group 1 heads 2 and 3 (4 * 0.25).
        let amax = [Dtype::Bf16.round(0.5), Dtype::Bf16.round(1.0)];
        assert_eq!(q.descale, vec![amax[0] as f32 / 448.0, amax[1] as f32 / 448.0]);
        for (i, &x) in values.iter().enumerate() {
            let back = f64::from(e4m3_to_f32(q.bits[i])) * f64::from(q.descale[i / 48]);
            let x = Dtype::Bf16.round(x);
            assert!((back - x).abs() <= E4M3_UNIT_ROUNDOFF * x.abs() + 1e-6, "element {i}: {x} -> {back}");
        }
        // Each group's largest head holds its extremes four times each.
        assert_eq!(q.bits.iter().filter(|&&b| b & 0x7f == E4M3_MAX_BITS).count(), 16);
    }

    #[test]
    fn an_all_zero_group_gets_descale_one() {
        let p = problem(2, 2, 2, 4, 8, Layout::Bshd);
        let mut values = vec![0.0; 128];
        values[5] = 3.0; // batch 0, seq 0, head 0 in BSHD
        let k = quantize(&p, TensorName::K, &bits_of(&values)).unwrap();
        assert_eq!(k.descale, vec![3.0 / 448.0, 1.0, 1.0, 1.0]);
        assert_eq!(k.bits[5], 0x7e);
        assert!(k.bits.iter().enumerate().all(|(i, &b)| i == 5 || b == 0));
    }

    #[test]
    fn a_non_finite_element_is_named() {
        let p = problem(2, 2, 1, 3, 8, Layout::Bhsd);
        let mut values = vec![1.0; 96];
        values[48 + 24 + 8 + 3] = f64::INFINITY; // b=1, h=1, s=1, d=3
        let err = quantize(&p, TensorName::Q, &bits_of(&values)).unwrap_err();
        assert_eq!(
            err,
            QuantizeError::NonFinite { tensor: TensorName::Q, batch: 1, head: 1, seq: 1, dim: 3, value: f64::INFINITY }
        );
        assert!(err.to_string().starts_with("q: element (b=1, h=1, s=1, d=3) is inf"));
        values[0] = f64::NAN;
        assert!(matches!(quantize(&p, TensorName::Q, &bits_of(&values)), Err(QuantizeError::NonFinite { seq: 0, .. })));
    }

    #[test]
    fn an_address_shared_by_groups_of_different_scales_is_refused() {
        // Two KV heads whose rows overlap: head 0 is rows 0-1, head 1 rows 1-2 of one buffer.
        let mut p = problem(1, 2, 2, 2, 8, Layout::Bhsd);
        p.k_strides = crate::problem::Strides { batch: 24, head: 8, seq: 8, dim: 1 };
        let mut values = vec![1.0; 24];
        let k = quantize(&p, TensorName::K, &bits_of(&values)).unwrap();
        assert_eq!(k.descale, vec![1.0 / 448.0; 2], "equal groups encode the shared row alike");
        values[16] = 4.0; // only in head 1: its scale differs, and row 1 cannot hold both
        assert_eq!(
            quantize(&p, TensorName::K, &bits_of(&values)),
            Err(QuantizeError::SharedAcrossGroups { tensor: TensorName::K })
        );
    }

    #[test]
    fn the_rotation_keeps_every_score_and_spreads_an_outlier() {
        let p = problem(1, 1, 1, 4, 64, Layout::Bhsd);
        let mut values: Vec<f64> = (0..256).map(|i| ((i * 37 % 29) as f64 - 14.0) / 16.0).collect();
        values[70] = 40.0; // one outlier coordinate in row 1
        let bits = bits_of(&values);
        let dequantized = |q: &Quantized| -> Vec<f64> {
            q.bits.iter().map(|&b| f64::from(e4m3_to_f32(b)) * f64::from(q.descale[0])).collect()
        };
        let plain = quantize(&p, TensorName::K, &bits).unwrap();
        let rotated = quantize_with(&p, TensorName::K, &bits, Rotation::Hadamard).unwrap();
        assert!(rotated.descale[0] < plain.descale[0] / 3.0, "the outlier no longer sets the scale");
        // Rows of Q and K rotated alike keep their dot products (the scores) up to E4M3's
        // rounding of both factors: at most 2u of the sum of |products| (u = 2^-4), plus the
        // subnormals' absolute step. Whether the rotation cuts attention's error is measured,
        // not assumed (docs/fp8-error.md).
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let abs_dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x * y).abs()).sum::<f64>();
        let qq = quantize_with(&p, TensorName::Q, &bits, Rotation::Hadamard).unwrap();
        let (rq, rk) = (dequantized(&qq), dequantized(&rotated));
        for (r, s) in [(0, 2), (1, 2), (1, 3)] {
            let (x, y) = (&values[64 * r..64 * (r + 1)], &values[64 * s..64 * (s + 1)]);
            let (a, b) = (&rq[64 * r..64 * (r + 1)], &rk[64 * s..64 * (s + 1)]);
            let err = (dot(a, b) - dot(x, y)).abs();
            assert!(err <= 2.0 * E4M3_UNIT_ROUNDOFF * abs_dot(a, b) + 1e-3, "rows {r}, {s}: off by {err}");
        }
        let mut h = vec![1.0f32, 0.0, 0.0, 0.0];
        hadamard(&mut h);
        assert_eq!(h, vec![0.5; 4], "H e0 / 2 is the first column");
    }

    #[test]
    fn v_and_odd_head_dims_are_not_rotated() {
        let p = problem(1, 1, 1, 2, 64, Layout::Bhsd);
        assert_eq!(
            quantize_with(&p, TensorName::V, &[0; 128], Rotation::Hadamard),
            Err(QuantizeError::NotRotatable { tensor: TensorName::V, d: 64 })
        );
        let odd = problem(1, 1, 1, 2, 48, Layout::Bhsd);
        assert!(matches!(
            quantize_with(&odd, TensorName::Q, &[0; 96], Rotation::Hadamard),
            Err(QuantizeError::NotRotatable { d: 48, .. })
        ));
    }

    #[test]
    fn only_inputs_of_the_problems_extent_are_quantized() {
        let p = problem(1, 1, 1, 2, 8, Layout::Bhsd);
        assert_eq!(quantize(&p, TensorName::O, &[0; 16]), Err(QuantizeError::NotAnInput(TensorName::O)));
        assert_eq!(
            quantize(&p, TensorName::Q, &[0; 15]),
            Err(QuantizeError::Short { tensor: TensorName::Q, held: 15, needed: 16 })
        );
        let bad = problem(1, 3, 2, 2, 8, Layout::Bhsd);
        assert!(matches!(quantize(&bad, TensorName::Q, &[0; 48]), Err(QuantizeError::Invalid(_))));
    }
}
