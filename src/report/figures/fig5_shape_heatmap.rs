//! Figure 5: shape-dependent tax. One 3×3 heatmap (input × output length) of the TTFT p90 tax per
//! non-plain config (Phase B, at ref_safe), values and CIs printed in the cells, one diverging
//! colour scale centred at 0 shared by every panel, blank cells where a shape has no data.

use std::collections::BTreeSet;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::nice_step;
use super::style::{self, Area};
use super::{Ctx, Drawing, Spec};
use crate::analysis::model::{Tax, TaxContext};
use crate::report::fmt;

pub(super) const SPEC: Spec = Spec {
    number: 5,
    slug: "fig5_shape_heatmap",
    title: "Figure 5. Shape-dependent TTFT p90 tax (Phase B)",
};

const COLS: usize = 3;
const SLOT_W: i32 = 320;
const SLOT_H: i32 = 236;
const CELL_W: i32 = 80;
const CELL_H: i32 = 50;
/// The line under the title that says how to read a cell.
const HEAD_H: i32 = 34;
const TOP: i32 = style::BODY_TOP + HEAD_H;

/// ColorBrewer RdBu (9 classes), blue for negative, red for positive.
const STOPS: [(u8, u8, u8); 9] = [
    (0x21, 0x66, 0xac),
    (0x43, 0x93, 0xc3),
    (0x92, 0xc5, 0xde),
    (0xd1, 0xe5, 0xf0),
    (0xf7, 0xf7, 0xf7),
    (0xfd, 0xdb, 0xc7),
    (0xf4, 0xa5, 0x82),
    (0xd6, 0x60, 0x4d),
    (0xb2, 0x18, 0x2b),
];

/// Diverging colour of `v` on a symmetric scale `[-limit, +limit]`.
fn diverging(v: f64, limit: f64) -> RGBColor {
    let t = ((v / limit).clamp(-1.0, 1.0) + 1.0) / 2.0 * (STOPS.len() - 1) as f64;
    let i = (t.floor() as usize).min(STOPS.len() - 2);
    let f = t - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let m = |x: u8, y: u8| (x as f64 + (y as f64 - x as f64) * f).round() as u8;
    RGBColor(m(a.0, b.0), m(a.1, b.1), m(a.2, b.2))
}

/// What every panel shares: the Phase B taxes, the configs that have one, the shape grid and
/// the colour scale.
struct Grid<'a> {
    taxes: Vec<&'a Tax>,
    configs: Vec<String>,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
    /// Colours run from -limit to +limit; `clipped` when some |tax| lies beyond.
    limit: f64,
    clipped: bool,
}

fn grid<'a>(ctx: &Ctx<'a>) -> Grid<'a> {
    let taxes: Vec<&Tax> = ctx
        .r
        .summary
        .taxes
        .iter()
        .filter(|t| t.context == TaxContext::ShapeB && t.ttft_p90.is_some())
        .collect();
    let configs: Vec<String> = ctx
        .non_plain()
        .into_iter()
        .filter(|c| taxes.iter().any(|t| &t.config == c))
        .collect();
    let sorted = |f: fn(&Tax) -> u32| -> Vec<u32> {
        taxes
            .iter()
            .map(|t| f(t))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let (inputs, outputs) = (sorted(|t| t.input_len), sorted(|t| t.output_len));
    // Colour limit: the 75th percentile of |tax|, rounded up, so one heavily taxed config (or a
    // saturated shape) does not wash out every other panel; cells beyond it keep the end colour.
    let mut abs: Vec<f64> = taxes
        .iter()
        .filter(|t| configs.contains(&t.config))
        .filter_map(|t| t.ttft_p90.as_ref().map(|v| v.value.est.abs()))
        .filter(|v| v.is_finite())
        .collect();
    abs.sort_by(f64::total_cmp);
    let robust = abs
        .get((abs.len().saturating_sub(1) * 3) / 4)
        .copied()
        .unwrap_or(0.1)
        .max(0.05);
    let step = nice_step(robust / 4.0);
    let limit = (robust / step).ceil().max(1.0) * step;
    let clipped = abs.last().is_some_and(|m| *m > limit);
    Grid {
        taxes,
        configs,
        inputs,
        outputs,
        limit,
        clipped,
    }
}

/// `4 req/s`, or `ref_safe` when it is undefined.
fn ref_safe_text(ctx: &Ctx<'_>) -> String {
    ctx.ref_safe().map_or_else(
        || "ref_safe".to_owned(),
        |r| format!("{} req/s", fmt::rate(r)),
    )
}

/// Each panel's launches over its cells (`mooncake_both 6 launches on 6 machines`), and the
/// configs whose panel rests on a single launch.
fn panel_launches(g: &Grid<'_>) -> (Vec<String>, Vec<String>) {
    let mut per_panel = Vec::new();
    let mut single = Vec::new();
    for c in &g.configs {
        let mine = || g.taxes.iter().filter(|t| &t.config == c);
        let launches: BTreeSet<u32> = mine()
            .flat_map(|t| t.paired_launches.iter().copied())
            .collect();
        let machines: BTreeSet<&str> = mine()
            .flat_map(|t| t.machines.iter().map(String::as_str))
            .collect();
        per_panel.push(format!(
            "{c} {}",
            fmt::launches_on(launches.len(), machines.len())
        ));
        if launches.len() == 1 {
            single.push(c.clone());
        }
    }
    (per_panel, single)
}

