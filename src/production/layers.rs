//! Where a named pass changes values: the first paired layer, in execution order, whose value
//! differs between the production session with the pass and the same session without it.
//!
//! ONNX Runtime keeps every graph output, so the paired layers' values are made graph outputs
//! of both sessions (the per-layer capture's values, not every node output: a fusion's own
//! intermediates stay internal so that the pass can still run). A value that is internal to
//! the pattern the pass rewrites blocks it; then the exposed sessions no longer reproduce the
//! output difference, and the honest answer is that the pass's values cannot be observed.
//! Each layer is judged by its own tolerance (`--atol`, `--rtol`, overrides), the session
//! without the pass as the reference. Pure: the sessions are `app::production`'s.

use crate::capture::tensor::{DType, HostTensor};
use crate::compare::stats::{compare, finite_or_null};
use crate::compare::tolerance::TolerancePolicy;
use crate::text::{fmt_num, module_label};
use serde::Serialize;

/// A paired layer whose value the probe sessions return.
#[derive(Debug, Clone)]
pub struct LayerValue {
    pub index: usize,
    pub module: String,
    pub onnx_node: String,
    /// The ONNX value's name: the graph output it is fetched as.
    pub value: String,
    /// The precision the layer is judged in.
    pub precision: DType,
}

/// What exposing the layers showed (JSON `production.layer`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LayerFinding {
    /// The first layer the pass changes beyond its tolerance.
    Layer {
        layer_index: usize,
        module: String,
        onnx_node: String,
        #[serde(serialize_with = "finite_or_null")]
        max_abs: f64,
        #[serde(serialize_with = "finite_or_null")]
        rel_to_range: f64,
    },
    /// With the layers exposed the outputs agree again: exposing them stopped the pass.
    Blocked,
    /// The outputs still differ, yet no paired layer's value does beyond its tolerance: the
    /// pass changes values between the paired ones (or only at the outputs).
    Between,
    /// The exposed sessions could not be built or run (why): the finding stands without it.
    NotRun { reason: String },
}

/// The finding, from the probe sessions' values with the pass (`with`) and without it
/// (`without`), by name, and whether the outputs still differ with the layers exposed.
pub fn first_changed(
    layers: &[LayerValue],
    with: &[(String, HostTensor)],
    without: &[(String, HostTensor)],
    outputs_still_differ: bool,
    policy: &TolerancePolicy,
) -> LayerFinding {
    if !outputs_still_differ {
        return LayerFinding::Blocked;
    }
    let find = |values: &'_ [(String, HostTensor)], name: &str| {
        values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    };
    for l in layers {
        let (Some(a), Some(b)) = (find(with, &l.value), find(without, &l.value)) else {
            continue;
        };
        let tol = policy.for_layer(&l.module, &l.onnx_node, l.precision);
        let Ok(stats) = compare(&b, &a, tol) else {
            continue;
        };
        if !stats.pass {
            return LayerFinding::Layer {
                layer_index: l.index,
                module: l.module.clone(),
                onnx_node: l.onnx_node.clone(),
                max_abs: stats.max_abs,
                rel_to_range: stats.rel_to_range,
            };
        }
    }
    LayerFinding::Between
}

impl LayerFinding {
    /// The clause the production line adds after the pass's name.
    pub fn clause(&self, pass: &str) -> String {
        match self {
            LayerFinding::Layer {
                layer_index,
                module,
                onnx_node,
                max_abs,
                rel_to_range,
            } => format!(
                "; the first paired layer it changes is #{layer_index} {} ({onnx_node}), by {} \
                 of range (max abs {})",
                module_label(module),
                fmt_num(*rel_to_range),
                fmt_num(*max_abs)
            ),
            LayerFinding::Blocked => format!(
                "; its values cannot be observed layer by layer: with the paired layers exposed \
                 as outputs ONNX Runtime no longer applies {pass} (the outputs then agree)"
            ),
            LayerFinding::Between => format!(
                "; no paired layer's value changes beyond its tolerance: {pass} changes values \
                 no layer pairs with"
            ),
            LayerFinding::NotRun { reason } => {
                format!("; the layers it changes could not be looked for: {reason}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::TensorData;

    fn t(v: &[f32]) -> HostTensor {
        HostTensor::new(vec![v.len()], TensorData::F32(v.to_vec()))
    }

    fn layer(index: usize, value: &str) -> LayerValue {
        LayerValue {
            index,
            module: format!("m{index}"),
            onnx_node: format!("/m{index}/Op"),
            value: value.into(),
            precision: DType::F32,
        }
    }

    #[test]
    fn the_first_layer_beyond_its_tolerance_is_named_in_execution_order() {
        let policy = TolerancePolicy::new(None, None, Vec::new()).unwrap();
        let layers = [layer(0, "a"), layer(1, "b"), layer(2, "c")];
        let without = vec![
            ("a".into(), t(&[1.0, 2.0])),
            ("b".into(), t(&[1.0, 2.0])),
            ("c".into(), t(&[1.0, 2.0])),
        ];
        // a agrees to rounding, b is changed, c more so: b is where the pass acts.
        let with = vec![
            ("a".into(), t(&[1.0, 2.000_000_2])),
            ("b".into(), t(&[1.0, 2.001])),
            ("c".into(), t(&[1.0, 2.1])),
        ];
        match first_changed(&layers, &with, &without, true, &policy) {
            LayerFinding::Layer {
                layer_index,
                max_abs,
                ..
            } => {
                assert_eq!(layer_index, 1);
                assert!((max_abs - 1e-3).abs() < 1e-6, "{max_abs}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            first_changed(&layers, &with, &without, false, &policy),
            LayerFinding::Blocked
        );
        assert_eq!(
            first_changed(&layers, &without, &without, true, &policy),
            LayerFinding::Between
        );
    }
}
