//! Figure 8: H4 additivity check at ref_safe: tax(mooncake_both), tax(lmcache_only), their sum
//! (stacked) and tax(multi_mooncake_lmcache), for TTFT p90 and TPOT p90, with CIs and the ±30%
//! band within which the seed calls the stack additive.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, Labels, min_max};
use super::style::{self, Area};
use super::{Ctx, Drawing, Spec};
use crate::analysis::model::{Estimate, Tax, TaxContext, TaxValue};
use crate::report::fmt;
use crate::verdicts::hypotheses::{H4_MAX_DEVIATION, H4_NHD, h4_configs_in};

pub(super) const SPEC: Spec = Spec {
    number: 8,
    slug: "fig8_additivity",
    title: "Figure 8. H4: is the MultiConnector tax additive? (ref_safe)",
};

/// The three configs compared (A, B, multi): H4's own choice (`hypotheses::h4_configs_in`),
/// the seed's or the NHD variants.
fn trio(ctx: &Ctx<'_>) -> &'static [&'static str; 3] {
    h4_configs_in(&ctx.r.summary.dataset, &ctx.r.summary.cells)
}
const PANEL_H: u32 = 330;
const BAND: RGBColor = RGBColor(0xe6, 0xee, 0xf7);

type Metric = fn(&Tax) -> Option<&TaxValue>;

pub(super) fn caption(ctx: &Ctx<'_>) -> String {
    let configs = trio(ctx);
    let [a, b, m] = *configs;
    let variant = if *configs == H4_NHD {
        " These are the named NHD variants (VLLM_KV_CACHE_LAYOUT=NHD for the two Mooncake \
         configs): the seed's multi_mooncake_lmcache has no complete Phase A cell, so the figure \
         compares the engines that could run, not the seed's."
    } else {
        ""
    };
    format!(
        "Tax vs plain at ref_safe of {a} (A), {b} (B), their sum A + B (stacked; its \
         whiskers add the two CIs' bounds, a conservative interval) and {m} (the \
         two stacked in one MultiConnector), with 95% CIs. The shaded band is where A + B must lie \
         for the seed's additivity test, |multi - (A + B)| / multi <= {H4_MAX_DEVIATION:.2}. A + B above the band \
         means the MultiConnector costs less than its parts' sum (sub-additive), below it more \
         (super-additive, cross-connector interference).{variant}"
    )
}

pub(super) fn draw(ctx: &Ctx<'_>) -> anyhow::Result<Drawing> {
    let [a, b, m] = *trio(ctx);
    let missing: Vec<String> = [a, b, m]
        .iter()
        .filter(|c| {
            ctx.tax(c, TaxContext::RefSafe)
                .and_then(|t| t.ttft_p90.as_ref())
                .is_none()
        })
        .map(|c| match ctx.skip_reason(c) {
            Some(r) => format!("{c} (skipped: {r})"),
            None => format!("{c} (no tax at ref_safe)"),
        })
        .collect();
    if !missing.is_empty() {
        return Ok(Drawing::Dropped(format!(
            "H4 needs all three of {a}, {b} and {m}; missing: {}. Figure 8 is not drawn.",
            missing.join("; ")
        )));
    }
    let svg = style::figure(SPEC.title, 2 * PANEL_H, |root, body| {
        let (top, bottom) = body.split_vertically(PANEL_H);
        panel(
            root,
            &top,
            ctx,
            [a, b, m],
            |t| t.ttft_p90.as_ref(),
            "TTFT p90 tax vs plain (%)",
        )?;
        panel(
            root,
            &bottom,
            ctx,
            [a, b, m],
            |t| t.tpot_p90.as_ref(),
            "TPOT p90 tax vs plain (%)",
        )?;
        Ok(())
    })?;
    Ok(Drawing::Svg(svg))
}

fn panel(
    root: &Area<'_>,
    area: &Area<'_>,
    ctx: &Ctx<'_>,
    [name_a, name_b, name_m]: [&str; 3],
    metric: Metric,
    y_desc: &str,
) -> anyhow::Result<()> {
    let get = |c: &str| {
        ctx.tax(c, TaxContext::RefSafe)
            .and_then(metric)
            .map(|v| v.value)
    };
    let (a, b, m) = (get(name_a), get(name_b), get(name_m));
    let sum = match (a, b) {
        (Some(a), Some(b)) => Some(Estimate {
            est: a.est + b.est,
            lo: a.lo.zip(b.lo).map(|(x, y)| x + y),
            hi: a.hi.zip(b.hi).map(|(x, y)| x + y),
        }),
        _ => None,
    };
    let bars: [(&str, Option<Estimate>); 4] =
        [(name_a, a), (name_b, b), ("A + B (sum)", sum), (name_m, m)];
    let band = m.map(|m| {
        (
            (1.0 - H4_MAX_DEVIATION) * m.est,
            (1.0 + H4_MAX_DEVIATION) * m.est,
        )
    });
    let vals = bars
        .iter()
        .filter_map(|(_, e)| *e)
        .flat_map(|e| [Some(e.est), e.lo, e.hi])
        .flatten()
        .chain(band.map(|b| b.0))
        .chain(band.map(|b| b.1));
    let (lo, hi) = min_max(vals).unwrap_or((0.0, 0.1));
    let span = (hi - lo).max(0.01);
    let y = Axis::linear(lo, hi + span * 0.12, 6, true, Labels::Percent);
    let x = Axis::categories(bars.iter().map(|(n, _)| (*n).to_owned()).collect());
    let chart = style::frame(area, &x, &y, "", y_desc, 80, 36)?;
    let px = |p: f64, q: f64| chart.backend_coord(&(p, q));
    let (left, right) = (px(x.lo, 0.0).0, px(x.hi, 0.0).0);
    if let Some((b0, b1)) = band {
        let (y0, y1) = (px(0.0, b0.min(b1)).1, px(0.0, b0.max(b1)).1);
        root.draw(&Rectangle::new([(left, y1), (right, y0)], BAND.filled()))
            .map_err(style::err)?;
        style::dashed(root, (left, y0), (right, y0), style::MUTED, 1)?;
        style::dashed(root, (left, y1), (right, y1), style::MUTED, 1)?;
        style::NOTE.anchor(HPos::Left, VPos::Top).draw(
            root,
            &format!(
                "additive band: A + B within multi +/- {}",
                fmt::whole_pct(H4_MAX_DEVIATION)
            ),
            (left + 8, y1 + 4),
        )?;
    }
    let zero = px(0.0, 0.0).1;
    root.draw(&PathElement::new(
        vec![(left, zero), (right, zero)],
        ShapeStyle::from(&style::INK),
    ))
    .map_err(style::err)?;
    for (i, (name, e)) in bars.iter().enumerate() {
        let xi = i as f64;
        let Some(e) = e else {
            style::NOTE.anchor(HPos::Center, VPos::Bottom).draw(
                root,
                "n/a",
                (px(xi, 0.0).0, zero - 8),
            )?;
            continue;
        };
        let (x0, x1) = (px(xi - 0.28, 0.0).0, px(xi + 0.28, 0.0).0);
        if i == 2 {
            // Stacked: A then B on top of it.
            let (ea, eb) = (a.map_or(0.0, |v| v.est), b.map_or(0.0, |v| v.est));
            let ya = px(0.0, ea).1;
            let yab = px(0.0, ea + eb).1;
            root.draw(&Rectangle::new(
                [(x0, zero.min(ya)), (x1, zero.max(ya))],
                ctx.color(name_a).filled(),
            ))
            .map_err(style::err)?;
            root.draw(&Rectangle::new(
                [(x0, ya.min(yab)), (x1, ya.max(yab))],
                ctx.color(name_b).filled(),
            ))
            .map_err(style::err)?;
        } else {
            let yv = px(0.0, e.est).1;
            root.draw(&Rectangle::new(
                [(x0, zero.min(yv)), (x1, zero.max(yv))],
                ctx.color(name).filled(),
            ))
            .map_err(style::err)?;
        }
        let xc = (x0 + x1) / 2;
        let mut top = px(0.0, e.est).1.min(zero);
        if let (Some(l), Some(h)) = (e.lo, e.hi) {
            let (yl, yh) = (px(0.0, l).1, px(0.0, h).1);
            style::vbar(root, xc, yl, yh, style::INK, 6)?;
            top = top.min(yh);
        }
        style::TICK.anchor(HPos::Center, VPos::Bottom).draw(
            root,
            &fmt::pct(e.est),
            (xc, top - 5),
        )?;
    }
    Ok(())
}
