//! Figure 1: TTFT p90 vs offered rate per config (Phase A), with CIs, saturation markers per
//! criterion and the reference rates.

use super::rate_curves::{self, Curve};
use super::{Ctx, Drawing, Spec};

pub(super) const SPEC: Spec = Spec {
    number: 1,
    slug: "fig1_ttft_vs_rate",
    title: "Figure 1. TTFT p90 vs offered rate (Phase A)",
};

pub(super) fn caption(ctx: &Ctx<'_>) -> String {
    format!(
        "TTFT p90 per config at each Phase A rate ({} tokens), 95% bootstrap CI as error bars; log2 \
         rate axis. Hollow points are at or above the config's saturation rate. The strip below \
         marks, per config and rate, which of the seed's three saturation criteria fired. Dashed \
         lines: the reference rates chosen from these data.",
        ctx.phase_a_shapes()
    )
}

pub(super) fn draw(ctx: &Ctx<'_>) -> anyhow::Result<Drawing> {
    let curve = Curve {
        title: SPEC.title,
        y_desc: "TTFT p90 (ms",
        metric: |c| c.ttft_ms.p90,
        strip: true,
    };
    Ok(match rate_curves::draw(ctx, &curve)? {
        Some(svg) => Drawing::Svg(svg),
        None => Drawing::Dropped("No Phase A cell has a TTFT p90: nothing to draw.".to_owned()),
    })
}
