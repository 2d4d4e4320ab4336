//! The HTML exporter: `templates/report.html`, askama-escaped, figures inlined as SVG.

use askama::Template;

use super::Exporter;
use super::view::ReportView;

#[derive(Template)]
#[template(path = "report.html")]
struct Page<'a> {
    v: &'a ReportView,
}

/// Renders `index.html`.
pub(crate) struct HtmlExporter;

impl Exporter for HtmlExporter {
    fn file_name(&self) -> &'static str {
        "index.html"
    }
    fn render(&self, view: &ReportView) -> anyhow::Result<String> {
        Ok(Page { v: view }.render()?)
    }
}
