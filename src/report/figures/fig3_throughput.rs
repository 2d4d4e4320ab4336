//! Figure 3: achieved (effective) vs offered throughput per config (Phase A), the y = x line, the
//! 0.95·x line of the seed's saturation criterion 1 (effective/offered; ours reads the completion
//! pace, `analysis::saturation`), and each config's knee (its saturation rate).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, min_max};
use super::style::{self, Glyph, Key};
use super::{Ctx, Drawing, Spec};
use crate::analysis::saturation::THROUGHPUT_RATIO_MIN;
use crate::report::fmt;

pub(super) const SPEC: Spec = Spec {
    number: 3,
    slug: "fig3_throughput",
    title: "Figure 3. Achieved vs offered throughput (Phase A)",
};

const DODGE: f64 = 0.03;
const BODY_H: u32 = 480;

/// Configs with a Phase A effective throughput, with their knee (saturation rate).
fn knees(ctx: &Ctx<'_>) -> Vec<(String, Option<f64>)> {
    ctx.phase_a_configs()
        .into_iter()
        .filter(|c| {
            ctx.phase_a(c)
                .iter()
                .any(|cell| cell.effective_rps.is_some())
        })
        .map(|c| {
            let knee = ctx
                .r
                .summary
                .reference_rates
                .saturation_rate
                .get(&c)
                .copied()
                .flatten();
            (c, knee)
        })
        .collect()
}

pub(super) fn caption(ctx: &Ctx<'_>) -> String {
    let knee_text: Vec<String> = knees(ctx)
        .iter()
        .map(|(c, k)| match k {
            Some(k) => format!("{c} {}", fmt::rate(*k)),
            None => format!("{c} none"),
        })
        .collect();
    format!(
        "Effective throughput (completions inside the measurement window / window length) against the offered \
         rate, both on log2 axes. On the solid y = x line the server keeps up; the dashed {THROUGHPUT_RATIO_MIN}x line is the seed's \
         criterion 1 (effective/offered). This tool's criterion 1 reads the window's requests' ok share \
         and completion pace instead (Conventions, Saturation), so a point below the line is not saturated \
         by that alone: the window's edges move with latency jitter. Rings mark each config's knee, its saturation rate (the lowest rate at \
         which any criterion fired), in req/s: {}.",
        if knee_text.is_empty() {
            "none".to_owned()
        } else {
            knee_text.join(", ")
        }
    )
}

pub(super) fn draw(ctx: &Ctx<'_>) -> anyhow::Result<Drawing> {
    let knees = knees(ctx);
    let configs: Vec<String> = knees.iter().map(|(c, _)| c.clone()).collect();
    if configs.is_empty() {
        return Ok(Drawing::Dropped(
            "No Phase A cell has an effective throughput.".to_owned(),
        ));
    }
    let mut rates: Vec<f64> = Vec::new();
    for c in &configs {
        rates.extend(ctx.phase_a(c).iter().map(|cell| cell.rate));
    }
    let x = Axis::log2_at(&rates);
    let eff: Vec<f64> = configs
        .iter()
        .flat_map(|c| {
            ctx.phase_a(c)
                .into_iter()
                .filter_map(|cell| cell.effective_rps)
        })
        .collect();
    let mut y = Axis::log2_at(&rates);
    if let Some((lo, hi)) = min_max(eff.iter().copied().filter(|v| *v > 0.0)) {
        y.lo = y.lo.min(lo.log2() - 0.25);
        y.hi = y.hi.max(hi.log2() + 0.25);
    }
    let n = configs.len();
    let svg = style::figure(SPEC.title, BODY_H, |root, body| {
        let (left, _) = body.split_horizontally(style::PLOT_W);
        let chart = style::frame(
            &left,
            &x,
            &y,
            "offered rate (req/s, log2 scale)",
            "effective throughput (req/s, log2 scale)",
            80,
            50,
        )?;
        let px = |a: f64, b: f64| chart.backend_coord(&(a, b));
        // y = x and y = 0.95 x over the common range.
        let lo = x.lo.max(y.lo);
        let hi = x.hi.min(y.hi);
        root.draw(&PathElement::new(
            vec![px(lo, lo), px(hi, hi)],
            ShapeStyle::from(&style::MUTED).stroke_width(2),
        ))
        .map_err(style::err)?;
        let k = THROUGHPUT_RATIO_MIN.log2();
        style::dashed(root, px(lo - k, lo), px(hi, hi + k), style::MUTED, 1)?;
        let (tx, ty) = px(hi - 0.15, hi - 0.15);
        style::NOTE
            .anchor(HPos::Right, VPos::Bottom)
            .draw(root, "y = x", (tx - 6, ty - 2))?;
        for (i, (c, knee)) in knees.iter().enumerate() {
            let color = ctx.color(c);
            let d = (i as f64 - (n as f64 - 1.0) / 2.0) * DODGE;
            let pts: Vec<(f64, f64)> = ctx
                .phase_a(c)
                .iter()
                .filter_map(|cell| {
                    cell.effective_rps
                        .filter(|e| *e > 0.0)
                        .map(|e| (x.fwd(cell.rate) + d, y.fwd(e)))
                })
                .collect();
            root.draw(&PathElement::new(
                pts.iter().map(|(a, b)| px(*a, *b)).collect::<Vec<_>>(),
                ShapeStyle::from(&color).stroke_width(2),
            ))
            .map_err(style::err)?;
            for (a, b) in &pts {
                style::glyph(root, px(*a, *b), Glyph::Dot, color, 3)?;
            }
            if let Some(kr) = knee {
                let at = ctx
                    .phase_a(c)
                    .into_iter()
                    .find(|cell| (cell.rate - kr).abs() < 1e-9)
                    .and_then(|cell| cell.effective_rps);
                if let Some(e) = at.filter(|e| *e > 0.0) {
                    style::glyph(root, px(x.fwd(*kr) + d, y.fwd(e)), Glyph::Ring, color, 8)?;
                    style::glyph(root, px(x.fwd(*kr) + d, y.fwd(e)), Glyph::Dot, color, 3)?;
                }
            }
        }
        let lx = style::LEGEND_X;
        let mut rows: Vec<(Key, String)> = vec![(Key::Heading, "config (knee, req/s)".to_owned())];
        rows.extend(knees.iter().map(|(c, k)| {
            let k = k.map_or_else(|| "none".to_owned(), fmt::rate);
            (
                Key::Series(ctx.color(c)),
                format!("{} ({k})", style::clip(c, 22)),
            )
        }));
        rows.push((Key::Heading, String::new()));
        rows.push((
            Key::Mark(Glyph::Ring, style::INK),
            "knee = saturation rate".to_owned(),
        ));
        rows.push((Key::Line(style::MUTED), "y = x".to_owned()));
        rows.push((
            Key::Dashed(style::MUTED),
            format!("{THROUGHPUT_RATIO_MIN} x (seed's criterion 1)"),
        ));
        style::legend(root, lx, style::LEGEND_TOP, &rows)?;
        Ok(())
    })?;
    Ok(Drawing::Svg(svg))
}
