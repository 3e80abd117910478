//! Random inputs for checks and benchmarks: fresh per seed, laid out by the problem's strides.
//! Every buffer element outside the logical tensor (the gaps of non-dense strides) holds NaN,
//! so a kernel that reads outside its tensor produces NaN and fails the check. The values come
//! from `evoattn::draw`, whose GPU and PyTorch twins draw the same bits where the tensors live.

use evoattn::draw::{host_tensor, Stream};
use evoattn::fp8::Descales;
use evoattn::reference::logical_offsets;
use evoattn::{Dtype, Problem, TensorName};
use std::borrow::Cow;

/// Which values fill Q, K and V.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Distribution {
    /// Q, K, V with mean 0 and std 1 (the generator's near-normal bell). With the default
    /// 1/sqrt(D) scale the scores have std 1: softmax rows spread over many keys, so P·V sums
    /// many similar terms.
    Normal,
    /// Q and K with std [`WIDE_QK_STD`], V with std 1. Scores get std 9 (with the
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

/// The quiet-NaN bit pattern of `dtype`.
pub fn nan_bits(dtype: Dtype) -> u16 {
    dtype.to_bits(f64::NAN)
}

/// A case's Q, K and V as the generator draws them (`evoattn::draw`): every value a pure
/// function of the seed, the distribution, the tensor and the logical index, so the same
/// wherever it is drawn: on the CPU for the float64 reference and the mock, on the GPU by the GPU
/// backend, by PyTorch in the oracle. A large case never crosses the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Draw {
    pub dist: Distribution,
    pub seed: u64,
    pub descales: DescaleGrain,
}

/// How E4M3 draws' descales vary over a tensor's (batch, KV head) groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DescaleGrain {
    /// A different descale per group (widened by group, [`e4m3_descale`]), so that a kernel
    /// reading another group's is caught: the default.
    PerGroup,
    /// One per tensor (every group's is group 0's): what a peer taking per-tensor scales
    /// (cuDNN's FP8 SDPA) can run.
    PerTensor,
}

impl Draw {
    pub fn new(dist: Distribution, seed: u64) -> Self {
        Draw { dist, seed, descales: DescaleGrain::PerGroup }
    }

    /// The same draw with descales of `grain`.
    pub fn with_descales(self, grain: DescaleGrain) -> Self {
        Draw { descales: grain, ..self }
    }

    /// An E4M3 problem's descales ([`e4m3_descale`] per group, or group 0's everywhere); none
    /// for 16-bit problems.
    pub fn descales(&self, problem: &Problem) -> Option<Descales> {
        if !problem.dtype.is_fp8() {
            return None;
        }
        let groups = problem.shape.b * problem.shape.hkv;
        let of = |t| {
            let std = self.stream_and_std(t).1;
            let group = |g| if self.descales == DescaleGrain::PerGroup { g } else { 0 };
            (0..groups).map(|g| e4m3_descale(std, group(g))).collect::<Vec<f32>>()
        };
        Some(Descales { q: of(TensorName::Q), k: of(TensorName::K), v: of(TensorName::V) })
    }

    /// The generator of tensor `t` (Q, K or V) and its standard deviation.
    fn stream_and_std(&self, t: TensorName) -> (Stream, f64) {
        let (stream, std) = match t {
            TensorName::K => (1, self.dist.qk_std()),
            TensorName::V => (2, 1.0),
            _ => (0, self.dist.qk_std()),
        };
        (Stream::new(self.seed, stream, std), std)
    }

    /// The generator of tensor `t` (Q, K or V).
    pub fn stream(&self, t: TensorName) -> Stream {
        self.stream_and_std(t).0
    }

    /// A backward check's dO (the loss's gradient of O), laid out as O with NaN in its gaps:
    /// std 1, from a stream of its own.
    pub fn d_o(&self, problem: &Problem) -> Vec<u16> {
        host_tensor(problem, TensorName::DO, &Stream::new(self.seed, 3, 1.0), nan_bits(problem.dtype.output()))
    }

