//! Shared drawing of figures 1 and 2: a Phase A latency percentile vs offered rate, one line per
//! config, with CIs, saturated points, reference rates and (figure 1) the saturation-criteria strip.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::Ctx;
use super::axis::{Axis, Labels, min_max};
use super::style::{self, Glyph, Key};
use crate::analysis::model::{CellStats, Estimate};
use crate::analysis::saturation::{THROUGHPUT_RATIO_MIN, TTFT_GROWTH_MAX, WAITING_P50_MAX};
use crate::report::fmt;

/// What figures 1 and 2 differ in.
pub(super) struct Curve {
    pub title: &'static str,
    /// Y axis description without the scale note, e.g. "TTFT p90 (ms".
    pub y_desc: &'static str,
    pub metric: fn(&CellStats) -> Option<Estimate>,
    /// Draw the per-criterion saturation strip under the chart.
    pub strip: bool,
}

/// Dodge between configs, in octaves, so error bars at one rate do not hide each other.
const DODGE: f64 = 0.035;
const MAIN_H: u32 = 430;
const ROW_H: i32 = 20;

struct Series<'a> {
    config: String,
    color: RGBColor,
    cells: Vec<&'a CellStats>,
}

/// Returns the SVG, or `None` when no config has a Phase A value of this metric.
pub(super) fn draw(ctx: &Ctx<'_>, spec: &Curve) -> anyhow::Result<Option<String>> {
    let series: Vec<Series<'_>> = ctx
        .phase_a_configs()
        .into_iter()
        .map(|c| Series {
            color: ctx.color(&c),
            cells: ctx.phase_a(&c),
            config: c,
        })
        .filter(|s| s.cells.iter().any(|c| (spec.metric)(c).is_some()))
        .collect();
    if series.is_empty() {
        return Ok(None);
    }
    let rates: Vec<f64> = series
        .iter()
        .flat_map(|s| s.cells.iter().map(|c| c.rate))
        .collect();
    let x = Axis::log2_at(&rates);
    let ys = series.iter().flat_map(|s| {
        s.cells
            .iter()
            .filter_map(|c| (spec.metric)(c))
            .flat_map(|e| [Some(e.est), e.lo, e.hi])
            .flatten()
    });
    let (ymin, ymax) = min_max(ys.filter(|v| *v > 0.0)).unwrap_or((1.0, 10.0));
    let log_y = ymax / ymin > 8.0;
    let y = if log_y {
        Axis::log10(ymin, ymax)
    } else {
        Axis::linear(ymin, ymax, 6, false, Labels::Number)
    };
    let y_desc = format!("{}{})", spec.y_desc, if log_y { ", log scale" } else { "" });
    let n = series.len();
    let strip_h: u32 = if spec.strip {
        30 + n as u32 * ROW_H as u32 + 58
    } else {
        0
    };
    let svg = style::figure(spec.title, MAIN_H + strip_h + 6, |root, body| {
        let (left, _right) = body.split_horizontally(style::PLOT_W);
        let (main_area, strip_area) = left.split_vertically(MAIN_H);
        let x_desc = if spec.strip {
            ""
        } else {
            "offered rate (req/s, log2 scale)"
        };
        let chart = style::frame(
            &main_area,
            &x,
            &y,
            x_desc,
            &y_desc,
            80,
            if spec.strip { 32 } else { 50 },
        )?;
        let px = |xv: f64, yv: f64| chart.backend_coord(&(xv, yv));
        let (plot_top, plot_bottom) = (px(x.lo, y.hi).1, px(x.lo, y.lo).1);

        // Saturation strip: one row per config, a glyph per criterion that fired.
        let mut strip_span: Option<(i32, i32)> = None;
        let mut rows_y: Vec<i32> = Vec::new();
        if spec.strip {
            let (_head, strip_chart_area) = strip_area.split_vertically(30);
            let mut cats = Axis::categories(vec![String::new(); n]);
            cats.ticks.clear();
            let strip = style::frame(
                &strip_chart_area,
                &x,
                &cats,
                "offered rate (req/s, log2 scale)",
                "",
                80,
                50,
            )?;
            let (hx, hy) = (80 + 14, style::BODY_TOP + MAIN_H as i32 + 16);
            let head = "Saturation criteria that fired:";
            style::TICK.draw(root, head, (hx, hy))?;
            let mut gx = hx + style::TICK.width(head) + 22;
            for (g, text) in [
                (
                    Glyph::Cross,
                    format!("completion pace < {}", fmt::whole_pct(THROUGHPUT_RATIO_MIN)),
                ),
                (Glyph::Square, format!("waiting p50 > {WAITING_P50_MAX}")),
                (
                    Glyph::Triangle,
                    format!("TTFT p90 growth > {TTFT_GROWTH_MAX}x"),
                ),
            ] {
                style::glyph(root, (gx, hy), g, style::INK, 4)?;
                style::SMALL.draw(root, &text, (gx + 10, hy))?;
                gx += 10 + style::SMALL.width(&text) + 24;
            }
            for (i, s) in series.iter().enumerate() {
                let row = (n - 1 - i) as f64;
                let ry = strip.backend_coord(&(x.lo, row)).1;
                rows_y.push(ry);
                // Faint row band in the config's colour.
                let (x0, x1) = (
                    strip.backend_coord(&(x.lo, row)).0,
                    strip.backend_coord(&(x.hi, row)).0,
                );
                root.draw(&Rectangle::new(
                    [(x0 + 1, ry - ROW_H / 2 + 2), (x1 - 1, ry + ROW_H / 2 - 2)],
                    style::tint(s.color, 0.9).filled(),
                ))
                .map_err(style::err)?;
                for c in &s.cells {
                    let Some(sat) = &c.saturation else { continue };
                    let cx = strip.backend_coord(&(x.fwd(c.rate), row)).0;
                    for (off, fired, g) in [
                        (-11, sat.throughput.fired, Glyph::Cross),
                        (0, sat.queue.fired, Glyph::Square),
                        (11, sat.ttft_growth.fired, Glyph::Triangle),
                    ] {
                        if fired {
                            style::glyph(root, (cx + off, ry), g, s.color, 4)?;
                        }
                    }
                }
            }
            strip_span = Some((
                strip.backend_coord(&(x.lo, cats.hi)).1,
                strip.backend_coord(&(x.lo, cats.lo)).1,
            ));
        }

        // Reference rates: dashed verticals through chart and strip.
        for (r, name) in ref_lines(ctx) {
            let xp = px(x.fwd(r), y.lo).0;
            style::dashed(root, (xp, plot_top), (xp, plot_bottom), style::MUTED, 1)?;
            if let Some((t, b)) = strip_span {
                style::dashed(root, (xp, t), (xp, b), style::MUTED, 1)?;
            }
            style::NOTE
                .anchor(HPos::Left, VPos::Top)
                .draw(root, &name, (xp + 4, plot_top + 4))?;
        }

        // Series: line, CI bars, points (hollow once saturated).
        for (i, s) in series.iter().enumerate() {
            let d = (i as f64 - (n as f64 - 1.0) / 2.0) * DODGE;
            let pts: Vec<(f64, &CellStats, Estimate)> = s
                .cells
                .iter()
                .filter_map(|c| (spec.metric)(c).map(|e| (x.fwd(c.rate) + d, *c, e)))
                .collect();
            let line: Vec<(i32, i32)> =
                pts.iter().map(|(xv, _, e)| px(*xv, y.fwd(e.est))).collect();
            root.draw(&PathElement::new(
                line,
                ShapeStyle::from(&s.color).stroke_width(2),
            ))
            .map_err(style::err)?;
            for (xv, c, e) in &pts {
                if let (Some(lo), Some(hi)) = (e.lo, e.hi) {
                    let (xp, ylo) = px(*xv, y.fwd(lo.max(y.inv(y.lo))));
                    let (_, yhi) = px(*xv, y.fwd(hi.min(y.inv(y.hi))));
                    style::vbar(root, xp, ylo, yhi, s.color, 3)?;
                }
                let saturated = c.saturated();
                let g = if saturated { Glyph::Ring } else { Glyph::Dot };
                style::glyph(root, px(*xv, y.fwd(e.est)), g, s.color, 4)?;
            }
        }

        // Legend column.
        let lx = style::LEGEND_X;
        let mut rows: Vec<(Key, String)> = vec![(Key::Heading, "config".to_owned())];
        rows.extend(
            series
                .iter()
                .map(|s| (Key::Series(s.color), style::clip(&s.config, 24))),
        );
        rows.push((Key::Heading, String::new()));
        rows.push((
            Key::Mark(Glyph::Dot, style::INK),
            "not saturated".to_owned(),
        ));
        rows.push((
            Key::Mark(Glyph::Ring, style::INK),
            "saturated (>= knee)".to_owned(),
        ));
        rows.push((Key::Heading, String::new()));
        rows.push((Key::Dashed(style::MUTED), "reference rates".to_owned()));
        let after = style::legend(root, lx, style::LEGEND_TOP, &rows)?;
        style::NOTE.draw(root, "bars: 95% bootstrap CI;", (lx, after + 6))?;
        style::NOTE.draw(root, "points dodged sideways", (lx, after + 22))?;
        if spec.strip {
            for (s, ry) in series.iter().zip(&rows_y) {
                style::glyph(root, (lx + 6, *ry), Glyph::Dot, s.color, 5)?;
                style::SMALL.draw(root, &style::clip(&s.config, 24), (lx + 18, *ry))?;
            }
        }
        Ok(())
    })?;
    Ok(Some(svg))
}

/// `ref_safe` / `ref_load` lines (merged when equal).
pub(super) fn ref_lines(ctx: &Ctx<'_>) -> Vec<(f64, String)> {
    match (ctx.ref_safe(), ctx.ref_load()) {
        (Some(a), Some(b)) if (a - b).abs() < 1e-9 => {
            vec![(a, format!("ref_safe = ref_load = {}", fmt::rate(a)))]
        }
        (a, b) => {
            let mut v = Vec::new();
            if let Some(a) = a {
                v.push((a, format!("ref_safe = {}", fmt::rate(a))));
            }
            if let Some(b) = b {
                v.push((b, format!("ref_load = {}", fmt::rate(b))));
            }
            v
        }
    }
}