pub(super) fn caption(ctx: &Ctx<'_>) -> String {
    let rs = ref_safe_text(ctx);
    let mut caption = format!(
        "TTFT p90 tax vs plain for each Phase B shape at ref_safe ({rs}): rows are input lengths, columns \
         output lengths. Each cell prints the estimate and its 95% CI; a bold outline marks a CI that \
         excludes 0. One colour scale, centred at 0 (white), is shared by all panels. Grey cells: no data."
    );
    let missing: Vec<&str> = ctx
        .r
        .summary
        .dataset
        .skipped
        .keys()
        .filter(|c| *c != "plain")
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        caption.push_str(&format!(
            " No panel for skipped configs: {}.",
            missing.join(", ")
        ));
    }
    let g = grid(ctx);
    if !g.configs.is_empty() {
        let (per_panel, single) = panel_launches(&g);
        caption.push_str(&format!(
            " Launches behind each panel (the config's, compared with plain on the same machines; the union over the panel's cells, so one cell may rest on fewer, as the Taxes table shows, and a launch resumed on another machine counts both machines): {}.",
            per_panel.join(", ")
        ));
        if !single.is_empty() {
            caption.push_str(&format!(
                " {} rest{} on a single launch: one pair, without replication of its own (its CIs \
                 carry the cell's launch noise from the other launches).",
                single.join(", "),
                if single.len() == 1 { "s" } else { "" }
            ));
        }
    }
    if !g.configs.is_empty() && g.clipped {
        caption.push_str(&format!(
            " Colours saturate beyond {} (values are still printed).",
            fmt::pct(g.limit).replace('+', "+/-")
        ));
    }
    caption
}

pub(super) fn draw(ctx: &Ctx<'_>) -> anyhow::Result<Drawing> {
    let g = grid(ctx);
    if g.configs.is_empty() {
        return Ok(Drawing::Dropped(
            "No Phase B shape tax was computed.".to_owned(),
        ));
    }
    let rs = ref_safe_text(ctx);
    let slots = g.configs.len() + 1;
    let rows = slots.div_ceil(COLS);
    let body_h = (HEAD_H + rows as i32 * SLOT_H + 8) as u32;
    let svg = style::figure(SPEC.title, body_h, |root, _| {
        style::TICK.color(style::MUTED).draw(
            root,
            &format!(
                "rows: input tokens, columns: output tokens; cell: TTFT p90 tax vs plain [95% CI], at ref_safe = {rs}"
            ),
            (14, style::BODY_TOP + 12),
        )?;
        for (k, c) in g.configs.iter().enumerate() {
            let ox = (k % COLS) as i32 * SLOT_W;
            let oy = TOP + (k / COLS) as i32 * SLOT_H;
            panel(
                root,
                ctx,
                c,
                (ox, oy),
                &g.inputs,
                &g.outputs,
                &g.taxes,
                g.limit,
            )?;
        }
        let k = g.configs.len();
        colour_bar(
            root,
            ((k % COLS) as i32 * SLOT_W, TOP + (k / COLS) as i32 * SLOT_H),
            g.limit,
            g.clipped,
        )?;
        Ok(())
    })?;
    Ok(Drawing::Svg(svg))
}

