//! The HTML report: one self-contained file (styles, charts and a little script inline,
//! nothing fetched from the network) that shows the verdict, the first divergence, the error
//! along the network, close-ups of the layers that matter, the module tree and every layer.
//!
//! It is rendered from a serialisable context (`context::Page`, derived from the `Outcome`)
//! through a minijinja template whose auto-escaping covers every string a model supplies:
//! module and node names, file paths, sources, reasons. The charts (`charts`, one function
//! each) are SVG drawn by plotters, which escapes its own text, and the verdict narrative
//! (`report::narrative`, marked up by `markup` with every name escaped) is finished markup;
//! those two are the only markup the template takes as is. The output is also well-formed XML (self-closed void elements,
//! script and style in CDATA), so tests can check its structure with an XML parser.

mod charts;
mod context;
mod markup;
mod tree;

use super::{Format, Report};
use crate::outcome::Outcome;
use anyhow::{Context, Result};
use minijinja::value::Serde;
use minijinja::{
    escape_formatter, AutoEscape, Environment, Error, ErrorKind, Output, State, UndefinedBehavior,
    Value,
};

const PAGE: &str = include_str!("html/page.html");
const STYLE: &str = include_str!("html/style.css");
const SCRIPT: &str = include_str!("html/script.js");

fn environment() -> Result<Environment<'static>> {
    let mut env = Environment::new();
    // A misspelt field must fail the build of the report, not render as an empty string.
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_formatter(formatter);
    env.add_template("page.html", PAGE)?;
    env.add_template("style.css", STYLE)?;
    env.add_template("script.js", SCRIPT)?;
    Ok(env)
}

/// Auto-escaping as minijinja does it, less the escaping of `/`: that is not needed for
/// safety in text or quoted attributes, and it would spell every ONNX node name
/// (`/layer1/layer1.0/conv1/Conv`) at six bytes per slash on a page of thousands of them.
pub(super) fn formatter(out: &mut Output, state: &mut State, value: &Value) -> Result<(), Error> {
    match (state.auto_escape(), value.as_str()) {
        (AutoEscape::Html, Some(text)) if !value.is_safe() => {
            let mut start = 0;
            for (i, c) in text.char_indices() {
                let entity = match c {
                    '&' => "&amp;",
                    '<' => "&lt;",
                    '>' => "&gt;",
                    '"' => "&quot;",
                    '\'' => "&#39;",
                    _ => continue,
                };
                out.write_str(&text[start..i])
                    .and_then(|_| out.write_str(entity))
                    .map_err(|_| Error::new(ErrorKind::WriteFailure, "writing the page"))?;
                start = i + c.len_utf8();
            }
            out.write_str(&text[start..])
                .map_err(|_| Error::new(ErrorKind::WriteFailure, "writing the page"))
        }
        _ => escape_formatter(out, state, value),
    }
}

pub const FORMAT: Format = Format {
    key: "html",
    flag: "html",
    help: "Write a self-contained HTML report with charts to PATH",
    writer: &Html,
};

#[derive(Debug)]
pub struct Html;

impl Report for Html {
    fn write(&self, outcome: &Outcome, out: &mut dyn std::io::Write) -> Result<()> {
        let page = context::page(outcome)?;
        let env = environment()?;
        let html = env
            .get_template("page.html")?
            .render(Serde(&page))
            .context("rendering the HTML report")?;
        out.write_all(html.as_bytes())?;
        Ok(())
    }
}

/// The HTML report of `outcome`, as UTF-8 bytes.
pub fn render(outcome: &Outcome) -> Result<Vec<u8>> {
    super::render_to_vec(&Html, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inlined_assets_hold_no_template_syntax() {
        // They are included as templates: a `{{` in the script would be evaluated.
        for text in [STYLE, SCRIPT] {
            for tag in ["{{", "{%", "{#"] {
                assert!(!text.contains(tag), "inlined asset contains {tag}");
            }
        }
        assert!(environment().is_ok());
    }

    #[test]
    fn style_sheet_colours_the_shared_bands() {
        // The page's colours and the Model Explorer overlay's come from the same scale.
        for band in crate::report::format::BANDS {
            let rule = format!(".{} {{ --c: {}; }}", band.class, band.colour);
            assert!(STYLE.contains(&rule), "style.css lacks `{rule}`");
        }
    }

    #[test]
    fn strings_are_escaped_and_safe_markup_is_not() {
        let mut env = environment().unwrap();
        env.add_template("t.html", "<p title=\"{{ a }}\">{{ a }}</p>{{ b|safe }}")
            .unwrap();
        let html = env
            .get_template("t.html")
            .unwrap()
            .render(minijinja::context! { a => "<x y='1' z=\"2\">&/", b => "<svg/>" })
            .unwrap();
        assert_eq!(
            html,
            "<p title=\"&lt;x y=&#39;1&#39; z=&quot;2&quot;&gt;&amp;/\">&lt;x y=&#39;1&#39; z=&quot;2&quot;&gt;&amp;/</p><svg/>"
        );
    }
}
