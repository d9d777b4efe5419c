//! The HTML report's markup for the shared verdict narrative (`report::narrative`): prose
//! escaped as the template's auto-escaping would, names in `<code>`, layer references as
//! links to their table row. The sentences come out as finished, escaped markup, the only
//! text besides the charts that the template takes as is.

use crate::report::narrative::Markup;
use crate::text::sentence_case;

/// Escapes `s` for text and quoted attributes (`/` left alone: see `html::formatter`).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub struct Html;

impl Markup for Html {
    fn text(&self, s: &str) -> String {
        escape(s)
    }
    fn name(&self, s: &str) -> String {
        format!("<code>{}</code>", escape(s))
    }
    fn layer(&self, index: usize, label: String) -> String {
        format!("<a href=\"#layer-{index}\">#{index}</a> {label}")
    }
    fn lead(&self, words: &str) -> String {
        escape(&sentence_case(words))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_inside_their_code() {
        assert_eq!(
            Html.name("<b>&'\"/x"),
            "<code>&lt;b&gt;&amp;&#39;&quot;/x</code>"
        );
        assert_eq!(Html.layer(3, Html.name("fc")), "<a href=\"#layer-3\">#3</a> <code>fc</code>");
        assert_eq!(Html.lead("accumulated drift:"), "Accumulated drift:");
    }
}
