//! Statistics on raw timing samples. Pure functions, computed the same way for our kernels and
//! for every peer.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Summary of one sample set, in the samples' unit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    pub p99: f64,
    pub iqr: f64,
}

/// The q-quantile (0..=1) by linear interpolation between closest ranks (numpy's default).
/// `sorted` must be ascending and non-empty.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Summarises `samples`; `None` when there are none.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let q = |p| quantile(&sorted, p);
    Some(Summary { n: sorted.len(), median: q(0.5), p10: q(0.1), p90: q(0.9), p99: q(0.99), iqr: q(0.75) - q(0.25) })
}

/// How far the median of a sample set's last third may lie from its first third's, relative,
/// before the set counts as drifting. Noise on one machine moves such medians by a few percent
/// (rows at the power cap by up to about 4%); a warm-up still under way, or a disturbance that
/// fades during the run, moves them far more (a 2026-11-24 record had cuDNN's samples fall from
/// 1343 to 136 µs over one case, which the speed test alone would have counted as our 3.6×).
pub const DRIFT_TOLERANCE: f64 = 0.10;

/// Fewest samples in each third for its median to say anything.
const DRIFT_MIN_THIRD: usize = 3;

/// How far apart the medians of `samples`' consecutive blocks of `block` are: the largest over
/// the smallest, less one. `None` for fewer than two blocks. A GPU whose clock moves from block
/// to block (at its power cap) spreads them without drifting.
pub fn block_spread(samples: &[f64], block: usize) -> Option<f64> {
    let medians: Vec<f64> = samples.chunks(block.max(1)).filter_map(|b| summarize(b).map(|s| s.median)).collect();
    let lo = medians.iter().copied().reduce(f64::min)?;
    let hi = medians.iter().copied().reduce(f64::max)?;
    (medians.len() >= 2 && lo > 0.0).then(|| hi / lo - 1.0)
}

/// The drift of `samples`, taken in this order: the median of the last third over the median
/// of the first third, minus 1 (the middle third, and the remainder of n/3, in neither).
/// `None` with fewer than three samples a third.
pub fn drift(samples: &[f64]) -> Option<f64> {
    let third = samples.len() / 3;
    if third < DRIFT_MIN_THIRD {
        return None;
    }
    let median = |part: &[f64]| summarize(part).map(|s| s.median);
    Some(median(&samples[samples.len() - third..])? / median(&samples[..third])? - 1.0)
}

/// The drift of `samples` where it passes [`DRIFT_TOLERANCE`] either way: samples not at a
/// steady state, which `bench` measures again and the gate does not judge.
pub fn unsteady_drift(samples: &[f64]) -> Option<f64> {
    drift(samples).filter(|d| d.abs() > DRIFT_TOLERANCE)
}

/// Bootstrap resamples per interval (DESIGN). At 10,000 the Monte-Carlo error of a 2.5%
/// percentile endpoint is about sqrt(0.025 * 0.975 / 10^4) = 0.16 percentage points of rank, small
/// next to the interval itself, and one interval of 100 + 100 samples takes milliseconds.
pub const DEFAULT_RESAMPLES: usize = 10_000;

/// Bootstrap seed, fixed so that re-gating one record always gives the same intervals and the
/// same verdict (the value itself is arbitrary). The generator is `SmallRng` (xoshiro), not the
/// cryptographic `StdRng`: the bootstrap draws 2 × 10^6 indices per interval and ChaCha is
/// several times slower, unoptimised test builds most of all. Either stream may change between
/// rand releases; within one build it is stable.
pub const DEFAULT_SEED: u64 = 0x6A7E_5EED;

/// A confidence interval `[lo, hi]` around a point `estimate` computed from the full samples.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
    pub estimate: f64,
}

impl Interval {
    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }
}

