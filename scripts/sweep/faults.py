"""Automatic fault injection into clean ONNX exports, with the culprit each fault should be
found at, decided from the ONNX graph alone (never from align-check).

Kinds, each at a random depth (a candidate node drawn uniformly; the two `scale` faults from the
first and the second half of the graph):

- `scale`: one initializer of a Conv/Gemm/MatMul or normalisation node scaled by U(1.02, 1.1)
  (copied first when other nodes share it, so only this node changes);
- `attribute`: one attribute changed: a Resize mode, coordinate mode or cubic coefficient, a
  normalisation epsilon (to 1e-2, or 1e-1 when already that large), a Softmax axis (to another
  axis of size > 1), a LeakyRelu/Elu/HardSigmoid alpha, a Gelu approximation;
- `swap`: two output channels of a Conv/Gemm/MatMul weight (and its bias) swapped.

A fault is stored as a recipe (`fault.json`), not a copy of the model: `materialise` applies it
to the clean ONNX file when the check runs, so hundreds of faults cost no disk.

Expected culprit: the module path from the mutated node's own scope, in this order: the dynamo
exporter's `pkg.torch.onnx.name_scopes` metadata (its last module entry), the legacy exporter's
node name (`/layer2/layer2.0/downsample/downsample.0/Conv` -> `layer2.0.downsample.0`), else the
initializer's name without its last part (`blocks.3.fc1.weight` -> `blocks.3.fc1`), else the
legacy value names an optimiser left on a node it renamed (`_module_from_value_names`), else its
sole reader's scope (`_module_from_readers`: a bias Add, or a Split of merged projections). The
expected ONNX node is the mutated node; `accepted_nodes` adds the nodes that complete its
module's output (downstream of it in the same module scope; in a graph without scopes, the
chain of sole consumers up to two hops: a MatMul's bias Add, then any further sole consumers
that only re-shape it or scale/shift it by a constant: a decomposed group norm's affine Mul and
Add) and the re-shapes that hold them. Where the graph names no module for the mutated node,
the judge (causes.py) takes an accepted node as the right module too. A path that names no
module of the TorchScript model (an exporter dropped a level) is read against the model's own
module tree (module_tree.py).

Isolated size: the clean model runs in ONNX Runtime with the mutated node's inputs and output
exposed; the mutated node alone, fed those values, is compared with the clean output. Within
the pair precision's element tolerance (atol * max(1, max|ref|) + rtol * |ref|) the fault is
"below tolerance" at its own layer and counted apart.
"""

import ast
import copy
import random
import re

import numpy as np
import onnx
from onnx import helper, numpy_helper

from sweep import module_tree

WEIGHT_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "FusedConv", "FusedGemm",
              "FusedMatMul"}
NORM_OPS = {"BatchNormalization", "LayerNormalization", "SimplifiedLayerNormalization",
            "SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
            "GroupNormalization", "InstanceNormalization"}
FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
               onnx.TensorProto.BFLOAT16}
TOLERANCE = {"float32": (1e-5, 1e-4), "float16": (1e-2, 1e-2)}


# Culprits ------------------------------------------------------------------------------------

def dynamo_module(node):
    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.name_scopes":
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, SyntaxError):
                return None
            modules = [s for s in scopes[:-1]
                       if s and not s.startswith("_empty_nn_module_stack")]
            return modules[-1] if modules else ""
    return None


def _is_op_name(part):
    op = re.sub(r"_\d+$", "", part)
    return any(onnx.defs.has(op, domain) for domain in ("", "com.microsoft"))


def legacy_module(name, graph=None):
    """`/layer1/layer1.0/conv1/Conv` -> `layer1.0.conv1`: each part names a module relative to
    its parent, except that a container's child repeats the container's name
    (`downsample/downsample.0`). The last part is the node's own (`Conv`, `Conv_1`); ONNX
    Runtime's optimiser appends one more to the nodes it fuses
    (`.../dense/MatMul/MatMulAddFusion`), so trailing parts that are op names go too.

    The exporter marks the k-th further call of one module by appending `_k` to its part
    (`conv.7_4`, `query_1`); the module is the same one (TorchScript names it `conv.7`). Given
    the graph, a part `X_k` is read as a call of `X` when the graph also holds the part `X`
    under the same parent, which is what a first call leaves; without that (a module really
    named `fc_1`) the part is kept."""
    if not name.startswith("/"):
        return None
    parts = _scope_parts(name)
    if graph is not None:
        known = _known_scopes(graph)
        for i, part in enumerate(parts):
            call = CALL_SUFFIX.match(part)
            if call and tuple(parts[:i]) + (call.group(1),) in known:
                parts[i] = call.group(1)
    path = []
    for part in parts:
        if path and part.startswith(path[-1] + "."):
            path[-1] = part
        else:
            path.append(part)
    return ".".join(path)


