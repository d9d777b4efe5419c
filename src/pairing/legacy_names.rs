//! The numbers in legacy node names, read as the order the exporter wrote the nodes in.
//!
//! The legacy exporter numbers the repeats of an op type in a scope as it writes them
//! (`/attn/MatMul`, `/attn/MatMul_1`, `/attn/MatMul_2`), and graph tools keep the names when
//! they sort the graph again. So two nodes of one run tell which of them was written first,
//! wherever a tool moved them (`scopes` keeps such a node in the call it was written in).

/// A legacy-named node's run (its name without the number) and its number there:
/// `/attn/MatMul_2` is number 2 of `/attn/MatMul`, `/attn/MatMul` number 0. A graph tool that
/// fuses nodes names the new node after the output of the node it replaced
/// (`/attn/MatMul_2_output_0` for the Gemm that took MatMul_2 and its Add): that is MatMul_2's
/// place too. `None` for a name that is not a legacy scope path.
pub(super) fn legacy_number(node: &str) -> Option<(&str, usize)> {
    if !node.starts_with('/') {
        return None;
    }
    let digits = |s: &str| -> Option<usize> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
    };
    let name = match node.rsplit_once("_output_") {
        Some((named, k)) if digits(k).is_some() => named,
        _ => node,
    };
    match name.rsplit_once('_') {
        Some((run, n)) if digits(n).is_some() => Some((run, digits(n)?)),
        _ => Some((name, 0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_names_taken_from_outputs_are_numbered() {
        assert_eq!(legacy_number("/attn/MatMul_2"), Some(("/attn/MatMul", 2)));
        assert_eq!(legacy_number("/attn/MatMul"), Some(("/attn/MatMul", 0)));
        let fused = legacy_number("/attn/MatMul_2_output_0");
        assert_eq!(fused, Some(("/attn/MatMul", 2)));
        assert_eq!(
            legacy_number("/attn/MatMul_output_0"),
            Some(("/attn/MatMul", 0))
        );
        assert_eq!(legacy_number("node_Conv_1379"), None);
    }
}
