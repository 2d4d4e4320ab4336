//! The eight figures of the seed ("Analysis & Figures"), drawn with plotters' SVG backend.
//!
//! One file per figure, named for what it draws, opening with its [`Spec`] (number, slug,
//! title) and its caption built from the data; [`style`] and [`axis`] hold what they share
//! (canvas and title layout, palette keyed by canonical config order, fonts and labels,
//! legend, glyphs, transformed log axes). Thresholds drawn as lines or bands are imported from
//! the definitions in `analysis::saturation` and `verdicts::hypotheses`. A figure either
//! returns an SVG or is *dropped* with a reason the report prints in its place.

mod axis;
mod style;

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

/// What a figure declares about itself, once, at the top of its file: number, file stem and
/// title. Its caption is a function of the data next to it (`caption`), and `draw` returns the
/// SVG or the reason it is not drawn.
#[derive(Debug, Clone, Copy)]
struct Spec {
    /// 1–8, the seed's numbering; the HTML anchor is `fig<number>`.
    pub number: u8,
    /// File stem under `figures/`, e.g. `fig1_ttft_vs_rate`.
    pub slug: &'static str,
    pub title: &'static str,
}

/// A figure's drawing: the SVG, or why there is none (printed in its place).
enum Drawing {
    Svg(String),
    Dropped(String),
}

/// One figure of the report: drawn (`svg`) or dropped (`svg` is `None`, `note` says why).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Figure {
    /// 1–8, the seed's numbering; the HTML anchor is `fig<number>`.
    pub number: u8,
    /// File stem under `figures/`, e.g. `fig1_ttft_vs_rate`.
    pub slug: &'static str,
    pub title: String,
    /// What the figure shows and how to read it (plain text built from the data; data-derived
    /// parts are escaped by the exporters).
    pub caption: String,
    pub svg: Option<String>,
    /// Why the figure was dropped.
    pub note: Option<String>,
}

impl Figure {
    pub(crate) fn anchor(&self) -> String {
        format!("fig{}", self.number)
    }
    pub(crate) fn file_name(&self) -> String {
        format!("{}.svg", self.slug)
    }
    fn new(spec: &Spec, caption: String, drawing: Drawing) -> Figure {
        let (svg, note) = match drawing {
            Drawing::Svg(svg) => (Some(svg), None),
            Drawing::Dropped(why) => (None, Some(why)),
        };
        Figure {
            number: spec.number,
            slug: spec.slug,
            title: spec.title.to_owned(),
            caption,
            svg,
            note,
        }
    }
}

type Caption = fn(&Ctx<'_>) -> String;
type Draw = fn(&Ctx<'_>) -> anyhow::Result<Drawing>;

/// Every figure, in order: its spec, caption and drawing.
const FIGURES: [(&Spec, Caption, Draw); 8] = [
    (&fig1_ttft::SPEC, fig1_ttft::caption, fig1_ttft::draw),
    (&fig2_tpot::SPEC, fig2_tpot::caption, fig2_tpot::draw),
    (
        &fig3_throughput::SPEC,
        fig3_throughput::caption,
        fig3_throughput::draw,
    ),
    (
        &fig4_tax_bars::SPEC,
        fig4_tax_bars::caption,
        fig4_tax_bars::draw,
    ),
    (
        &fig5_shape_heatmap::SPEC,
        fig5_shape_heatmap::caption,
        fig5_shape_heatmap::draw,
    ),
    (
        &fig6_step_cdf::SPEC,
        fig6_step_cdf::caption,
        fig6_step_cdf::draw,
    ),
    (
        &fig7_decomposition::SPEC,
        fig7_decomposition::caption,
        fig7_decomposition::draw,
    ),
    (
        &fig8_additivity::SPEC,
        fig8_additivity::caption,
        fig8_additivity::draw,
    ),
];

/// Draws all eight figures, in order.
pub(crate) fn build_all(r: &AnalysisResult) -> anyhow::Result<Vec<Figure>> {
    let ctx = Ctx::new(r);
    FIGURES
        .iter()
        .map(|(spec, caption, draw)| Ok(Figure::new(spec, caption(&ctx), draw(&ctx)?)))
        .collect()
}

/// Read-only access to the data the figures draw.
struct Ctx<'a> {
    pub r: &'a AnalysisResult,
    /// Every config with any data, canonical order first (palette key).
    pub configs: Vec<String>,
}

impl<'a> Ctx<'a> {
    fn new(r: &'a AnalysisResult) -> Self {
        Ctx {
            r,
            configs: super::all_configs(r),
        }
    }

    fn color(&self, config: &str) -> plotters::style::RGBColor {
        style::config_color(config, &self.configs)
    }

    /// The Phase A shapes in the data, e.g. `input 4096, output 256`.
    fn phase_a_shapes(&self) -> String {
        let shapes: Vec<(u32, u32)> = self
            .r
            .summary
            .cells
            .iter()
            .filter(|c| c.key.phase == Phase::A && c.launch.is_none())
            .map(|c| (c.input_len, c.output_len))
            .collect();
        crate::report::fmt::shapes(&shapes)
    }

    /// Pooled Phase A cells of a config, by rate.
    fn phase_a(&self, config: &str) -> Vec<&'a CellStats> {
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
    fn phase_a_configs(&self) -> Vec<String> {
        self.configs
            .iter()
            .filter(|c| !self.phase_a(c).is_empty())
            .cloned()
            .collect()
    }

    /// The tax of a config at `ref_safe` / `ref_load`.
    fn tax(&self, config: &str, ctx: TaxContext) -> Option<&'a Tax> {
        self.r
            .summary
            .taxes
            .iter()
            .find(|t| t.config == config && t.context == ctx)
    }

    /// Non-plain configs, palette order.
    fn non_plain(&self) -> Vec<String> {
        self.configs
            .iter()
            .filter(|c| *c != "plain")
            .cloned()
            .collect()
    }

    fn ref_safe(&self) -> Option<f64> {
        self.r.summary.reference_rates.ref_safe
    }
    fn ref_load(&self) -> Option<f64> {
        self.r.summary.reference_rates.ref_load
    }

    /// Why a config has no data (pre-flight skip reason), if recorded.
    fn skip_reason(&self, config: &str) -> Option<&'a str> {
        self.r
            .summary
            .dataset
            .skipped
            .get(config)
            .map(String::as_str)
    }
}
