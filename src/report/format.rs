//! What the reports share beyond plain text (numbers and names are `crate::text`'s, re-exported
//! here): the colour scale errors are painted with, one definition, so a layer reads the same
//! in the terminal, Markdown, HTML, JUnit and Model Explorer; and whether isolation ran.

use crate::outcome::Outcome;
pub use crate::text::{bytes, file_name, fmt_num, growth, module_label, severity, snr};

/// Whether isolation measured any layer: the reports add their isolated column only then,
/// so a run without isolation reads exactly as it did before isolation existed.
pub fn isolation_ran(outcome: &Outcome) -> bool {
    outcome.layers.iter().any(|l| l.isolated.is_some())
}

/// One band of the colour scale of error relative to range: one per decade, green to red.
#[derive(Debug, Clone, Copy)]
pub struct Band {
    /// Errors below this (and not below the previous band's bound) fall in this band.
    pub below: f64,
    /// The HTML report's class for it (`style.css` gives each its colour).
    pub class: &'static str,
    /// The legend's text.
    pub label: &'static str,
    /// Its colour, as `style.css` has it.
    pub colour: &'static str,
}

/// The colour scale, lowest errors first; the last band takes everything above (and NaN).
pub const BANDS: [Band; 8] = [
    band(1e-7, "c0", "< 1e-7", "#1a9850"),
    band(1e-6, "c1", "< 1e-6", "#66bd63"),
    band(1e-5, "c2", "< 1e-5", "#a6d96a"),
    band(1e-4, "c3", "< 1e-4", "#d9ef8b"),
    band(1e-3, "c4", "< 1e-3", "#fee08b"),
    band(1e-2, "c5", "< 1e-2", "#fdae61"),
    band(1e-1, "c6", "< 1e-1", "#f46d43"),
    band(f64::INFINITY, "c7", "≥ 1e-1", "#d73027"),
];

const fn band(below: f64, class: &'static str, label: &'static str, colour: &'static str) -> Band {
    Band {
        below,
        class,
        label,
        colour,
    }
}

/// The band of an error relative to range; infinity and NaN are in the last one.
pub fn band_of(rel: f64) -> &'static Band {
    BANDS
        .iter()
        .find(|b| rel < b.below)
        .unwrap_or(&BANDS[BANDS.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_are_decades() {
        assert_eq!(band_of(0.0).class, "c0");
        assert_eq!(band_of(5e-7).class, "c1");
        assert_eq!(band_of(0.0139).class, "c6");
        assert_eq!(band_of(f64::INFINITY).class, "c7");
        assert_eq!(band_of(f64::NAN).class, "c7");
    }
}
