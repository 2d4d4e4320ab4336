//! The eight figures of the seed ("Analysis & Figures"), drawn with plotters' SVG backend.
//!
//! One file per figure, named for what it draws; [`style`] and [`axis`] hold what they share
//! (palette keyed by canonical config order, fonts, legend, glyphs, transformed log axes). A
//! figure either returns an SVG or is *dropped* with a reason the report prints in its place.

pub mod axis;
pub mod style;

mod fig1_ttft;
mod fig2_tpot;
mod fig3_throughput;
mod fig4_tax_bars;
mod fig5_shape_heatmap;
mod fig6_step_cdf;
mod fig7_decomposition;
mod fig8_additivity;
mod rate_curves;

use crate::analysis::model::{AnalysisResult, CellStats, Tax, TaxContext};
use ctax_schema::Phase;

/// One figure of the report: drawn (`svg`) or dropped (`svg` is `None`, `note` says why).
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// 1–8, the seed's numbering; the HTML anchor is `fig<number>`.
    pub number: u8,
    /// File stem under `figures/`, e.g. `fig1_ttft_vs_rate`.
    pub slug: &'static str,
    pub title: String,
    /// What the figure shows and how to read it (plain text; data-derived parts are escaped by
    /// the exporters).
    pub caption: String,
    pub svg: Option<String>,
    /// Why the figure was dropped, or a degradation note about a figure still drawn.
    pub note: Option<String>,
}

impl Figure {
    pub fn anchor(&self) -> String {
        format!("fig{}", self.number)
    }
    pub fn file_name(&self) -> String {
        format!("{}.svg", self.slug)
    }
    fn drawn(number: u8, slug: &'static str, title: &str, caption: String, svg: String) -> Figure {
        Figure {
            number,
            slug,
            title: title.to_owned(),
            caption,
            svg: Some(svg),
            note: None,
        }
    }
    fn dropped(
        number: u8,
        slug: &'static str,
        title: &str,
        caption: String,
        why: String,
    ) -> Figure {
        Figure {
            number,
            slug,
            title: title.to_owned(),
            caption,
            svg: None,
            note: Some(why),
        }
    }
}

/// Draws all eight figures, in order.
pub fn build_all(r: &AnalysisResult) -> anyhow::Result<Vec<Figure>> {
    let ctx = Ctx::new(r);
    Ok(vec![
        fig1_ttft::figure(&ctx)?,
        fig2_tpot::figure(&ctx)?,
        fig3_throughput::figure(&ctx)?,
        fig4_tax_bars::figure(&ctx)?,
        fig5_shape_heatmap::figure(&ctx)?,
        fig6_step_cdf::figure(&ctx)?,
        fig7_decomposition::figure(&ctx)?,
        fig8_additivity::figure(&ctx)?,
    ])
}

/// Read-only access to the data the figures draw.
pub(crate) struct Ctx<'a> {
    pub r: &'a AnalysisResult,
    /// Every config with any data, canonical order first (palette key).
    pub configs: Vec<String>,
}

impl<'a> Ctx<'a> {
    pub fn new(r: &'a AnalysisResult) -> Self {
        Ctx {
            r,
            configs: super::all_configs(r),
        }
    }

    pub fn color(&self, config: &str) -> plotters::style::RGBColor {
        style::config_color(config, &self.configs)
    }

    /// Pooled Phase A cells of a config, by rate.
    pub fn phase_a(&self, config: &str) -> Vec<&'a CellStats> {
        let mut v: Vec<&CellStats> = self
            .r
            .summary
            .cells
            .iter()
            .filter(|c| c.key.config == config && c.key.phase == Phase::A && c.launch.is_none())
            .collect();
        v.sort_by(|a, b| a.rate.total_cmp(&b.rate));
        v
    }

    /// Configs with Phase A data, in palette order.
    pub fn phase_a_configs(&self) -> Vec<String> {
        self.configs
            .iter()
            .filter(|c| !self.phase_a(c).is_empty())
            .cloned()
            .collect()
    }

    /// The tax of a config at `ref_safe` / `ref_load`.
    pub fn tax(&self, config: &str, ctx: TaxContext) -> Option<&'a Tax> {
        self.r
            .summary
            .taxes
            .iter()
            .find(|t| t.config == config && t.context == ctx)
    }

    /// Non-plain configs, palette order.
    pub fn non_plain(&self) -> Vec<String> {
        self.configs
            .iter()
            .filter(|c| *c != "plain")
            .cloned()
            .collect()
    }

    pub fn ref_safe(&self) -> Option<f64> {
        self.r.summary.reference_rates.ref_safe
    }
    pub fn ref_load(&self) -> Option<f64> {
        self.r.summary.reference_rates.ref_load
    }

    /// Why a config has no data (pre-flight skip reason), if recorded.
    pub fn skip_reason(&self, config: &str) -> Option<&'a str> {
        self.r
            .summary
            .dataset
            .skipped
            .get(config)
            .map(String::as_str)
    }
}