CALL_SUFFIX = re.compile(r"^(.+)_(\d+)$")


def _scope_parts(name):
    """The module parts of a legacy node name: all but the node's own part and op names."""
    parts = [p for p in name.split("/")[1:-1] if p]
    while parts and _is_op_name(parts[-1]):
        parts.pop()
    return parts


def _known_scopes(graph):
    """Every prefix of the module parts of the graph's legacy node names (cached per graph)."""
    if _KNOWN.get("graph") is not graph:
        known = set()
        for n in graph.node:
            if n.name.startswith("/"):
                parts = _scope_parts(n.name)
                known.update(tuple(parts[:i]) for i in range(1, len(parts) + 1))
        _KNOWN.update(graph=graph, known=known)
    return _KNOWN["known"]


_KNOWN = {}


def _own_initializers(graph, node):
    """The node's initializer inputs that no other node reads (a shared one, such as a weight
    an optimiser de-duplicated, says nothing about which module this node belongs to)."""
    inits = _initializers(graph)
    uses = _uses(graph)
    return [n for n in node.input if n in inits and uses.get(n, 0) == 1]


def expected_module(node, graph, initializer_name=None):
    """(module path, where it came from)."""
    module = dynamo_module(node)
    if module is not None:
        return module, "name_scopes"
    module = legacy_module(node.name, graph)
    if module is not None:
        return module, "node_name"
    own = _own_initializers(graph, node)
    for name in ([initializer_name] if initializer_name in own else []) + own:
        if "." in name and "::" not in name:
            return name.rsplit(".", 1)[0], "initializer"
    module, source = _module_from_value_names(node, graph)
    if module is None:
        module, source = _module_from_readers(node, graph)
    return module, source


def _known_only_as_container(recipe, graph, modules):
    """A node the graph names by a container whose child modules no node of the graph names
    (the legacy exporter's `/encoder/MatMul_1` for a scripted `nn.Sequential` whose Linears
    are `encoder.0` .. `encoder.2`): the graph knows the culprit only up to that container,
    which of its children computed the node is not in it, so a module inside it is as right
    as the container (`enclosing_scope`). The children come from the model's own modules
    (module_tree), the scopes from the graph alone."""
    module = recipe.get("expected_module")
    if not module or not modules or not recipe.get("expected_module_from", "").startswith(
            "node_name"):
        return
    inside = module + "."
    if not any(m.startswith(inside) for m in modules):
        return
    if any((node_scope(n, graph) or "").startswith(inside) for n in graph.node):
        return
    recipe["expected_module_from"] = "enclosing_scope"


def _module_from_readers(node, graph):
    """For a renamed node whose own names say nothing, what its readers' scopes do say:
    - a sole reader that adds an initializer (a bias Add) completes the same layer, since the
      exporter writes one layer as MatMul + Add in one scope: that scope;
    - a sole reader that is a Split (a simplifier merged several projections into one MatMul
      and splits its output) whose readers all lie in one module scope: that module encloses
      the merged layers, and which of them shows the fault first is not in the graph, so the
      culprit is only known up to that module (`enclosing_scope`; the judge accepts a module
      inside it)."""
    consumers = {}
    for n in graph.node:
        for name in n.input:
            consumers.setdefault(name, []).append(n)
    users = consumers.get(node.output[0], []) if node.output else []
    if len(users) != 1:
        return None, None
    user = users[0]
    inits = _initializers(graph)
    if user.op_type == "Add" and any(n in inits for n in user.input if n != node.output[0]):
        scope = node_scope(user, graph)
        return (scope, "bias_add") if scope else (None, None)
    if user.op_type == "Split":
        readers = [r for out in user.output for r in consumers.get(out, [])]
        scopes = {node_scope(r, graph) for r in readers}
        if len(scopes) == 1 and None not in scopes and "" not in scopes:
            return scopes.pop(), "enclosing_scope"
    return None, None