    /// The values on the host, laid out by the problem's strides with NaN in every gap, so that
    /// a kernel that reads outside its tensor produces NaN and fails the check. E4M3 inputs are
    /// drawn as 16-bit ones are, divided by their group's descale ([`e4m3_descale`]) and rounded
    /// to E4M3.
    pub fn host(&self, problem: &Problem) -> HostInputs {
        let Some(descales) = self.descales(problem) else {
            let fill = |t| host_tensor(problem, t, &self.stream(t), nan_bits(problem.dtype));
            return HostInputs {
                q: fill(TensorName::Q),
                k: fill(TensorName::K),
                v: fill(TensorName::V),
                descales: None,
            };
        };
        let s = problem.shape;
        // Drawn in logical order on every core, then laid out by the strides: a fa3-grid row's
        // Q, K and V are 100M values, drawn twice by a check, at some 25 ns a value on one core
        // (the generator 6 ns, the E4M3 rounding 18); `bench` reported 13-18 s of checking per
        // such row on the 16-core GPU machine when they were drawn on one.
        let fill = |t: TensorName| {
            let (stream, scale) = (self.stream(t), descales.of(t));
            let mut values = vec![0u16; problem.elements(t)];
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            let chunk = values.len().div_ceil(threads).max(MIN_DRAW_CHUNK);
            std::thread::scope(|scope| {
                for (c, out) in values.chunks_mut(chunk).enumerate() {
                    scope.spawn(move || {
                        for (j, x) in out.iter_mut().enumerate() {
                            let i = c * chunk + j;
                            let group = problem.kv_group(t, i / s.d);
                            *x = problem.dtype.bits_from_f32(stream.value(i as u32) / scale[group]);
                        }
                    });
                }
            });
            let mut buf = vec![nan_bits(problem.dtype); problem.extent(t)];
            for (offset, x) in logical_offsets(problem, t).zip(values) {
                buf[offset] = x;
            }
            buf
        };
        let (q, k, v) = (fill(TensorName::Q), fill(TensorName::K), fill(TensorName::V));
        HostInputs { q, k, v, descales: Some(descales) }
    }
}

/// Fewest E4M3 values one drawing thread takes: below this a thread costs more than it saves.
const MIN_DRAW_CHUNK: usize = 1 << 16;

/// Half the drawn values' range in standard deviations: the generator's sum of four uniforms
/// reaches ±2√3 std.
const DRAW_HALF_RANGE_STDS: f64 = 3.464_101_615_137_754_6;

/// The descale of drawn E4M3 inputs of standard deviation `std` in (batch, KV head) group
/// `group`: the drawn range maps onto E4M3's ±448 (as `evoattn quantize` maps a group's
/// largest value), widened by 1, 1.25, 1.5 or 1.75 by group so that each group's descale
/// differs and a kernel reading another group's is caught.
pub fn e4m3_descale(std: f64, group: usize) -> f32 {
    let widen = 1.0 + (group % 4) as f64 / 4.0;
    (std * DRAW_HALF_RANGE_STDS * widen / f64::from(evoattn::fp8::E4M3_MAX)) as f32
}

/// Host buffers of raw dtype bits (E4M3 in the low byte), each `problem.extent(t)` elements,
/// and for E4M3 inputs their descales.
#[derive(Clone, Debug, PartialEq)]
pub struct HostInputs {
    pub q: Vec<u16>,
    pub k: Vec<u16>,
    pub v: Vec<u16>,
    pub descales: Option<Descales>,
}

/// The Q, K and V a kernel runs on.
#[derive(Clone, Copy, Debug)]
pub enum Inputs<'a> {
    /// Drawn where they are used.
    Drawn(Draw),
    /// Given by the caller (`run`'s file), laid out by the problem's strides.
    Host(&'a HostInputs),
}

