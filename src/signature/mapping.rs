//! Which ONNX input each TorchScript argument receives, when the two files were not exported
//! by one script and their signatures differ.
//!
//! The TorchScript side offers *slots*: each plain argument (`x`, `rate`), and each element a
//! container argument is read at in the graph (`inputs.input_ids`, `pair.0`). Slots are
//! matched to ONNX inputs by `--map SLOT=INPUT` first, then by name (the argument's name or
//! the element's key), then by position among what is left (arguments with a default or of
//! Optional type step aside when more slots than inputs are left). Position is only trusted
//! where order settles it: as many slots as inputs left, or one slot left among several
//! inputs (it takes the first, the order in which exports list data before state). Several slots
//! among a different number of inputs, or a position that puts a number on a tensor input,
//! is refused with both lists and the `--map` that settles it. Whatever is left over is
//! one-sided: an ONNX input no argument takes (state the TorchScript module keeps inside
//! itself) and an argument no ONNX input feeds (one the exporter dropped).

use super::types::ArgType;
use anyhow::{bail, Result};
use serde::Serialize;

/// One forward argument as the mapping sees it.
#[derive(Debug, Clone)]
pub struct TorchArg {
    /// The Python name (`x`, not the graph's `x.1`).
    pub name: String,
    pub ty: ArgType,
    /// For a container argument, the keys the graph reads it at, in reading order.
    pub keys: Vec<String>,
    /// Whether the argument can go without data (a default, or `Optional`).
    pub optional: bool,
}

/// One ONNX input as the mapping sees it.
#[derive(Debug, Clone)]
pub struct OnnxInput {
    pub name: String,
    /// Whether its declared shape holds exactly one element (rank 0, or all dims 1): the
    /// only inputs a number can come from.
    pub one_element: bool,
}

/// How a slot found its ONNX input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkedBy {
    /// `--map`
    Map,
    Name,
    Position,
}

/// A slot and the ONNX input that feeds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// `x`, or `inputs.input_ids` for an element of a container argument.
    pub slot: String,
    pub onnx: String,
    pub by: LinkedBy,
}

/// The whole correspondence between the two signatures.
#[derive(Debug, Clone, Default)]
pub struct Mapping {
    /// In ONNX input order.
    pub links: Vec<Link>,
    /// Slots no ONNX input feeds, in argument order.
    pub torch_only: Vec<String>,
    /// ONNX inputs no slot takes, in input order.
    pub onnx_only: Vec<String>,
}

impl Mapping {
    pub fn onnx_for(&self, slot: &str) -> Option<&Link> {
        self.links.iter().find(|l| l.slot == slot)
    }
}

/// A slot: its name, the name it matches ONNX inputs by, whether it holds a number, and
/// whether it is module state (matched by name or `--map` only, never by position).
struct Slot {
    name: String,
    key: String,
    scalar: bool,
    state: bool,
    optional: bool,
}

/// The prefix of state slots: `self.state` is the module's attribute `state`.
pub const STATE_PREFIX: &str = "self.";

fn slots(args: &[TorchArg], state: &[String]) -> Vec<Slot> {
    let mut out = Vec::new();
    for a in args {
        if a.ty.is_container() {
            for k in &a.keys {
                out.push(Slot {
                    name: format!("{}.{k}", a.name),
                    key: k.clone(),
                    scalar: false,
                    state: false,
                    optional: false,
                });
            }
        } else {
            out.push(Slot {
                name: a.name.clone(),
                key: a.name.clone(),
                scalar: a.ty.scalar().is_some(),
                state: false,
                optional: a.optional,
            });
        }
    }
    out.extend(state.iter().map(|attr| Slot {
        name: format!("{STATE_PREFIX}{attr}"),
        key: attr.clone(),
        scalar: false,
        state: true,
        optional: true,
    }));
    out
}

/// The mapping for `args` (and the module attributes `state` that forward reads before it
/// writes them) against `inputs`, with the user's `--map SLOT=INPUT` pairs first, then
/// names, then positions.
pub fn plan(
    args: &[TorchArg],
    state: &[String],
    inputs: &[OnnxInput],
    maps: &[(String, String)],
) -> Result<Mapping> {
    let slots = slots(args, state);
    let mut p = Placing {
        taken: vec![None; inputs.len()],
        placed: vec![false; slots.len()],
    };
    p.by_map(&slots, inputs, maps)?;
    p.by_name(&slots, inputs);
    p.by_position(&slots, inputs)?;
    Ok(p.into_mapping(&slots, inputs))
}

/// The mapping as it is being made: for each ONNX input, the slot that takes it and how;
/// for each slot, whether it is placed.
struct Placing {
    taken: Vec<Option<(usize, LinkedBy)>>,
    placed: Vec<bool>,
}

fn names_of<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

impl Placing {
    fn take(&mut self, slot: usize, input: usize, by: LinkedBy) {
        self.taken[input] = Some((slot, by));
        self.placed[slot] = true;
    }

