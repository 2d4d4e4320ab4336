//! Figure 2: TPOT p90 vs offered rate per config (Phase A), with CIs and the reference rates.

use super::rate_curves::{self, Curve};
use super::{Ctx, Drawing, Spec};

pub(super) const SPEC: Spec = Spec {
    number: 2,
    slug: "fig2_tpot_vs_rate",
    title: "Figure 2. TPOT p90 vs offered rate (Phase A)",
};

pub(super) fn caption(ctx: &Ctx<'_>) -> String {
    format!(
        "TPOT p90 per config at each Phase A rate ({} tokens), 95% bootstrap CI as error bars; log2 \
         rate axis. Hollow points are at or above the config's saturation rate (criteria in Figure \
         1). Dashed lines: the reference rates.",
        ctx.phase_a_shapes()
    )
}

pub(super) fn draw(ctx: &Ctx<'_>) -> anyhow::Result<Drawing> {
    let curve = Curve {
        title: SPEC.title,
        y_desc: "TPOT p90 (ms",
        metric: |c| c.tpot_ms.p90,
        strip: false,
    };
    Ok(match rate_curves::draw(ctx, &curve)? {
        Some(svg) => Drawing::Svg(svg),
        None => Drawing::Dropped("No Phase A cell has a TPOT p90: nothing to draw.".to_owned()),
    })
}
