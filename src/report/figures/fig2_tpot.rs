//! Figure 2: TPOT p90 vs offered rate per config (Phase A), with CIs and the reference rates.

use super::rate_curves::{self, Spec};
use super::{Ctx, Figure};

pub const SLUG: &str = "fig2_tpot_vs_rate";
pub const TITLE: &str = "Figure 2. TPOT p90 vs offered rate (Phase A)";

pub fn figure(ctx: &Ctx<'_>) -> anyhow::Result<Figure> {
    let caption = "TPOT p90 per config at each Phase A rate (input 4096, output 256 tokens), 95% bootstrap CI \
                   as error bars; log2 rate axis. Hollow points are at or above the config's saturation rate \
                   (criteria in Figure 1). Dashed lines: the reference rates."
        .to_owned();
    let spec = Spec {
        title: TITLE,
        y_desc: "TPOT p90 (ms",
        metric: |c| c.tpot_ms.p90,
        strip: false,
    };
    Ok(match rate_curves::draw(ctx, &spec)? {
        Some(svg) => Figure::drawn(2, SLUG, TITLE, caption, svg),
        None => Figure::dropped(
            2,
            SLUG,
            TITLE,
            caption,
            "No Phase A cell has a TPOT p90: nothing to draw.".to_owned(),
        ),
    })
}
