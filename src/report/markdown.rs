//! The Markdown exporter: `templates/report.md`, every data string through the `md` filter, the
//! figures linked as SVG files beside it.

use askama::Template;

use super::Exporter;
use super::view::ReportView;

// `askama::filter_fn` expands each filter into helper items that the macro itself declares `pub`
// (reported on the filter's signature, whatever visibility the source gives the filter); the
// lint's suggested rewrite lands inside the signature and breaks it, so it is allowed here only.
#[allow(unreachable_pub)]
mod filters {
    /// Escapes a data string for Markdown text and table cells.
    #[askama::filter_fn]
    pub fn md(s: impl std::fmt::Display, _env: &dyn askama::Values) -> askama::Result<String> {
        Ok(crate::report::fmt::md(&s.to_string()))
    }

    /// A fenced code block the content cannot close early.
    #[askama::filter_fn]
    pub fn codeblock(
        s: impl std::fmt::Display,
        _env: &dyn askama::Values,
    ) -> askama::Result<String> {
        Ok(crate::report::fmt::md_code_block(&s.to_string(), ""))
    }
}

#[derive(Template)]
#[template(path = "report.md")]
struct Page<'a> {
    v: &'a ReportView,
}

/// Renders `report.md`.
pub(crate) struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn file_name(&self) -> &'static str {
        "report.md"
    }
    fn render(&self, view: &ReportView) -> anyhow::Result<String> {
        let mut s = Page { v: view }.render()?;
        // One trailing newline, no trailing spaces: friendly to `git diff --check`.
        s = s.lines().map(str::trim_end).collect::<Vec<_>>().join("\n");
        s.truncate(s.trim_end().len());
        s.push('\n');
        Ok(s)
    }
}
