//! Figure 4: substrate tax (TTFT p90 and TPOT p90 vs plain) per non-plain config at ref_safe
//! (pure tax) and ref_load (tax + non-linear queueing), with CIs.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, Labels, min_max};
use super::style::{self, Area};
use super::{Ctx, Figure};
use crate::analysis::model::{Tax, TaxContext, TaxValue};
use crate::report::fmt;

pub const SLUG: &str = "fig4_tax_bars";
pub const TITLE: &str = "Figure 4. Substrate tax at ref_safe and ref_load";

const SLOT_H: u32 = 40;
const PANEL_EXTRA: u32 = 64;
const LEGEND_H: u32 = 30;

type Metric = fn(&Tax) -> Option<&TaxValue>;

pub fn figure(ctx: &Ctx<'_>) -> anyhow::Result<Figure> {
    let rs = ctx.ref_safe().map_or_else(|| "n/a".to_owned(), fmt::rate);
    let rl = ctx.ref_load().map_or_else(|| "n/a".to_owned(), fmt::rate);
    let caption = format!(
        "Tax = p90(config) / p90(plain) - 1 in the Phase A cell at ref_safe = {rs} req/s (solid: the pure \
         per-step tax, no queueing) and at ref_load = {rl} req/s (light: tax plus the non-linear queueing \
         amplification near saturation), with 95% bootstrap CIs. The gap between the two bars of a config \
         is the amplification. Dashed line: H1's +10% threshold."
    );
    let configs: Vec<String> = ctx
        .non_plain()
        .into_iter()
        .filter(|c| {
            ctx.tax(c, TaxContext::RefSafe).is_some() || ctx.tax(c, TaxContext::RefLoad).is_some()
        })
        .collect();
    if configs.is_empty() {
        return Ok(Figure::dropped(
            4,
            SLUG,
            TITLE,
            caption,
            "No tax at ref_safe or ref_load was computed (plain or every other config is missing)."
                .to_owned(),
        ));
    }
    let panel_h = configs.len() as u32 * SLOT_H + PANEL_EXTRA;
    let height = 38 + LEGEND_H + 2 * panel_h;
    let svg = style::svg(height, |root| {
        let body = style::titled(root, TITLE)?;
        let (legend_area, rest) = body.split_vertically(LEGEND_H);
        let _ = legend_area;
        // One-line legend.
        let ly = 38 + 14;
        let mut lx = 200;
        for (fill, outline_only, text) in [
            (style::INK, false, format!("at ref_safe = {rs} req/s")),
            (
                style::tint(style::INK, 0.6),
                true,
                format!("at ref_load = {rl} req/s"),
            ),
        ] {
            root.draw(&Rectangle::new(
                [(lx, ly - 7), (lx + 22, ly + 7)],
                fill.filled(),
            ))
            .map_err(style::err)?;
            if outline_only {
                root.draw(&Rectangle::new(
                    [(lx, ly - 7), (lx + 22, ly + 7)],
                    ShapeStyle::from(&style::INK).stroke_width(1),
                ))
                .map_err(style::err)?;
            }
            style::label(
                root,
                &text,
                (lx + 30, ly),
                style::TICK_SIZE,
                style::INK,
                HPos::Left,
                VPos::Center,
            )?;
            lx += 30 + style::text_width(&text, style::TICK_SIZE) + 36;
        }
        style::label(
            root,
            "(bar colour = config; whiskers: 95% CI)",
            (lx, ly),
            style::SMALL_SIZE,
            style::MUTED,
            HPos::Left,
            VPos::Center,
        )?;
        let (top, bottom) = rest.split_vertically(panel_h);
        panel(
            root,
            &top,
            ctx,
            &configs,
            |t| t.ttft_p90.as_ref(),
            "TTFT p90 tax vs plain (%)",
            Some(0.10),
        )?;
        panel(
            root,
            &bottom,
            ctx,
            &configs,
            |t| t.tpot_p90.as_ref(),
            "TPOT p90 tax vs plain (%)",
            None,
        )?;
        Ok(())
    })?;
    Ok(Figure::drawn(4, SLUG, TITLE, caption, svg))
}

