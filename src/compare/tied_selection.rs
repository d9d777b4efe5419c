//! Ties in a selection: a `TopK` or sort that, fed PyTorch's values, selects the same values
//! as PyTorch but lists equal ones in another order.
//!
//! Which of several equal scores comes first is each runtime's own choice (ONNX Runtime takes
//! the lower index; libtorch's order among ties is unspecified), and a detector that has
//! thresholded its scores holds many exact ties. Fed PyTorch's values, the node's values
//! output then agrees with PyTorch's while its indices output still differs: the indices
//! fail in isolation though the node computes what PyTorch computes. When every float output
//! of the node passes in isolation, its integer outputs that fail there differ only among
//! equal values: they pass, marked `tied`, and the differences they carry downstream are
//! discrete flips like those of near-ties (`discrete`), left to the outputs' tolerance.

use crate::capture::tensor::DType;
use crate::capture::Capture;
use crate::compare::judged::{Isolated, LayerResult};

/// Passes the integer outputs of selection nodes whose float outputs all pass in isolation.
/// `isolated` is indexed like `layers`.
pub fn pass_tied_selections(
    layers: &[LayerResult],
    onnx: &Capture,
    isolated: &mut [Option<Isolated>],
) {
    let node_of = |i: usize| onnx.values[layers[i].onnx_id].node.as_str();
    let is_float = |i: usize| DType::from_name(&layers[i].cmp.dtype).is_some_and(|d| d.is_float());
    let failing_indices: Vec<usize> = (0..layers.len())
        .filter(|&i| !is_float(i) && !node_of(i).is_empty())
        .filter(|&i| isolated[i].as_ref().is_some_and(|x| !x.pass))
        .collect();
    for i in failing_indices {
        let mut values = (0..layers.len()).filter(|&j| node_of(j) == node_of(i) && is_float(j));
        let mut any = false;
        let agree = values.all(|j| {
            any = true;
            isolated[j].as_ref().is_some_and(|x| x.pass)
        });
        if any && agree {
            if let Some(x) = isolated[i].as_mut() {
                x.pass = true;
                x.tied = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{CapturedValue, Side, ValueRole};

    fn onnx_value(id: usize, node: &str) -> CapturedValue {
        CapturedValue {
            id,
            name: format!("v{id}"),
            op: "TopK".into(),
            node: node.into(),
            scope: vec![],
            scope_recorded: true,
            source: None,
            source_stack: vec![],
            role: ValueRole::Intermediate,
            dtype: DType::F32,
            shape: vec![2],
            inputs: vec![],
            tensor: None,
        }
    }

    fn layer(index: usize, dtype: &str) -> LayerResult {
        let mut l = crate::compare::evaluate::tests::layer_result(index);
        l.cmp.dtype = dtype.to_string();
        l.onnx_id = index;
        l
    }

    fn iso(pass: bool) -> Option<Isolated> {
        Some(Isolated {
            max_abs: if pass { 0.0 } else { 1.0 },
            rel_to_range: if pass { 0.0 } else { 1.0 },
            pass,
            snr_db: None,
            rounding_floor: None,
            tied: false,
            nonfinite_mismatch: 0,
        })
    }

    #[test]
    fn indices_pass_only_where_the_node_selects_the_same_values() {
        let onnx = Capture {
            side: Side::Onnx,
            values: vec![
                onnx_value(0, "/TopK"),
                onnx_value(1, "/TopK"),
                onnx_value(2, "/ArgMax"),
            ],
            uncapturable: vec![],
            element_inputs: Default::default(),
            fx_nodes: Default::default(),
            module_aliases: Default::default(),
            control_flow: false,
        };
        let layers = vec![layer(0, "float32"), layer(1, "int64"), layer(2, "int64")];
        // The values agree: the indices differ among equal values only.
        let mut isolated = vec![iso(true), iso(false), iso(false)];
        pass_tied_selections(&layers, &onnx, &mut isolated);
        let got: Vec<(bool, bool)> = isolated
            .iter()
            .map(|x| x.as_ref().map(|x| (x.pass, x.tied)).unwrap())
            .collect();
        // An ArgMax has no values output to vouch for it: it keeps its failure.
        assert_eq!(got, [(true, false), (true, true), (false, false)]);
        // Values that differ too: a real difference in what is selected.
        let mut isolated = vec![iso(false), iso(false), iso(false)];
        pass_tied_selections(&layers, &onnx, &mut isolated);
        assert!(isolated.iter().all(|x| !x.as_ref().unwrap().pass));
    }
}
