//! How numbers are written into warnings, verdict reasons and the report (one definition for
//! the analysis, the verdicts and the report's formatter).

/// `l6, l8`: launch indices as the report names them.
pub(crate) fn launch_list(launches: &[u32]) -> String {
    launches
        .iter()
        .map(|l| format!("l{l}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `1st`, `2nd`, `3rd`, `4th` … `11th`, `12th`, `13th`, `21st`.
pub(crate) fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Whether a number written out is 0 (`0`, `0.0`, `-0.00`).
pub(crate) fn reads_as_zero(s: &str) -> bool {
    s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
}

/// `-0.0` written as `0.0`, any other text as it is.
pub(crate) fn no_neg_zero(s: String) -> String {
    if s.starts_with('-') && reads_as_zero(&s) {
        s[1..].to_owned()
    } else {
        s
    }
}

/// `x` with `dp` decimals, no `-0`.
pub(crate) fn fixed(x: f64, dp: usize) -> String {
    no_neg_zero(format!("{x:.dp$}"))
}

/// `x` with `dp` decimals, or with up to 3 more where `dp` would write a non-zero `x` as 0: a
/// CI bound of −0.000146 written as a percentage at one decimal is `-0.01`, not `0.0` or `-0.0`,
/// so a bound that puts a CI on one side of 0 never reads as touching it. No `-0`.
pub(crate) fn fixed_off_zero(x: f64, dp: usize) -> String {
    if !x.is_finite() || x == 0.0 {
        return fixed(x, dp);
    }
    (dp..=dp + 3)
        .map(|d| fixed(x, d))
        .find(|s| !reads_as_zero(s))
        .unwrap_or_else(|| fixed(x, dp))
}

/// [`fixed_off_zero`] with a sign: `+1.2`, `-0.01`, `+0.0`.
pub(crate) fn signed(x: f64, dp: usize) -> String {
    let s = fixed_off_zero(x, dp);
    if s.starts_with('-') || !x.is_finite() {
        s
    } else {
        format!("+{s}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .map(ordinal)
            .into();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
    }

    /// H6's upper CI bound on the archive, −0.0146 pp: at one decimal `-0.0`, so it gets a
    /// second and reads `-0.01`; 0 stays `0.0`; a value that needs more than 3 extra decimals
    /// is written at `dp` as 0.
    #[test]
    fn a_value_off_zero_never_prints_as_zero() {
        assert_eq!(fixed_off_zero(-0.0146, 1), "-0.01");
        assert_eq!(fixed_off_zero(0.00049, 1), "0.0005");
        assert_eq!(fixed_off_zero(1e-9, 1), "0.0");
        assert_eq!(fixed_off_zero(-1e-9, 1), "0.0");
        assert_eq!(fixed_off_zero(0.0, 1), "0.0");
        assert_eq!(fixed_off_zero(-2.94, 1), "-2.9");
        assert_eq!(fixed_off_zero(12.0, 0), "12");
        assert_eq!(signed(-0.0146, 1), "-0.01");
        assert_eq!(signed(0.0, 1), "+0.0");
        assert_eq!(signed(13.04, 1), "+13.0");
    }
}
