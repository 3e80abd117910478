//! Random inputs for checks and benchmarks: fresh per seed, laid out by the problem's strides.
//! Every buffer element outside the logical tensor (the gaps of non-dense strides) holds NaN,
//! so a kernel that reads outside its tensor produces NaN and fails the check.

use evoattn::reference::logical_offsets;
use evoattn::{Dtype, Problem, TensorName};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

/// Which values fill Q, K and V.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Q, K, V standard normal. With the default 1/sqrt(D) scale the scores are N(0, 1):
    /// softmax rows spread over many keys, so P·V sums many similar terms.
    Normal,
    /// Q and K normal with std [`WIDE_QK_STD`], V standard normal. Scores get std 9 (with the
    /// default scale) and spread over about ±30: each row is dominated by a few keys, exp
    /// underflows for most keys (P rounds to 0 in f16), and a softmax without the max
    /// subtraction or a missed rescale overflows.
    Wide,
}

/// Standard deviation of Q and K under [`Distribution::Wide`]; the scores' std is its square.
pub const WIDE_QK_STD: f64 = 3.0;

impl Distribution {
    fn qk_std(self) -> f64 {
        match self {
            Distribution::Normal => 1.0,
            Distribution::Wide => WIDE_QK_STD,
        }
    }
}

/// Host buffers of raw dtype bits, each `problem.extent(t)` elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Inputs {
    pub q: Vec<u16>,
    pub k: Vec<u16>,
    pub v: Vec<u16>,
}

/// The quiet-NaN bit pattern of `dtype`.
pub fn nan_bits(dtype: Dtype) -> u16 {
    dtype.to_bits(f64::NAN)
}

/// Values per independently seeded chunk: chunks are drawn in parallel, and large enough that
/// seeding costs nothing next to drawing.
const CHUNK: usize = 1 << 20;

/// SplitMix64's finaliser: distinct, well-mixed seeds for (seed, tensor, chunk).
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `n` values of `std`·N(0, 1) as dtype bits, in logical order; chunk `c` comes from its own
/// generator seeded by (`seed`, `stream`, `c`), so the result does not depend on the threads.
fn draw(dtype: Dtype, n: usize, std: f64, seed: u64, stream: u64) -> Vec<u16> {
    let mut out = vec![0u16; n];
    let chunks: Vec<(usize, &mut [u16])> = out.chunks_mut(CHUNK).enumerate().collect();
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(chunks.len().max(1));
    let mut per_thread: Vec<Vec<(usize, &mut [u16])>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, chunk) in chunks.into_iter().enumerate() {
        per_thread[i % threads].push(chunk);
    }
    std::thread::scope(|scope| {
        for work in per_thread {
            scope.spawn(move || {
                for (c, values) in work {
                    let mut rng = StdRng::seed_from_u64(mix(mix(seed ^ mix(stream)) ^ c as u64));
                    for v in values.iter_mut() {
                        let x: f64 = rng.sample(StandardNormal);
                        *v = dtype.to_bits(std * x);
                    }
                }
            });
        }
    });
    out
}