/// Median of `values`, equal to `quantile(sorted, 0.5)` but by selection (O(n)), since the
/// bootstrap takes 2 × 10,000 of them per interval. Reorders `values`; must be non-empty.
fn median_in_place(values: &mut [f64]) -> f64 {
    let (n, mid) = (values.len(), values.len() / 2);
    let (below, &mut upper, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
    if n.is_multiple_of(2) {
        let lower = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        // Same expression as `quantile`, so both give bit-identical medians.
        lower + (upper - lower) * 0.5
    } else {
        upper
    }
}

/// Fills `out` with draws from `samples`, with replacement, `block` consecutive samples at a
/// time (a block bootstrap; 1 = single samples). Samples taken in one block of the lab's
/// interleaving share the GPU's clock and thermal state, so they are not independent; drawing
/// whole blocks keeps that dependence, and the interval widens by as much as it is real.
fn resample(rng: &mut SmallRng, samples: &[f64], block: usize, out: &mut [f64]) {
    let block = block.clamp(1, samples.len());
    let blocks = samples.len().div_ceil(block);
    let mut filled = 0;
    while filled < out.len() {
        let start = rng.random_range(0..blocks) * block;
        let chunk = &samples[start..(start + block).min(samples.len())];
        let n = chunk.len().min(out.len() - filled);
        out[filled..filled + n].copy_from_slice(&chunk[..n]);
        filled += n;
    }
}

/// Percentile bootstrap interval of `stat(median(ours), median(peer))`: each side is resampled
/// independently with replacement (they are separate sample sets, not pairs), in blocks of
/// `block` samples, `resamples` times.
/// `None` when either side is empty. Panics unless 0 < `confidence` < 1 and `resamples` > 0.
fn bootstrap_medians(
    ours: &[f64],
    peer: &[f64],
    block: usize,
    resamples: usize,
    confidence: f64,
    seed: u64,
    stat: fn(f64, f64) -> f64,
) -> Option<Interval> {
    assert!(confidence > 0.0 && confidence < 1.0, "confidence {confidence} is not inside (0, 1)");
    assert!(resamples > 0, "the bootstrap needs at least one resample");
    if ours.is_empty() || peer.is_empty() {
        return None;
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut a, mut b) = (vec![0.0; ours.len()], vec![0.0; peer.len()]);
    let mut stats: Vec<f64> = (0..resamples)
        .map(|_| {
            resample(&mut rng, ours, block, &mut a);
            resample(&mut rng, peer, block, &mut b);
            stat(median_in_place(&mut a), median_in_place(&mut b))
        })
        .collect();
    stats.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    let estimate = stat(median_in_place(&mut ours.to_vec()), median_in_place(&mut peer.to_vec()));
    Some(Interval { lo: quantile(&stats, tail), hi: quantile(&stats, 1.0 - tail), estimate })
}

/// Bootstrap interval of median(ours) − median(peer): entirely below zero means ours is faster
/// at that confidence.
pub fn bootstrap_median_diff(
    ours: &[f64],
    peer: &[f64],
    block: usize,
    resamples: usize,
    confidence: f64,
    seed: u64,
) -> Option<Interval> {
    bootstrap_medians(ours, peer, block, resamples, confidence, seed, |o, p| o - p)
}

/// Bootstrap interval of the speedup median(peer) / median(ours).
pub fn bootstrap_median_ratio(
    ours: &[f64],
    peer: &[f64],
    block: usize,
    resamples: usize,
    confidence: f64,
    seed: u64,
) -> Option<Interval> {
    bootstrap_medians(ours, peer, block, resamples, confidence, seed, |o, p| p / o)
}

/// Bootstrap interval of the relative change median(ours) / median(base) − 1: +0.03 is 3%
/// slower than the base. A percentile interval of the ratio itself, not of the difference
/// scaled by the base's point median, so the base's own noise is in it.
pub fn bootstrap_median_change(
    ours: &[f64],
    base: &[f64],
    block: usize,
    resamples: usize,
    confidence: f64,
    seed: u64,
) -> Option<Interval> {
    bootstrap_medians(ours, base, block, resamples, confidence, seed, |o, b| o / b - 1.0)
}

/// Speedup (peer median / our median) from which a result is called excellent.
pub const EXCELLENT_SPEEDUP: f64 = 1.5;
/// ... good: a 10% gain is worth shipping on its own.
pub const GOOD_SPEEDUP: f64 = 1.1;
/// ... modest: 2% is about the run-to-run spread of a median of 100 samples on a quiet GPU, so
/// within ±2% is called parity rather than a gain or a loss.
pub const MODEST_SPEEDUP: f64 = 1.02;
/// Below this speedup a result is a regression.
pub const PARITY_FLOOR: f64 = 0.98;

/// A speedup in words (DESIGN: Excellent ≥ 1.5×, Good ≥ 1.1×, Modest ≥ 1.02×, Parity within
/// ±2%, Regression below).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Excellent,
    Good,
    Modest,
    Parity,
    Regression,
}

