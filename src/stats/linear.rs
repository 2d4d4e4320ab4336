//! Ordinary least squares for the small dummy-coded designs of the machine-effect test
//! (`analysis::machines`): the residual sum of squares and the rank, with rank-deficient
//! designs (every config and every machine coded, or machines that no config links) handled by
//! dropping the columns that add nothing.

/// The dummy-coded design of `keys` = (first factor, second factor) per row: one 0/1 column per
/// level of the first factor, then (with `second`) one per level of the second, levels in
/// sorted order. Every level is coded, so the design is rank-deficient by the number of
/// connected groups; [`least_squares_rss`] handles that.
pub(crate) fn two_way_dummies(keys: &[(&str, &str)], second: bool) -> Vec<Vec<f64>> {
    let firsts = sorted_levels(keys.iter().map(|k| k.0));
    let seconds = sorted_levels(keys.iter().map(|k| k.1));
    keys.iter()
        .map(|(a, b)| {
            let row = firsts.iter().map(|x| f64::from(u8::from(x == a)));
            if second {
                row.chain(seconds.iter().map(|x| f64::from(u8::from(x == b))))
                    .collect()
            } else {
                row.collect()
            }
        })
        .collect()
}

/// The distinct values of `it`, sorted.
fn sorted_levels<'a>(it: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut v: Vec<&str> = it.collect();
    v.sort();
    v.dedup();
    v
}

/// Residual sum of squares of `y` on the columns of `x` (`x[i]` is row i) and the rank of `x`.
///
/// Gram–Schmidt with re-orthogonalisation: each column is orthogonalised twice against the
/// columns kept so far and kept when its remaining norm is above `1e-9` of its own (a column
/// the others span adds nothing); the residual is `y` minus its projections. For the designs
/// here (tens of rows, dummies in {0, 1}) that is exact to rounding.
pub(crate) fn least_squares_rss(x: &[Vec<f64>], y: &[f64]) -> (f64, usize) {
    let (r, rank) = least_squares_residual(x, y);
    (dot(&r, &r), rank)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(u, v)| u * v).sum::<f64>()
}

/// One added column's coefficient in `y ~ x + f`: its estimate, standard error and the
/// residual degrees of freedom (n − rank(x) − 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct AddedColumn {
    pub beta: f64,
    pub se: f64,
    pub df: usize,
}

/// The coefficient of the column `f` added to the design `x` (rows of `x`, one value of `f`
/// per row), by Frisch–Waugh–Lovell: `f` and `y` are each replaced by their residuals on `x`,
/// `β = (r_f·r_y)/(r_f·r_f)`, the residual sum of squares of the full model is
/// `r_y·r_y − β² r_f·r_f`, and `se = √(RSS / df / r_f·r_f)` — the same numbers ordinary least
/// squares on `[x, f]` gives. `None` when `x` spans `f` (nothing within `x`'s groups tells
/// `f` apart) or no degree of freedom is left.
pub(crate) fn added_column(x: &[Vec<f64>], f: &[f64], y: &[f64]) -> Option<AddedColumn> {
    let (rf, rank) = least_squares_residual(x, f);
    let (ry, _) = least_squares_residual(x, y);
    let ff = dot(&rf, &rf);
    if ff <= 1e-9 * dot(f, f).max(f64::MIN_POSITIVE) {
        return None;
    }
    let df = y.len().checked_sub(rank + 1).filter(|d| *d > 0)?;
    let beta = dot(&rf, &ry) / ff;
    let rss = (dot(&ry, &ry) - beta * beta * ff).max(0.0);
    Some(AddedColumn {
        beta,
        se: (rss / df as f64 / ff).sqrt(),
        df,
    })
}