def _module_from_value_names(node, graph):
    """For a node an optimiser renamed or made (ONNX Runtime's fusions, inlined functions):
    the legacy exporter's value names outlive the node names. A fused node's output keeps the
    name of the value it replaces (`SkipLayerNorm_0` writes `.../attention/LayerNorm/
    LayerNormalization_output_0`), and a function expanded into nodes ends in the node that
    writes the call's output: HardSwish(x) inlined as HardSigmoid + Mul, where the Mul reads
    x and HardSigmoid(x) and writes `.../act/HardSwish_output_0`. So: the node's own output
    names, else those of a consumer that also reads the node's input (the rest of the same
    expanded call); none when they name different modules. A consumer that reads only the
    node's output is the next layer, not this one, so it is not followed."""
    def scopes(nodes):
        return {legacy_module(out, graph) for n in nodes for out in n.output
                if legacy_module(out, graph)}
    own = scopes([node])
    if not own:
        inputs = {name for name in node.input if name}
        outputs = set(node.output)
        rest = [n for n in graph.node if n is not node and outputs & set(n.input)
                and inputs & set(n.input)]
        own = scopes(rest)
    return (own.pop(), "value_name") if len(own) == 1 else (None, None)


def node_scope(node, graph):
    """The module scope a node's own metadata or name gives (no initializer fallback)."""
    module = dynamo_module(node)
    return module if module is not None else legacy_module(node.name, graph)


def accepted_nodes(graph, index):
    """The mutated node and the nodes that complete its module's output (module docstring),
    then the re-shapes that hold any of those outputs."""
    nodes = list(graph.node)
    node = nodes[index]
    consumers = _consumers(nodes)
    scope = node_scope(node, graph)
    accepted = [index]
    if scope:
        frontier, seen = [index], {index}
        while frontier:
            i = frontier.pop()
            for out in nodes[i].output:
                for j in consumers.get(out, []):
                    if j not in seen and node_scope(nodes[j], graph) == scope:
                        seen.add(j)
                        frontier.append(j)
                        accepted.append(j)
    else:
        i = index
        for _ in range(2):
            users = consumers.get(nodes[i].output[0], []) if nodes[i].output else []
            if len(users) != 1:
                break
            i = users[0]
            accepted.append(i)
        accepted += _constant_affine_chain(nodes, consumers, accepted[-1], _initializers(graph))
    return [nodes[i].name for i in _with_reshapes(nodes, consumers, accepted)]


# Elementwise ops that, with a constant operand, scale or shift a value: a normalisation's
# affine step.
AFFINE_OPS = {"Add", "Sub", "Mul", "Div"}


def _constant_affine_chain(nodes, consumers, i, inits):
    """The chain of sole readers after node `i` that only re-shape it or scale/shift it by a
    constant (an initializer operand): they complete the same layer's output. A decomposed
    group norm is InstanceNormalization, Reshape, then the affine Mul and Add; a graph without
    scopes names none of them, and the Add is the only node holding the module's output."""
    chain = []
    while nodes[i].output:
        users = consumers.get(nodes[i].output[0], [])
        if len(users) != 1 or users[0] in chain:
            break
        user = nodes[users[0]]
        others = [x for x in user.input if x != nodes[i].output[0]]
        affine = user.op_type in AFFINE_OPS and len(others) == 1 and others[0] in inits
        if user.op_type not in RESHAPES and not affine:
            break
        i = users[0]
        chain.append(i)
    return chain


# Ops that change only a tensor's shape: their output is their input's elements in the same
# order, so the node holds the very values of the node it reads.
RESHAPES = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}


def _with_reshapes(nodes, consumers, accepted):
    """`accepted` plus each chain of re-shapes that is the sole reader of an accepted node's
    output, in any scope or none: ONNX Runtime's Gemm rewrite flattens a MatMul's input to 2-D
    and restores the shape in a Reshape named by the optimiser (`gemm_output_reshape_token_N`,
    no scope), which is then the only node holding the module's output in its own shape."""
    out = list(accepted)
    for i in accepted:
        while nodes[i].output:
            users = consumers.get(nodes[i].output[0], [])
            if len(users) != 1 or nodes[users[0]].op_type not in RESHAPES or users[0] in out:
                break
            i = users[0]
            out.append(i)
    return out


def _consumers(nodes):
    consumers = {}
    for i, n in enumerate(nodes):
        for name in n.input:
            consumers.setdefault(name, []).append(i)
    return consumers


# Candidates ----------------------------------------------------------------------------------

def _initializers(graph):
    return {i.name: i for i in graph.initializer}


