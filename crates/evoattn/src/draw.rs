//! Reproducible random tensors: every element is a pure function of (seed, tensor, logical
//! index), so the CPU, the GPU kernel (`kernels/draw.cu`, launched by `Gpu::draw`) and the lab's
//! Python oracle (`python/evoattn_oracle/draw.py`) produce the same bits on every machine, and a
//! large case's inputs can be drawn where they are used instead of on the host. Only 32-bit
//! integer arithmetic, one float32 multiply and one round-to-nearest-even to the element type:
//! no transcendental function whose last bit differs between math libraries.
//!
//! The values are the centred sum of four 16-bit uniforms (Irwin-Hall with n = 4), scaled to
//! the requested standard deviation: a near-normal bell on ±3.46 std devs.

use crate::problem::{Dtype, Problem, TensorName};

/// Standard deviation of the sum of four independent uniforms on {0, ..., 65535}.
fn sum_std() -> f64 {
    ((65536.0f64 * 65536.0 - 1.0) / 3.0).sqrt()
}

/// Mean of that sum, subtracted exactly in integers.
const SUM_MEAN: i32 = 2 * 65535;

/// A bijective 32-bit mixer (Wellons' "lowbias32"): every output bit depends on every input bit.
pub fn hash32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// SplitMix64's finaliser: well-mixed keys for (seed, tensor).
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The generator of one tensor: two keys and the float32 factor from the integer sum to the
/// requested standard deviation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stream {
    pub keys: [u32; 2],
    pub scale: f32,
}

impl Stream {
    /// Tensor number `stream` (the lab draws Q, K, V as 0, 1, 2) of `seed`, with standard
    /// deviation `std`.
    pub fn new(seed: u64, stream: u64, std: f64) -> Self {
        let key = mix64(seed ^ mix64(stream));
        Stream { keys: [key as u32, (key >> 32) as u32], scale: (std / sum_std()) as f32 }
    }

    /// The value of logical element `i` (row-major over the tensor's logical `[b, h, s, d]`).
    pub fn value(&self, i: u32) -> f32 {
        let h1 = hash32(i ^ self.keys[0]);
        let h2 = hash32(h1.wrapping_add(self.keys[1]));
        let sum = (h1 & 0xffff) + (h1 >> 16) + (h2 & 0xffff) + (h2 >> 16);
        // |sum - mean| < 2^18: exact in float32, so the multiply is the only rounding.
        (sum as i32 - SUM_MEAN) as f32 * self.scale
    }

    /// [`value`](Self::value) as `dtype` bits, rounded to nearest even.
    pub fn bits(&self, dtype: Dtype, i: u32) -> u16 {
        dtype.bits_from_f32(self.value(i))
    }
}

/// Tensor `t` of `problem` drawn on the CPU, laid out by the problem's strides, with `gap` in
/// every element of the buffer outside the logical tensor. The problem must be valid
/// ([`Problem::validate`]): its element counts then fit the generator's 32-bit index.
pub fn host_tensor(problem: &Problem, t: TensorName, stream: &Stream, gap: u16) -> Vec<u16> {
    let mut buf = vec![gap; problem.extent(t)];
    for (i, off) in crate::reference::logical_offsets(problem, t).enumerate() {
        buf[off] = stream.bits(problem.dtype, i as u32);
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Layout, Shape};

    /// The same numbers are asserted by python/tests/test_draw.py: the oracle's twin must agree
    /// bit for bit.
    #[test]
    fn known_values_pin_the_generator_for_its_twins() {
        assert_eq!(hash32(0), 0);
        assert_eq!(hash32(1), 0x6889_90c0);
        let s = Stream::new(7, 1, 1.0);
        assert_eq!(s.keys, [0x38aa_e818, 0xdf2b_bb95]);
        assert_eq!(s.scale.to_bits(), 0x37dd_b3d7);
        let bits: Vec<u16> = (0..4).map(|i| s.bits(Dtype::Bf16, i)).collect();
        assert_eq!(bits, [0x3ec5, 0x3f38, 0x3cf7, 0xbe7b]);
        let half: Vec<u16> = (0..4).map(|i| Stream::new(0, 2, 3.0).bits(Dtype::F16, i)).collect();
        assert_eq!(half, [0xaf86, 0x3b38, 0xbbb0, 0x3b84]);
        // E4M3 draws (the lab's and the oracle's): the float32 value over its descale, rounded once.
        let e4m3: Vec<u16> = (0..4).map(|i| Dtype::E4m3.bits_from_f32(s.value(i) / 0.01)).collect();
        assert_eq!(e4m3, [0x62, 0x69, 0x44, 0xdc]);
    }

    #[test]
    fn values_have_the_requested_spread_and_no_bias() {
        for std in [1.0, 3.0] {
            let s = Stream::new(3, 0, std);
            let xs: Vec<f64> = (0..1 << 18).map(|i| f64::from(s.value(i))).collect();
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
            // 2^18 samples: the mean's standard error is std/512, the std's relative one 0.14%.
            assert!(mean.abs() < 0.01 * std, "mean {mean}");
            assert!((sd / std - 1.0).abs() < 0.01, "std {sd}, want {std}");
            let bound = 3.0f64.sqrt() * 2.0 * std * 1.0001;
            assert!(xs.iter().all(|x| x.abs() <= bound), "a value past the sum's range ±{bound}");
        }
    }

    #[test]
    fn streams_and_seeds_differ() {
        let a: Vec<f32> = (0..64).map(|i| Stream::new(1, 0, 1.0).value(i)).collect();
        for other in [Stream::new(1, 1, 1.0), Stream::new(2, 0, 1.0)] {
            let b: Vec<f32> = (0..64).map(|i| other.value(i)).collect();
            assert_ne!(a, b);
        }
    }

    #[test]
    fn host_tensors_fill_logical_elements_and_mark_the_gaps() {
        let shape = Shape { b: 1, h: 2, hkv: 1, sq: 3, sk: 5, d: 8 };
        let mut p = Problem::dense(shape, Dtype::F16, Layout::Bhsd);
        p.q_strides.seq = 16; // rows padded from 8 to 16 elements
        let s = Stream::new(0, 0, 1.0);
        let buf = host_tensor(&p, TensorName::Q, &s, 0xffff);
        assert_eq!(buf.len(), p.extent(TensorName::Q));
        assert_eq!(buf.iter().filter(|&&x| x == 0xffff).count(), buf.len() - 2 * 3 * 8);
        assert_eq!(buf[16], s.bits(Dtype::F16, 8), "logical row 1 starts at offset 16");
    }
}
