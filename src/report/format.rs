//! How every report writes numbers and names: error values, SNR, growth factors, sizes,
//! module labels and file names, which error counts as the worst (NaN does), and the colour
//! scale errors are painted with. One definition each, so a layer reads the same in the
//! terminal, Markdown, HTML, JUnit and Model Explorer. Also what the human reports say about
//! isolation, which three of them say alike.

use crate::outcome::verdict::drift_sentence;
use crate::outcome::{Drift, Gate, Outcome};

/// An error statistic in at most nine characters: four decimals in `[1e-3, 1e4)`, scientific
/// notation outside, and `0`, `nan`, `inf`, `-inf` spelled out.
pub fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1e-3 && v.abs() < 1e4 {
        format!("{v:.4}")
    } else {
        format!("{v:.2e}")
    }
}

/// A signal-to-noise ratio in dB, one decimal; `inf` for identical tensors.
pub fn snr(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        fmt_num(v)
    }
}

/// A growth factor against the baseline, one decimal (`12.3`, `inf`), without the `x`.
pub fn growth(g: f64) -> String {
    if g.is_finite() {
        format!("{g:.1}")
    } else {
        fmt_num(g)
    }
}

/// A file size, exact and readable: `1.5 MiB (1572864 bytes)`, `812 B`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {} ({n} bytes)", UNITS[unit])
    }
}

/// `layer1.0.conv1`, or a readable stand-in for values outside any module.
pub fn module_label(module: &str) -> &str {
    if module.is_empty() {
        "(top level)"
    } else {
        module
    }
}

/// The last component of a path, whichever separator it uses.
pub fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// An error as reports rank it: NaN counts as the worst error there is, so it never makes a
/// layer or a module look clean. Larger is worse; compare with `f64::total_cmp`.
pub fn severity(v: f64) -> f64 {
    if v.is_nan() {
        f64::INFINITY
    } else {
        v
    }
}

/// Whether isolation measured any layer: the reports add their isolated column only then,
/// so a run without isolation reads exactly as it did before isolation existed.
pub fn isolation_ran(outcome: &Outcome) -> bool {
    outcome.layers.iter().any(|l| l.isolated.is_some())
}

/// The largest isolated contributions to accumulated drift, `label(module) value` each, as a
/// comma-separated list; the caller's `label` quotes names for its format.
pub fn drift_contributors(drift: &Drift, label: impl Fn(&str) -> String) -> String {
    drift
        .contributors
        .iter()
        .map(|c| {
            format!(
                "{} {}",
                label(module_label(&c.module)),
                fmt_num(c.isolated_rel_to_range)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A failed gate's detail as the human reports list it: without the accumulated-drift
/// sentence the gate appends, since their headline already says it (with the contributors).
pub fn gate_line<'a>(gate: &'a Gate, drift: Option<&Drift>) -> &'a str {
    drift
        .and_then(|d| gate.detail.strip_suffix(drift_sentence(d).as_str()))
        .unwrap_or(&gate.detail)
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
    fn numbers() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(0.25), "0.2500");
        assert_eq!(fmt_num(1.5e-7), "1.50e-7");
        assert_eq!(fmt_num(f64::NAN), "nan");
        assert_eq!(fmt_num(f64::NEG_INFINITY), "-inf");
        assert_eq!(snr(139.24), "139.2");
        assert_eq!(snr(f64::INFINITY), "inf");
        assert_eq!(snr(f64::NEG_INFINITY), "-inf");
        assert_eq!(growth(9.18), "9.2");
        assert_eq!(growth(f64::INFINITY), "inf");
    }

    #[test]
    fn sizes_and_names() {
        assert_eq!(bytes(812), "812 B");
        assert_eq!(bytes(1536 * 1024), "1.5 MiB (1572864 bytes)");
        assert_eq!(module_label(""), "(top level)");
        assert_eq!(module_label("layer1.0"), "layer1.0");
        assert_eq!(file_name("a/b\\c/model.onnx"), "model.onnx");
        assert_eq!(file_name("model.pt"), "model.pt");
    }

    #[test]
    fn bands_are_decades() {
        assert_eq!(band_of(0.0).class, "c0");
        assert_eq!(band_of(5e-7).class, "c1");
        assert_eq!(band_of(0.0139).class, "c6");
        assert_eq!(band_of(f64::INFINITY).class, "c7");
        assert_eq!(band_of(f64::NAN).class, "c7");
    }

    #[test]
    fn nan_is_the_worst_error() {
        assert!(severity(f64::NAN) > severity(1e300));
        assert_eq!(severity(f64::NAN), severity(f64::INFINITY));
        assert_eq!(severity(0.5), 0.5);
    }
}
