//! Number formatting and escaping shared by every output.
//!
//! Every number the report prints goes through here, so the same value is always written the same
//! way (fixed, locale-free formatting: part of the byte-identical-output promise).

use crate::analysis::model::Estimate;

/// Placeholder for a missing value.
pub(crate) const NA: &str = "n/a";

/// Adaptive fixed-point formatting: about three significant digits, never scientific notation
/// for the magnitudes a report holds (µs to hours). `-0` prints as `0`.
pub(crate) fn num(x: f64) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            NA.to_owned()
        } else if x > 0.0 {
            "inf".to_owned()
        } else {
            "-inf".to_owned()
        };
    }
    fixed(x, dp_for(x.abs()))
}

/// Decimals that give about three significant digits at magnitude `a`.
fn dp_for(a: f64) -> usize {
    if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else if a >= 0.1 {
        3
    } else if a >= 0.01 {
        4
    } else if a == 0.0 || !a.is_finite() {
        0
    } else {
        ((-a.log10()).ceil() as usize + 2).min(9)
    }
}

/// Fixed decimals, with `-0.0` printed as `0.0`.
pub(crate) fn fixed(x: f64, dp: usize) -> String {
    if !x.is_finite() {
        return num(x);
    }
    words::fixed(x, dp)
}

/// A rate in req/s: `0.5`, `4`, `12.5`.
pub(crate) fn rate(r: f64) -> String {
    if !r.is_finite() {
        return num(r);
    }
    let s = format!("{r:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.').to_owned();
    words::no_neg_zero(s)
}

/// A fraction as a signed percentage: `0.123` → `+12.3%`.
pub(crate) fn pct(frac: f64) -> String {
    if !frac.is_finite() {
        return num(frac);
    }
    let p = frac * 100.0;
    let body = fixed_off_zero(p, if p.abs() >= 100.0 { 0 } else { 1 });
    if body.starts_with('-') || reads_as_zero(&body) {
        format!("{body}%")
    } else {
        format!("+{body}%")
    }
}

pub(crate) use crate::analysis::words::ordinal;
use crate::analysis::words::{self, fixed_off_zero, reads_as_zero};

/// A fraction as an unsigned percentage (shares, ratios of throughput): `0.95` → `95.0%`.
pub(crate) fn share(frac: f64) -> String {
    if !frac.is_finite() {
        return num(frac);
    }
    format!("{}%", fixed(frac * 100.0, 1))
}

/// Fraction points as percentage points: `-0.07` → `-7.0 pp`.
fn pp(frac: f64) -> String {
    if !frac.is_finite() {
        return num(frac);
    }
    let body = fixed_off_zero(frac * 100.0, 1);
    if body.starts_with('-') || reads_as_zero(&body) {
        format!("{body} pp")
    } else {
        format!("+{body} pp")
    }
}

/// How a value of a given unit is written. Units are those of the model: `fraction`, `pp`,
/// `ratio`, `hours`, `count`, `us`, `ms`, `rps`; anything else is printed as a number + unit.
pub(crate) fn with_unit(x: f64, unit: &str) -> String {
    match unit {
        "fraction" => pct(x),
        "pp" => pp(x),
        "ratio" => {
            if x.abs() < 10.0 {
                fixed(x, 2)
            } else {
                num(x)
            }
        }
        "hours" => format!("{} h", num(x)),
        "count" => {
            if x.fract() == 0.0 && x.abs() < 1e15 {
                format!("{}", x as i64)
            } else {
                num(x)
            }
        }
        "us" => format!("{} µs", num(x)),
        "ms" => format!("{} ms", num(x)),
        "rps" => format!("{} req/s", rate(x)),
        "" => num(x),
        other => format!("{} {other}", num(x)),
    }
}

/// `12.3 [10.1, 14.6] ms`, `+12.3% [+10.1%, +16.0%]`, `-7.0 [-9.0, -5.0] pp`: the estimate and
/// both CI bounds share one number of decimals (set by the largest magnitude of the three); the
/// bracket is left out when there is no CI.
pub(crate) fn estimate(e: &Estimate, unit: &str) -> String {
    let vals = [Some(e.est), e.lo, e.hi];
    let (scale, signed) = match unit {
        "fraction" | "pp" => (100.0, true),
        _ => (1.0, false),
    };
    let m = vals
        .iter()
        .flatten()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max((v * scale).abs()));
    let dp = match unit {
        "fraction" | "pp" => {
            if m >= 99.95 {
                0
            } else {
                1
            }
        }
        "ratio" if m < 10.0 => 2,
        "count" => 0,
        _ => dp_for(m),
    };
    let one = |v: f64| -> String {
        if !v.is_finite() {
            return num(v);
        }
        let s = fixed_off_zero(v * scale, dp);
        let s = if signed && !s.starts_with('-') && reads_as_zero(&s) {
            s
        } else if signed && !s.starts_with('-') {
            format!("+{s}")
        } else {
            s
        };
        if unit == "fraction" {
            format!("{s}%")
        } else {
            s
        }
    };
    let ci = match (e.lo, e.hi) {
        (Some(lo), Some(hi)) => Some(format!("[{}, {}]", one(lo), one(hi))),
        (Some(lo), None) => Some(format!("[{}, ?]", one(lo))),
        (None, Some(hi)) => Some(format!("[?, {}]", one(hi))),
        (None, None) => None,
    };
    let suffix = match unit {
        "fraction" | "ratio" | "count" | "" => String::new(),
        "pp" => " pp".to_owned(),
        "hours" => " h".to_owned(),
        "us" => " µs".to_owned(),
        "ms" => " ms".to_owned(),
        "rps" => " req/s".to_owned(),
        other => format!(" {other}"),
    };
    match ci {
        Some(ci) => format!("{} {ci}{suffix}", one(e.est)),
        None => format!("{}{suffix}", one(e.est)),
    }
}