impl Inputs<'_> {
    /// The values on the host: drawn there, or the caller's.
    pub fn host(&self, problem: &Problem) -> Cow<'_, HostInputs> {
        match self {
            Inputs::Drawn(draw) => Cow::Owned(draw.host(problem)),
            Inputs::Host(host) => Cow::Borrowed(host),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let a = Draw::new(Distribution::Normal, 7).host(&p);
        assert_eq!(a.q.len(), 2 * 4 * 33 * 64);
        assert_eq!(a.k.len(), 2 * 2 * 17 * 64);
        for buf in [&a.q, &a.k, &a.v] {
            assert!(buf.iter().all(|&x| Dtype::Bf16.from_bits(x).is_finite()));
        }
        assert_eq!(a, Draw::new(Distribution::Normal, 7).host(&p));
        assert_ne!(a.q, Draw::new(Distribution::Normal, 8).host(&p).q);
    }

    #[test]
    fn gaps_of_padded_strides_are_nan() {
        // Rows padded from 64 to 72 elements, heads padded by one extra row.
        let mut p = Problem::dense(shape(), Dtype::F16, Layout::Bhsd);
        p.q_strides = Strides { batch: 4 * 34 * 72, head: 34 * 72, seq: 72, dim: 1 };
        let inputs = Draw::new(Distribution::Normal, 1).host(&p);
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
        let (a, b) = (Draw::new(Distribution::Wide, 3).host(&bhsd), Draw::new(Distribution::Wide, 3).host(&bshd));
        assert_ne!(a.q, b.q, "the buffers are laid out differently");
        assert_eq!(logical(&bhsd, TensorName::Q, &a.q), logical(&bshd, TensorName::Q, &b.q));
        assert_eq!(logical(&bhsd, TensorName::V, &a.v), logical(&bshd, TensorName::V, &b.v));
    }

    #[test]
    fn wide_widens_q_and_k_but_not_v() {
        let p = Problem::dense(Shape::new(1, 4, 256, 64), Dtype::F16, Layout::Bhsd);
        let normal = Draw::new(Distribution::Normal, 5).host(&p);
        let wide = Draw::new(Distribution::Wide, 5).host(&p);
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
    fn e4m3_draws_are_each_value_over_its_groups_descale_wherever_the_strides_put_it() {
        // GQA, BSHD and more values than one drawing thread takes: the specification, serially.
        let shape = Shape { b: 2, h: 4, hkv: 2, sq: 300, sk: 170, d: 64 };
        let p = Problem::dense(shape, Dtype::E4m3, Layout::Bshd);
        assert!(p.elements(TensorName::Q) > MIN_DRAW_CHUNK);
        let draw = Draw::new(Distribution::Wide, 9);
        let inputs = draw.host(&p);
        let descales = inputs.descales.as_ref().expect("E4M3 inputs come with descales");
        for (t, buf) in [(TensorName::Q, &inputs.q), (TensorName::K, &inputs.k), (TensorName::V, &inputs.v)] {
            let stream = draw.stream(t);
            let mut want = vec![nan_bits(Dtype::E4m3); p.extent(t)];
            for (i, offset) in logical_offsets(&p, t).enumerate() {
                let group = p.kv_group(t, i / shape.d);
                want[offset] = Dtype::E4m3.bits_from_f32(stream.value(i as u32) / descales.of(t)[group]);
            }
            assert_eq!(buf, &want, "{t}");
        }
    }

    #[test]
    fn per_tensor_descales_are_group_zeros_everywhere_and_per_group_ones_differ() {
        let p = Problem::dense(Shape { b: 2, h: 4, hkv: 2, sq: 3, sk: 5, d: 64 }, Dtype::E4m3, Layout::Bhsd);
        let per_group = Draw::new(Distribution::Normal, 4);
        let per_tensor = per_group.with_descales(DescaleGrain::PerTensor);
        let (g, t) = (per_group.descales(&p).unwrap(), per_tensor.descales(&p).unwrap());
        for name in [TensorName::Q, TensorName::K, TensorName::V] {
            assert_eq!(t.of(name), vec![g.of(name)[0]; 4].as_slice(), "{name}");
            assert!(g.of(name).windows(2).all(|w| w[0] != w[1]), "{name}: {:?}", g.of(name));
        }
        // The values follow their descales; 16-bit problems have none.
        assert_eq!(per_tensor.host(&p).descales, Some(t));
        assert_eq!(per_tensor.descales(&Problem::dense(p.shape, Dtype::Bf16, Layout::Bhsd)), None);
    }

    #[test]
    fn empty_problems_get_empty_buffers() {
        let p = Problem::dense(Shape { b: 1, h: 2, hkv: 1, sq: 0, sk: 5, d: 64 }, Dtype::F16, Layout::Bshd);
        let inputs = Draw::new(Distribution::Normal, 0).host(&p);
        assert!(inputs.q.is_empty());
        assert_eq!(inputs.k.len(), 5 * 64);
    }
}
