"""Runs an exported program's graph module node by node in Python and keeps what each node
computed: the ground truth that align-check's `.pt2` captures are measured against
(`scripts/bench.py`'s values, `scripts/make_pt2_fixtures.py`'s check of each fixture).

Values are keyed by FX node name, as align-check names the values it captures from a `.pt2`;
the tensors of a node that returns several are `name.k`. A mode-wrapping higher-order op
(`wrap_with_autocast`, `wrap_with_set_grad_enabled`) runs its subgraph here by node too, under
its mode, and the subgraph's values are keyed `<subgraph>.<node>` (`submod_1.matmul`), as
align-check names what it captures inside one.
"""

import torch


class Recorder(torch.fx.Interpreter):
    """Keeps a copy of every call node's tensor results as they are computed (a copy: an
    in-place op later in the graph, such as relu_, would rewrite a result kept by reference)."""

    def __init__(self, module):
        super().__init__(module)
        self.values = {}

    def run_node(self, n):
        wrapped = self.run_wrapper(n)
        result = wrapped if wrapped is not None else super().run_node(n)
        if n.op == "call_function":
            if isinstance(result, torch.Tensor):
                self.values[n.name] = result.clone()
            elif isinstance(result, (tuple, list)):
                for k, item in enumerate(result):
                    if isinstance(item, torch.Tensor):
                        self.values[f"{n.name}.{k}"] = item.clone()
        return result

    def run_wrapper(self, n):
        """Runs a mode-wrapping higher-order op's subgraph with a recorder of its own; None
        for any other node."""
        name = getattr(n.target, "__name__", "") if n.op == "call_function" else ""
        if name == "wrap_with_autocast":
            at = 4
            device, dtype, enabled, cache = self.map_nodes_to_values(n.args[:4], n)
            mode = torch.autocast(device, dtype=dtype, enabled=enabled, cache_enabled=cache)
        elif name == "wrap_with_set_grad_enabled":
            at = 1
            mode = torch.set_grad_enabled(self.map_nodes_to_values(n.args[:1], n)[0])
        else:
            return None
        graph_node = n.args[at]
        inner = Recorder(self.fetch_attr(graph_node.target))
        with mode:
            result = inner.run(*self.map_nodes_to_values(n.args[at + 1:], n))
        for key, value in inner.values.items():
            self.values[f"{graph_node.target}.{key}"] = value
        return result