def _uses(graph):
    uses = {}
    for n in graph.node:
        for name in n.input:
            uses[name] = uses.get(name, 0) + 1
    return uses


def _float_init(inits, name):
    init = inits.get(name)
    if init is None or init.data_type not in FLOAT_TYPES:
        return None
    size = int(np.prod(init.dims)) if len(init.dims) else 1
    return init if size > 1 else None


def scale_candidates(graph):
    inits = _initializers(graph)
    out = []
    for i, n in enumerate(graph.node):
        if n.op_type in WEIGHT_OPS or n.op_type in NORM_OPS:
            order = [1] + [k for k in range(len(n.input)) if k != 1]
            for k in order:
                if k < len(n.input) and _float_init(inits, n.input[k]) is not None:
                    out.append((i, k))
                    break
    return out


def _swap_axis(node, init):
    if node.op_type in ("Conv", "FusedConv"):
        return 0
    if node.op_type == "ConvTranspose":
        group = next((a.i for a in node.attribute if a.name == "group"), 1)
        return 1 if group == 1 else None
    if node.op_type in ("Gemm", "FusedGemm"):
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    if node.op_type in ("MatMul", "FusedMatMul") and len(init.dims) >= 2:
        if any(a.name in ("transB", "transBatchB") and a.i for a in node.attribute):
            return None
        return len(init.dims) - 1
    return None


def swap_candidates(graph):
    inits = _initializers(graph)
    out = []
    for i, n in enumerate(graph.node):
        if n.op_type in WEIGHT_OPS and len(n.input) > 1:
            init = _float_init(inits, n.input[1])
            if init is None:
                continue
            axis = _swap_axis(n, init)
            if axis is not None and init.dims[axis] >= 2:
                out.append((i, axis))
    return out


def _attr(node, name):
    return next((a for a in node.attribute if a.name == name), None)


def _ranks(model):
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # shape inference is only a help for choosing a Softmax axis
        return {}
    shapes = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + \
            list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if vi.type.tensor_type.HasField("shape"):
            shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return shapes


def attribute_changes(model, rng):
    """[(node index, attribute name, new value, description)] over the whole graph."""
    graph = model.graph
    shapes = None
    out = []
    for i, n in enumerate(graph.node):
        if n.domain not in ("", "ai.onnx") and n.op_type not in NORM_OPS:
            continue  # contrib ops (com.microsoft Gelu) do not take the standard attributes
        if n.op_type == "Resize":
            mode = _attr(n, "mode")
            mode_value = mode.s.decode() if mode else "nearest"
            coord = _attr(n, "coordinate_transformation_mode")
            coord_value = coord.s.decode() if coord else "half_pixel"
            if mode_value == "nearest":
                out.append((i, "mode", b"linear", "Resize mode nearest -> linear"))
            elif mode_value == "cubic":
                coeff = _attr(n, "cubic_coeff_a")
                old = coeff.f if coeff else -0.75
                new = -0.5 if abs(old + 0.75) < 1e-6 else -0.75
                out.append((i, "cubic_coeff_a", new, f"Resize cubic_coeff_a {old} -> {new}"))
            else:
                new = "align_corners" if coord_value != "align_corners" else "half_pixel"
                out.append((i, "coordinate_transformation_mode", new.encode(),
                            f"Resize coordinate_transformation_mode {coord_value} -> {new}"))
        elif n.op_type in NORM_OPS:
            eps = _attr(n, "epsilon")
            old = eps.f if eps else 1e-5
            new = 1e-2 if old < 1e-2 else 1e-1
            out.append((i, "epsilon", new, f"{n.op_type} epsilon {old:g} -> {new:g}"))
        elif n.op_type in ("Softmax", "LogSoftmax"):
            if shapes is None:
                shapes = _ranks(model)
            shape = shapes.get(n.input[0])
            if not shape:
                continue
            axis_attr = _attr(n, "axis")
            axis = axis_attr.i if axis_attr else -1
            axis %= len(shape)
            others = [a for a, d in enumerate(shape) if a != axis and (d is None or d > 1)]
            if others:
                new = rng.choice(others)
                out.append((i, "axis", new, f"{n.op_type} axis {axis} -> {new}"))
        elif n.op_type in ("LeakyRelu", "Elu", "HardSigmoid"):
            alpha = _attr(n, "alpha")
            old = alpha.f if alpha else {"LeakyRelu": 0.01, "Elu": 1.0,
                                         "HardSigmoid": 0.2}[n.op_type]
            new = old * 1.5
            out.append((i, "alpha", new, f"{n.op_type} alpha {old:g} -> {new:g}"))
        elif n.op_type == "Gelu":
            approx = _attr(n, "approximate")
            old = approx.s.decode() if approx else "none"
            new = "tanh" if old == "none" else "none"
            out.append((i, "approximate", new.encode(), f"Gelu approximate {old} -> {new}"))
    return out


