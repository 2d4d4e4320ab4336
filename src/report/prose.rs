//! Prose sections, written in Markdown under `templates/prose/` and compiled into the binary.
//!
//! HTML comes from pulldown-cmark with tables enabled and **raw HTML dropped** (any `Html` /
//! `InlineHtml` event is removed), so even a careless edit cannot inject markup into the page.
//! The Markdown twin embeds the source text as is.

use pulldown_cmark::{Event, Options, Parser, html};

/// One prose section: its Markdown source and the HTML rendered from it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prose {
    pub markdown: String,
    pub html: String,
}

impl Prose {
    fn new(markdown: &str) -> Prose {
        Prose {
            markdown: markdown.trim_end().to_owned(),
            html: to_html(markdown),
        }
    }
}

/// The report's fixed prose.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Texts {
    pub intro: Prose,
    pub verdicts: Prose,
    pub conventions: Prose,
}

impl Texts {
    pub(crate) fn load() -> Texts {
        Texts {
            intro: Prose::new(include_str!("../../templates/prose/intro.md")),
            verdicts: Prose::new(include_str!("../../templates/prose/verdicts.md")),
            conventions: Prose::new(include_str!("../../templates/prose/conventions.md")),
        }
    }
}

/// Markdown → HTML with tables and strikethrough, raw HTML removed.
fn to_html(markdown: &str) -> String {
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let parser = Parser::new_ext(markdown, opts)
        .filter(|e| !matches!(e, Event::Html(_) | Event::InlineHtml(_)));
    let mut out = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut out, parser);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_is_dropped() {
        let h = to_html(
            "a <script>alert(1)</script> b\n\n<div onclick=x>block</div>\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
        );
        assert!(!h.contains("<script"), "{h}");
        assert!(!h.contains("<div"), "{h}");
        assert!(h.contains("<table>"), "{h}");
    }

    #[test]
    fn prose_loads() {
        let t = Texts::load();
        assert!(t.intro.html.contains("<strong>substrate tax</strong>"));
        assert!(t.verdicts.html.contains("<table>"));
    }
}