#[allow(clippy::too_many_arguments)]
fn panel(
    root: &Area<'_>,
    ctx: &Ctx<'_>,
    config: &str,
    (ox, oy): (i32, i32),
    inputs: &[u32],
    outputs: &[u32],
    taxes: &[&Tax],
    limit: f64,
) -> anyhow::Result<()> {
    let gx = ox + 72;
    let gy = oy + 30;
    // Title with a colour key for the config.
    style::glyph(
        root,
        (ox + 30, oy + 12),
        style::Glyph::Dot,
        ctx.color(config),
        5,
    )?;
    style::HEADING.draw(root, &style::clip(config, 26), (ox + 40, oy + 12))?;
    let gmid = gy + inputs.len() as i32 * CELL_H / 2;
    root.draw(&Text::new(
        "input tokens".to_owned(),
        (ox + 14, gmid),
        style::font_c(style::SMALL_SIZE, style::MUTED)
            .pos(Pos::new(HPos::Center, VPos::Center))
            .transform(FontTransform::Rotate270),
    ))
    .map_err(style::err)?;
    for (r, &inp) in inputs.iter().enumerate() {
        let y0 = gy + r as i32 * CELL_H;
        style::TICK.anchor(HPos::Right, VPos::Center).draw(
            root,
            &inp.to_string(),
            (gx - 6, y0 + CELL_H / 2),
        )?;
        for (col, &out) in outputs.iter().enumerate() {
            let x0 = gx + col as i32 * CELL_W;
            let rect = [(x0 + 1, y0 + 1), (x0 + CELL_W - 1, y0 + CELL_H - 1)];
            let t = taxes
                .iter()
                .find(|t| t.config == config && t.input_len == inp && t.output_len == out)
                .and_then(|t| t.ttft_p90.as_ref());
            match t {
                Some(v) if v.value.est.is_finite() => {
                    let fill = diverging(v.value.est, limit);
                    root.draw(&Rectangle::new(rect, fill.filled()))
                        .map_err(style::err)?;
                    if v.value.above(0.0) || v.value.below(0.0) {
                        root.draw(&Rectangle::new(
                            [(x0 + 2, y0 + 2), (x0 + CELL_W - 2, y0 + CELL_H - 2)],
                            ShapeStyle::from(&style::INK).stroke_width(2),
                        ))
                        .map_err(style::err)?;
                    }
                    let ink = if style::luminance(fill) < 0.33 {
                        style::BG
                    } else {
                        style::INK
                    };
                    let cx = x0 + CELL_W / 2;
                    style::TICK
                        .color(ink)
                        .anchor(HPos::Center, VPos::Center)
                        .draw(root, &short_pct(v.value.est), (cx, y0 + 18))?;
                    if let (Some(lo), Some(hi)) = (v.value.lo, v.value.hi) {
                        let ci = format!("[{}, {}]", short_num(lo), short_num(hi));
                        style::Label::new(12.0)
                            .color(ink)
                            .anchor(HPos::Center, VPos::Center)
                            .draw(root, &ci, (cx, y0 + 35))?;
                    }
                }
                _ => {
                    root.draw(&Rectangle::new(rect, style::GRID_LIGHT.filled()))
                        .map_err(style::err)?;
                    style::NOTE.anchor(HPos::Center, VPos::Center).draw(
                        root,
                        "n/a",
                        (x0 + CELL_W / 2, y0 + CELL_H / 2),
                    )?;
                }
            }
        }
    }
    let yb = gy + inputs.len() as i32 * CELL_H;
    for (col, &out) in outputs.iter().enumerate() {
        let cx = gx + col as i32 * CELL_W + CELL_W / 2;
        style::TICK.anchor(HPos::Center, VPos::Center).draw(
            root,
            &out.to_string(),
            (cx, yb + 10),
        )?;
    }
    let mid = gx + outputs.len() as i32 * CELL_W / 2;
    style::NOTE
        .anchor(HPos::Center, VPos::Center)
        .draw(root, "output tokens", (mid, yb + 28))?;
    Ok(())
}

/// `+42%` (no decimals above 10%).
fn short_pct(v: f64) -> String {
    let p = v * 100.0;
    let body = if p.abs() >= 9.95 {
        fmt::fixed(p, 0)
    } else {
        fmt::fixed(p, 1)
    };
    if body.starts_with('-') || body == "0" || body == "0.0" {
        format!("{body}%")
    } else {
        format!("+{body}%")
    }
}

/// CI bounds in percent without the sign noise: `35`, `-2.1`.
fn short_num(v: f64) -> String {
    let p = v * 100.0;
    if p.abs() >= 9.95 {
        fmt::fixed(p, 0)
    } else {
        fmt::fixed(p, 1)
    }
}

fn colour_bar(
    root: &Area<'_>,
    (ox, oy): (i32, i32),
    limit: f64,
    clipped: bool,
) -> anyhow::Result<()> {
    let (x0, y0, w, h) = (ox + 80, oy + 36, 22, 150);
    style::HEADING.draw(root, "TTFT p90 tax (colour)", (ox + 30, oy + 12))?;
    let steps = 60;
    for i in 0..steps {
        // Top = +limit.
        let v = limit - 2.0 * limit * (i as f64 + 0.5) / steps as f64;
        let ya = y0 + (h * i) / steps;
        let yb = y0 + (h * (i + 1)) / steps;
        root.draw(&Rectangle::new(
            [(x0, ya), (x0 + w, yb)],
            diverging(v, limit).filled(),
        ))
        .map_err(style::err)?;
    }
    root.draw(&Rectangle::new(
        [(x0, y0), (x0 + w, y0 + h)],
        ShapeStyle::from(&style::MUTED).stroke_width(1),
    ))
    .map_err(style::err)?;
    for k in 0..=4 {
        let v = limit - limit * k as f64 / 2.0;
        let y = y0 + h * k / 4;
        root.draw(&PathElement::new(
            vec![(x0 + w, y), (x0 + w + 5, y)],
            ShapeStyle::from(&style::MUTED),
        ))
        .map_err(style::err)?;
        let text = if v.abs() < 1e-12 {
            "0% (= plain)".to_owned()
        } else if clipped && (k == 0 || k == 4) {
            format!("{} or beyond", short_pct(v))
        } else {
            short_pct(v)
        };
        style::TICK.draw(root, &text, (x0 + w + 9, y))?;
    }
    style::NOTE.draw(
        root,
        "red: slower than plain, blue: faster;",
        (ox + 30, y0 + h + 22),
    )?;
    style::NOTE.draw(root, "bold outline: CI excludes 0", (ox + 30, y0 + h + 38))?;
    Ok(())
}
