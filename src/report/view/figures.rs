//! The Figures section: each figure's title, caption, file and inline SVG (or why it is not
//! drawn).

use crate::report::figures::Figure;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FigureView {
    pub number: u8,
    pub anchor: String,
    pub title: String,
    pub caption: String,
    /// Relative path from the report, e.g. `figures/fig1_ttft_vs_rate.svg`.
    pub file: String,
    /// The SVG to inline (HTML); `None` when dropped.
    pub svg: Option<String>,
    pub note: Option<String>,
}

impl FigureView {
    pub(super) fn new(f: &Figure) -> FigureView {
        FigureView {
            number: f.number,
            anchor: f.anchor(),
            title: f.title.clone(),
            caption: f.caption.clone(),
            file: format!("figures/{}", f.file_name()),
            svg: f.svg.as_ref().map(|s| inline_svg(s, &f.title)),
            note: f.note.clone(),
        }
    }
}

/// Adds accessibility attributes to a plotters SVG so it can be inlined.
fn inline_svg(svg: &str, title: &str) -> String {
    let t: String = title
        .chars()
        .filter(|c| !matches!(c, '<' | '>' | '&' | '"'))
        .collect();
    match svg.find("<svg ") {
        Some(i) => format!(
            "{}<svg role=\"img\" aria-label=\"{t}\" {}",
            &svg[..i],
            &svg[i + 5..]
        ),
        None => svg.to_owned(),
    }
}
