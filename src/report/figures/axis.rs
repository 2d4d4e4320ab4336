//! Axes in a transformed space.
//!
//! Every chart is drawn on plain `f64` coordinates; a log axis is a linear axis over `log2(x)` or
//! `log10(x)` whose tick labels print the original value. One chart type for every figure, and
//! ticks chosen here (exact powers of two on the rate axis, 1-2-5 steps elsewhere) instead of by
//! plotters' heuristics.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

use crate::report::fmt;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scale {
    Linear,
    Log2,
    Log10,
}

/// How tick labels are written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Labels {
    /// Adaptive number (`fmt::num`).
    Number,
    /// Rate (`0.5`, `4`).
    Rate,
    /// Fraction as signed percentage (`+20%`).
    Percent,
    /// Probability 0..1 as plain decimal.
    Unit,
    /// Explicit category names, one per integer position.
    Categories,
}

#[derive(Debug, Clone)]
pub(crate) struct Axis {
    pub scale: Scale,
    /// Range in transformed space.
    pub lo: f64,
    pub hi: f64,
    /// Bold ticks (labelled), transformed space.
    pub ticks: Vec<f64>,
    /// Light grid lines, transformed space.
    pub minor: Vec<f64>,
    pub labels: Labels,
    pub categories: Vec<String>,
}

impl Axis {
    pub(crate) fn fwd(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => v,
            Scale::Log2 => v.log2(),
            Scale::Log10 => v.log10(),
        }
    }

    pub(crate) fn inv(&self, t: f64) -> f64 {
        match self.scale {
            Scale::Linear => t,
            Scale::Log2 => t.exp2(),
            Scale::Log10 => 10f64.powf(t),
        }
    }

    /// The plotters coordinate for this axis.
    pub(crate) fn coord(&self) -> AxisCoord {
        AxisCoord {
            lo: self.lo,
            hi: self.hi,
            ticks: self.ticks.clone(),
            minor: self.minor.clone(),
        }
    }

    pub(crate) fn label(&self, t: f64) -> String {
        let v = self.inv(t);
        match self.labels {
            // Round-trip through the scale can give 99.99999 for 100.
            Labels::Number => trim(round_sig(v, 6)),
            Labels::Rate => fmt::rate(round_sig(v, 6)),
            Labels::Percent => {
                let p = round_sig(v * 100.0, 6);
                if p == 0.0 {
                    "0%".to_owned()
                } else if p > 0.0 {
                    format!("+{}%", trim(p))
                } else {
                    format!("{}%", trim(p))
                }
            }
            Labels::Unit => trim(round_sig(v, 6)),
            Labels::Categories => {
                let i = t.round();
                if (t - i).abs() < 1e-6 && i >= 0.0 {
                    self.categories.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            }
        }
    }

    /// A log2 axis whose ticks are the given values (e.g. the sweep's rates), padded by a
    /// quarter octave on each side.
    pub(crate) fn log2_at(values: &[f64]) -> Axis {
        let vals: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| *v > 0.0 && v.is_finite())
            .collect();
        let (mut lo, mut hi) = min_max(vals.iter().map(|v| v.log2())).unwrap_or((-1.0, 5.0));
        if hi - lo < 1.0 {
            lo -= 0.5;
            hi += 0.5;
        }
        let mut ticks: Vec<f64> = vals.iter().map(|v| v.log2()).collect();
        ticks.sort_by(f64::total_cmp);
        ticks.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
        // Minor grid at half octaves.
        let minor = ticks.windows(2).map(|w| (w[0] + w[1]) / 2.0).collect();
        Axis {
            scale: Scale::Log2,
            lo: lo - 0.25,
            hi: hi + 0.25,
            ticks,
            minor,
            labels: Labels::Rate,
            categories: vec![],
        }
    }

    /// A log10 axis over `[lo, hi]` (data units, both > 0) with 1-2-5 ticks.
    pub(crate) fn log10(lo: f64, hi: f64) -> Axis {
        let (lo, hi) = (lo.max(1e-12), hi.max(lo * 1.0001));
        let (tlo, thi) = (lo.log10(), hi.log10());
        let pad = ((thi - tlo) * 0.04).max(0.02);
        let (tlo, thi) = (tlo - pad, thi + pad);
        let decades = thi - tlo;
        let mults: &[f64] = if decades > 4.0 {
            &[1.0]
        } else if decades > 2.2 {
            &[1.0, 3.0]
        } else if decades > 1.2 {
            &[1.0, 2.0, 5.0]
        } else {
            // Less than about a decade: label every integer multiple.
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
        };
        // Candidates in order of roundness (powers of ten first); a candidate is labelled only
        // if it is not crowded by one already kept.
        let mut cands: Vec<(usize, f64)> = Vec::new();
        let mut minor = Vec::new();
        let mut e = tlo.floor() as i32 - 1;
        while (e as f64) <= thi + 1.0 {
            let p = 10f64.powi(e);
            for m in 1..10 {
                let t = (m as f64 * p).log10();
                if t < tlo || t > thi {
                    continue;
                }
                match mults.iter().position(|x| *x == m as f64) {
                    Some(_) => cands.push((
                        [1, 5, 2, 3, 4, 6, 7, 8, 9]
                            .iter()
                            .position(|x| *x == m)
                            .unwrap_or(9),
                        t,
                    )),
                    None => minor.push(t),
                }
            }
            e += 1;
        }
        cands.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let min_gap = decades / 14.0;
        let mut ticks: Vec<f64> = Vec::new();
        for (_, t) in cands {
            if ticks.iter().all(|k| (k - t).abs() >= min_gap) {
                ticks.push(t);
            } else {
                minor.push(t);
            }
        }
        ticks.sort_by(f64::total_cmp);
        minor.sort_by(f64::total_cmp);
        Axis {
            scale: Scale::Log10,
            lo: tlo,
            hi: thi,
            ticks,
            minor,
            labels: Labels::Number,
            categories: vec![],
        }
    }

    /// A linear axis over `[lo, hi]` with about `n` 1-2-5 ticks; `include_zero` extends it to 0.
    pub(crate) fn linear(lo: f64, hi: f64, n: usize, include_zero: bool, labels: Labels) -> Axis {
        let (mut lo, mut hi) = (lo.min(hi), lo.max(hi));
        if include_zero {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        if (hi - lo).abs() < 1e-12 {
            hi = lo + 1.0;
        }
        let span = hi - lo;
        let step = nice_step(span / n.max(2) as f64);
        // Extend to the next tick when that is close, else pad by 3% of the span.
        let lo_t = (lo / step).floor() * step;
        let hi_t = (hi / step).ceil() * step;
        let lo_p = if include_zero && lo >= 0.0 {
            0.0
        } else if lo - lo_t <= 0.08 * span {
            lo_t.min(lo - span * 0.01)
        } else {
            lo - span * 0.03
        };
        let hi_p = if hi_t - hi <= 0.08 * span {
            hi_t.max(hi + span * 0.01)
        } else {
            hi + span * 0.03
        };
        let mut ticks = Vec::new();
        let mut k = (lo_p / step).ceil() as i64;
        while (k as f64) * step <= hi_p + step * 1e-9 {
            let t = k as f64 * step;
            ticks.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
            k += 1;
        }
        let minor = ticks
            .iter()
            .map(|t| t + step / 2.0)
            .filter(|t| *t < hi_p)
            .collect();
        Axis {
            scale: Scale::Linear,
            lo: lo_p,
            hi: hi_p,
            ticks,
            minor,
            labels,
            categories: vec![],
        }
    }

    /// Categories at integer positions 0..n, padded by half a slot.
    pub(crate) fn categories(names: Vec<String>) -> Axis {
        let n = names.len().max(1) as f64;
        Axis {
            scale: Scale::Linear,
            lo: -0.5,
            hi: n - 0.5,
            ticks: (0..names.len()).map(|i| i as f64).collect(),
            minor: vec![],
            labels: Labels::Categories,
            categories: names,
        }
    }
}

