//! The sentences every human report says alike about what a run found beyond pass and fail:
//! the error carried from upstream (information, not a failure), outputs measured against
//! PyTorch's own float64 result, layers too small-valued for
//! the absolute tolerance to judge, discrete decisions that flipped under rounding, and the
//! smallest tolerance a pair would pass. Each is a `Finding` value; the terminal, Markdown
//! and HTML reports each show its sentence in their own markup, the words written once, here.

use crate::compare::discrete::DiscreteFlip;
use crate::compare::judged::OutputResult;
use crate::compare::rounding_reference::RoundingReference;
use crate::compare::small_values::SmallValues;
use crate::compare::stats::ErrorStats;
use crate::outcome::{AccumulatedError, GateName, Outcome};
use crate::production::report::ProductionReport;
use crate::quantized::analysis::QuantizedReport;
use crate::report::format::{fmt_num, module_label};

/// "14 layers exceed their per-layer tolerance only by error carried from upstream (each
/// passes in isolation: float32 rounding in a different order); largest 3.05e-4 of range at
/// model.22.dfl (/model.22/dfl/Softmax)".
pub fn accumulated_line(a: &AccumulatedError) -> String {
    format!(
        "{} layer(s) exceed their per-layer tolerance only by error carried from upstream \
         (each passes in isolation); largest {} of range at {} ({}); not gated, the outputs' \
         tolerance decides",
        a.layers,
        fmt_num(a.rel_to_range),
        module_label(&a.module),
        a.onnx_node
    )
}

/// "blocks.3.attn (/blocks.3/attn/MatMul) differs by 1.0000e-1 of its range, but its values
/// are below 2.00e-9 (atol 1e-5): not gated; --strict-small gates it". Under
/// `--strict-small` such a layer fails instead and is not listed.
pub fn small_value_line(s: &SmallValues) -> String {
    format!(
        "{} ({}) differs by {} of its range, but its values are below {} (atol {}): not \
         gated; --strict-small gates it",
        module_label(&s.module),
        s.onnx_node,
        fmt_num(s.rel_to_range),
        fmt_num(s.max_value),
        fmt_num(s.atol),
    )
}

/// "the TopK at model.28 (/model.28/TopK) selects 3 of 300 items differently; its inputs
/// differ by 1.70e-6 (2.1e-7 of range); fed PyTorch's values it agrees: near-ties decided
/// the other way by rounding, not an export bug (the outputs pass)"; `outputs_passed` is the
/// outputs gate's result, when it was judged.
pub fn flip_line(f: &DiscreteFlip, outputs_passed: Option<bool>) -> String {
    let inputs = if f.input_max_abs.is_finite() {
        format!(
            "; its inputs differ by {} ({} of range)",
            fmt_num(f.input_max_abs),
            fmt_num(f.input_rel_to_range)
        )
    } else {
        String::new()
    };
    let outputs = match outputs_passed {
        Some(true) => "the outputs pass",
        Some(false) => "the outputs fail their tolerance",
        None => "the outputs decide",
    };
    let why = if f.tied {
        "fed PyTorch's values it selects the same values, listing equal ones in its own order: \
         ties broken the other way"
    } else {
        "fed PyTorch's values it agrees: near-ties decided the other way by rounding"
    };
    format!(
        "the {} at {} ({}) selects {} of {} items differently{inputs}; {why}, not an export bug \
         ({outputs})",
        f.onnx_op,
        module_label(&f.module),
        f.onnx_node,
        f.differing,
        f.total
    )
}

/// "output logits differs by 1.60 (1.6e-3 of range), beyond its tolerance; PyTorch's own
/// float32 result is 3.76e-1 from its float64 one there (3.7e-4 of range), and ONNX Runtime's
/// difference is within 16x that: float32 rounding amplified by the network, not the export
/// (not gated)", or, when the difference is larger, why it stays a failure.
pub fn rounding_line(o: &OutputResult, r: &RoundingReference) -> String {
    let head = format!(
        "output {} differs by {} ({} of range), beyond its tolerance",
        o.name,
        fmt_num(o.cmp.max_abs),
        fmt_num(o.cmp.rel_to_range)
    );
    if r.float64_max_abs.is_infinite() {
        return format!(
            "{head}; in float64 PyTorch itself returns another shape there: rounding decides \
             what this output holds, not the export (not gated)"
        );
    }
    let reference = match r.float64_mismatch_ratio {
        Some(share) => format!(
            "in float64 PyTorch itself changes {} of its elements",
            fmt_num(share)
        ),
        None => format!(
            "PyTorch's own float32 result is {} from its float64 one there ({} of range)",
            fmt_num(r.float64_max_abs),
            fmt_num(r.float64_rel_to_range)
        ),
    };
    if r.explains && !r.decides {
        return format!(
            "{head}; {reference}, and ONNX Runtime's difference is within {}x that: float32 \
             rounding, not the export, but the output tolerance you set asks for more and \
             decides",
            r.factor
        );
    }
    if r.explains {
        format!(
            "{head}; {reference}, and ONNX Runtime's difference is within {}x that: float32 \
             rounding amplified by the network, not the export (not gated)",
            r.factor
        )
    } else {
        let (ours, theirs) = match r.float64_mismatch_ratio {
            Some(share) => (o.cmp.mismatch_ratio, share),
            None => (o.cmp.max_abs, r.float64_max_abs),
        };
        let times = if theirs > 0.0 {
            format!("{:.1}x that", ours / theirs)
        } else {
            "while float64 changes nothing".to_string()
        };
        format!(
            "{head}; {reference}; ONNX Runtime's difference is {times}, more than the {}x \
             rounding explains: the output fails",
            r.factor
        )
    }
}

