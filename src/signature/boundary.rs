//! Making the two captures' graph inputs and outputs correspond one to one before pairing,
//! when the two signatures differ.
//!
//! Pairing compares graph inputs and outputs by position. Here each side keeps only the
//! inputs that received the same data (the mapping's links, minus any that `--torch-inputs`
//! and `--onnx-inputs` fed differently), renumbered in ONNX input order, and only the
//! outputs that have a counterpart: matched by name (TorchScript's are the paths in its
//! returned value, `0`, `last_hidden_state`), then by position among the rest. An output on
//! one side only is removed from the comparison and listed, never an error. Removing a value
//! shifts the ids after it, as pairing expects ids to be positions.

use crate::capture::{Capture, CapturedValue, Side, ValueRole};
use crate::signature::types::argument_name;
use anyhow::{bail, Result};
use serde::Serialize;

/// A graph output that only one side has, so it is not compared.
#[derive(Debug, Clone, Serialize)]
pub struct OneSidedOutput {
    pub side: Side,
    pub name: String,
    pub shape: Vec<usize>,
}

/// The slot name of a TorchScript graph input: the argument without the graph's `.N`
/// suffix (`x.1` is `x`); an element of a container argument is already named by its slot.
fn slot_of(v: &CapturedValue) -> String {
    if v.op == "input" {
        argument_name(&v.name).to_string()
    } else {
        v.name.clone()
    }
}

/// Removes the values in `removed` (ids) and shifts the ids after them down.
fn remove_values(capture: &mut Capture, removed: &[usize]) {
    if removed.is_empty() {
        return;
    }
    let new_id = |old: usize| old - removed.iter().filter(|&&r| r < old).count();
    capture.values.retain(|v| !removed.contains(&v.id));
    for v in &mut capture.values {
        v.id = new_id(v.id);
        v.inputs.retain(|i| !removed.contains(i));
        for i in &mut v.inputs {
            *i = new_id(*i);
        }
    }
}

/// Numbers the graph inputs named in `pairs` (TorchScript slot, ONNX input) in the order of
/// `pairs` on both sides, and the inputs only one side was given after them, apart (ONNX's
/// after TorchScript's), so that they pair with nothing but keep their consumers computed
/// from an input. TorchScript-only arguments (`torch_only`) are removed from the capture, as
/// they have no ONNX counterpart to meet; one in `placeholders` (data made up because its
/// graph was expected not to read it) must indeed not be read.
pub fn align_inputs(
    torch: &mut Capture,
    onnx: &mut Capture,
    pairs: &[(String, String)],
    (torch_only, placeholders): (&[String], &[String]),
) -> Result<()> {
    let position_of = |v: &CapturedValue, side: Side| {
        pairs.iter().position(|(t, o)| match side {
            Side::Torch => *t == slot_of(v),
            Side::Onnx => *o == v.name,
        })
    };
    let mut next_apart = pairs.len();
    for (capture, side) in [(&mut *torch, Side::Torch), (&mut *onnx, Side::Onnx)] {
        let mut seen = vec![false; pairs.len()];
        let mut removed = Vec::new();
        for v in &mut capture.values {
            if !matches!(v.role, ValueRole::Input(_)) {
                continue;
            }
            match position_of(v, side) {
                Some(k) if !seen[k] => {
                    seen[k] = true;
                    v.role = ValueRole::Input(k);
                }
                Some(_) if v.op != "input" => {
                    // A container element read a second time is an ordinary value.
                    v.role = ValueRole::Intermediate;
                }
                _ if side == Side::Torch && torch_only.contains(&slot_of(v)) => removed.push(v.id),
                _ => {
                    v.role = ValueRole::Input(next_apart);
                    next_apart += 1;
                }
            }
        }
        if side == Side::Torch {
            check_placeholders_unread(capture, &removed, placeholders)?;
        }
        remove_values(capture, &removed);
    }
    Ok(())
}

fn check_placeholders_unread(
    capture: &Capture,
    removed: &[usize],
    placeholders: &[String],
) -> Result<()> {
    for v in &capture.values {
        let Some(&r) = v.inputs.iter().find(|i| removed.contains(i)) else {
            continue;
        };
        let slot = slot_of(&capture.values[r]);
        if placeholders.contains(&slot) {
            bail!(
                "forward argument '{slot}' is not an input of the ONNX model, but the PyTorch model reads it ({} computes value '{}' from it), so align-check has no data for it; pass --input {slot}=file.npy or --shape {slot}=...",
                v.op,
                v.name
            );
        }
    }
    Ok(())
}

