//! Calendar dates and day counts since 1970-01-01 (proleptic Gregorian, UTC): the arithmetic
//! behind every date this tool reads or writes, without a time-zone database.

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`);
/// the one conversion from a calendar date: the run directories' stamps
/// (`orchestrate::manifest::stamp_ms`), LMCache's log lines (`engine_log`).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Howard Hinnant's days-from-civil inverse: (year, month, day) of a day count since
/// 1970-01-01 (`report::fmt::unix_ms`).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `days_from_civil` against `date -u -d … +%s` / 86400 at dates around leap days (2000
    /// is a leap year, 1900 and 2100 are not), and the two conversions invert each other on
    /// every day from 1600 to 2400.
    #[test]
    fn days_from_civil_and_back() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2026, 12, 1), 20_788);
        assert_eq!(
            days_from_civil(1900, 3, 1) - days_from_civil(1900, 2, 28),
            1
        );
        assert_eq!(
            days_from_civil(2100, 3, 1) - days_from_civil(2100, 2, 28),
            1
        );
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        for z in days_from_civil(1600, 1, 1)..days_from_civil(2400, 1, 1) {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m.into(), d.into()), z, "{y}-{m}-{d}");
        }
    }
}
