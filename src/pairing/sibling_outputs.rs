//! The outputs of one multi-output op in one order on both sides, for the order-keeping
//! alignment.
//!
//! A `topk`, `max`, `min` or `sort` with indices returns a float tensor and an integer one.
//! ONNX lists a node's outputs in their order (TopK's values, then indices), while
//! TorchScript's capture of a traced detector listed the indices first; the alignment keeps
//! the order of both sides, so it could pair only one of the two, and 77 index tensors of a
//! clean SSD were left out of the comparison. Within a run of consecutive values of one op
//! read from the same inputs (the outputs of one node), the float outputs are put first on
//! either side; the order is otherwise kept, so outputs of one kind of number (a split's
//! pieces) stay as they were.

use crate::capture::CapturedValue;

/// `ids` (positions into `values`, in execution order) with each run of sibling outputs
/// reordered floats first, stably.
pub(super) fn floats_first(ids: &[usize], values: &[CapturedValue]) -> Vec<usize> {
    let mut out = Vec::with_capacity(ids.len());
    let mut start = 0;
    while start < ids.len() {
        let first = &values[ids[start]];
        let mut end = start + 1;
        while end < ids.len() && siblings(first, &values[ids[end]]) {
            end += 1;
        }
        let mut run = ids[start..end].to_vec();
        run.sort_by_key(|&id| !values[id].dtype.is_float());
        out.extend(run);
        start = end;
    }
    out
}

/// Whether two values are outputs of one node, as far as the capture tells: the same op on
/// the same (non-empty) inputs.
fn siblings(a: &CapturedValue, b: &CapturedValue) -> bool {
    a.op == b.op && !a.inputs.is_empty() && a.inputs == b.inputs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::DType;
    use crate::capture::ValueRole;

    fn value(id: usize, op: &str, inputs: &[usize], dtype: DType) -> CapturedValue {
        CapturedValue {
            id,
            name: format!("v{id}"),
            op: op.into(),
            node: String::new(),
            scope: Vec::new(),
            scope_recorded: true,
            source: None,
            source_stack: Vec::new(),
            role: ValueRole::Intermediate,
            dtype,
            shape: vec![4],
            inputs: inputs.to_vec(),
            tensor: None,
        }
    }

    #[test]
    fn a_nodes_indices_listed_first_follow_its_values() {
        let values = vec![
            value(0, "aten::select", &[], DType::F32),
            value(1, "aten::topk", &[0], DType::I64),
            value(2, "aten::topk", &[0], DType::F32),
            value(3, "aten::index", &[2, 1], DType::F32),
            // A split's pieces, one kind of number: kept as they are.
            value(4, "aten::split", &[3], DType::F32),
            value(5, "aten::split", &[3], DType::F32),
            // Alike ops on other inputs are not siblings.
            value(6, "aten::topk", &[4], DType::I64),
            value(7, "aten::topk", &[5], DType::F32),
        ];
        let ids: Vec<usize> = (0..values.len()).collect();
        assert_eq!(floats_first(&ids, &values), [0, 2, 1, 3, 4, 5, 6, 7]);
    }
}
