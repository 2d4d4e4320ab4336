//! Making external text safe for a terminal.
//!
//! Server error bodies, config and model names, paths and file contents reach stderr/stdout in
//! messages; an ESC (`\x1b`) there can recolour, retitle or clear the user's terminal, a BEL
//! rings it, a CR overwrites the line being read. [`escape_controls`] rewrites every C0 control
//! but tab and newline, DEL, and every C1 control (U+0080–U+009F) as a visible escape.

use std::borrow::Cow;
use std::fmt::Write;

fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || c == '\u{7f}'
}

/// `s` with control characters escaped: `\r`, `\xHH` for other C0 controls and DEL, `\u{HH}`
/// for C1 controls. Borrowed (no copy) when there is nothing to escape.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if !is_unsafe(c) {
            out.push(c);
        } else if c == '\r' {
            out.push_str("\\r");
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_c0_c1_and_del_but_not_tab_newline_or_text() {
        assert!(matches!(
            escape_controls("plain\tok\nüñí"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            escape_controls("a\x1b[2Jb\x07c\rd\x00e\x7ff\u{9b}31mg"),
            "a\\x1b[2Jb\\x07c\\rd\\x00e\\x7ff\\u{9b}31mg"
        );
        // Nothing that a terminal acts on survives.
        let all: String = (0u32..0x200).filter_map(char::from_u32).collect();
        let e = escape_controls(&all);
        assert!(
            e.chars()
                .all(|c| c == '\n' || c == '\t' || !(c.is_control() || c == '\u{7f}')),
            "{e:?}"
        );
    }
}