/// Q, K and V for `problem`, reproducible from `seed`. Values are drawn in logical
/// (b, h, s, d) order, so one seed gives the same logical tensors in every layout.
pub fn random_inputs(problem: &Problem, dist: Distribution, seed: u64) -> Inputs {
    let fill = |t: TensorName, stream: u64, std: f64| -> Vec<u16> {
        let n = problem.elements(t);
        let values = draw(problem.dtype, n, std, seed, stream);
        let mut buf = vec![nan_bits(problem.dtype); problem.extent(t)];
        for (off, bits) in logical_offsets(problem, t).zip(values) {
            buf[off] = bits;
        }
        buf
    };
    let qk_std = dist.qk_std();
    Inputs { q: fill(TensorName::Q, 0, qk_std), k: fill(TensorName::K, 1, qk_std), v: fill(TensorName::V, 2, 1.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_draws_are_reproducible_and_chunks_independent() {
        let n = 2 * CHUNK + 5;
        let a = draw(Dtype::Bf16, n, 1.0, 7, 0);
        assert_eq!(a, draw(Dtype::Bf16, n, 1.0, 7, 0));
        assert_ne!(a[..64], a[CHUNK..CHUNK + 64], "chunks must not repeat each other");
        assert_ne!(a[..64], draw(Dtype::Bf16, n, 1.0, 7, 1)[..64], "streams (q, k, v) must differ");
        assert_eq!(a.len(), n);
    }
    use evoattn::{Layout, Shape, Strides};

    fn shape() -> Shape {
        Shape { b: 2, h: 4, hkv: 2, sq: 33, sk: 17, d: 64 }
    }

    fn logical(problem: &Problem, t: TensorName, buf: &[u16]) -> Vec<f64> {
        logical_offsets(problem, t).map(|off| problem.dtype.from_bits(buf[off])).collect()
    }

    fn std_dev(xs: &[f64]) -> f64 {
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt()
    }

    #[test]
    fn nan_bits_are_nan_in_both_dtypes() {
        for dtype in Dtype::ALL {
            assert!(dtype.from_bits(nan_bits(dtype)).is_nan(), "{dtype}");
        }
        assert_eq!(nan_bits(Dtype::F16), 0x7e00);
        assert_eq!(nan_bits(Dtype::Bf16), 0x7fc0);
    }

    #[test]
    fn dense_buffers_are_fully_written_and_reproducible() {
        let p = Problem::dense(shape(), Dtype::Bf16, Layout::Bhsd);
        let a = random_inputs(&p, Distribution::Normal, 7);
        assert_eq!(a.q.len(), 2 * 4 * 33 * 64);
        assert_eq!(a.k.len(), 2 * 2 * 17 * 64);
        for buf in [&a.q, &a.k, &a.v] {
            assert!(buf.iter().all(|&x| Dtype::Bf16.from_bits(x).is_finite()));
        }
        assert_eq!(a, random_inputs(&p, Distribution::Normal, 7));
        assert_ne!(a.q, random_inputs(&p, Distribution::Normal, 8).q);
    }

    #[test]
    fn gaps_of_padded_strides_are_nan() {
        // Rows padded from 64 to 72 elements, heads padded by one extra row.
        let mut p = Problem::dense(shape(), Dtype::F16, Layout::Bhsd);
        p.q_strides = Strides { batch: 4 * 34 * 72, head: 34 * 72, seq: 72, dim: 1 };
        let inputs = random_inputs(&p, Distribution::Normal, 1);
        let extent = p.extent(TensorName::Q);
        assert_eq!(inputs.q.len(), extent);
        let nan = inputs.q.iter().filter(|&&x| Dtype::F16.from_bits(x).is_nan()).count();
        assert_eq!(nan, extent - 2 * 4 * 33 * 64);
        assert!(logical(&p, TensorName::Q, &inputs.q).iter().all(|x| x.is_finite()));
        // the padding after row 0's 64 elements
        assert!(inputs.q[64..72].iter().all(|&x| Dtype::F16.from_bits(x).is_nan()));
    }

    #[test]
    fn one_seed_gives_the_same_logical_tensors_in_both_layouts() {
        let bhsd = Problem::dense(shape(), Dtype::F16, Layout::Bhsd);
        let bshd = Problem::dense(shape(), Dtype::F16, Layout::Bshd);
        let (a, b) = (random_inputs(&bhsd, Distribution::Wide, 3), random_inputs(&bshd, Distribution::Wide, 3));
        assert_ne!(a.q, b.q, "the buffers are laid out differently");
        assert_eq!(logical(&bhsd, TensorName::Q, &a.q), logical(&bshd, TensorName::Q, &b.q));
        assert_eq!(logical(&bhsd, TensorName::V, &a.v), logical(&bshd, TensorName::V, &b.v));
    }

    #[test]
    fn wide_widens_q_and_k_but_not_v() {
        let p = Problem::dense(Shape::new(1, 4, 256, 64), Dtype::F16, Layout::Bhsd);
        let normal = random_inputs(&p, Distribution::Normal, 5);
        let wide = random_inputs(&p, Distribution::Wide, 5);
        let sd = |t, buf: &[u16]| std_dev(&logical(&p, t, buf));
        // 65536 samples: the sample std's relative standard error is 1/sqrt(2n) = 0.3%
        const REL: f64 = 0.02;
        for (got, want) in [
            (sd(TensorName::Q, &normal.q), 1.0),
            (sd(TensorName::V, &normal.v), 1.0),
            (sd(TensorName::Q, &wide.q), WIDE_QK_STD),
            (sd(TensorName::K, &wide.k), WIDE_QK_STD),
            (sd(TensorName::V, &wide.v), 1.0),
        ] {
            assert!((got / want - 1.0).abs() < REL, "std {got}, want {want}");
        }
    }

    #[test]
    fn empty_problems_get_empty_buffers() {
        let p = Problem::dense(Shape { b: 1, h: 2, hkv: 1, sq: 0, sk: 5, d: 64 }, Dtype::F16, Layout::Bshd);
        let inputs = random_inputs(&p, Distribution::Normal, 0);
        assert!(inputs.q.is_empty());
        assert_eq!(inputs.k.len(), 5 * 64);
    }
}