/// Matches graph outputs by name, then by position among the rest; renumbers the matched
/// ones in ONNX output order on both sides and removes the others, which are returned. A
/// matched pair of different sizes means the two models were not given the same thing (or
/// do not compute it): an error that names both and the flags that fix the usual causes.
pub fn align_outputs(torch: &mut Capture, onnx: &mut Capture) -> Result<Vec<OneSidedOutput>> {
    let names = |c: &Capture| -> Vec<(usize, String)> {
        c.outputs().iter().map(|v| (v.id, v.name.clone())).collect()
    };
    let (t_out, o_out) = (names(torch), names(onnx));
    let mut t_for_o: Vec<Option<usize>> = o_out
        .iter()
        .map(|(_, on)| t_out.iter().position(|(_, tn)| tn == on))
        .collect();
    let mut t_free: Vec<usize> = (0..t_out.len())
        .filter(|t| !t_for_o.contains(&Some(*t)))
        .collect();
    t_free.reverse();
    for slot in t_for_o.iter_mut().filter(|s| s.is_none()) {
        *slot = t_free.pop();
    }
    let mut one_sided = Vec::new();
    for (o, t) in t_for_o.iter().enumerate() {
        let Some(t) = t else { continue };
        let (tv, ov) = (&torch.values[t_out[*t].0], &onnx.values[o_out[o].0]);
        let numel = |s: &[usize]| s.iter().product::<usize>();
        if numel(&tv.shape) != numel(&ov.shape) {
            bail!(
                "PyTorch output '{}' is {} but ONNX output '{}' it is matched with is {}; the models were given different inputs or do not compute the same thing (when they take their inputs in different conventions, give each its own with --torch-inputs and --onnx-inputs; when the arguments are mapped wrongly, use --map)",
                tv.name,
                crate::capture::tensor::format_shape(&tv.shape),
                ov.name,
                crate::capture::tensor::format_shape(&ov.shape)
            );
        }
    }
    // Matched outputs are numbered 0.. in ONNX output order on both sides.
    let rank: Vec<Option<usize>> = t_for_o
        .iter()
        .scan(0, |next, t| {
            Some(t.map(|_| {
                *next += 1;
                *next - 1
            }))
        })
        .collect();
    let mut keep_torch = vec![None; t_out.len()];
    for (t, r) in t_for_o.iter().zip(&rank) {
        if let (Some(t), Some(r)) = (t, r) {
            keep_torch[*t] = Some(*r);
        }
    }
    let mut renumber = |capture: &mut Capture, ids: Vec<(usize, Option<usize>)>, side: Side| {
        let mut removed = Vec::new();
        for (id, k) in ids {
            let v = &mut capture.values[id];
            match k {
                Some(k) => v.role = ValueRole::Output(k),
                None => {
                    one_sided.push(OneSidedOutput {
                        side,
                        name: v.name.clone(),
                        shape: v.shape.clone(),
                    });
                    removed.push(id);
                }
            }
        }
        remove_values(capture, &removed);
    };
    let torch_ids = t_out.iter().map(|(id, _)| *id).zip(keep_torch).collect();
    let onnx_ids = o_out
        .iter()
        .map(|(id, _)| *id)
        .zip(rank.iter().copied())
        .collect();
    renumber(torch, torch_ids, Side::Torch);
    renumber(onnx, onnx_ids, Side::Onnx);
    Ok(one_sided)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::DType;

    fn value(
        id: usize,
        name: &str,
        op: &str,
        role: ValueRole,
        inputs: Vec<usize>,
    ) -> CapturedValue {
        CapturedValue {
            id,
            name: name.into(),
            op: op.into(),
            node: String::new(),
            scope: Vec::new(),
            scope_recorded: true,
            source: None,
            source_stack: Vec::new(),
            role,
            dtype: DType::F32,
            shape: vec![2],
            inputs,
            tensor: None,
        }
    }

    fn capture(side: Side, values: Vec<CapturedValue>) -> Capture {
        Capture {
            side,
            values,
            uncapturable: Vec::new(),
            element_inputs: Default::default(),
            fx_nodes: Default::default(),
            module_aliases: Default::default(),
            control_flow: false,
        }
    }

    #[test]
    fn inputs_keep_only_the_linked_ones_in_onnx_order() {
        let mut torch = capture(
            Side::Torch,
            vec![
                value(0, "x.1", "input", ValueRole::Input(0), vec![]),
                value(1, "h", "aten::tanh", ValueRole::Intermediate, vec![0]),
            ],
        );
        let mut onnx = capture(
            Side::Onnx,
            vec![
                value(0, "input", "input", ValueRole::Input(0), vec![]),
                value(1, "state", "input", ValueRole::Input(1), vec![]),
                value(2, "h", "Tanh", ValueRole::Intermediate, vec![0, 1]),
            ],
        );
        let pairs = [("x".to_string(), "input".to_string())];
        align_inputs(&mut torch, &mut onnx, &pairs, (&[], &[])).unwrap();
        // The state only ONNX was given stays an input, numbered apart from the shared one.
        let roles: Vec<_> = onnx
            .inputs()
            .iter()
            .map(|v| (v.name.clone(), v.role))
            .collect();
        assert_eq!(
            roles,
            [
                ("input".to_string(), ValueRole::Input(0)),
                ("state".to_string(), ValueRole::Input(1))
            ]
        );
        assert_eq!(onnx.values[2].inputs, vec![0, 1]);
        assert_eq!(torch.inputs()[0].name, "x.1");
    }

    #[test]
    fn a_read_placeholder_is_refused() {
        let mut torch = capture(
            Side::Torch,
            vec![
                value(0, "x.1", "input", ValueRole::Input(0), vec![]),
                value(1, "mask", "input", ValueRole::Input(1), vec![]),
                value(2, "y", "aten::mul", ValueRole::Intermediate, vec![0, 1]),
            ],
        );
        let mut onnx = capture(
            Side::Onnx,
            vec![value(0, "x", "input", ValueRole::Input(0), vec![])],
        );
        let pairs = [("x".to_string(), "x".to_string())];
        let mask = ["mask".to_string()];
        let e = align_inputs(&mut torch, &mut onnx, &pairs, (&mask, &mask)).unwrap_err();
        assert!(e.to_string().contains("'mask'"), "{e}");
    }

    #[test]
    fn outputs_match_by_name_then_position_and_the_rest_is_one_sided() {
        let mut torch = capture(
            Side::Torch,
            vec![
                value(0, "a", "aten::relu", ValueRole::Intermediate, vec![]),
                value(1, "0", "output", ValueRole::Output(0), vec![0]),
                value(2, "1", "output", ValueRole::Output(1), vec![0]),
            ],
        );
        let mut onnx = capture(
            Side::Onnx,
            vec![
                value(0, "a", "Relu", ValueRole::Intermediate, vec![]),
                value(
                    1,
                    "last_hidden_state",
                    "output",
                    ValueRole::Output(0),
                    vec![0],
                ),
            ],
        );
        let one_sided = align_outputs(&mut torch, &mut onnx).unwrap();
        assert_eq!(one_sided.len(), 1);
        assert_eq!(
            (one_sided[0].side, one_sided[0].name.as_str()),
            (Side::Torch, "1")
        );
        assert_eq!(torch.outputs().len(), 1);
        assert_eq!(torch.outputs()[0].name, "0");

        let mut torch = capture(
            Side::Torch,
            vec![
                value(0, "logits", "output", ValueRole::Output(0), vec![]),
                value(1, "state_out", "output", ValueRole::Output(1), vec![]),
            ],
        );
        let mut onnx = capture(
            Side::Onnx,
            vec![
                value(0, "state_out", "output", ValueRole::Output(0), vec![]),
                value(1, "extra", "output", ValueRole::Output(1), vec![]),
                value(2, "logits", "output", ValueRole::Output(2), vec![]),
            ],
        );
        let one_sided = align_outputs(&mut torch, &mut onnx).unwrap();
        assert_eq!(one_sided.len(), 1);
        assert_eq!(one_sided[0].name, "extra");
        let order: Vec<_> = torch.outputs().iter().map(|v| v.name.clone()).collect();
        assert_eq!(order, ["state_out", "logits"]);
    }
}