/// A linear plotters coordinate with exactly the ticks (bold) and grid lines (light) we chose.
#[derive(Debug, Clone)]
pub(crate) struct AxisCoord {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    minor: Vec<f64>,
}

impl Ranged for AxisCoord {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        if self.hi == self.lo {
            return (limit.0 + limit.1) / 2;
        }
        let f = (v - self.lo) / (self.hi - self.lo);
        limit.0 + ((limit.1 - limit.0) as f64 * f).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.minor.clone()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// 1, 2, 2.5, 5 × 10^k at or above `raw`.
pub(crate) fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let nm = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 2.5 {
        2.5
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    nm * p
}

fn round_sig(v: f64, sig: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let d = sig - 1 - v.abs().log10().floor() as i32;
    let f = 10f64.powi(d);
    (v * f).round() / f
}

/// Shortest decimal (up to 4 dp), no trailing zeros.
fn trim(v: f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.').to_owned();
    if s == "-0" { "0".to_owned() } else { s }
}

pub(crate) fn min_max<I: IntoIterator<Item = f64>>(it: I) -> Option<(f64, f64)> {
    it.into_iter()
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((a, b)) => Some((a.min(v), b.max(v))),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_rates() {
        let a = Axis::log2_at(&[0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]);
        assert_eq!(a.ticks.len(), 7);
        let labels: Vec<String> = a.ticks.iter().map(|t| a.label(*t)).collect();
        assert_eq!(labels, ["0.5", "1", "2", "4", "8", "16", "32"]);
    }

    #[test]
    fn log10_ticks() {
        let a = Axis::log10(80.0, 12_000.0);
        let labels: Vec<String> = a.ticks.iter().map(|t| a.label(*t)).collect();
        assert!(
            labels.contains(&"100".to_owned()) && labels.contains(&"1000".to_owned()),
            "{labels:?}"
        );
    }

    #[test]
    fn narrow_log10_range_gets_uncrowded_ticks() {
        let a = Axis::log10(850.0, 4300.0);
        let labels: Vec<String> = a.ticks.iter().map(|t| a.label(*t)).collect();
        for want in ["1000", "2000", "3000", "4000"] {
            assert!(labels.contains(&want.to_owned()), "{labels:?}");
        }
        assert!(
            !labels.contains(&"900".to_owned()),
            "900 crowds 1000: {labels:?}"
        );
        let gaps = a
            .ticks
            .windows(2)
            .map(|w| w[1] - w[0])
            .fold(f64::INFINITY, f64::min);
        assert!(gaps >= (a.hi - a.lo) / 15.0, "{labels:?}");
    }

    #[test]
    fn linear_ticks() {
        let a = Axis::linear(-0.05, 0.93, 6, true, Labels::Percent);
        assert!(a.lo <= -0.05 && a.hi >= 0.93);
        let labels: Vec<String> = a.ticks.iter().map(|t| a.label(*t)).collect();
        assert!(labels.contains(&"0%".to_owned()), "{labels:?}");
        assert!(labels.contains(&"+20%".to_owned()), "{labels:?}");
    }
}