/// A fraction as a whole percentage, for thresholds: `0.95` → `95%`.
pub(crate) fn whole_pct(frac: f64) -> String {
    format!("{:.0}%", frac * 100.0)
}

/// Request shapes for captions and headings: `input 4096, output 256` for one shape,
/// `input/output 512/64, 4096/256` for several (sorted, duplicates dropped).
pub(crate) fn shapes(shapes: &[(u32, u32)]) -> String {
    let mut v = shapes.to_vec();
    v.sort_unstable();
    v.dedup();
    match v.as_slice() {
        [] => "no measured shape".to_owned(),
        [(i, o)] => format!("input {i}, output {o}"),
        many => format!(
            "input/output {}",
            many.iter()
                .map(|(i, o)| format!("{i}/{o}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// How many launches a tax rests on: `1 launch on 1 machine`, `6 launches on 5 machines`.
pub(crate) fn launches_on(launches: usize, machines: usize) -> String {
    let s = |n: usize| if n == 1 { "" } else { "s" };
    format!(
        "{launches} launch{} on {machines} machine{}",
        if launches == 1 { "" } else { "es" },
        s(machines)
    )
}

/// Optional estimate; `n/a` when absent.
pub fn opt_estimate(e: Option<&Estimate>, unit: &str) -> String {
    e.map_or_else(|| NA.to_owned(), |e| estimate(e, unit))
}

/// Optional number with a unit; `n/a` when absent.
pub(crate) fn opt(x: Option<f64>, unit: &str) -> String {
    x.map_or_else(|| NA.to_owned(), |x| with_unit(x, unit))
}

/// Milliseconds since the Unix epoch → `YYYY-MM-DD HH:MM:SS UTC` (no time-zone database, no
/// "now": pure arithmetic on the stored value).
pub fn unix_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = crate::ingest::civil::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// True for a character no reader should receive raw: C0 controls except tab and newline
/// (ESC, BEL, CR, …), DEL, and the C1 controls.
fn is_hidden_control(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// `\u{1b}` for ESC: the visible text a hidden control character is shown as.
fn visible(c: char) -> String {
    format!("\\u{{{:x}}}", c as u32)
}

/// Shows every hidden control character (see [`is_hidden_control`]) as visible `\u{..}`
/// text. Applied to each finished output document (HTML, Markdown, SVG): the templates never
/// contain such characters, so any that remain came from data, and a terminal escape or a bell
/// in a config name reaches no reader raw.
pub(crate) fn visible_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(is_hidden_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_hidden_control(c) {
            out.push_str(&visible(c));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Escapes a data string for Markdown text (table cells included). `<`, `>` and `&` become
/// entities (no raw HTML or entity can be injected); characters that start emphasis, code, links,
/// strikethrough or break a table (`\` `` ` `` `*` `[` `]` `|` `~`) are backslash-escaped, `_`
/// only where it could delimit emphasis (not inside `mooncake_both`); a leading `#`, `+`, `-`,
/// `=` or `1.` cannot start a block; line breaks and tabs become spaces; other control
/// characters are shown as visible `\u{..}` text.
pub fn md(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 8);
    let first = chars.iter().position(|c| !c.is_whitespace()).unwrap_or(0);
    for (i, &c) in chars.iter().enumerate() {
        let alnum = |k: Option<&char>| k.is_some_and(|c| c.is_alphanumeric());
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' | '\t' => out.push(' '),
            '\\' | '`' | '*' | '[' | ']' | '|' | '~' => {
                out.push('\\');
                out.push(c);
            }
            '_' if !(i > 0 && alnum(chars.get(i - 1)) && alnum(chars.get(i + 1))) => {
                out.push_str("\\_")
            }
            '#' | '+' | '-' | '=' if i == first => {
                out.push('\\');
                out.push(c);
            }
            '.' | ')'
                if i > first
                    && chars[first..i].iter().all(|d| d.is_ascii_digit())
                    && chars.get(i + 1).is_none_or(|n| n.is_whitespace()) =>
            {
                out.push('\\');
                out.push(c);
            }
            c if is_hidden_control(c) => out.push_str(&visible(c)),
            c => out.push(c),
        }
    }
    out
}

/// A fenced Markdown code block that data cannot break out of: the fence is longer than any
/// backtick run in the content.
pub(crate) fn md_code_block(content: &str, lang: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in content.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let body = content.trim_end_matches('\n');
    format!("{fence}{lang}\n{body}\n{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(num(1234.56), "1235");
        assert_eq!(num(12.345), "12.3");
        assert_eq!(num(1.2345), "1.23");
        assert_eq!(num(0.12345), "0.123");
        assert_eq!(num(0.0012345), "0.00123");
        assert_eq!(num(-0.0), "0");
        assert_eq!(num(-0.0001), "-0.000100");
        assert_eq!(num(f64::NAN), "n/a");
        assert_eq!(rate(0.5), "0.5");
        assert_eq!(rate(4.0), "4");
        assert_eq!(pct(0.123), "+12.3%");
        assert_eq!(pct(-0.05), "-5.0%");
        // A value off 0 never prints as 0 (analysis::words::fixed_off_zero): −0.01%, not 0.0%.
        assert_eq!(pct(-0.0001), "-0.01%");
        assert_eq!(pct(-0.0), "0.0%");
        assert_eq!(pct(1.5), "+150%");
        assert_eq!(pp(-0.07), "-7.0 pp");
        assert_eq!(share(0.95), "95.0%");
    }

    #[test]
    fn estimates() {
        let e = Estimate {
            est: 12.34,
            lo: Some(10.1),
            hi: Some(14.6),
        };
        assert_eq!(estimate(&e, "ms"), "12.3 [10.1, 14.6] ms");
        assert_eq!(estimate(&e, ""), "12.3 [10.1, 14.6]");
        let f = Estimate {
            est: 0.123,
            lo: Some(0.101),
            hi: Some(0.146),
        };
        assert_eq!(estimate(&f, "fraction"), "+12.3% [+10.1%, +14.6%]");
        let p = Estimate {
            est: -0.07,
            lo: Some(-0.09),
            hi: Some(-0.05),
        };
        assert_eq!(estimate(&p, "pp"), "-7.0 [-9.0, -5.0] pp");
        let n = Estimate {
            est: 4.8,
            lo: None,
            hi: None,
        };
        assert_eq!(estimate(&n, "hours"), "4.80 h");
        let u = Estimate {
            est: 60.2,
            lo: Some(0.174),
            hi: Some(120.4),
        };
        // The lower bound 0.174 µs excludes 0, so it is not written as 0.
        assert_eq!(estimate(&u, "us"), "60 [0.2, 120] µs");
        let r = Estimate {
            est: 0.0222,
            lo: Some(-0.0978),
            hi: Some(0.152),
        };
        assert_eq!(estimate(&r, "ratio"), "0.02 [-0.10, 0.15]");
        let big = Estimate {
            est: 0.92,
            lo: Some(0.813),
            hi: Some(1.03),
        };
        assert_eq!(estimate(&big, "fraction"), "+92% [+81%, +103%]");
    }

    #[test]
    fn dates() {
        assert_eq!(unix_ms(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(unix_ms(1_764_428_400_000), "2025-11-29 15:00:00 UTC");
        assert_eq!(unix_ms(951_782_400_000), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn markdown_escape() {
        let s = md("<script>alert(1)</script>&\"x|y*_`");
        assert!(!s.contains('<') && !s.contains('>'));
        assert!(s.contains("\\|") && s.contains("\\*") && s.contains("\\_") && s.contains("\\`"));
        assert_eq!(md("a\nb"), "a b");
        assert_eq!(md("mooncake_both"), "mooncake_both");
        assert_eq!(md("_x_ and tax_"), "\\_x\\_ and tax\\_");
        assert_eq!(md("+45% [+28%, +61%]"), "\\+45% \\[+28%, +61%\\]");
        assert_eq!(md("12. item"), "12\\. item");
        assert_eq!(md("# head"), "\\# head");
        assert_eq!(md("0.02 [-0.10, 0.15]"), "0.02 \\[-0.10, 0.15\\]");
        let b = md_code_block("x ``` y", "");
        assert!(b.starts_with("````\n"));
    }

    #[test]
    fn control_characters_become_visible_text() {
        assert_eq!(
            visible_controls("a\u{1b}[31mb\u{7}\tc\nd\r\u{7f}\u{9b}"),
            "a\\u{1b}[31mb\\u{7}\tc\nd\\u{d}\\u{7f}\\u{9b}"
        );
        assert!(matches!(
            visible_controls("plain text\n"),
            std::borrow::Cow::Borrowed(_)
        ));
        // Markdown cells: tab and newline are spaces; ESC is text, then `[` is escaped.
        assert_eq!(md("x\u{1b}[1my\tz"), "x\\u{1b}\\[1my z");
    }

    #[test]
    fn shapes_and_thresholds() {
        assert_eq!(
            shapes(&[(4096, 256), (4096, 256)]),
            "input 4096, output 256"
        );
        assert_eq!(
            shapes(&[(4096, 256), (512, 64)]),
            "input/output 512/64, 4096/256"
        );
        assert_eq!(launches_on(1, 1), "1 launch on 1 machine");
        assert_eq!(launches_on(6, 5), "6 launches on 5 machines");
        assert_eq!(whole_pct(0.95), "95%");
        assert_eq!(whole_pct(0.10), "10%");
    }
}
