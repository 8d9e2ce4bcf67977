"""XLA-compiled functions named by their content, so that the session's persistent XLA cache
(tests/conftest.py) serves a kernel compiled in one process to every other process.

TensorFlow names each traced function `__inference_<name>_<uid>`, the uid a per-process counter,
and the persistent cache's key holds that name (with the argument shapes and the HLO): the same
kernel at the same shapes gets another name, so another key, in each process that traced
something else before it, and is compiled again there (docs/performance.md has the counts).
`install()` names a function that must be compiled (`jit_compile=True`) by a hash of its graph,
inputs, outputs and attributes instead: the same in every process, and still unique within one
(two functions with one name have one definition; TensorFlow counts the references to a name).
A loaded SavedModel's kernel is the same graph under its saved name (`__inference_<name>_<digest>`),
its attributes as `AttrValue`s, and a construction context attribute (which runtime made it:
TensorFlow drops it from saved functions itself): the name's prefix and that attribute are left
out of the name and of the registered function, so that a test comparing an export with the
model in its process compiles each kernel once. Nothing else changes: the name is only a key,
and the cache checks the whole HLO on a hit.

Installed in the pytest processes (tests/conftest.py) and the script server the tests' scripts
are forked from (tests/script_server.py); a script started afresh (BERT_TESTS_FORK=0) compiles
as a user's run does. If TensorFlow's internals differ from what this expects, nothing is
installed and the suite runs as before, only slower.
"""
import hashlib
import re


def install():
    """Makes every later-traced `jit_compile` function's name its content's (once per process)."""
    try:
        from tensorflow.python.eager.polymorphic_function import atomic_function, attributes
        from tensorflow.python.eager.polymorphic_function import concrete_function
        original = concrete_function.ConcreteFunction.from_func_graph.__func__
        create = atomic_function.from_func_graph
    except (ImportError, AttributeError):
        return
    if getattr(original, "names_by_content", False):
        return

    def from_func_graph(cls, graph, function_type, attrs, shared_func_graph=True):
        compile_attr = (attrs or {}).get(attributes.XLA_COMPILE)
        if getattr(compile_attr, "b", compile_attr) is not True:
            return original(cls, graph, function_type, attrs, shared_func_graph)
        # The ops, and which of their tensors are the function's inputs and outputs: all that
        # the function's definition is made of. (The ops that must run, sorted: TensorFlow
        # collects them in a set, whose order changes from one process to the next.)
        attrs = {k: v for k, v in (attrs or {}).items() if k != "_construction_context"}
        plain = sorted((k, _plain(v)) for k, v in attrs.items())
        ends = [[t.name for t in graph.inputs], [t.name for t in graph.outputs],
                sorted(op.name for op in graph.control_outputs), plain]
        graph_def = graph.as_graph_def()
        _number_gradient_types(graph_def)
        content = graph_def.SerializeToString(deterministic=True) + repr(ends).encode()
        digest = hashlib.sha1(content).hexdigest()[:16]
        saved = re.fullmatch(r"__inference_(.+)_[0-9a-f]{16}", graph.name)
        name = saved.group(1) if saved else graph.name
        function = create(f"__inference_{name}_{digest}", graph, attrs, function_type)
        return cls(function, shared_func_graph=shared_func_graph)

    from_func_graph.names_by_content = True
    concrete_function.ConcreteFunction.from_func_graph = classmethod(from_func_graph)


def _number_gradient_types(graph_def):
    """Renames the `_gradient_op_type` attributes of `graph_def`'s nodes (`tf.custom_gradient`'s
    "CustomGradient-<uid>", another per-process counter, read only when a gradient is taken) by
    their order in it, so that they name nothing process-specific."""
    numbers = {}
    for nodes in [graph_def.node, *(f.node_def for f in graph_def.library.function)]:
        for node in nodes:
            if "_gradient_op_type" in node.attr:
                value = node.attr["_gradient_op_type"]
                value.s = b"CustomGradient-%d" % numbers.setdefault(value.s, len(numbers))


def _plain(value):
    """An attribute as a traced function holds it: a loaded function's are `AttrValue`s, each
    read here as the value it holds, so that the two kinds key alike."""
    kind = value.WhichOneof("value") if hasattr(value, "WhichOneof") else None
    return getattr(value, kind) if kind else value
