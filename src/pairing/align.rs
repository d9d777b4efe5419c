//! Order-preserving alignment of two op sequences (a longest common subsequence where
//! "equal" means "may be the same computation").
//!
//! Inside one scope both exporters keep the order in which PyTorch ran the ops, but ONNX adds
//! nodes (a decomposed GELU is five) and drops some (folded constants). Among the alignments
//! with the most pairs, each TorchScript value takes the latest compatible ONNX value: the last
//! node of a decomposition is the one that carries the op's result.

/// Returns `(torch_index, onnx_index)` pairs in increasing order of both.
pub fn align(n: usize, m: usize, can_pair: impl Fn(usize, usize) -> bool) -> Vec<(usize, usize)> {
    if n == 0 || m == 0 {
        return Vec::new();
    }
    // best[i][j]: most pairs among the first i torch and first j ONNX values.
    let width = m + 1;
    let mut best = vec![0u32; (n + 1) * width];
    for i in 1..=n {
        for j in 1..=m {
            let skip = best[(i - 1) * width + j].max(best[i * width + j - 1]);
            let take = if can_pair(i - 1, j - 1) {
                best[(i - 1) * width + j - 1] + 1
            } else {
                0
            };
            best[i * width + j] = skip.max(take);
        }
    }
    let mut pairs = Vec::new();
    let (mut i, mut j) = (n, m);
    while i > 0 && j > 0 {
        let here = best[i * width + j];
        if here == 0 {
            break;
        }
        if can_pair(i - 1, j - 1) && here == best[(i - 1) * width + j - 1] + 1 {
            pairs.push((i - 1, j - 1));
            i -= 1;
            j -= 1;
        } else if best[i * width + j - 1] == here {
            j -= 1;
        } else {
            i -= 1;
        }
    }
    pairs.reverse();
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decomposition_pairs_with_its_last_node() {
        // torch: [gelu]; onnx: [Div, Erf, Add, Mul, Mul] where both Muls are compatible.
        let onnx = ["Div", "Erf", "Add", "Mul", "Mul"];
        let pairs = align(1, onnx.len(), |_, j| onnx[j] == "Mul");
        assert_eq!(pairs, vec![(0, 4)]);
    }

    #[test]
    fn keeps_order_and_maximises_pairs() {
        let torch = ["resize", "cat", "add"];
        let onnx = ["Shape", "resize", "cat", "Constant", "add"];
        let pairs = align(torch.len(), onnx.len(), |i, j| torch[i] == onnx[j]);
        assert_eq!(pairs, vec![(0, 1), (1, 2), (2, 4)]);
    }

    #[test]
    fn nothing_compatible_gives_nothing() {
        assert!(align(3, 3, |_, _| false).is_empty());
        assert!(align(0, 3, |_, _| true).is_empty());
    }
}
