//! The exact two-sample rank test (Wilcoxon rank-sum / Mann–Whitney) for the handful of
//! machines a tax is measured on: every split of the pooled values into groups of the observed
//! sizes is enumerated, so the p-value needs no normal approximation and holds for 3 against 4;
//! and its stratified form (the groups compared within strata, e.g. phases), enumerated the same
//! way.

/// Most splits enumerated (C(20, 10) = 184,756): beyond it the caller has more data than this
/// test is for, and gets `None`.
const MAX_SPLITS: u64 = 200_000;

/// Two-sided exact p-value of the rank-sum test of `a` against `b`: the share of all
/// C(n, |a|) ways to choose |a| of the pooled values whose rank sum lies at least as far from
/// its mean `|a| (n + 1) / 2` as `a`'s does. Ties take their mid-rank (the permutation
/// distribution is enumerated with the mid-ranks, so it stays exact). `None` when either group
/// is empty, a value is not finite, or there are more than [`MAX_SPLITS`] splits.
pub(crate) fn rank_sum_p(a: &[f64], b: &[f64]) -> Option<f64> {
    // One stratum: the stratified test's enumeration is this test's.
    stratified_rank_sum_p(&[(a.to_vec(), b.to_vec())])
}

/// Two-sided exact p-value of the stratified rank-sum test: `a` against `b` within each stratum
/// (`(a_i, b_i)`), the statistic the sum over strata of `a_i`'s rank sum among its stratum's
/// pooled values (ranked within the stratum, ties at mid-ranks). Its permutation distribution
/// shuffles values only within strata, every split of each stratum equally likely, so a
/// difference between the strata (a phase where every value sits on one side) cannot make p
/// small; it is enumerated exactly, stratum by stratum, by convolving each stratum's
/// distribution of rank sums. p is the share of the joint splits whose statistic lies at least
/// as far from its mean `Σ |a_i| (n_i + 1) / 2` as the observed one. A stratum with one side
/// empty has a single split and adds nothing. `None` when no stratum has both sides, a value is
/// not finite, or a stratum has more than [`MAX_SPLITS`] splits. With one stratum it is
/// [`rank_sum_p`], which calls it so.
pub(crate) fn stratified_rank_sum_p(strata: &[(Vec<f64>, Vec<f64>)]) -> Option<f64> {
    if strata
        .iter()
        .flat_map(|(a, b)| a.iter().chain(b))
        .any(|x| !x.is_finite())
    {
        return None;
    }
    // Rank sums are multiples of 0.5: counted by twice their value, so the sums stay exact.
    let mut dist: std::collections::BTreeMap<i64, u64> = [(0, 1)].into();
    let (mut observed, mut mean, mut informative) = (0i64, 0i64, false);
    for (a, b) in strata
        .iter()
        .filter(|(a, b)| !a.is_empty() && !b.is_empty())
    {
        let (k, n) = (a.len(), a.len() + b.len());
        if binomial(n as u64, k as u64)? > MAX_SPLITS {
            return None;
        }
        informative = true;
        let twice: Vec<i64> = mid_ranks(&a.iter().chain(b).copied().collect::<Vec<_>>())
            .iter()
            .map(|r| (2.0 * r).round() as i64)
            .collect();
        observed += twice[..k].iter().sum::<i64>();
        mean += (k * (n + 1)) as i64; // twice k (n + 1) / 2
        let mut here: std::collections::BTreeMap<i64, u64> = Default::default();
        let mut pick: Vec<usize> = (0..k).collect();
        loop {
            *here
                .entry(pick.iter().map(|&i| twice[i]).sum())
                .or_default() += 1;
            if !next_combination(&mut pick, n) {
                break;
            }
        }
        let mut next: std::collections::BTreeMap<i64, u64> = Default::default();
        for (s, c) in &dist {
            for (t, d) in &here {
                // Joint split counts past u64 (more strata than this test is for): `None`.
                let e = next.entry(s + t).or_default();
                *e = e.checked_add(c.checked_mul(*d)?)?;
            }
        }
        dist = next;
    }
    if !informative {
        return None;
    }
    let far = (observed - mean).abs();
    let total: u64 = dist.values().sum();
    let extreme: u64 = dist
        .iter()
        .filter(|(s, _)| (*s - mean).abs() >= far)
        .map(|(_, c)| c)
        .sum();
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

    /// Phase A's machines all 1st (no split to shuffle) and Phase B's 2 above 4 (the archive
    /// after the seventeenth stretch): only Phase B's C(6, 2) = 15 splits count, and of those
    /// only the observed one (ranks 5 + 6 = 11, mean 2·7/2 = 7) and its mirror (1 + 2 = 3) lie
    /// 4 from the mean: p = 2/15 (by hand), where pooling the phases gives 2/70.
    #[test]
    fn strata_with_one_side_add_nothing() {
        let a_phase = (vec![0.124, 0.140], vec![]);
        let b_phase = (vec![0.016, 0.141], vec![-0.164, -0.163, -0.095, -0.152]);
        let p = stratified_rank_sum_p(&[a_phase.clone(), b_phase.clone()]).unwrap();
        assert!((p - 2.0 / 15.0).abs() < 1e-12, "{p}");
        let pooled = rank_sum_p(
            &[0.124, 0.140, 0.016, 0.141],
            &[-0.164, -0.163, -0.095, -0.152],
        )
        .unwrap();
        assert!((pooled - 2.0 / 70.0).abs() < 1e-12, "{pooled}");
        assert_eq!(stratified_rank_sum_p(&[a_phase]), None);
        assert_eq!(stratified_rank_sum_p(&[]), None);
        assert_eq!(
            stratified_rank_sum_p(&[(vec![f64::INFINITY], vec![1.0])]),
            None
        );
    }

    /// Two informative strata, by hand. Stratum 1: a = {2} against {1}: a's rank 2; its splits
    /// give 1 or 2. Stratum 2: a = {5} against {3, 4}: a's rank 3; splits 1, 2 or 3. Observed
    /// 2 + 3 = 5, mean 1.5 + 2 = 3.5. The 2 × 3 joint splits sum to 2, 3, 4, 3, 4, 5; those
    /// ≥ 1.5 from 3.5 are 2 and 5: p = 2/6. Values in stratum 2 sit far above stratum 1's,
    /// which ranks within strata ignore (pooled, a's 2 and 5 would rank 2nd and 5th of 5).
    #[test]
    fn strata_are_ranked_apart_and_convolved() {
        let p =
            stratified_rank_sum_p(&[(vec![2.0], vec![1.0]), (vec![5.0], vec![3.0, 4.0])]).unwrap();
        assert!((p - 2.0 / 6.0).abs() < 1e-12, "{p}");
        // One stratum: the unstratified test, ties included (rank_sum_p calls the stratified
        // test, so its hand-checked values above hold for this path too).
        for (a, b) in [
            (vec![1.0, 4.0], vec![2.0, 3.0, 5.0]),
            (vec![1.0, 1.0], vec![1.0, 2.0]),
            (vec![0.12, 0.14, 0.141], vec![-0.16, -0.16, -0.09, -0.15]),
        ] {
            assert_eq!(
                stratified_rank_sum_p(&[(a.clone(), b.clone())]),
                rank_sum_p(&a, &b)
            );
        }
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
