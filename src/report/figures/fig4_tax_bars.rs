//! Figure 4: substrate tax (TTFT p90 and TPOT p90 vs plain) per non-plain config at ref_safe
//! (pure tax) and ref_load (tax + non-linear queueing), with CIs. The two metrics sit side by
//! side and the figure is as tall as its bars: one bar per config when the two reference rates
//! coincide (the same cell), two otherwise.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, Labels, min_max};
use super::style::{self, Area};
use super::{Ctx, Drawing, Spec};
use crate::analysis::model::{Tax, TaxContext, TaxValue};
use crate::report::fmt;
use crate::verdicts::hypotheses::H1_MIN_TAX;

pub(super) const SPEC: Spec = Spec {
    number: 4,
    slug: "fig4_tax_bars",
    title: "Figure 4. Substrate tax at ref_safe and ref_load",
};

/// Height of the one-line legend under the title.
const LEGEND_H: u32 = 30;
/// Pixels per config row: one bar, or a pair of bars.
const ROW_ONE: u32 = 28;
const ROW_TWO: u32 = 40;
/// Room above the first row for the threshold's label.
const HEADROOM: u32 = 18;
/// The x axis (ticks and its description) and chart margins below the rows.
const AXIS_H: u32 = 58;
/// Blank space left of the second panel.
const PANEL_GAP: u32 = 40;

type Metric = fn(&Tax) -> Option<&TaxValue>;

/// A set of bars: which reference rate, its legend text, drawn light (ref_load) or solid.
struct Context {
    context: TaxContext,
    legend: String,
    light: bool,
}

/// The reference rates to draw: one context when ref_safe and ref_load are the same rate (the
/// same Phase A cell, hence the same tax), else each that exists.
fn contexts(ctx: &Ctx<'_>) -> Vec<Context> {
    match (ctx.ref_safe(), ctx.ref_load()) {
        (Some(a), Some(b)) if (a - b).abs() < 1e-9 => vec![Context {
            context: TaxContext::RefSafe,
            legend: format!("at ref_safe = ref_load = {} req/s", fmt::rate(a)),
            light: false,
        }],
        (a, b) => {
            let mut v = Vec::new();
            if let Some(a) = a {
                v.push(Context {
                    context: TaxContext::RefSafe,
                    legend: format!("at ref_safe = {} req/s", fmt::rate(a)),
                    light: false,
                });
            }
            if let Some(b) = b {
                v.push(Context {
                    context: TaxContext::RefLoad,
                    legend: format!("at ref_load = {} req/s", fmt::rate(b)),
                    light: true,
                });
            }
            v
        }
    }
}

pub(super) fn caption(ctx: &Ctx<'_>) -> String {
    let rs = ctx.ref_safe().map_or_else(|| "n/a".to_owned(), fmt::rate);
    let rl = ctx.ref_load().map_or_else(|| "n/a".to_owned(), fmt::rate);
    let mut once: Vec<&str> = ctx
        .r
        .summary
        .taxes
        .iter()
        .filter(|t| t.context == crate::analysis::model::TaxContext::RefSafe)
        .filter(|t| t.paired_launches.len() == 1)
        .map(|t| t.config.as_str())
        .collect();
    once.sort_by_key(|c| crate::report::config_rank(c));
    let once = if once.is_empty() {
        String::new()
    } else {
        format!(
            " Compared with plain through one launch (whiskers carry the launch noise of the other \
             launches): {}.",
            once.join(", ")
        )
    };
    let h1 = format!(
        "Dashed line: H1's +{} threshold.{once}",
        fmt::whole_pct(H1_MIN_TAX)
    );
    if contexts(ctx).len() == 1 && ctx.ref_safe().is_some() && ctx.ref_load().is_some() {
        return format!(
            "Tax = p90(config) / p90(plain) - 1 on the same machine in the Phase A cell at ref_safe = \
             ref_load = {rs} req/s \
             (one bar per config: at this rate the pure per-step tax and the queueing-amplified tax \
             are the same cell), with 95% bootstrap CIs. {h1}"
        );
    }
    format!(
        "Tax = p90(config) / p90(plain) - 1 on the same machine in the Phase A cell at ref_safe = {rs} \
         req/s (solid: the pure \
         per-step tax, no queueing) and at ref_load = {rl} req/s (light: tax plus the non-linear queueing \
         amplification near saturation), with 95% bootstrap CIs. The gap between the two bars of a config \
         is the amplification. {h1}"
    )
}