# Recipes -------------------------------------------------------------------------------------

# Bumped when the expected-culprit derivation (module or accepted nodes) changes: cached recipes
# are then re-derived from their clean graph (refresh_expected), so the cache never mixes two
# derivations.
DERIVATION = 6


def refresh_expected(doc, model_path, modules):
    """Re-derives the expected culprit of cached recipes planned under an older derivation;
    True when `doc` changed (the caller writes it back). `modules()` lists the TorchScript
    model's modules (module_tree)."""
    if doc.get("derivation") == DERIVATION or not doc.get("faults"):
        return False
    graph = onnx.load(model_path, load_external_data=False).graph
    listed = modules()
    for r in doc["faults"]:
        node = graph.node[r["node_index"]]
        init_name = node.input[r.get("input_index", 1)] if r["kind"] != "attribute" else None
        r["expected_module"], r["expected_module_from"] = expected_module(node, graph,
                                                                          init_name)
        module_tree.resolve(r, listed)
        _known_only_as_container(r, graph, listed)
        r["accepted_nodes"] = accepted_nodes(graph, r["node_index"])
    doc["derivation"] = DERIVATION
    return True


def plan(model, pair_key, modules=None):
    """The fault recipes for one clean model, deterministic in pair_key; `modules` are the
    TorchScript model's (module_tree), which the expected culprits are read against."""
    rng = random.Random(pair_key)
    graph = model.graph
    total = max(1, len(graph.node))
    recipes = []
    scales = scale_candidates(graph)
    halves = [[c for c in scales if c[0] < total / 2], [c for c in scales if c[0] >= total / 2]]
    for half, pool in enumerate(halves):
        if pool:
            index, k = rng.choice(pool)
            recipes.append({"kind": "scale", "node_index": index, "input_index": k,
                            "factor": round(rng.uniform(1.02, 1.1), 4)})
    changes = attribute_changes(model, rng)
    if changes:
        index, name, value, what = rng.choice(changes)
        if isinstance(value, bytes):
            value = value.decode()
            encoded = "bytes"
        else:
            encoded = "int" if isinstance(value, int) else "float"
        recipes.append({"kind": "attribute", "node_index": index, "attribute": name,
                        "value": value, "encoding": encoded, "detail": what})
    swaps = swap_candidates(graph)
    if swaps:
        index, axis = rng.choice(swaps)
        init = _initializers(graph)[graph.node[index].input[1]]
        a, b = rng.sample(range(init.dims[axis]), 2)
        recipes.append({"kind": "swap", "node_index": index, "axis": axis, "channels": [a, b]})
    for n, r in enumerate(recipes):
        r["id"] = f"{r['kind']}{n}"
        node = graph.node[r["node_index"]]
        init_name = node.input[r.get("input_index", 1)] if r["kind"] != "attribute" else None
        module, source = expected_module(node, graph, init_name)
        r.update(op_type=node.op_type, node=node.name or f"sweep_fault_{r['node_index']}",
                 depth=round(r["node_index"] / total, 3), expected_module=module,
                 expected_module_from=source,
                 accepted_nodes=accepted_nodes(graph, r["node_index"]))
        module_tree.resolve(r, modules)
        _known_only_as_container(r, graph, modules)
        if r["kind"] == "scale":
            r["detail"] = (f"{node.op_type} input {r['input_index']} ({init_name}) "
                           f"x{r['factor']}")
        elif r["kind"] == "swap":
            r["detail"] = f"{node.op_type} weight channels {r['channels']} swapped (axis {axis})"
    return recipes


def _replace_initializer(graph, node, k, array, suffix):
    """Gives node its own copy of input k holding `array` (other users keep the original)."""
    name = node.input[k]
    inits = _initializers(graph)
    original = inits[name]
    if _uses(graph).get(name, 0) > 1 or any(o.name == name for o in graph.output):
        new = numpy_helper.from_array(array.astype(numpy_helper.to_array(original).dtype),
                                      f"{name}__{suffix}")
        graph.initializer.append(new)
        node.input[k] = new.name
    else:
        original.CopyFrom(numpy_helper.from_array(
            array.astype(numpy_helper.to_array(original).dtype), name))


