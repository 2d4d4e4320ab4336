//! Figure 3: achieved (effective) vs offered throughput per config (Phase A), the y = x line, the
//! 0.95·x line of saturation criterion 1, and each config's knee (its saturation rate).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, min_max};
use super::style::{self, Glyph, Key};
use super::{Ctx, Figure};
use crate::report::fmt;

pub const SLUG: &str = "fig3_throughput";
pub const TITLE: &str = "Figure 3. Achieved vs offered throughput (Phase A)";

const DODGE: f64 = 0.03;

pub fn figure(ctx: &Ctx<'_>) -> anyhow::Result<Figure> {
    let configs: Vec<String> = ctx
        .phase_a_configs()
        .into_iter()
        .filter(|c| {
            ctx.phase_a(c)
                .iter()
                .any(|cell| cell.effective_rps.is_some())
        })
        .collect();
    let knees: Vec<(String, Option<f64>)> = configs
        .iter()
        .map(|c| {
            (
                c.clone(),
                ctx.r
                    .summary
                    .reference_rates
                    .saturation_rate
                    .get(c)
                    .copied()
                    .flatten(),
            )
        })
        .collect();
    let knee_text: Vec<String> = knees
        .iter()
        .map(|(c, k)| match k {
            Some(k) => format!("{c} {}", fmt::rate(*k)),
            None => format!("{c} none"),
        })
        .collect();
    let caption = format!(
        "Effective throughput (completions inside the measurement window / window length) against the offered \
         rate, both on log2 axes. On the solid y = x line the server keeps up; below the dashed 0.95x line \
         saturation criterion 1 fires. Rings mark each config's knee, its saturation rate (the lowest rate at \
         which any criterion fired), in req/s: {}.",
        if knee_text.is_empty() {
            "none".to_owned()
        } else {
            knee_text.join(", ")
        }
    );
    if configs.is_empty() {
        return Ok(Figure::dropped(
            3,
            SLUG,
            TITLE,
            caption,
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
    let left_w = style::WIDTH - style::LEGEND_W;
    let n = configs.len();
    let svg = style::svg(38 + 480, |root| {
        let body = style::titled(root, TITLE)?;
        let (left, _) = body.split_horizontally(left_w);
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
        let k = 0.95f64.log2();
        style::dashed(root, px(lo - k, lo), px(hi, hi + k), style::MUTED, 1)?;
        let (tx, ty) = px(hi - 0.15, hi - 0.15);
        style::label(
            root,
            "y = x",
            (tx - 6, ty - 2),
            style::SMALL_SIZE,
            style::MUTED,
            HPos::Right,
            VPos::Bottom,
        )?;
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
        let lx = left_w as i32 + 8;
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
        rows.push((Key::Dashed(style::MUTED), "0.95 x (criterion 1)".to_owned()));
        style::legend(root, lx, 38 + 8, &rows)?;
        Ok(())
    })?;
    Ok(Figure::drawn(3, SLUG, TITLE, caption, svg))
}
