//! The exact two-sample rank test (Wilcoxon rank-sum / Mann–Whitney) for the handful of
//! machines a tax is measured on: every split of the pooled values into groups of the observed
//! sizes is enumerated, so the p-value needs no normal approximation and holds for 3 against 4.

/// Most splits enumerated (C(20, 10) = 184,756): beyond it the caller has more data than this
/// test is for, and gets `None`.
const MAX_SPLITS: u64 = 200_000;

/// Two-sided exact p-value of the rank-sum test of `a` against `b`: the share of all
/// C(n, |a|) ways to choose |a| of the pooled values whose rank sum lies at least as far from
/// its mean `|a| (n + 1) / 2` as `a`'s does. Ties take their mid-rank (the permutation
/// distribution is enumerated with the mid-ranks, so it stays exact). `None` when either group
/// is empty, a value is not finite, or there are more than [`MAX_SPLITS`] splits.
pub(crate) fn rank_sum_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let (k, n) = (a.len(), a.len() + b.len());
    if k == 0 || b.is_empty() || a.iter().chain(b).any(|x| !x.is_finite()) {
        return None;
    }
    if binomial(n as u64, k as u64)? > MAX_SPLITS {
        return None;
    }
    let ranks = mid_ranks(&a.iter().chain(b).copied().collect::<Vec<_>>());
    let mean = k as f64 * (n as f64 + 1.0) / 2.0;
    let observed = (ranks[..k].iter().sum::<f64>() - mean).abs();
    // Rank sums are multiples of 0.5; compare with a tolerance well below that.
    let (mut extreme, mut total) = (0u64, 0u64);
    let mut pick: Vec<usize> = (0..k).collect();
    loop {
        let s: f64 = pick.iter().map(|&i| ranks[i]).sum();
        total += 1;
        if (s - mean).abs() >= observed - 1e-9 {
            extreme += 1;
        }
        if !next_combination(&mut pick, n) {
            break;
        }
    }
    Some(extreme as f64 / total as f64)
}

/// 1-based ranks, ties sharing the mean of the ranks they span.
fn mid_ranks(x: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&i, &j| x[i].total_cmp(&x[j]));
    let mut r = vec![0.0; x.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && x[order[j + 1]] == x[order[i]] {
            j += 1;
        }
        let mid = (i + j) as f64 / 2.0 + 1.0;
        for &o in &order[i..=j] {
            r[o] = mid;
        }
        i = j + 1;
    }
    r
}

/// The next k-subset of 0..n in lexicographic order; false after the last.
fn next_combination(c: &mut [usize], n: usize) -> bool {
    let k = c.len();
    let Some(i) = (0..k).rev().find(|&i| c[i] < n - k + i) else {
        return false;
    };
    c[i] += 1;
    for j in i + 1..k {
        c[j] = c[j - 1] + 1;
    }
    true
}

fn binomial(n: u64, k: u64) -> Option<u64> {
    let k = k.min(n - k);
    (0..k).try_fold(1u64, |acc, i| acc.checked_mul(n - i).map(|x| x / (i + 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 3 values all above 4 others: of the C(7, 3) = 35 splits only the observed one and its
    /// mirror (the 3 lowest) are as far from the mean rank sum 12, so p = 2/35 (by hand).
    #[test]
    fn fully_separated_groups_give_two_of_all_splits() {
        let p = rank_sum_p(&[0.12, 0.14, 0.141], &[-0.16, -0.16, -0.09, -0.15]).unwrap();
        assert!((p - 2.0 / 35.0).abs() < 1e-12, "{p}");
    }

    /// a = {1, 4} among 1..5: rank sum 5, mean 2·6/2 = 6. The 10 splits' sums are 3, 4, 5, 6,
    /// 5, 6, 7, 7, 8, 9 (by hand); all but the two 6s lie ≥ 1 from 6, so p = 8/10.
    #[test]
    fn interleaved_groups_count_every_split_as_far_out() {
        let p = rank_sum_p(&[1.0, 4.0], &[2.0, 3.0, 5.0]).unwrap();
        assert!((p - 0.8).abs() < 1e-12, "{p}");
    }

    /// Ties: {1, 1} against {1, 2} → mid-ranks 2, 2 | 2, 4; rank sum 4, mean 5. The 6 splits
    /// sum to 4 (three ways) or 6 (three ways), each 1 from 5: p = 1 (by hand).
    #[test]
    fn ties_take_mid_ranks() {
        assert_eq!(rank_sum_p(&[1.0, 1.0], &[1.0, 2.0]), Some(1.0));
        assert_eq!(mid_ranks(&[3.0, 1.0, 3.0, 2.0]), vec![3.5, 1.0, 3.5, 2.0]);
    }

    /// One against one can never be significant: p = 2/2.
    #[test]
    fn too_few_values_and_bad_input() {
        assert_eq!(rank_sum_p(&[1.0], &[2.0]), Some(1.0));
        assert_eq!(rank_sum_p(&[], &[2.0]), None);
        assert_eq!(rank_sum_p(&[f64::NAN], &[2.0]), None);
        // C(30, 15) splits are past the limit.
        let a: Vec<f64> = (0..15).map(f64::from).collect();
        let b: Vec<f64> = (15..30).map(f64::from).collect();
        assert_eq!(rank_sum_p(&a, &b), None);
    }

    #[test]
    fn combinations_are_enumerated_once_each() {
        let mut c = vec![0, 1];
        let mut n = 1;
        while next_combination(&mut c, 5) {
            n += 1;
        }
        assert_eq!(n, 10);
        assert_eq!(binomial(20, 10), Some(184_756));
    }
}
