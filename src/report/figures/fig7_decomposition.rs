//! Figure 7: framework vs implementation decomposition of the TTFT p90 tax at ref_safe.
//! framework = tax(noop_connector); implementation = tax(config) − tax(noop_connector).

use plotters::prelude::*;

use super::axis::{Axis, Labels, min_max};
use super::fig6_step_cdf::step_timing_note;
use super::style;
use super::{Ctx, Drawing, Spec};
use crate::analysis::model::TaxContext;
use crate::report::fmt;

pub(super) const SPEC: Spec = Spec {
    number: 7,
    slug: "fig7_decomposition",
    title: "Figure 7. Framework vs implementation cost of the TTFT p90 tax (ref_safe)",
};

const NOOP: &str = "noop_connector";
const SLOT_H: u32 = 40;
/// The legend line under the title, and the x axis with margins below the rows.
const LEGEND_H: u32 = 32;
const AXIS_H: u32 = 64;

/// A config, its total tax, and the total's CI.
type Row = (String, f64, Option<(f64, f64)>);

pub(super) fn caption(_: &Ctx<'_>) -> String {
    "Each bar is a config's TTFT p90 tax at ref_safe split into an estimated framework cost (grey: \
                   the tax of noop_connector, vLLM's connector dispatch with every hook a no-op) and an estimated \
                   implementation cost (colour: the rest). The split is a difference of two estimates and has \
                   no CI of its own; whiskers are the 95% CI of the total tax, the grey band that of \
                   noop_connector."
        .to_owned()
}

pub(super) fn draw(ctx: &Ctx<'_>) -> anyhow::Result<Drawing> {
    if !ctx.r.summary.dataset.step_timing_available {
        let mut note = step_timing_note(ctx);
        if ctx.tax(NOOP, TaxContext::RefSafe).is_none() {
            note.push_str(
                " noop_connector did not run either, which alone also drops this figure.",
            );
        }
        return Ok(Drawing::Dropped(note));
    }
    let noop = ctx
        .tax(NOOP, TaxContext::RefSafe)
        .and_then(|t| t.ttft_p90.as_ref());
    let Some(noop) = noop else {
        let why = match ctx.skip_reason(NOOP) {
            Some(r) => format!("noop_connector did not run ({r})"),
            None => "noop_connector has no tax at ref_safe".to_owned(),
        };
        return Ok(Drawing::Dropped(format!(
            "{why}, so the framework share cannot be estimated: Figure 7 is dropped, as the seed specifies. \
                 Each config's tax is reported as a single number in the taxes table and in Figure 4."
        )));
    };
    let rows: Vec<Row> = ctx
        .non_plain()
        .into_iter()
        .filter(|c| c != NOOP)
        .filter_map(|c| {
            let v = ctx.tax(&c, TaxContext::RefSafe)?.ttft_p90.as_ref()?;
            Some((c, v.value.est, v.value.lo.zip(v.value.hi)))
        })
        .collect();
    if rows.is_empty() {
        return Ok(Drawing::Dropped(
            "No config besides noop_connector has a tax at ref_safe.".to_owned(),
        ));
    }
    let f = noop.value.est;
    let vals = rows
        .iter()
        .flat_map(|(_, t, ci)| [Some(*t), ci.map(|c| c.0), ci.map(|c| c.1)])
        .flatten()
        .chain(
            [Some(f), noop.value.lo, noop.value.hi]
                .into_iter()
                .flatten(),
        );
    let (lo, hi) = min_max(vals).unwrap_or((0.0, 0.1));
    let span = (hi - lo).max(0.01);
    let x = Axis::linear(lo, hi + span * 0.5, 7, true, Labels::Percent);
    let names: Vec<String> = rows
        .iter()
        .rev()
        .map(|(c, _, _)| style::clip(c, 24))
        .collect();
    let y = Axis::categories(names);
    let n = rows.len();
    let svg = style::figure(
        SPEC.title,
        LEGEND_H + n as u32 * SLOT_H + AXIS_H,
        |root, body| {
            let (_, rest) = body.split_vertically(LEGEND_H);
            let ly = style::BODY_TOP + 14;
            let mut lx = 200;
            let grey = style::PALETTE[1];
            let text = format!("framework = tax(noop_connector) = {}", fmt::pct(f));
            root.draw(&Rectangle::new(
                [(lx, ly - 7), (lx + 22, ly + 7)],
                grey.filled(),
            ))
            .map_err(style::err)?;
            style::TICK.draw(root, &text, (lx + 30, ly))?;
            lx += 30 + style::TICK.width(&text) + 30;
            // The implementation share is drawn in each config's colour: a striped key says so.
            for (k, c) in rows.iter().take(3).enumerate() {
                let x0 = lx + 8 * k as i32;
                root.draw(&Rectangle::new(
                    [(x0, ly - 7), (x0 + 8, ly + 7)],
                    ctx.color(&c.0).filled(),
                ))
                .map_err(style::err)?;
            }
            let text = "implementation = tax(config) - tax(noop), config colour";
            style::TICK.draw(root, text, (lx + 30, ly))?;
            let chart = style::frame(
                &rest,
                &x,
                &y,
                "TTFT p90 tax vs plain at ref_safe (%)",
                "",
                style::NAMES_W,
                46,
            )?;
            let px = |a: f64, b: f64| chart.backend_coord(&(a, b));
            let (top, bottom) = (px(x.lo, y.hi).1, px(x.lo, y.lo).1);
            // noop's CI as a band, its estimate as a line.
            if let (Some(l), Some(h)) = (noop.value.lo, noop.value.hi) {
                let (xl, xh) = (px(l, 0.0).0, px(h, 0.0).0);
                root.draw(&Rectangle::new(
                    [(xl, top), (xh, bottom)],
                    style::tint(grey, 0.8).filled(),
                ))
                .map_err(style::err)?;
            }
            let xf = px(f, 0.0).0;
            style::dashed(root, (xf, top), (xf, bottom), grey, 1)?;
            let zero = px(0.0, 0.0).0;
            root.draw(&PathElement::new(
                vec![(zero, top), (zero, bottom)],
                ShapeStyle::from(&style::INK),
            ))
            .map_err(style::err)?;
            for (i, (c, t, ci)) in rows.iter().enumerate() {
                let row = (n - 1 - i) as f64;
                let color = ctx.color(c);
                let (x0, y0) = px(0.0, row + 0.3);
                let (x1, y1) = px(f, row - 0.3);
                root.draw(&Rectangle::new(
                    [(x0.min(x1), y0), (x0.max(x1), y1)],
                    grey.filled(),
                ))
                .map_err(style::err)?;
                let x2 = px(*t, 0.0).0;
                let impl_style = if *t >= f {
                    color.filled()
                } else {
                    style::tint(color, 0.5).filled()
                };
                root.draw(&Rectangle::new(
                    [(x1.min(x2), y0), (x1.max(x2), y1)],
                    impl_style,
                ))
                .map_err(style::err)?;
                let yc = (y0 + y1) / 2;
                let mut right = x0.max(x1).max(x2);
                if let Some((l, h)) = ci {
                    let (xl, xh) = (px(*l, 0.0).0, px(*h, 0.0).0);
                    style::hbar(root, yc, xl, xh, style::INK, 5)?;
                    right = right.max(xh);
                }
                let text = format!(
                    "{}: framework {}, impl. {}",
                    fmt::pct(*t),
                    fmt::pct(f),
                    fmt::pct(t - f)
                );
                style::SMALL.draw(root, &text, (right + 6, yc))?;
            }
            Ok(())
        },
    )?;
    Ok(Drawing::Svg(svg))
}