/// "passes at atol 2.10e-6 (rtol 0), or rtol 3.00e-5 at atol 1e-4": the smallest tolerance
/// under which the pair passes, as the JSON's `required_atol` and `required_rtol` say it; or
/// that none does, when an element is NaN or infinite on one side only.
pub fn required_tolerance(s: &ErrorStats) -> String {
    // The required tolerances are measured over the finite elements: with NaN or an
    // infinity on one side only, no tolerance passes, and the figures would say it does.
    if s.nonfinite_mismatch > 0 {
        return format!(
            "no tolerance: {} element(s) NaN or infinite on one side only",
            s.nonfinite_mismatch
        );
    }
    format!(
        "passes at atol {} (rtol 0), or rtol {} at atol {}",
        fmt_num(s.required_atol),
        fmt_num(s.required_rtol),
        fmt_num(s.tol.atol)
    )
}

/// What a pass says of the layers and outputs: "159 layers and 1 output(s) within
/// tolerance", or, when some layers carry rounding from upstream beyond their own tolerance,
/// "no layer introduces error beyond its tolerance (9 of 159 layers carry rounding from
/// upstream) and 1 output(s) within tolerance".
pub fn pass_summary(outcome: &Outcome) -> String {
    let carried = outcome.accumulated.as_ref().map_or(0, |a| a.layers);
    let layers = if carried == 0 {
        format!("{} layers", outcome.layers.len())
    } else {
        format!(
            "no layer introduces error beyond its tolerance ({carried} of {} layers carry \
             rounding from upstream)",
            outcome.layers.len()
        )
    };
    let by_rounding = outcome
        .outputs
        .iter()
        .filter(|o| !o.cmp.pass && o.passes())
        .count();
    let rounding = match by_rounding {
        0 => String::new(),
        n => format!(" ({n} only within what float32 rounding does, measured in float64)"),
    };
    format!(
        "{layers} and {} output(s) within tolerance{rounding}",
        outcome.outputs.len()
    )
}

/// One thing a run found beyond pass and fail, as a value; each report shows its sentence
/// in its own markup. A new kind of finding is a new variant here, worded in `sentence`.
#[derive(Debug, Clone, Copy)]
pub enum Finding<'a> {
    /// Layers beyond their per-layer tolerance only by error carried from upstream.
    Accumulated(&'a AccumulatedError),
    /// A discrete result that flipped under rounding, and how the outputs stand.
    Flip(&'a DiscreteFlip, Option<bool>),
    /// A layer too small-valued for the absolute tolerance to judge.
    SmallValues(&'a SmallValues),
    /// A quantised model's SQNR summary.
    Quantized(&'a QuantizedReport),
    /// The production session, when its gate passed (a failure is said among the gates).
    Production(&'a ProductionReport),
    /// A failing output measured against PyTorch's own float64 result.
    Rounding(&'a OutputResult, &'a RoundingReference),
    /// Why that float64 run could not be made.
    RoundingUnavailable(&'a str),
}

impl Finding<'_> {
    pub fn sentence(&self) -> String {
        match *self {
            Finding::Accumulated(a) => accumulated_line(a),
            Finding::Flip(f, outputs_passed) => flip_line(f, outputs_passed),
            Finding::SmallValues(s) => small_value_line(s),
            Finding::Quantized(q) => q.line(),
            Finding::Production(p) => p.line(),
            Finding::Rounding(o, r) => rounding_line(o, r),
            Finding::RoundingUnavailable(why) => format!(
                "the float64 run that measures what rounding does to the outputs failed ({why}): \
                 the outputs are judged by their tolerance alone"
            ),
        }
    }
}

/// Every finding of `outcome`, in the order the reports show them.
pub fn findings(outcome: &Outcome) -> Vec<Finding<'_>> {
    let outputs_passed = outcome.gate(GateName::Outputs).map(|g| g.passed);
    let mut found: Vec<Finding> = outcome
        .accumulated
        .iter()
        .map(Finding::Accumulated)
        .collect();
    found.extend(
        outcome
            .discrete_flips
            .iter()
            .map(|f| Finding::Flip(f, outputs_passed)),
    );
    found.extend(
        outcome
            .outputs
            .iter()
            .filter_map(|o| Some(Finding::Rounding(o, o.rounding.as_ref()?))),
    );
    found.extend(
        outcome
            .rounding_reference
            .iter()
            .filter_map(|r| Some(Finding::RoundingUnavailable(r.error.as_deref()?))),
    );
    found.extend(outcome.small_values.iter().map(Finding::SmallValues));
    found.extend(outcome.quantized.iter().map(Finding::Quantized));
    found.extend(
        outcome
            .production
            .iter()
            .filter(|p| p.gate_passed())
            .map(Finding::Production),
    );
    found
}

/// Every finding's sentence, in order.
pub fn lines(outcome: &Outcome) -> Vec<String> {
    findings(outcome).iter().map(Finding::sentence).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_small_value_line_says_how_much_and_how_small() {
        let s = SmallValues {
            layer_index: 3,
            module: "model.10.attn.pe".into(),
            onnx_node: "/model.10/attn/pe/Conv".into(),
            rel_to_range: 0.1,
            max_value: 2e-9,
            atol: 1e-5,
        };
        let line = small_value_line(&s);
        assert!(line.starts_with("model.10.attn.pe (/model.10/attn/pe/Conv) differs by 0.1000"));
        assert!(line.contains("below 2.00e-9"), "{line}");
        assert!(line.contains("--strict-small gates it"), "{line}");
    }
}
