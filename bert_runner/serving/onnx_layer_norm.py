"""Each LayerNorm of a converted encoder as one ONNX `LayerNormalization` node (opset 17).

tf2onnx writes the reference LayerNorm (`keras.ops.layer_normalization` on TensorFlow: moments,
then the batch-normalisation form) as a dozen elementwise nodes:

    mean = ReduceMean(z)              var = ReduceMean(Mul(d, d)), d = Sub(z, mean)
    inv  = Mul(Reciprocal(Sqrt(Add(var, epsilon))), gamma)
    out  = Add(Mul(z, inv), Add(Mul(Neg(mean), inv), beta))

onnxruntime's own LayerNorm fusion looks for `(z - mean) / sqrt(var + eps)` and does not match
this form, so each is a dozen passes over the rows; here they become one node, which
onnxruntime computes in one pass (and any ONNX runtime runs: it is a standard operator).
`out` is the same function of `z`; the outputs move by float32 rounding.
"""
import numpy as np


def fuse_layer_norms(model):
    """Rewrites, in place, each LayerNorm of `model` (an `onnx.ModelProto` from tf2onnx) as a
    `LayerNormalization` node over the axis its statistics reduce, its gamma and beta flattened
    to that axis's size. Returns the number of LayerNorms rewritten; a graph in another form
    is left as it is."""
    from onnx import helper, numpy_helper

    graph = model.graph
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    producer = {name: node for node in graph.node for name in node.output}
    consumers = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def made_by(name, op_type):
        node = producer.get(name)
        return node if node is not None and node.op_type == op_type else None

    def only_consumer(name, op_type):
        found = consumers.get(name, [])
        return found[0] if len(found) == 1 and found[0].op_type == op_type else None

    def other(node, name):
        """The input of the two-input `node` that is not `name` (None if neither or both)."""
        a, b = node.input
        return b if a == name and b != name else a if b == name and a != name else None

    fused, flattened = [], {}

    def flat(name, size):
        """The constant `name` as a new [size] initializer (None if it is not a constant of
        that many values)."""
        value = constants.get(name)
        if value is None or value.size != size:
            return None
        if name not in flattened:
            flattened[name] = numpy_helper.from_array(
                np.ascontiguousarray(value.reshape(size)), name + "/layer_norm_flat")
        return flattened[name].name

    for sqrt in [node for node in graph.node if node.op_type == "Sqrt"]:
        plus_epsilon = made_by(sqrt.input[0], "Add")
        if plus_epsilon is None:
            continue
        var_name, epsilon_name = plus_epsilon.input
        if var_name in constants:
            var_name, epsilon_name = epsilon_name, var_name
        var = made_by(var_name, "ReduceMean")
        epsilon = constants.get(epsilon_name)
        square = var and made_by(var.input[0], "Mul")
        if epsilon is None or epsilon.size != 1 or square is None or (
                square.input[0] != square.input[1]):
            continue
        difference = made_by(square.input[0], "Sub")
        mean = difference and made_by(difference.input[1], "ReduceMean")
        z = difference and difference.input[0]
        if mean is None or mean.input[0] != z or _axes(mean) != _axes(var) or len(
                _axes(mean) or ()) != 1:
            continue
        reciprocal = only_consumer(sqrt.output[0], "Reciprocal")
        scaled = reciprocal and only_consumer(reciprocal.output[0], "Mul")
        gamma = scaled and other(scaled, reciprocal.output[0])
        if gamma not in constants:
            continue
        inv = scaled.output[0]
        uses = [n for n in consumers.get(inv, []) if n.op_type == "Mul"]
        times_z = next((n for n in uses if other(n, inv) == z), None)
        negated = next((n for n in uses if made_by(other(n, inv), "Neg")), None)
        if times_z is None or negated is None or len(consumers[inv]) != 2 or (
                made_by(other(negated, inv), "Neg").input[0] != mean.output[0]):
            continue
        shift = only_consumer(negated.output[0], "Add")
        beta = shift and other(shift, negated.output[0])
        out = only_consumer(times_z.output[0], "Add")
        if beta not in constants or out is None or other(out, times_z.output[0]) != (
                shift.output[0]):
            continue
        size = constants[gamma].size
        scale, bias = flat(gamma, size), flat(beta, size)
        if scale is None or bias is None:
            continue
        fused.append((out, helper.make_node(
            "LayerNormalization", [z, scale, bias], list(out.output),
            name=out.name + "/LayerNormalization", axis=_axes(mean)[0],
            epsilon=float(epsilon.reshape(())))))

    if not fused:
        return 0
    graph.initializer.extend(flattened.values())
    replacements = {id(out): node for out, node in fused}
    nodes = [replacements.get(id(node), node) for node in graph.node]
    del graph.node[:]
    graph.node.extend(_live(nodes, {o.name for o in graph.output}))
    # The old gammas and betas unread (onnxruntime would warn of each at every load).
    read = {name for node in graph.node for name in node.input}
    kept = [i for i in graph.initializer if i.name in read]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return len(fused)


def _axes(node):
    """The `axes` attribute of a ReduceMean (opset 17), or None."""
    return next((list(a.ints) for a in node.attribute if a.name == "axes"), None)


def _live(nodes, outputs):
    """`nodes` (in order) less those whose outputs nothing reads (the LayerNorms' old nodes)."""
    needed = set(outputs)
    live = []
    for node in reversed(nodes):
        if any(name in needed for name in node.output):
            live.append(node)
            needed.update(node.input)
    return live[::-1]
