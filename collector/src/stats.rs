//! The few statistics the collector itself reports (cell health). Analysis lives elsewhere.

/// Linear-interpolation quantile (numpy's default, Hyndman–Fan type 7) of sorted data.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// p50, p99, max of unsorted data (sorts in place). Zeros when empty.
pub fn p50_p99_max(v: &mut [f64]) -> (f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    v.sort_by(f64::total_cmp);
    (
        quantile_sorted(v, 0.5),
        quantile_sorted(v, 0.99),
        v[v.len() - 1],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_numpy_linear() {
        let d = [1.0, 2.0, 3.0, 4.0, 10.0];
        assert!((quantile_sorted(&d, 0.9) - 7.6).abs() < 1e-12);
        assert!((quantile_sorted(&d, 0.375) - 2.5).abs() < 1e-12);
        assert_eq!(quantile_sorted(&d, 0.25), 2.0);
        let mut v = vec![10.0, 1.0, 4.0, 3.0, 2.0];
        assert_eq!(p50_p99_max(&mut v), (3.0, 4.0 + 0.96 * 6.0, 10.0));
    }
}