pub(super) fn draw(ctx: &Ctx<'_>) -> anyhow::Result<Drawing> {
    let sets = contexts(ctx);
    let configs: Vec<String> = ctx
        .non_plain()
        .into_iter()
        .filter(|c| sets.iter().any(|s| ctx.tax(c, s.context).is_some()))
        .collect();
    if configs.is_empty() {
        return Ok(Drawing::Dropped(
            "No tax at ref_safe or ref_load was computed (plain or every other config is missing)."
                .to_owned(),
        ));
    }
    let row_h = if sets.len() > 1 { ROW_TWO } else { ROW_ONE };
    let panel_h = configs.len() as u32 * row_h + HEADROOM + AXIS_H;
    let svg = style::figure(SPEC.title, LEGEND_H + panel_h, |root, body| {
        legend(root, &sets)?;
        let (_, panels) = body.split_vertically(LEGEND_H);
        // Names once, on the left; the two panels share the rows.
        let half = (style::WIDTH - style::NAMES_W) / 2;
        let (left, right) = panels.split_horizontally(style::NAMES_W + half);
        let p = Panels {
            ctx,
            configs: &configs,
            sets: &sets,
            row_h,
        };
        p.draw(
            root,
            &left,
            |t| t.ttft_p90.as_ref(),
            "TTFT p90 tax vs plain (%)",
            Some(H1_MIN_TAX),
            true,
        )?;
        p.draw(
            root,
            &right,
            |t| t.tpot_p90.as_ref(),
            "TPOT p90 tax vs plain (%)",
            None,
            false,
        )?;
        Ok(())
    })?;
    Ok(Drawing::Svg(svg))
}

/// The one-line legend: a swatch per reference rate, then how to read colours and whiskers.
fn legend(root: &Area<'_>, sets: &[Context]) -> anyhow::Result<()> {
    let ly = style::BODY_TOP + 14;
    let mut lx = style::NAMES_W as i32 + 10;
    for s in sets {
        let swatch = [(lx, ly - 7), (lx + 22, ly + 7)];
        let fill = if s.light {
            style::tint(style::INK, 0.6)
        } else {
            style::INK
        };
        root.draw(&Rectangle::new(swatch, fill.filled()))
            .map_err(style::err)?;
        if s.light {
            root.draw(&Rectangle::new(
                swatch,
                ShapeStyle::from(&style::INK).stroke_width(1),
            ))
            .map_err(style::err)?;
        }
        style::TICK.draw(root, &s.legend, (lx + 30, ly))?;
        lx += 30 + style::TICK.width(&s.legend) + 36;
    }
    style::NOTE.draw(root, "(bar colour = config; whiskers: 95% CI)", (lx, ly))
}

/// What the two panels share.
struct Panels<'a> {
    ctx: &'a Ctx<'a>,
    configs: &'a [String],
    sets: &'a [Context],
    row_h: u32,
}

