//! The HTML report: one self-contained file (styles, charts and a little script inline,
//! nothing fetched from the network) that shows the verdict, the first divergence, the error
//! along the network, close-ups of the layers that matter, the module tree and every layer.
//!
//! It is rendered from a serialisable context (`context::Page`, derived from the `Outcome`)
//! through a minijinja template whose auto-escaping covers every string a model supplies:
//! module and node names, file paths, sources, reasons. The charts (`charts`, one function
//! each) are SVG drawn by plotters, which escapes its own text; they are the only markup the
//! template takes as is. The output is also well-formed XML (self-closed void elements,
//! script and style in CDATA), so tests can check its structure with an XML parser.

mod charts;
mod context;
mod tree;

use crate::outcome::Outcome;
use anyhow::{Context, Result};
use minijinja::value::Serde;
use minijinja::{Environment, UndefinedBehavior};

const PAGE: &str = include_str!("html/page.html");
const STYLE: &str = include_str!("html/style.css");
const SCRIPT: &str = include_str!("html/script.js");

fn environment() -> Result<Environment<'static>> {
    let mut env = Environment::new();
    // A misspelt field must fail the build of the report, not render as an empty string.
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.add_template("page.html", PAGE)?;
    env.add_template("style.css", STYLE)?;
    env.add_template("script.js", SCRIPT)?;
    Ok(env)
}

/// The HTML report of `outcome`, as UTF-8 bytes.
pub fn render(outcome: &Outcome) -> Result<Vec<u8>> {
    let page = context::page(outcome)?;
    let env = environment()?;
    let html = env
        .get_template("page.html")?
        .render(Serde(&page))
        .context("rendering the HTML report")?;
    Ok(html.into_bytes())
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
}
