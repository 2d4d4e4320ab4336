//! Figure 1: TTFT p90 vs offered rate per config (Phase A), with CIs, saturation markers per
//! criterion and the reference rates.

use super::rate_curves::{self, Spec};
use super::{Ctx, Figure};

pub const SLUG: &str = "fig1_ttft_vs_rate";
pub const TITLE: &str = "Figure 1. TTFT p90 vs offered rate (Phase A)";

pub fn figure(ctx: &Ctx<'_>) -> anyhow::Result<Figure> {
    let caption = "TTFT p90 per config at each Phase A rate (input 4096, output 256 tokens), 95% bootstrap CI \
                   as error bars; log2 rate axis. Hollow points are at or above the config's saturation rate. \
                   The strip below marks, per config and rate, which of the seed's three saturation criteria \
                   fired. Dashed lines: the reference rates chosen from these data."
        .to_owned();
    let spec = Spec {
        title: TITLE,
        y_desc: "TTFT p90 (ms",
        metric: |c| c.ttft_ms.p90,
        strip: true,
    };
    Ok(match rate_curves::draw(ctx, &spec)? {
        Some(svg) => Figure::drawn(1, SLUG, TITLE, caption, svg),
        None => Figure::dropped(
            1,
            SLUG,
            TITLE,
            caption,
            "No Phase A cell has a TTFT p90: nothing to draw.".to_owned(),
        ),
    })
}
