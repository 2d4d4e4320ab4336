//! Percentiles with numpy's default estimator (`method="linear"`, Hyndman–Fan type 7):
//! for sorted `x[0..n]` and quantile `q`, `h = (n − 1)·q`, result
//! `x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋])`.

/// Linear (type 7) quantile of already-sorted data. `None` for empty input.
pub(crate) fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let h = (n - 1) as f64 * q;
    let lo = h.floor() as usize;
    let frac = h - lo as f64;
    let a = sorted[lo];
    if lo + 1 >= n || frac == 0.0 {
        return Some(a);
    }
    Some(a + frac * (sorted[lo + 1] - a))
}

/// Linear quantile of unsorted data (copies and sorts). NaNs must not be present.
pub(crate) fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut v = values.to_vec();
    sort(&mut v);
    quantile_sorted(&v, q)
}

/// Sorts f64 values in place (total order; callers never pass NaN).
pub(crate) fn sort(v: &mut [f64]) {
    v.sort_unstable_by(f64::total_cmp);
}

/// Linear quantile by selection (O(n)), reordering `buf`. Used inside bootstrap loops.
pub(crate) fn quantile_select(buf: &mut [f64], q: f64) -> Option<f64> {
    let n = buf.len();
    if n == 0 {
        return None;
    }
    let h = (n - 1) as f64 * q;
    let lo = h.floor() as usize;
    let frac = h - lo as f64;
    let (_, a, right) = buf.select_nth_unstable_by(lo, f64::total_cmp);
    let a = *a;
    if frac == 0.0 || right.is_empty() {
        return Some(a);
    }
    let b = right.iter().copied().fold(f64::INFINITY, f64::min);
    Some(a + frac * (b - a))
}

/// Arithmetic mean, `None` for empty input.
pub(crate) fn mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some(values.iter().sum::<f64>() / values.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values are numpy 2.x `np.percentile(x, 100*q)` (default method "linear"),
    // reproduced by hand: x = [1, 2, 3, 4, 10], h = 4q.
    #[test]
    fn matches_numpy_linear_by_hand() {
        let x = [1.0, 2.0, 3.0, 4.0, 10.0];
        let cases = [
            (0.9, 7.6),
            (0.375, 2.5),
            (0.625, 3.5),
            (0.25, 2.0),
            (0.0, 1.0),
            (1.0, 10.0),
            (0.99, 9.76),
        ];
        for (q, want) in cases {
            let got = quantile_sorted(&x, q).unwrap();
            assert!((got - want).abs() < 1e-12, "q={q}: got {got}, want {want}");
            let mut buf = x.to_vec();
            buf.reverse();
            let sel = quantile_select(&mut buf, q).unwrap();
            assert!(
                (sel - want).abs() < 1e-12,
                "select q={q}: got {sel}, want {want}"
            );
        }
    }

    // numpy: np.percentile(np.arange(1, 201), [50, 90, 99]) = [100.5, 180.1, 198.01]
    #[test]
    fn matches_numpy_on_1_to_200() {
        let x: Vec<f64> = (1..=200).map(f64::from).collect();
        let got: Vec<f64> = [0.5, 0.9, 0.99]
            .iter()
            .map(|&q| quantile(&x, q).unwrap())
            .collect();
        for (g, w) in got.iter().zip([100.5, 180.1, 198.01]) {
            assert!((g - w).abs() < 1e-9, "{g} vs {w}");
        }
    }

    #[test]
    fn single_value_and_empty() {
        assert_eq!(quantile_sorted(&[3.0], 0.9), Some(3.0));
        assert_eq!(quantile_sorted(&[], 0.9), None);
        assert_eq!(mean(&[]), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
    }

    #[test]
    fn quantiles_are_monotone_in_q() {
        let x: Vec<f64> = (0..97).map(|i| ((i * 37) % 101) as f64 * 1.5).collect();
        let mut s = x.clone();
        sort(&mut s);
        let mut prev = f64::NEG_INFINITY;
        for k in 0..=100 {
            let v = quantile_sorted(&s, k as f64 / 100.0).unwrap();
            assert!(v >= prev);
            prev = v;
        }
    }
}