impl Panels<'_> {
    /// Bars of `metric` for every config and reference rate on `area`; config names on the
    /// y axis when `names`.
    fn draw(
        &self,
        root: &Area<'_>,
        area: &Area<'_>,
        metric: Metric,
        x_desc: &str,
        threshold: Option<f64>,
        names: bool,
    ) -> anyhow::Result<()> {
        let ctx = self.ctx;
        let values = |k: TaxContext| -> Vec<f64> {
            self.configs
                .iter()
                .filter_map(|c| ctx.tax(c, k).and_then(metric))
                .flat_map(|v| [Some(v.value.est), v.value.lo, v.value.hi])
                .flatten()
                .filter(|v| v.is_finite())
                .collect()
        };
        // A saturated config at ref_load can be 10-100x taxed; keep the scale readable for the
        // rest and draw such bars broken at the edge, value printed.
        let safe_max = values(TaxContext::RefSafe)
            .into_iter()
            .map(f64::abs)
            .fold(0.05, f64::max);
        let cap = (safe_max * 3.0).max(0.3);
        let all: Vec<f64> = self.sets.iter().flat_map(|s| values(s.context)).collect();
        let (lo, hi) = min_max(
            all.iter()
                .copied()
                .filter(|v| v.abs() <= cap)
                .chain(threshold),
        )
        .unwrap_or((0.0, 0.1));
        // Room on the right for value labels.
        let span = (hi - lo).max(0.01);
        let x = Axis::linear(lo, hi + span * 0.3, 5, true, Labels::Percent);
        // Rows top to bottom in canonical order, with headroom for the threshold label.
        let n = self.configs.len();
        let labels: Vec<String> = if names {
            self.configs
                .iter()
                .rev()
                .map(|c| style::clip(c, 24))
                .collect()
        } else {
            vec![String::new(); n]
        };
        let mut y = Axis::categories(labels);
        y.hi += HEADROOM as f64 / self.row_h as f64;
        // Without names, a blank label column keeps the two panels' tick labels apart.
        let name_w = if names { style::NAMES_W } else { PANEL_GAP };
        let chart = style::frame(area, &x, &y, x_desc, "", name_w, 46)?;
        let px = |a: f64, b: f64| chart.backend_coord(&(a, b));
        let (top, bottom) = (px(x.lo, y.hi).1, px(x.lo, y.lo).1);
        let zero = px(0.0, 0.0).0;
        root.draw(&PathElement::new(
            vec![(zero, top), (zero, bottom)],
            ShapeStyle::from(&style::INK).stroke_width(1),
        ))
        .map_err(style::err)?;
        if let Some(t) = threshold {
            let xp = px(t, 0.0).0;
            style::dashed(root, (xp, top), (xp, bottom), style::MUTED, 1)?;
            let text = format!("H1: +{}", fmt::whole_pct(t));
            style::NOTE
                .anchor(HPos::Left, VPos::Top)
                .draw(root, &text, (xp + 4, top + 3))?;
        }
        // Bar centres (in rows) and half-heights: one bar per row, or a pair.
        let (offsets, half): (&[f64], f64) = if self.sets.len() > 1 {
            (&[0.19, -0.19], 0.16)
        } else {
            (&[0.0], 0.28)
        };
        for (i, c) in self.configs.iter().enumerate() {
            let row = (n - 1 - i) as f64;
            for (s, off) in self.sets.iter().zip(offsets) {
                let Some(v) = ctx.tax(c, s.context).and_then(metric) else {
                    let (xp, yp) = px(0.0, row + off);
                    style::NOTE.draw(root, "n/a", (xp + 4, yp))?;
                    continue;
                };
                let bar = Bar {
                    y0: px(0.0, row + off + half).1,
                    y1: px(0.0, row + off - half).1,
                    color: ctx.color(c),
                    light: s.light,
                };
                bar.draw(root, &x, &px, v)?;
            }
        }
        Ok(())
    }
}

/// One horizontal bar between pixel rows `y0` and `y1`.
struct Bar {
    y0: i32,
    y1: i32,
    color: RGBColor,
    light: bool,
}

impl Bar {
    fn draw(
        &self,
        root: &Area<'_>,
        x: &Axis,
        px: &dyn Fn(f64, f64) -> (i32, i32),
        v: &TaxValue,
    ) -> anyhow::Result<()> {
        let (y0, y1) = (self.y0, self.y1);
        let est = v.value.est.clamp(x.lo, x.hi);
        let off_scale = v.value.est > x.hi || v.value.est < x.lo;
        let x0 = px(0.0, 0.0).0;
        let x1 = px(est, 0.0).0;
        let fill = if self.light {
            style::tint(self.color, 0.6)
        } else {
            self.color
        };
        let rect = [(x0.min(x1), y0), (x0.max(x1), y1)];
        root.draw(&Rectangle::new(rect, fill.filled()))
            .map_err(style::err)?;
        if self.light {
            root.draw(&Rectangle::new(
                rect,
                ShapeStyle::from(&self.color).stroke_width(1),
            ))
            .map_err(style::err)?;
        }
        let yc = (y0 + y1) / 2;
        if off_scale {
            // Break marks near the clipped end, value written inside the bar.
            let xb = if v.value.est > x.hi { x1 - 26 } else { x1 + 26 };
            for dx in [0, 6] {
                root.draw(&PathElement::new(
                    vec![(xb + dx - 4, y0 + 2), (xb + dx + 4, y1 - 2)],
                    ShapeStyle::from(&style::BG).stroke_width(2),
                ))
                .map_err(style::err)?;
            }
            let text = format!("{} (off scale)", fmt::pct(v.value.est));
            let ink = if style::luminance(fill) < 0.3 {
                style::BG
            } else {
                style::INK
            };
            let (h, xt) = if v.value.est > x.hi {
                (HPos::Right, xb - 6)
            } else {
                (HPos::Left, xb + 12)
            };
            return style::SMALL
                .color(ink)
                .anchor(h, VPos::Center)
                .draw(root, &text, (xt, yc));
        }
        let mut right = x1.max(x0);
        if let (Some(l), Some(h)) = (v.value.lo, v.value.hi) {
            let (xl, xh) = (
                px(l.clamp(x.lo, x.hi), 0.0).0,
                px(h.clamp(x.lo, x.hi), 0.0).0,
            );
            style::hbar(root, yc, xl, xh, style::INK, 4)?;
            right = right.max(xh);
        }
        style::SMALL.draw(root, &fmt::pct(v.value.est), (right + 6, yc))
    }
}