/// The residual of `y` on the columns of `x` and the rank of `x` (see [`least_squares_rss`]).
pub(crate) fn least_squares_residual(x: &[Vec<f64>], y: &[f64]) -> (Vec<f64>, usize) {
    let p = x.first().map_or(0, Vec::len);
    let mut basis: Vec<Vec<f64>> = Vec::new();
    for j in 0..p {
        let mut col: Vec<f64> = x.iter().map(|row| row[j]).collect();
        let norm0 = dot(&col, &col).sqrt();
        if norm0 == 0.0 {
            continue;
        }
        for _ in 0..2 {
            for q in &basis {
                let c = dot(q, &col);
                col.iter_mut().zip(q).for_each(|(v, qv)| *v -= c * qv);
            }
        }
        let norm = dot(&col, &col).sqrt();
        if norm > 1e-9 * norm0 {
            col.iter_mut().for_each(|v| *v /= norm);
            basis.push(col);
        }
    }
    let mut r = y.to_vec();
    for _ in 0..2 {
        for q in &basis {
            let c = dot(q, &r);
            r.iter_mut().zip(q).for_each(|(v, qv)| *v -= c * qv);
        }
    }
    (r, basis.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unbalanced two-way layout (configs a, b, c; machines m1, m2, m3; 9 launches). The
    /// expected values are numpy's: `np.linalg.lstsq(X, y)` residuals squared and summed, and
    /// the rank it reports, for X = config dummies (rank 3) and X = config + machine dummies,
    /// all six coded (rank 5: one column is the sum of others).
    #[test]
    fn rss_and_rank_match_numpy_lstsq() {
        let rows = [
            ("a", "m1", 0.10),
            ("a", "m1", 0.12),
            ("b", "m1", 0.31),
            ("a", "m2", -0.05),
            ("b", "m2", 0.16),
            ("c", "m2", 0.40),
            ("c", "m3", 0.62),
            ("b", "m3", 0.41),
            ("b", "m3", 0.37),
        ];
        let y: Vec<f64> = rows.iter().map(|r| r.2).collect();
        let keys: Vec<(&str, &str)> = rows.iter().map(|r| (r.0, r.1)).collect();
        let dummies = |with_machines: bool| two_way_dummies(&keys, with_machines);
        // Every level coded: 3 config columns, then 3 machine columns.
        assert_eq!(dummies(true)[0], vec![1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
        assert_eq!(dummies(false)[5], vec![0.0, 0.0, 1.0]);
        let (rss1, rank1) = least_squares_rss(&dummies(false), &y);
        assert_eq!(rank1, 3);
        assert!((rss1 - 0.077_541_666_666_666_66).abs() < 1e-12, "{rss1}");
        let (rss2, rank2) = least_squares_rss(&dummies(true), &y);
        assert_eq!(rank2, 5);
        assert!((rss2 - 0.001_08).abs() < 1e-12, "{rss2}");
    }

    /// The first-launch column of `analysis::first_launch` added to config + machine dummies
    /// (every level coded, rank 5). Expected from numpy: `np.linalg.lstsq` on `[X, f]` gives the
    /// coefficient of f 0.19625, rank 6, so df 9 − 6 = 3, residual sum of squares 0.0018375, and
    /// the standard error √(s² · pinv(XᵀX)[f, f]) = 0.019565594803123130.
    #[test]
    fn an_added_column_matches_numpy_lstsq() {
        let rows = [
            ("plain", "m1", 1.0, 0.27),
            ("x", "m1", 0.0, 0.12),
            ("plain", "m1", 0.0, 0.05),
            ("plain", "m2", 1.0, 0.41),
            ("x", "m2", 0.0, 0.25),
            ("y", "m2", 0.0, 0.33),
            ("x", "m3", 1.0, 0.52),
            ("plain", "m3", 0.0, 0.30),
            ("y", "m3", 0.0, 0.47),
        ];
        let keys: Vec<(&str, &str)> = rows.iter().map(|r| (r.0, r.1)).collect();
        let f: Vec<f64> = rows.iter().map(|r| r.2).collect();
        let y: Vec<f64> = rows.iter().map(|r| r.3).collect();
        let x = two_way_dummies(&keys, true);
        let a = added_column(&x, &f, &y).expect("f varies within machines");
        assert_eq!(a.df, 3);
        assert!((a.beta - 0.196_25).abs() < 1e-12, "{a:?}");
        assert!((a.se - 0.019_565_594_803_123_13).abs() < 1e-12, "{a:?}");
        // The same model's RSS through least_squares_rss on [x, f].
        let xf: Vec<Vec<f64>> = x
            .iter()
            .zip(&f)
            .map(|(r, v)| r.iter().copied().chain([*v]).collect())
            .collect();
        let (rss, rank) = least_squares_rss(&xf, &y);
        assert_eq!(rank, 6);
        assert!((rss - 0.001_837_5).abs() < 1e-12, "{rss}");
        // A column the machines span (every launch of m1 first, none elsewhere): no estimate.
        let by_machine: Vec<f64> = rows
            .iter()
            .map(|r| f64::from(u8::from(r.1 == "m1")))
            .collect();
        assert_eq!(added_column(&x, &by_machine, &y), None);
    }

    #[test]
    fn an_exact_fit_and_an_empty_design() {
        // y = 2 + 3t exactly: rank 2, no residual.
        let x: Vec<Vec<f64>> = (0..5).map(|t| vec![1.0, f64::from(t)]).collect();
        let y: Vec<f64> = (0..5).map(|t| 2.0 + 3.0 * f64::from(t)).collect();
        let (rss, rank) = least_squares_rss(&x, &y);
        assert_eq!(rank, 2);
        assert!(rss < 1e-20, "{rss}");
        // No columns: the residual is y itself.
        let (rss, rank) = least_squares_rss(&[vec![], vec![]], &[3.0, 4.0]);
        assert_eq!((rss, rank), (25.0, 0));
    }
}
