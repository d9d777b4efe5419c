"""Runs an exported program's graph module node by node in Python and keeps what each node
computed: the ground truth that align-check's `.pt2` captures are measured against
(`scripts/bench.py`'s values, `scripts/make_pt2_fixtures.py`'s check of each fixture).

Values are keyed by FX node name, as align-check names the values it captures from a `.pt2`;
the tensors of a node that returns several are `name.k`.
"""

import torch


class Recorder(torch.fx.Interpreter):
    """Keeps a copy of every call node's tensor results as they are computed (a copy: an
    in-place op later in the graph, such as relu_, would rewrite a result kept by reference)."""

    def __init__(self, module):
        super().__init__(module)
        self.values = {}

    def run_node(self, n):
        result = super().run_node(n)
        if n.op == "call_function":
            if isinstance(result, torch.Tensor):
                self.values[n.name] = result.clone()
            elif isinstance(result, (tuple, list)):
                for k, item in enumerate(result):
                    if isinstance(item, torch.Tensor):
                        self.values[f"{n.name}.{k}"] = item.clone()
        return result