    /// The user's `--map` pairs, each checked against both signatures.
    fn by_map(
        &mut self,
        slots: &[Slot],
        inputs: &[OnnxInput],
        maps: &[(String, String)],
    ) -> Result<()> {
        for (slot, onnx) in maps {
            let Some(s) = slots.iter().position(|s| &s.name == slot) else {
                bail!("--map {slot}={onnx}: the PyTorch model's forward has no argument '{slot}' (its arguments: {})", names_of(slots.iter().map(|s| s.name.as_str())));
            };
            let Some(i) = inputs.iter().position(|i| &i.name == onnx) else {
                bail!(
                    "--map {slot}={onnx}: the ONNX model has no input '{onnx}' (its inputs: {})",
                    names_of(inputs.iter().map(|i| i.name.as_str()))
                );
            };
            if self.placed[s] || self.taken[i].is_some() {
                bail!(
                    "--map {slot}={onnx}: '{slot}' or '{onnx}' is already mapped by another --map"
                );
            }
            self.take(s, i, LinkedBy::Map);
        }
        Ok(())
    }

    /// Each slot left to the input of its key's or its own name.
    fn by_name(&mut self, slots: &[Slot], inputs: &[OnnxInput]) {
        for (s, slot) in slots.iter().enumerate() {
            if self.placed[s] {
                continue;
            }
            let by_name = inputs.iter().enumerate().find(|(i, inp)| {
                self.taken[*i].is_none() && (inp.name == slot.key || inp.name == slot.name)
            });
            if let Some((i, _)) = by_name {
                self.take(s, i, LinkedBy::Name);
            }
        }
    }

    /// The slots left, in order, to the inputs left, when position settles it.
    fn by_position(&mut self, slots: &[Slot], inputs: &[OnnxInput]) -> Result<()> {
        let mut left_slots: Vec<usize> = (0..slots.len())
            .filter(|&s| !self.placed[s] && !slots[s].state)
            .collect();
        let left_inputs: Vec<usize> = (0..inputs.len())
            .filter(|&i| self.taken[i].is_none())
            .collect();
        if left_slots.len() > left_inputs.len() {
            // Arguments that can go without data (a default, an Optional) are the ones an
            // export leaves out: position places the others.
            left_slots.retain(|&s| !slots[s].optional);
        }
        if left_slots.is_empty() || left_inputs.is_empty() {
            return Ok(());
        }
        if left_slots.len() > 1 && left_slots.len() != left_inputs.len() {
            bail!(self.unsettled(slots, inputs, &left_slots, &left_inputs));
        }
        for (&s, &i) in left_slots.iter().zip(&left_inputs) {
            if slots[s].scalar && !inputs[i].one_element {
                bail!(
                    "by position, forward argument '{}' (a number) would take ONNX input '{}', which is not a one-element tensor; say which input it takes with --map {}=INPUT",
                    slots[s].name,
                    inputs[i].name,
                    slots[s].name
                );
            }
            self.take(s, i, LinkedBy::Position);
        }
        Ok(())
    }

    /// Why position cannot place the slots left: what is left on each side, and the flag.
    fn unsettled(
        &self,
        slots: &[Slot],
        inputs: &[OnnxInput],
        left_slots: &[usize],
        left_inputs: &[usize],
    ) -> String {
        let ls: Vec<&str> = left_slots.iter().map(|&s| slots[s].name.as_str()).collect();
        let li: Vec<&str> = left_inputs
            .iter()
            .map(|&i| inputs[i].name.as_str())
            .collect();
        let state = names_of(
            (0..slots.len())
                .filter(|&s| !self.placed[s] && slots[s].state)
                .map(|s| slots[s].name.as_str()),
        );
        let state = if state.is_empty() {
            String::new()
        } else {
            format!(" (module state that an ONNX input may carry: {state})")
        };
        format!(
            "cannot tell which forward argument takes which ONNX input: after matching by name, argument(s) {} are left for ONNX input(s) {}, and position does not settle {} arguments among {} inputs; say which with --map ARG=INPUT (e.g. --map {}={}){state}",
            ls.join(", "),
            li.join(", "),
            ls.len(),
            li.len(),
            ls[0],
            li[0]
        )
    }

