//! The view-model both exporters render: every number already formatted (units, CIs,
//! percentages), every list already in its display order. Strings are *raw* text; each exporter
//! escapes for its own format (askama's HTML autoescape, the Markdown `md` filter).
//!
//! One module per report section, in page order: [`overview`] (at a glance, degradation, with
//! [`coverage`]: what of the seed's plan was measured),
//! [`verdicts`], [`figures`], [`taxes`] (with [`machines`], [`episodes`] and [`sensitivity`]:
//! H1–H6 without the launch-cells that slow episodes name), [`cells`], [`accounting`], [`conventions`],
//! [`provenance`].

mod accounting;
mod cells;
mod conventions;
mod coverage;
mod episodes;
mod figures;
mod machines;
mod overview;
mod provenance;
mod sensitivity;
mod taxes;
mod verdicts;

use accounting::AccountingView;
use cells::{CellGroup, SaturationRules};
use figures::FigureView;
use provenance::Provenance;
use taxes::{CalibrationView, RefTaxRow, ShapeTaxRow};
use verdicts::{CRITERIA, HYPOTHESES, VerdictRow};

use super::figures::Figure;
use super::prose::Texts;
use crate::analysis::model::AnalysisResult;
use crate::verdicts::Verdicts;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReportView {
    pub title: String,
    pub simulated: bool,
    /// Step-timing columns are shown only when the plugin produced data.
    pub step_timing: bool,
    pub glance: Vec<(String, String)>,
    pub texts: Texts,
    pub hypotheses: Vec<VerdictRow>,
    pub criteria: Vec<VerdictRow>,
    pub figures: Vec<FigureView>,
    /// Degradation notes (step timing, missing configs), in the order the seed lists them.
    pub degradation: Vec<String>,
    /// Skipped configs with their reasons.
    pub skipped: Vec<(String, String)>,
    /// The Phase A shape(s) the reference-rate taxes were measured at, e.g.
    /// `input 4096, output 256`.
    pub ref_shape: String,
    /// Taxes at ref_safe / ref_load, one row per non-plain config.
    pub ref_taxes: Vec<RefTaxRow>,
    /// Shape taxes (Phase B and B').
    pub shape_taxes: Vec<ShapeTaxRow>,
    /// Detected taxes that one machine carries (leave one machine out), one line each.
    pub one_machine: Vec<String>,
    /// Taxes of a cell both Phase A and Phase B measured (a replication check).
    pub same_cell: Vec<taxes::SameCellView>,
    /// The saturation criteria's thresholds, as the Cells section's legend prints them.
    pub saturation_rules: SaturationRules,
    pub cell_groups: Vec<CellGroup>,
    /// The Cells table has a GPU column (some launch recorded its GPU slot).
    pub show_gpus: bool,
    /// GPU-to-GPU calibration rows (plain vs plain between GPUs); empty without a calibration
    /// round.
    pub calibration: Vec<CalibrationView>,
    /// A/A taxes (noise floor): each config with >= 2 launches on one machine against itself.
    pub aa: Vec<taxes::AaView>,
    /// Launches whose TTFT p90 a transient slow stretch of their measured window sets.
    pub episodes: Vec<episodes::EpisodeView>,
    /// The slow-episode rule in words, from its constants.
    pub episodes_rule: String,
    /// H1–H6 without the launch-cells that slow episodes name, beside the reported ones.
    pub sensitivity: Option<sensitivity::SensitivityView>,
    /// H1–H6 without the configs that hold ref_safe down.
    pub holders: Option<sensitivity::HoldersView>,
    /// Which launches ran on which machine, and the machine-effect tests.
    pub machines: machines::MachinesView,
    /// The launch-to-launch noise in one line: pooled over cells, and each cell's own.
    pub launch_noise: String,
    /// What ingest did with every record; which cells' data is not whole.
    pub accounting: AccountingView,
    pub conventions: Vec<(String, String)>,
    pub warnings: Vec<String>,
    pub provenance: Provenance,
}

impl ReportView {
    pub(crate) fn build(r: &AnalysisResult, v: &Verdicts, figures: &[Figure]) -> ReportView {
        let s = &r.summary;
        let simulated = s.dataset.simulated || v.simulated;
        let skipped = overview::skipped(r);
        ReportView {
            title: "KV-connector substrate tax".to_owned(),
            simulated,
            step_timing: s.dataset.step_timing_available,
            glance: overview::glance(r, simulated, &skipped),
            texts: Texts::load(),
            hypotheses: verdicts::verdict_rows(&v.hypotheses, &HYPOTHESES),
            criteria: verdicts::verdict_rows(&v.success_criteria, &CRITERIA),
            figures: figures.iter().map(FigureView::new).collect(),
            degradation: overview::degradation(r, figures, &skipped),
            skipped,
            ref_shape: taxes::ref_shape_text(r),
            ref_taxes: taxes::ref_tax_rows(r),
            shape_taxes: taxes::shape_tax_rows(r),
            one_machine: taxes::one_machine_lines(r),
            same_cell: taxes::same_cell_rows(r),
            saturation_rules: SaturationRules::new(),
            cell_groups: cells::cell_groups(r),
            show_gpus: s.cells.iter().any(|c| !c.gpus.is_empty()),
            calibration: s.calibration.iter().map(taxes::calibration_view).collect(),
            aa: taxes::aa_rows(r),
            episodes: episodes::rows(r),
            episodes_rule: crate::analysis::episodes::rule(),
            sensitivity: sensitivity::view(r, v),
            holders: sensitivity::holders(r, v),
            machines: machines::machines(r),
            launch_noise: overview::launch_noise_line(&s.launch_noise),
            accounting: accounting::accounting(r),
            conventions: conventions::rows(&s.conventions),
            warnings: s.warnings.clone(),
            provenance: provenance::provenance(r, v),
        }
    }
}
