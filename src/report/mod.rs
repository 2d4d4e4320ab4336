//! `ctax report`: the static report users read and papers link to.
//!
//! [`render`] turns an [`AnalysisResult`] and its [`Verdicts`] into
//! - `index.html`: one self-contained offline page (inline CSS, inline SVG figures, no script),
//! - `report.md`: its Markdown twin for a GitHub PR, with
//! - `figures/fig<N>_<what>.svg`: the figures the page inlines and the Markdown links.
//!
//! Layout (criterion/hyperfine style): [`view`] builds one view-model from the analysis output
//! (numbers formatted with units and CIs); an [`Exporter`] per format renders it through an askama
//! template in `templates/`; [`figures`] holds one module per figure over shared axes, palette and
//! legend helpers; [`prose`] renders the Markdown prose in `templates/prose/`. Output is a pure
//! function of the input: no clock, no hash-map order, fixed number formatting. Data strings are
//! escaped for each format, and control characters in them are shown as visible `\u{..}` text
//! in every output ([`fmt::visible_controls`]).

mod figures;
pub mod fmt;
mod prose;
mod view;

mod html;
mod markdown;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::analysis::model::{AnalysisResult, config_order};
use crate::fsutil::write_atomic;
use crate::verdicts::Verdicts;
use html::HtmlExporter;
use markdown::MarkdownExporter;
use view::ReportView;

/// One output format of the report.
trait Exporter {
    /// File name under the output directory.
    fn file_name(&self) -> &'static str;
    /// Renders the whole document.
    fn render(&self, view: &ReportView) -> anyhow::Result<String>;
}

/// What [`render`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedReport {
    /// Every file written, in write order (figures first, then `index.html`, `report.md`).
    pub files: Vec<PathBuf>,
    /// All eight figures with their fate.
    pub figures: Vec<FigureStatus>,
}

impl RenderedReport {
    /// Figures not drawn, with the reason printed in their place.
    pub fn dropped(&self) -> impl Iterator<Item = &FigureStatus> {
        self.figures.iter().filter(|f| f.file.is_none())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FigureStatus {
    pub number: u8,
    pub slug: String,
    /// The SVG written, or `None` when the figure was dropped.
    pub file: Option<PathBuf>,
    /// Why it was dropped, or a degradation note for a figure still drawn.
    pub note: Option<String>,
}

/// Renders the report into `out_dir` (created if needed). Figure files this renderer owns
/// (`figures/fig<N>_*.svg`) that the current data no longer produces are removed, so a committed
/// `site/` never keeps a stale figure.
pub fn render(
    result: &AnalysisResult,
    verdicts: &Verdicts,
    out_dir: &Path,
) -> anyhow::Result<RenderedReport> {
    let fig_dir = out_dir.join("figures");
    std::fs::create_dir_all(&fig_dir).with_context(|| format!("creating {}", fig_dir.display()))?;
    let figures = figures::build_all(result)?;

    let mut files = Vec::new();
    let mut statuses = Vec::new();
    for f in &figures {
        let file = match &f.svg {
            Some(svg) => {
                let p = fig_dir.join(f.file_name());
                write_atomic(&p, fmt::visible_controls(svg).as_bytes())
                    .with_context(|| format!("writing {}", p.display()))?;
                files.push(p.clone());
                Some(p)
            }
            None => None,
        };
        statuses.push(FigureStatus {
            number: f.number,
            slug: f.slug.to_owned(),
            file,
            note: f.note.clone(),
        });
    }
    remove_stale_figures(&fig_dir, &figures)?;

    let view = ReportView::build(result, verdicts, &figures);
    let exporters: [&dyn Exporter; 2] = [&HtmlExporter, &MarkdownExporter];
    for e in exporters {
        let text = e
            .render(&view)
            .with_context(|| format!("rendering {}", e.file_name()))?;
        let p = out_dir.join(e.file_name());
        write_atomic(&p, fmt::visible_controls(&text).as_bytes())
            .with_context(|| format!("writing {}", p.display()))?;
        files.push(p);
    }
    Ok(RenderedReport {
        files,
        figures: statuses,
    })
}

fn remove_stale_figures(dir: &Path, figures: &[figures::Figure]) -> anyhow::Result<()> {
    let keep: Vec<String> = figures
        .iter()
        .filter(|f| f.svg.is_some())
        .map(|f| f.file_name())
        .collect();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let ours = name.len() > 5
            && name.starts_with("fig")
            && name.as_bytes()[3].is_ascii_digit()
            && name.as_bytes()[4] == b'_'
            && name.ends_with(".svg");
        if ours && !keep.contains(&name) {
            let p = dir.join(&name);
            std::fs::remove_file(&p).with_context(|| format!("removing stale {}", p.display()))?;
        }
    }
    Ok(())
}

/// Sort key of a config: canonical order first, then others alphabetically.
fn config_rank(name: &str) -> (usize, String) {
    config_order(name)
}

/// Every config that appears anywhere in the result, canonical order first. This list keys the
/// palette, so a config has the same colour in every figure.
fn all_configs(r: &AnalysisResult) -> Vec<String> {
    let s = &r.summary;
    let mut v: Vec<String> = s
        .dataset
        .configs
        .iter()
        .cloned()
        .chain(s.cells.iter().map(|c| c.key.config.clone()))
        .chain(s.taxes.iter().map(|t| t.config.clone()))
        .chain(r.step_ecdf.keys().cloned())
        .collect();
    v.sort_by_key(|c| config_rank(c));
    v.dedup();
    v
}
