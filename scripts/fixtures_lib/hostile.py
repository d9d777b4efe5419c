"""The hostile-names fixture: conv_bn_legacy with markup in every ONNX node and value name.

Reports show ONNX node and value names verbatim, and a model file is untrusted input: a name
such as `<script>alert(1)</script>` must come out of the HTML, Markdown and JUnit reports as
text, never as markup. This copies tests/fixtures/conv_bn_legacy to
tests/fixtures/hostile_names_legacy, appends a payload to each node name (keeping the legacy
`/conv1/Conv` prefix, so pairing by module scope still works), renames every non-input value
consistently, including the graph output, and records a manifest entry with the structure of
conv_bn_legacy's. The numbers are unchanged, so the fixture is clean: align-check must pass it.

Run on its own (without regenerating the whole zoo):
    PYTHONPATH=scripts .venv/bin/python -c \
        'from fixtures_lib import hostile; hostile.make_hostile_names()'
"""

import json
import os
import shutil

import onnx

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
SOURCE = "conv_bn_legacy"
NAME = "hostile_names_legacy"
PAYLOADS = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>"]


def _rename_graph(model):
    """Appends a payload to every node name and renames the values nodes produce."""
    graph = model.graph
    inputs = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    renamed = {}
    for k, node in enumerate(graph.node):
        payload = PAYLOADS[k % len(PAYLOADS)]
        node.name = node.name + payload
        for j, out in enumerate(node.output):
            if out and out not in inputs:
                # Why the other payload: value names then carry both strings too.
                renamed[out] = out + PAYLOADS[(k + j + 1) % len(PAYLOADS)]
    for node in graph.node:
        for j, name in enumerate(node.input):
            node.input[j] = renamed.get(name, name)
        for j, name in enumerate(node.output):
            node.output[j] = renamed.get(name, name)
    for value in list(graph.output) + list(graph.value_info):
        value.name = renamed.get(value.name, value.name)
    return renamed


def make_hostile_names(fixtures=FIXTURES):
    """Writes the fixture folder and adds (or replaces) its manifest entry; returns the entry."""
    src = os.path.join(fixtures, SOURCE)
    path = os.path.join(fixtures, NAME)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    for f in ("model.pt", "inputs.npz"):
        shutil.copyfile(os.path.join(src, f), os.path.join(path, f))
    model = onnx.load(os.path.join(src, "model.onnx"))
    _rename_graph(model)
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(path, "model.onnx"))

    manifest_path = os.path.join(fixtures, "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    base = next(e for e in manifest if e["name"] == SOURCE)
    entry = json.loads(json.dumps(base))
    entry["name"] = NAME
    entry["exercises"] = ["hostile_names"]
    entry["outputs"] = [o.name for o in model.graph.output]
    entry["notes"] = (f"{SOURCE} with markup in every ONNX node and value name (payloads "
                      f"{PAYLOADS}); numbers unchanged, so it must pass. Reports must show "
                      "the names escaped, never as markup.")
    entry["size_bytes"] = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    manifest = [e for e in manifest if e["name"] != NAME] + [entry]
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return entry


if __name__ == "__main__":
    print(json.dumps(make_hostile_names(), indent=2))