    fn into_mapping(self, slots: &[Slot], inputs: &[OnnxInput]) -> Mapping {
        let mut mapping = Mapping::default();
        for (i, t) in self.taken.iter().enumerate() {
            match t {
                Some((s, by)) => mapping.links.push(Link {
                    slot: slots[*s].name.clone(),
                    onnx: inputs[i].name.clone(),
                    by: *by,
                }),
                None => mapping.onnx_only.push(inputs[i].name.clone()),
            }
        }
        mapping.torch_only = (0..slots.len())
            .filter(|&s| !self.placed[s] && !slots[s].state)
            .map(|s| slots[s].name.clone())
            .collect();
        mapping
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(name: &str, ty: &str) -> TorchArg {
        TorchArg {
            name: name.into(),
            ty: ArgType::parse(ty),
            keys: Vec::new(),
            optional: ty.starts_with("Optional"),
        }
    }

    fn input(name: &str, one_element: bool) -> OnnxInput {
        OnnxInput {
            name: name.into(),
            one_element,
        }
    }

    fn links(m: &Mapping) -> Vec<(String, String, LinkedBy)> {
        m.links
            .iter()
            .map(|l| (l.slot.clone(), l.onnx.clone(), l.by))
            .collect()
    }

    #[test]
    fn names_first_then_the_one_argument_left_takes_the_first_input_left() {
        let args = [arg("x", "Tensor"), arg("rate", "int")];
        let inputs = [
            input("input", false),
            input("state", false),
            input("rate", true),
        ];
        let m = plan(&args, &[], &inputs, &[]).unwrap();
        assert_eq!(
            links(&m),
            vec![
                ("x".into(), "input".into(), LinkedBy::Position),
                ("rate".into(), "rate".into(), LinkedBy::Name)
            ]
        );
        assert_eq!(m.onnx_only, vec!["state".to_string()]);
        assert!(m.torch_only.is_empty());
    }

    #[test]
    fn several_arguments_among_a_different_number_of_inputs_name_the_flag() {
        let args = [arg("x", "Tensor"), arg("rate", "int")];
        let inputs = [
            input("input", false),
            input("state", false),
            input("sample_rate", true),
        ];
        let e = plan(&args, &[], &inputs, &[]).unwrap_err().to_string();
        assert!(
            e.contains("x, rate") && e.contains("input, state, sample_rate"),
            "{e}"
        );
        assert!(e.contains("--map"), "{e}");
        let maps = [("rate".to_string(), "sample_rate".to_string())];
        let m = plan(&args, &[], &inputs, &maps).unwrap();
        assert_eq!(
            links(&m),
            vec![
                ("x".into(), "input".into(), LinkedBy::Position),
                ("rate".into(), "sample_rate".into(), LinkedBy::Map)
            ]
        );
    }

    #[test]
    fn arguments_that_need_no_data_step_aside_for_position() {
        let args = [arg("x", "Tensor"), arg("bias", "Optional[Tensor]")];
        let m = plan(&args, &[], &[input("input", false)], &[]).unwrap();
        assert_eq!(
            links(&m),
            vec![("x".into(), "input".into(), LinkedBy::Position)]
        );
        assert_eq!(m.torch_only, vec!["bias".to_string()]);
    }

    #[test]
    fn module_state_takes_an_input_by_name_only() {
        let args = [arg("x", "Tensor")];
        let state = ["state".to_string(), "context".to_string()];
        let inputs = [input("input", false), input("state", false)];
        let m = plan(&args, &state, &inputs, &[]).unwrap();
        assert_eq!(
            links(&m),
            vec![
                ("x".into(), "input".into(), LinkedBy::Position),
                ("self.state".into(), "state".into(), LinkedBy::Name)
            ]
        );
        // State never soaks up a leftover input by position, nor counts as an argument.
        let m = plan(
            &args,
            &state,
            &[input("input", false), input("h0", false)],
            &[],
        )
        .unwrap();
        assert_eq!(m.onnx_only, vec!["h0".to_string()]);
        assert!(m.torch_only.is_empty());
    }

    #[test]
    fn dict_elements_match_inputs_by_key() {
        let mut inputs_arg = arg("inputs", "Dict[str, Tensor]");
        inputs_arg.keys = vec!["input_ids".into(), "attention_mask".into()];
        let m = plan(
            &[inputs_arg],
            &[],
            &[input("attention_mask", false), input("input_ids", false)],
            &[],
        )
        .unwrap();
        assert_eq!(
            links(&m),
            vec![
                (
                    "inputs.attention_mask".into(),
                    "attention_mask".into(),
                    LinkedBy::Name
                ),
                (
                    "inputs.input_ids".into(),
                    "input_ids".into(),
                    LinkedBy::Name
                )
            ]
        );
    }

    #[test]
    fn equal_counts_stay_positional_and_leftovers_are_one_sided() {
        let m = plan(
            &[arg("a", "Tensor"), arg("b", "Tensor")],
            &[],
            &[input("input_0", false), input("input_1", false)],
            &[],
        )
        .unwrap();
        assert_eq!(m.links.len(), 2);
        assert!(m.links.iter().all(|l| l.by == LinkedBy::Position));
        let m = plan(
            &[arg("x", "Tensor"), arg("mask", "Tensor")],
            &[],
            &[input("x", false)],
            &[],
        )
        .unwrap();
        assert_eq!(m.torch_only, vec!["mask".to_string()]);
    }

    #[test]
    fn a_number_never_takes_a_tensor_input_by_position_and_bad_maps_are_named() {
        let e = plan(&[arg("rate", "int")], &[], &[input("input", false)], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--map rate=INPUT"), "{e}");
        let e = plan(
            &[arg("x", "Tensor")],
            &[],
            &[input("input", false)],
            &[("y".into(), "input".into())],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no argument 'y'") && e.contains("x"), "{e}");
    }
}
