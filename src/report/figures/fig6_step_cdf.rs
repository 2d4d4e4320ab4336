//! Figure 6: ECDF of engine step durations per config (Phase A cell at ref_safe), log µs axis.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, Labels};
use super::style::{self, Key};
use super::{Ctx, Drawing, Spec};
use crate::report::fmt;

pub(super) const SPEC: Spec = Spec {
    number: 6,
    slug: "fig6_step_cdf",
    title: "Figure 6. Per-step latency CDF at ref_safe (Phase A)",
};

/// At most this many ECDF steps per config are drawn (quantile-spaced; keeps the SVG small).
const MAX_POINTS: usize = 500;
const BODY_H: u32 = 460;

pub(super) fn caption(ctx: &Ctx<'_>) -> String {
    let rs = ctx.ref_safe().map_or_else(
        || "ref_safe".to_owned(),
        |r| format!("{} req/s", fmt::rate(r)),
    );
    format!(
        "Empirical CDF of engine step duration (schedule() entry to the end of update_from_output, from the \
         step-timing plugin) in the Phase A cell at ref_safe ({rs}), one line per config; log x axis in \
         microseconds. Dashed lines mark the median and the 90th percentile. A shift to the right is what \
         each step costs."
    )
}

pub(super) fn draw(ctx: &Ctx<'_>) -> anyhow::Result<Drawing> {
    if !ctx.r.summary.dataset.step_timing_available {
        return Ok(Drawing::Dropped(step_timing_note(ctx)));
    }
    let series: Vec<(String, &Vec<f64>)> = ctx
        .configs
        .iter()
        .filter_map(|c| ctx.r.step_ecdf.get(c).map(|v| (c.clone(), v)))
        .filter(|(_, v)| v.iter().any(|x| x.is_finite() && *x > 0.0))
        .collect();
    if series.is_empty() {
        return Ok(Drawing::Dropped(
            "Step timing is marked available, but no step durations were recorded at ref_safe."
                .to_owned(),
        ));
    }
    let clean: Vec<(String, Vec<f64>)> = series
        .into_iter()
        .map(|(c, v)| {
            let mut v: Vec<f64> = v
                .iter()
                .copied()
                .filter(|x| x.is_finite() && *x > 0.0)
                .collect();
            v.sort_by(f64::total_cmp);
            (c, v)
        })
        .collect();
    let lo = clean
        .iter()
        .map(|(_, v)| v[0])
        .fold(f64::INFINITY, f64::min);
    let hi = clean
        .iter()
        .map(|(_, v)| v[v.len() - 1])
        .fold(0.0f64, f64::max);
    let x = Axis::log10(lo, hi.max(lo * 1.5));
    let mut y = Axis::linear(0.0, 1.0, 4, true, Labels::Unit);
    y.lo = 0.0;
    y.hi = 1.02;
    let svg = style::figure(SPEC.title, BODY_H, |root, body| {
        let (left, _) = body.split_horizontally(style::PLOT_W);
        let chart = style::frame(
            &left,
            &x,
            &y,
            "engine step duration (us, log scale)",
            "fraction of steps <= x",
            70,
            50,
        )?;
        let px = |a: f64, b: f64| chart.backend_coord(&(a, b));
        for (q, name) in [(0.5, "p50"), (0.9, "p90")] {
            style::dashed(root, px(x.lo, q), px(x.hi, q), style::MUTED, 1)?;
            let (xr, yq) = px(x.hi, q);
            style::NOTE
                .anchor(HPos::Right, VPos::Bottom)
                .draw(root, name, (xr - 4, yq - 3))?;
        }
        for (c, v) in &clean {
            let color = ctx.color(c);
            let n = v.len();
            let m = MAX_POINTS.min(n);
            let mut path: Vec<(i32, i32)> = Vec::with_capacity(2 * m + 2);
            let mut prev_f = 0.0;
            for j in 0..=m {
                // n >= 1 (empty series were filtered out), so m >= 1.
                let idx = (j * (n - 1)) / m;
                let f = (idx + 1) as f64 / n as f64;
                let xv = x.fwd(v[idx]);
                path.push(px(xv, prev_f));
                path.push(px(xv, f));
                prev_f = f;
            }
            root.draw(&PathElement::new(
                path,
                ShapeStyle::from(&color).stroke_width(2),
            ))
            .map_err(style::err)?;
        }
        let mut rows: Vec<(Key, String)> = vec![(Key::Heading, "config".to_owned())];
        rows.extend(
            clean
                .iter()
                .map(|(c, _)| (Key::Series(ctx.color(c)), style::clip(c, 24))),
        );
        style::legend(root, style::LEGEND_X, style::LEGEND_TOP, &rows)?;
        Ok(())
    })?;
    Ok(Drawing::Svg(svg))
}

/// The sentence the report prints when step timing is unavailable.
pub(super) fn step_timing_note(ctx: &Ctx<'_>) -> String {
    let why = ctx
        .r
        .summary
        .dataset
        .preflight
        .as_ref()
        .and_then(|p| p.step_timing_reason.clone())
        .unwrap_or_else(|| "the step-timing plugin produced no records".to_owned());
    format!(
        "Step timing unavailable ({why}). As the seed plans for this fallback, Figures 6 (per-step CDF) and 7 \
         (decomposition) are not drawn; the client-side figures and the H1/H2/H4 numbers do not depend on it."
    )
}
