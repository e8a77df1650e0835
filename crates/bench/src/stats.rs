//! Summary statistics over per-iteration results: the max/min/mean/standard deviation IOR and
//! mdtest print, the coefficient of variation the series plots, and IO500's geometric mean.

use serde::Serialize;

/// Max, min, mean and standard deviation of a set of values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Summary {
    pub max: f64,
    pub min: f64,
    pub mean: f64,
    pub stddev: f64,
    pub count: usize,
}

/// Which standard deviation: IOR divides by n, mdtest by n - 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deviation {
    Population,
    Sample,
}

impl Summary {
    /// Summarises `values`; an empty set gives all zeros. A single value has deviation 0.
    pub fn of(values: &[f64], dev: Deviation) -> Summary {
        if values.is_empty() {
            return Summary::default();
        }
        let n = values.len();
        let max = values.iter().copied().fold(f64::MIN, f64::max);
        let min = values.iter().copied().fold(f64::MAX, f64::min);
        let mean = values.iter().sum::<f64>() / n as f64;
        let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
        let stddev = match (dev, n) {
            (_, 1) => 0.0,
            (Deviation::Population, _) => (ss / n as f64).sqrt(),
            (Deviation::Sample, _) => (ss / (n - 1) as f64).sqrt(),
        };
        Summary {
            max,
            min,
            mean,
            stddev,
            count: n,
        }
    }

    /// Coefficient of variation in percent (stddev / mean × 100); 0 when the mean is 0.
    pub fn cv_pct(&self) -> f64 {
        if self.mean == 0.0 {
            0.0
        } else {
            self.stddev / self.mean * 100.0
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` for an
/// empty set. Benchmarks comparing a feature on and off take it over their runs: on a
/// shared machine one run in a few is slowed by something else, and a mean carries that
/// run into the ratio.
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Geometric mean of positive values; 0 if any value is not positive or the set is empty
/// (IO500 scores an invalid phase as 0).
pub fn geometric_mean(values: &[f64]) -> f64 {
    if values.is_empty() || values.iter().any(|v| v.is_nan() || *v <= 0.0) {
        return 0.0;
    }
    let log_sum: f64 = values.iter().map(|v| v.ln()).sum();
    (log_sum / values.len() as f64).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_none() {
        assert_eq!(median([]), None);
        assert_eq!(median([3.0, 1.0, 1000.0]), Some(3.0));
        assert_eq!(median([4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn summary_math() {
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        let p = Summary::of(&v, Deviation::Population);
        assert_eq!(p.max, 9.0);
        assert_eq!(p.min, 2.0);
        assert_eq!(p.mean, 5.0);
        assert!((p.stddev - 2.0).abs() < 1e-12);
        let s = Summary::of(&v, Deviation::Sample);
        assert!((s.stddev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert!((p.cv_pct() - 40.0).abs() < 1e-9);
        assert_eq!(Summary::of(&[3.0], Deviation::Sample).stddev, 0.0);
        assert_eq!(Summary::of(&[], Deviation::Sample).count, 0);
    }

    #[test]
    fn geomean() {
        assert!((geometric_mean(&[1.0, 4.0, 16.0]) - 4.0).abs() < 1e-12);
        assert_eq!(geometric_mean(&[1.0, 0.0]), 0.0);
        assert_eq!(geometric_mean(&[]), 0.0);
    }
}
