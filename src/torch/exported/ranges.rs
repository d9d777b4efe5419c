//! The shapes an exported program was exported for: each user input's dimensions are fixed
//! sizes or symbols (`s77`) whose allowed values the program's `range_constraints` give
//! (`torch.export.Dim("batch", min=2, max=8)`). The program's kernels were specialised and
//! its guards decided for exactly those shapes; an input outside them runs code that
//! `ep.module()` would refuse to run, so the check refuses it first, in one line.
//!
//! Only dimensions that are one plain symbol or a fixed size are checked; a derived dimension
//! (`2*s77`) is left to the program (its key in `range_constraints` is sympy's printing of an
//! expression, which this reader does not evaluate).

use super::graph::Model;
use serde_json::Value;

/// What one dimension of a user input may be.
#[derive(Debug, Clone, PartialEq)]
pub enum DimRule {
    Fixed(i64),
    /// A symbol and its inclusive range (`None`: unbounded above).
    Range {
        symbol: String,
        min: i64,
        max: Option<i64>,
    },
    /// A derived dimension, not checked.
    Derived,
}

/// Per user input (by name, in argument order), the rule for each of its dimensions.
pub fn input_rules(model: &Model, inputs: &[String]) -> Vec<(String, Vec<DimRule>)> {
    let values = &model.graph_module.graph.tensor_values;
    inputs
        .iter()
        .map(|name| {
            let sizes = values
                .get(name)
                .and_then(|v| v.get("sizes"))
                .and_then(Value::as_array);
            let rules = sizes
                .map(|s| s.iter().map(|d| rule(model, d)).collect())
                .unwrap_or_default();
            (name.clone(), rules)
        })
        .collect()
}

fn rule(model: &Model, dim: &Value) -> DimRule {
    if let Some(n) = dim.get("as_int").and_then(Value::as_i64) {
        return DimRule::Fixed(n);
    }
    let expr = dim
        .get("as_expr")
        .and_then(|e| e.get("expr_str"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let Some(symbol) = plain_symbol(expr) else {
        return DimRule::Derived;
    };
    let range = model.range_constraints.get(symbol);
    let bound = |key: &str| range.and_then(|r| r.get(key)).and_then(Value::as_i64);
    DimRule::Range {
        symbol: symbol.to_string(),
        min: bound("min_val").unwrap_or(0),
        max: bound("max_val"),
    }
}

/// `s77` of `Symbol('s77', positive=True, integer=True)`; `None` for any other expression.
fn plain_symbol(expr: &str) -> Option<&str> {
    let rest = expr.strip_prefix("Symbol('")?;
    let (name, tail) = rest.split_once('\'')?;
    (tail.starts_with(',') || tail.starts_with(')')).then_some(name)
}

/// The first input shape the rules refuse, as one line; `None` when every shape fits.
/// `shapes` are the user's tensors' shapes in argument order (`None` for a non-tensor).
pub fn refusal(rules: &[(String, Vec<DimRule>)], shapes: &[Option<Vec<i64>>]) -> Option<String> {
    // Where each symbol was first met: the same symbol must have the same value everywhere.
    let mut seen: Vec<(&str, i64, &str, usize)> = Vec::new();
    for ((name, dims), shape) in rules.iter().zip(shapes) {
        let Some(shape) = shape else { continue };
        if dims.is_empty() {
            continue;
        }
        if shape.len() != dims.len() {
            return Some(format!(
                "input '{name}' has {} dimension(s), but the exported program was exported for {}",
                shape.len(),
                dims.len()
            ));
        }
        for (k, (rule, &value)) in dims.iter().zip(shape).enumerate() {
            if let Some(why) = outside(rule, value, &seen) {
                return Some(format!("input '{name}' dimension {k} is {value}: {why}"));
            }
            if let DimRule::Range { symbol, .. } = rule {
                if !seen.iter().any(|(s, ..)| s == symbol) {
                    seen.push((symbol, value, name, k));
                }
            }
        }
    }
    None
}

/// Why `value` breaks `rule` (given the symbols already bound), if it does.
fn outside(rule: &DimRule, value: i64, seen: &[(&str, i64, &str, usize)]) -> Option<String> {
    match rule {
        DimRule::Fixed(n) if *n != value => Some(format!(
            "the exported program was exported for size {n} there (a static dimension; export \
             it with a torch.export.Dim for that dimension to vary it)"
        )),
        DimRule::Range { symbol, min, max } => {
            let above = max.is_some_and(|m| value > m);
            if value < *min || above {
                let max = max.map_or("inf".to_string(), |m| m.to_string());
                return Some(format!(
                    "outside the range [{min}, {max}] the exported program allows for its \
                     dynamic dimension {symbol} (range_constraints)"
                ));
            }
            let (_, bound, first, at) = seen.iter().find(|(s, ..)| s == symbol)?;
            (*bound != value).then(|| {
                format!(
                    "it is the exported program's dynamic dimension {symbol}, which input \
                     '{first}' dimension {at} sets to {bound}"
                )
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(symbol: &str, min: i64, max: Option<i64>) -> DimRule {
        DimRule::Range {
            symbol: symbol.into(),
            min,
            max,
        }
    }

    #[test]
    fn plain_symbols_are_read_and_expressions_are_not() {
        assert_eq!(
            plain_symbol("Symbol('s77', positive=True, integer=True)"),
            Some("s77")
        );
        assert_eq!(plain_symbol("Symbol('s0')"), Some("s0"));
        assert_eq!(
            plain_symbol("Mul(Integer(2), Symbol('s77', positive=True))"),
            None
        );
    }

    #[test]
    fn a_shape_outside_its_range_is_refused_naming_input_dimension_value_and_range() {
        let rules = vec![
            (
                "x".to_string(),
                vec![range("s77", 2, Some(8)), DimRule::Fixed(4)],
            ),
            (
                "y".to_string(),
                vec![range("s77", 2, Some(8)), DimRule::Derived],
            ),
        ];
        let fits = [Some(vec![3, 4]), Some(vec![3, 100])];
        assert_eq!(refusal(&rules, &fits), None);
        let big = refusal(&rules, &[Some(vec![9, 4]), Some(vec![9, 1])]).unwrap();
        assert!(big.starts_with("input 'x' dimension 0 is 9: "), "{big}");
        assert!(big.contains("[2, 8]") && big.contains("s77"), "{big}");
        let fixed = refusal(&rules, &[Some(vec![3, 5]), Some(vec![3, 1])]).unwrap();
        assert!(
            fixed.contains("dimension 1 is 5") && fixed.contains("size 4"),
            "{fixed}"
        );
        let unequal = refusal(&rules, &[Some(vec![3, 4]), Some(vec![5, 1])]).unwrap();
        assert!(
            unequal.starts_with("input 'y' dimension 0 is 5"),
            "{unequal}"
        );
        assert!(unequal.contains("'x' dimension 0 sets to 3"), "{unequal}");
        let unbounded = vec![("x".to_string(), vec![range("s0", 0, None)])];
        assert_eq!(refusal(&unbounded, &[Some(vec![100_000])]), None);
        let small = refusal(&unbounded, &[Some(vec![-1])]).unwrap();
        assert!(small.contains("[0, inf]"), "{small}");
    }
}