fn panel(
    root: &Area<'_>,
    area: &Area<'_>,
    ctx: &Ctx<'_>,
    configs: &[String],
    metric: Metric,
    x_desc: &str,
    threshold: Option<f64>,
) -> anyhow::Result<()> {
    let values = |k: TaxContext| -> Vec<f64> {
        configs
            .iter()
            .filter_map(|c| ctx.tax(c, k).and_then(metric))
            .flat_map(|v| [Some(v.value.est), v.value.lo, v.value.hi])
            .flatten()
            .filter(|v| v.is_finite())
            .collect()
    };
    // A saturated config at ref_load can be 10-100x taxed; keep the scale readable for the rest
    // and draw such bars broken at the edge, value printed.
    let safe_max = values(TaxContext::RefSafe)
        .into_iter()
        .map(f64::abs)
        .fold(0.05, f64::max);
    let cap = (safe_max * 3.0).max(0.3);
    let all: Vec<f64> = values(TaxContext::RefSafe)
        .into_iter()
        .chain(values(TaxContext::RefLoad))
        .collect();
    let (lo, hi) = min_max(
        all.iter()
            .copied()
            .filter(|v| v.abs() <= cap)
            .chain(threshold),
    )
    .unwrap_or((0.0, 0.1));
    // Room on the right for value labels.
    let span = (hi - lo).max(0.01);
    let x = Axis::linear(lo, hi + span * 0.22, 7, true, Labels::Percent);
    // Categories top to bottom in canonical order, with headroom for the threshold label.
    let names: Vec<String> = configs.iter().rev().map(|c| style::clip(c, 24)).collect();
    let mut y = Axis::categories(names);
    y.hi += 0.35;
    let chart = style::frame(area, &x, &y, x_desc, "", 190, 46)?;
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
        style::label(
            root,
            "H1: +10%",
            (xp + 4, top + 3),
            style::SMALL_SIZE,
            style::MUTED,
            HPos::Left,
            VPos::Top,
        )?;
    }
    let n = configs.len();
    for (i, c) in configs.iter().enumerate() {
        let row = (n - 1 - i) as f64;
        let color = ctx.color(c);
        for (k, off, light) in [
            (TaxContext::RefSafe, 0.19, false),
            (TaxContext::RefLoad, -0.19, true),
        ] {
            let Some(v) = ctx.tax(c, k).and_then(metric) else {
                let (xp, yp) = px(0.0, row + off);
                style::label(
                    root,
                    "n/a",
                    (xp + 4, yp),
                    style::SMALL_SIZE,
                    style::MUTED,
                    HPos::Left,
                    VPos::Center,
                )?;
                continue;
            };
            let est = v.value.est.clamp(x.lo, x.hi);
            let off_scale = v.value.est > x.hi || v.value.est < x.lo;
            let (x0, y0) = px(0.0, row + off + 0.16);
            let (x1, y1) = px(est, row + off - 0.16);
            let fill = if light {
                style::tint(color, 0.6)
            } else {
                color
            };
            root.draw(&Rectangle::new(
                [(x0.min(x1), y0), (x0.max(x1), y1)],
                fill.filled(),
            ))
            .map_err(style::err)?;
            if light {
                root.draw(&Rectangle::new(
                    [(x0.min(x1), y0), (x0.max(x1), y1)],
                    ShapeStyle::from(&color).stroke_width(1),
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
                style::label(
                    root,
                    &text,
                    (xt, yc),
                    style::SMALL_SIZE,
                    ink,
                    h,
                    VPos::Center,
                )?;
                continue;
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
            style::label(
                root,
                &fmt::pct(v.value.est),
                (right + 6, yc),
                style::SMALL_SIZE,
                style::INK,
                HPos::Left,
                VPos::Center,
            )?;
        }
    }
    Ok(())
}