def apply(model, recipe):
    """Applies the recipe to a copy of the clean model and returns the mutated model."""
    model = copy.deepcopy(model)
    graph = model.graph
    node = graph.node[recipe["node_index"]]
    if not node.name:
        node.name = recipe["node"]
    inits = _initializers(graph)
    if recipe["kind"] == "scale":
        k = recipe["input_index"]
        value = numpy_helper.to_array(inits[node.input[k]])
        scaled = (value.astype(np.float64) * recipe["factor"])
        _replace_initializer(graph, node, k, scaled, "sweep_scaled")
    elif recipe["kind"] == "swap":
        a, b = recipe["channels"]
        axis = recipe["axis"]
        value = numpy_helper.to_array(inits[node.input[1]]).copy()
        index = [slice(None)] * value.ndim
        ia, ib = list(index), list(index)
        ia[axis], ib[axis] = a, b
        value[tuple(ia)], value[tuple(ib)] = value[tuple(ib)].copy(), value[tuple(ia)].copy()
        _replace_initializer(graph, node, 1, value, "sweep_swapped")
        if len(node.input) > 2 and node.input[2] in inits:
            bias = numpy_helper.to_array(inits[node.input[2]]).copy()
            if bias.ndim == 1 and bias.shape[0] > max(a, b):
                bias[[a, b]] = bias[[b, a]]
                _replace_initializer(graph, node, 2, bias, "sweep_swapped")
    else:
        for attr in list(node.attribute):
            if attr.name == recipe["attribute"]:
                node.attribute.remove(attr)
        value = recipe["value"]
        if recipe["encoding"] == "bytes":
            value = value.encode()
        elif recipe["encoding"] == "int":
            value = int(value)
        else:
            value = float(value)
        node.attribute.append(helper.make_attribute(recipe["attribute"], value))
    return model


def materialise(clean_path, recipe, out_path):
    onnx.save(apply(onnx.load(clean_path), recipe), out_path)


# Isolated size -------------------------------------------------------------------------------

def _session(model):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def _single_node_model(model, node, feeds):
    inits = _initializers(model.graph)
    graph = helper.make_graph(
        [node], "isolated",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in feeds.items()],
        [onnx.ValueInfoProto(name=node.output[0])],
        [inits[n] for n in node.input if n in inits])
    single = helper.make_model(graph, opset_imports=list(model.opset_import))
    single.ir_version = model.ir_version
    return single


def isolated_sizes(clean, recipes, feeds, precision):
    """Adds `isolated` ({rel_to_range, max_abs, below_tolerance} or {error}) to each recipe."""
    inits = _initializers(clean.graph)
    graph_inputs = {i.name for i in clean.graph.input}
    wanted = set()
    for r in recipes:
        node = clean.graph.node[r["node_index"]]
        wanted.update(n for n in node.input if n and n not in inits and n not in graph_inputs)
        wanted.add(node.output[0])
    probe = copy.deepcopy(clean)
    existing = {o.name for o in probe.graph.output}
    for name in sorted(wanted - existing):
        probe.graph.output.append(onnx.ValueInfoProto(name=name))
    sess = _session(probe)
    in_names = [i.name for i in sess.get_inputs()]
    values = dict(zip([o.name for o in sess.get_outputs()],
                      sess.run(None, {n: feeds[n] for n in in_names})))
    values.update({n: feeds[n] for n in in_names})
    atol, rtol = TOLERANCE[precision]
    for r in recipes:
        try:
            mutated = apply(clean, r)
            node = mutated.graph.node[r["node_index"]]
            runtime = [n for n in node.input if n and n in values and
                       n not in _initializers(mutated.graph)]
            fed = {n: values[n] for n in runtime}
            out = _session(_single_node_model(mutated, node, fed)).run(None, fed)[0]
            ref = values[node.output[0]].astype(np.float64)
            diff = np.abs(out.astype(np.float64) - ref)
            peak = float(np.abs(ref).max()) if ref.size else 0.0
            within = bool(np.all(diff <= atol * max(1.0, peak) + rtol * np.abs(ref)))
            r["isolated"] = {"max_abs": float(diff.max()) if diff.size else 0.0,
                             "rel_to_range": float(diff.max() / peak) if peak else 0.0,
                             "below_tolerance": within}
        except Exception as err:  # the fault still counts; its size is unknown
            r["isolated"] = {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"}
    return recipes
