//! Plain text every part of align-check writes numbers and names in: error values, SNR,
//! growth factors, sizes, module labels and file names, and which error counts as the worst
//! (NaN does). It sits at the bottom of the module graph (it imports nothing of the crate),
//! so that a stage writing a sentence (a gate, a cause) and every report read a layer alike
//! without any of them importing another.

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

/// `s` with its first letter capitalised, to open a sentence.
pub fn sentence_case(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
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
    fn nan_is_the_worst_error() {
        assert!(severity(f64::NAN) > severity(1e300));
        assert_eq!(severity(f64::NAN), severity(f64::INFINITY));
        assert_eq!(severity(0.5), 0.5);
    }
}