impl Verdict {
    /// A NaN speedup is a regression: nothing vouches for it.
    pub fn from_speedup(speedup: f64) -> Self {
        if speedup >= EXCELLENT_SPEEDUP {
            Verdict::Excellent
        } else if speedup >= GOOD_SPEEDUP {
            Verdict::Good
        } else if speedup >= MODEST_SPEEDUP {
            Verdict::Modest
        } else if speedup >= PARITY_FLOOR {
            Verdict::Parity
        } else {
            Verdict::Regression
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Excellent => "excellent",
            Verdict::Good => "good",
            Verdict::Modest => "modest",
            Verdict::Parity => "parity",
            Verdict::Regression => "regression",
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand_distr::{Distribution, LogNormal};

    /// `n` seeded draws of a kernel time around `median_us` with lognormal jitter of shape
    /// `sigma` (timings are positive and right-skewed). Shared with the gate tests.
    pub(crate) fn lognormal_samples(median_us: f64, sigma: f64, n: usize, seed: u64) -> Vec<f64> {
        let dist = LogNormal::new(median_us.ln(), sigma).expect("valid lognormal");
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..n).map(|_| dist.sample(&mut rng)).collect()
    }

    #[test]
    fn block_spread_compares_the_slowest_blocks_median_with_the_fastest() {
        // Blocks of 3: medians 10, 12, 11: the slowest 20% above the fastest.
        let capped = [9.0, 10.0, 11.0, 12.0, 12.0, 50.0, 11.0, 11.0, 1.0];
        assert!((block_spread(&capped, 3).unwrap() - 0.2).abs() < 1e-12);
        // A last, short block counts with its own median.
        assert!((block_spread(&[10.0, 10.0, 15.0], 2).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(block_spread(&[5.0; 12], 4), Some(0.0));
        assert_eq!(block_spread(&[5.0; 4], 4), None, "one block says nothing");
        assert_eq!(block_spread(&[], 4), None);
        // Block levels alternating 12% apart spread without drifting (the power cap's mark).
        let alternating: Vec<f64> = (0..30).map(|i| if (i / 5) % 2 == 0 { 100.0 } else { 112.0 }).collect();
        assert!((block_spread(&alternating, 5).unwrap() - 0.12).abs() < 1e-12);
        assert_eq!(unsteady_drift(&alternating), None);
    }

    #[test]
    fn drift_compares_the_last_third_with_the_first() {
        // Thirds of 3: [9, 10, 11] against [19, 20, 21]: medians 10 and 20, +100%.
        let rising = [9.0, 10.0, 11.0, 0.0, 0.0, 0.0, 19.0, 20.0, 21.0];
        assert_eq!(drift(&rising), Some(1.0));
        // Ten samples: thirds of 3, the tenth (the middle's remainder) in neither: [40, 40, 40]
        // against [10, 10, 10], -75%.
        let falling = [40.0, 40.0, 40.0, 0.0, 0.0, 0.0, 0.0, 10.0, 10.0, 10.0];
        assert_eq!(drift(&falling), Some(-0.75));
        assert_eq!(drift(&[5.0; 12]), Some(0.0));
        assert_eq!(drift(&[5.0; 8]), None, "thirds of 2 say nothing");
        // A quiet GPU's 3% jitter stays well inside the tolerance.
        let quiet = lognormal_samples(100.0, 0.03, 100, 7);
        assert!(drift(&quiet).unwrap().abs() < DRIFT_TOLERANCE / 2.0);
        assert_eq!(unsteady_drift(&quiet), None);
        assert_eq!(unsteady_drift(&falling), Some(-0.75));
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let s = [1.0, 2.0, 3.0, 4.0];
        // numpy.quantile([1,2,3,4], [0.5, 0.1, 0.9]) = [2.5, 1.3, 3.7]
        assert_eq!(quantile(&s, 0.5), 2.5);
        assert!((quantile(&s, 0.1) - 1.3).abs() < 1e-12);
        assert!((quantile(&s, 0.9) - 3.7).abs() < 1e-12);
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
    }

    #[test]
    fn summary_of_unsorted_samples() {
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.n, s.median), (5, 3.0));
        // quartiles 2 and 4
        assert_eq!(s.iqr, 2.0);
        assert!(summarize(&[]).is_none());
    }

    /// Confidence of the intervals in these tests, as the gate's default.
    const CONF: f64 = 0.95;

    #[test]
    fn median_by_selection_equals_the_quantile() {
        for n in 1..40 {
            let mut v = lognormal_samples(10.0, 0.3, n, n as u64);
            let mut sorted = v.clone();
            sorted.sort_by(f64::total_cmp);
            assert_eq!(median_in_place(&mut v), quantile(&sorted, 0.5), "n = {n}");
        }
        assert_eq!(median_in_place(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn constant_samples_give_a_point_interval() {
        let (ours, peer) = ([5.0; 3], [7.0; 3]);
        let d = bootstrap_median_diff(&ours, &peer, 1, 1000, CONF, DEFAULT_SEED).unwrap();
        assert_eq!(d, Interval { lo: -2.0, hi: -2.0, estimate: -2.0 });
        let r = bootstrap_median_ratio(&ours, &peer, 1, 1000, CONF, DEFAULT_SEED).unwrap();
        assert_eq!(r, Interval { lo: 1.4, hi: 1.4, estimate: 1.4 });
    }

    #[test]
    fn worked_example_two_against_one() {
        // A resample of ours = [1, 3] is (1,1), (1,3), (3,1) or (3,3): its median is 1, 2 or 3
        // with probability 1/4, 1/2, 1/4. Against peer = [10] the difference is -9, -8 or -7;
        // a 95% interval cuts 2.5% from each end, inside the 25% masses at -9 and -7.
        let d = bootstrap_median_diff(&[1.0, 3.0], &[10.0], 1, DEFAULT_RESAMPLES, CONF, DEFAULT_SEED).unwrap();
        assert_eq!(d, Interval { lo: -9.0, hi: -7.0, estimate: -8.0 });
        // The speedup 10 / median is 10, 5 or 10/3 with the same masses.
        let r = bootstrap_median_ratio(&[1.0, 3.0], &[10.0], 1, DEFAULT_RESAMPLES, CONF, DEFAULT_SEED).unwrap();
        assert_eq!(r, Interval { lo: 10.0 / 3.0, hi: 10.0, estimate: 5.0 });
    }

    #[test]
    fn seeded_and_reproducible() {
        let ours = lognormal_samples(10.0, 0.1, 50, 1);
        let peer = lognormal_samples(11.0, 0.1, 50, 2);
        let a = bootstrap_median_diff(&ours, &peer, 1, 2000, CONF, 7).unwrap();
        assert_eq!(a, bootstrap_median_diff(&ours, &peer, 1, 2000, CONF, 7).unwrap());
        let b = bootstrap_median_diff(&ours, &peer, 1, 2000, CONF, 8).unwrap();
        assert_ne!((a.lo, a.hi), (b.lo, b.hi));
        assert_eq!(a.estimate, b.estimate, "the estimate does not depend on the seed");
    }

    #[test]
    fn empty_side_gives_no_interval() {
        assert!(bootstrap_median_diff(&[], &[1.0], 1, 10, CONF, 0).is_none());
        assert!(bootstrap_median_ratio(&[1.0], &[], 1, 10, CONF, 0).is_none());
    }

    #[test]
    fn interval_narrows_with_more_samples() {
        let width = |n: usize| {
            let ours = lognormal_samples(10.0, 0.1, n, 3);
            let peer = lognormal_samples(10.0, 0.1, n, 4);
            let i = bootstrap_median_diff(&ours, &peer, 1, 2000, CONF, DEFAULT_SEED).unwrap();
            i.hi - i.lo
        };
        // The width of a median's interval shrinks like 1/sqrt(n): 16× the samples, about 1/4.
        let (small, large) = (width(25), width(400));
        assert!(large < small / 2.0, "width {small} at n = 25, {large} at n = 400");
    }

    #[test]
    fn identical_sets_are_indistinguishable() {
        for seed in 0..10 {
            let s = lognormal_samples(10.0, 0.2, 100, seed);
            let d = bootstrap_median_diff(&s, &s, 1, 2000, CONF, seed).unwrap();
            assert!(d.contains(0.0) && d.estimate == 0.0, "{d:?}");
            let r = bootstrap_median_ratio(&s, &s, 1, 2000, CONF, seed).unwrap();
            assert!(r.contains(1.0) && r.estimate == 1.0, "{r:?}");
        }
    }

    #[test]
    fn interval_covers_the_true_difference_at_about_the_stated_rate() {
        // Lognormal medians are known exactly (the scale), so the true difference is 10 - 11.
        // 1000 resamples suffice for coverage and keep 200 intervals fast.
        const REPEATS: u64 = 200;
        let covered = (0..REPEATS)
            .filter(|&seed| {
                let ours = lognormal_samples(10.0, 0.2, 100, 2 * seed);
                let peer = lognormal_samples(11.0, 0.2, 100, 2 * seed + 1);
                bootstrap_median_diff(&ours, &peer, 1, 1000, CONF, seed).unwrap().contains(-1.0)
            })
            .count();
        let rate = covered as f64 / REPEATS as f64;
        println!("coverage of the true difference: {covered}/{REPEATS}");
        // The percentile bootstrap of a median under-covers slightly at n = 100; 0.9 leaves
        // room for that and for the binomial spread (±1.5% at 200 repeats).
        assert!(rate >= 0.9, "coverage {rate}");
    }

    /// A/A with a shared drift per block (as a GPU's clock state gives): 100 samples in blocks of
    /// 20, each block shifted by its own offset. Resampling single samples treats the shifts as
    /// noise that averages out and calls equal sets different; resampling blocks does not.
    #[test]
    fn block_bootstrap_keeps_block_drift_in_the_interval() {
        const BLOCK: usize = 20;
        const REPEATS: u64 = 40;
        let drifted = |seed: u64| -> Vec<f64> {
            let mut rng = SmallRng::seed_from_u64(seed);
            let base = lognormal_samples(100.0, 0.002, 5 * BLOCK, seed ^ 0xA5A5);
            let shifts: Vec<f64> = (0..5).map(|_| 1.0 + 0.006 * (rng.random::<f64>() - 0.5)).collect();
            base.iter().enumerate().map(|(i, x)| x * shifts[i / BLOCK]).collect()
        };
        let equal_rate = |block: usize| {
            (0..REPEATS)
                .filter(|&seed| {
                    let (a, b) = (drifted(2 * seed), drifted(2 * seed + 1));
                    bootstrap_median_diff(&a, &b, block, 2000, CONF, seed).unwrap().contains(0.0)
                })
                .count()
        };
        let (single, blocked) = (equal_rate(1), equal_rate(BLOCK));
        println!("equal: single samples {single}, blocks {blocked} of {REPEATS}");
        assert!(blocked > single, "blocks {blocked} vs single samples {single} of {REPEATS}");
        assert!(blocked as f64 >= 0.85 * REPEATS as f64, "blocks: equal in {blocked} of {REPEATS}");
    }

    #[test]
    fn verdict_thresholds_are_inclusive_from_below() {
        let cases = [
            (2.0, Verdict::Excellent),
            (1.5, Verdict::Excellent),
            (1.499, Verdict::Good),
            (1.1, Verdict::Good),
            (1.02, Verdict::Modest),
            (1.019, Verdict::Parity),
            (1.0, Verdict::Parity),
            (0.98, Verdict::Parity),
            (0.979, Verdict::Regression),
            (f64::NAN, Verdict::Regression),
        ];
        for (speedup, verdict) in cases {
            assert_eq!(Verdict::from_speedup(speedup), verdict, "speedup {speedup}");
        }
        assert_eq!(Verdict::Parity.name(), "parity");
    }
}
