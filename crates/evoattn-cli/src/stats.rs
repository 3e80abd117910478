//! Statistics on raw timing samples. Pure functions, computed the same way for our kernels and
//! for every peer.

/// Summary of one sample set, in the samples' unit.
#[derive(Clone, Copy, Debug, PartialEq)]
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
