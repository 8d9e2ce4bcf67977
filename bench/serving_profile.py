r"""Where one batch-1 call of the raw-text classifier SavedModel spends its time, on this CPU.

    python -m bench.serving_profile --export_dir=/tmp/profile_sm            # exports once, reuses
    python -m bench.serving_profile --export_dir=/tmp/profile_sm --num_threads=1
    TF_ENABLE_ONEDNN_OPTS=0 python -m bench.serving_profile --export_dir=/tmp/profile_sm
    python -m bench.serving_profile --export_dir=/tmp/profile_sm --onnx_dir=/tmp/profile_onnx
    python -m bench.serving_profile --export_dir=/tmp/profile_skinny --negligible_arithmetic

Each row times one part on the same --sentences Austen sentences (bench/serving.py's), one
sentence a call, p50 over --repeats rounds after one warm-up round:
  signature         the loaded SavedModel's `serving_default` on a string tensor, `.numpy()` of
                    the probabilities (what bench/serving.py and predict.py time).
  in-process serve  the exporting module's own `serve` tf.function (the same graph, not loaded).
  tokenizer+pack    `FastBertTokenizer.tokenize` and `pack` (and the trim to the longest row) in
                    a tf.function: the signature's text side alone.
  encoder           the Keras classifier on the sentence's packed, trimmed ids in a
                    tf.function (what the signature's loop runs per group of rows).
  encoder, grid     the same on the plain grid (`static_shapes`), not the real-row block.
  encoder, XLA      the grid's encoder compiled by XLA (`jit_compile`), one program per length
                    (each compiled in the untimed round; the compilations' time is printed apart).
  empty call        a tf.function returning its string input: the floor of any function call.
  dense matmuls     the encoder's dense layers' matmuls alone, at the median sentence's rows
                    and at 32 rows, in each form TensorFlow can be asked for them: as the model
                    computes them; with the weights as graph constants, each matmul followed by
                    a bias (oneDNN's fused inner product, weights packed once); with the weights
                    stored transposed (W^T x^T, then the product transposed back); as a batch
                    matmul (BatchMatMulV2, oneDNN's matmul primitive); as a 1x1 convolution of
                    constant weights with their biases (oneDNN's convolution, weights reordered
                    once). With onnxruntime installed, the same matmuls (same weights) in an
                    ONNX Runtime session: whose matrix products are faster, apart from
                    everything else.
--negligible_arithmetic gives the same graph at hidden 96: what its ops cost without the work.
Then `Session.run` of the same SavedModel in a TF1 graph session, and one traced call's executed
ops (RunMetadata step stats): their count, and their time summed by op type.
With --onnx_dir, ONNX Runtime on `export_model.py --format=onnx`'s model (written there once)
behind our tokenizer (`serving.onnx.OnnxTextModel`), and its InferenceSession alone.
Figures and what they say: docs/performance.md, "Where a batch-1 call's time goes".
"""
import collections
import os
import time

import numpy as np
from absl import flags

from bench import harness, serving  # (serving's flags: --config, --vocab_file ...)

flags.DEFINE_string("export_dir", "/tmp/serving_profile_saved_model",
                    "SavedModel to profile, with its weights beside it; written (random weights) "
                    "when missing.")
flags.DEFINE_string("onnx_dir", None, "Also time ONNX Runtime on the ONNX export written here "
                    "(when missing) from the same weights.")
flags.DEFINE_bool("negligible_arithmetic", False, "BERT-Base's graph (12 layers, 12 heads, the "
                  "same ops) at hidden 96, intermediate 384: what its ops cost without the work.")
flags.DEFINE_bool("op_stats", True, "Also the TF1 session's Session.run and traced op stats.")
flags.DEFINE_integer("inter_op_threads", None, "Inter-op threads (default: --num_threads).")
flags.DEFINE_integer("sentences", 64, "Sentences timed, one a call (bench/serving.py's).")
FLAGS = flags.FLAGS
LABELS = serving.CLASSIFIER_LABELS


def p50(run, items, repeats):
    """Median milliseconds of `run(item)` over every item of `repeats` rounds after one untimed."""
    calls = harness.time_rounds({"": run}, repeats, 1, lambda run: [
        harness.wall_seconds(lambda item=item: run(item)) for item in items])[""]
    return np.median(calls) * 1e3


def step_stats(export_dir, texts):
    """(Session.run p50 ms, executed ops per call, {op type: ms per call}) in a TF1 session."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        config = tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=FLAGS.num_threads,
            inter_op_parallelism_threads=FLAGS.inter_op_threads or FLAGS.num_threads)
        session = tf.compat.v1.Session(graph=graph, config=config)
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)
        signature = meta.signature_def["serving_default"]
        feed = signature.inputs["text_a"].name
        fetch = signature.outputs["probabilities"].name
        run_ms = p50(lambda t: session.run(fetch, {feed: [t]}), texts, FLAGS.repeats)
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        by_type, ops = collections.Counter(), 0
        for text in texts:
            metadata = tf.compat.v1.RunMetadata()
            session.run(fetch, {feed: [text]}, options=options, run_metadata=metadata)
            for device in metadata.step_stats.dev_stats:
                for node in device.node_stats:
                    if node.node_name == "_SOURCE":
                        continue
                    ops += 1
                    op = node.timeline_label.split("(")[0].split("=")[-1].strip() \
                        if "=" in node.timeline_label else node.node_name
                    by_type[op] += node.all_end_rel_micros
    return run_ms, ops / len(texts), {k: v / len(texts) / 1e3 for k, v in by_type.items()}


def main(argv):
    del argv
    os.environ["RAYON_NUM_THREADS"] = str(FLAGS.num_threads)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.num_threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_op_threads
                                                         or FLAGS.num_threads)
    from bert_tasks.classifier import raw_text
    from bert_runner.serving.text_module import trim_to_longest
    from vocab.fast_tokenizer import FastBertTokenizer

    sizes = serving.CONFIGS[FLAGS.config]
    if FLAGS.negligible_arithmetic:
        sizes = dict(sizes, hidden_size=96, intermediate_size=384)
    texts = serving.read_sentences(FLAGS.input, FLAGS.sentences, FLAGS.seed)
    model = serving.Task("classifier").build_model(sizes, FLAGS.seed)
    if not os.path.exists(FLAGS.export_dir):
        raw_text.export_classifier(model, FLAGS.vocab_file, True, FLAGS.max_seq_length,
                                   LABELS, FLAGS.export_dir)
        # The profiled export's weights, so the in-process graph and ONNX match it.
        model.save_weights(os.path.join(FLAGS.export_dir, "profile.weights.h5"))
    model.load_weights(os.path.join(FLAGS.export_dir, "profile.weights.h5"))
    module = raw_text.ClassifierExport(model, FastBertTokenizer(FLAGS.vocab_file, True),
                                       FLAGS.max_seq_length, LABELS)
    tokenizer = module._parts.tokenizer
    print(harness.describe_machine(FLAGS.num_threads, ["tensorflow", "tensorflow-text", "keras"]))
    print(f"TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', '(unset)')}, "
          f"inter-op {FLAGS.inter_op_threads or FLAGS.num_threads}; {FLAGS.config}, "
          f"max_seq_length {FLAGS.max_seq_length}, {len(texts)} sentences")

    serve = tf.saved_model.load(FLAGS.export_dir).signatures["serving_default"]

    @tf.function(input_signature=[serving_text_spec()])
    def tokenize_pack(text):
        return trim_to_longest(tokenizer.pack(tokenizer.tokenize(text), None,
                                              FLAGS.max_seq_length))

    features = [tokenize_pack(tf.constant([t])) for t in texts]
    spec = {k: tf.TensorSpec([None, None], v.dtype) for k, v in features[0].items()}

    @tf.function(input_signature=[spec])
    def encoder(group):
        return module._row_values(group)

    # The same module on the grid layout (one row a call's modes): a trimmed single text has no
    # padding to skip.
    grid_module = raw_text.ClassifierExport(model, tokenizer, FLAGS.max_seq_length,
                                            LABELS, rows_per_call=1)

    def on_grid(group):
        return grid_module._row_values(group)

    encoder_grid = tf.function(on_grid, input_signature=[spec])
    encoder_xla = tf.function(on_grid, input_signature=[spec], jit_compile=True)

    hidden, inner = sizes["hidden_size"], sizes["intermediate_size"]
    rng = np.random.default_rng(FLAGS.seed)
    kernels = [tf.constant(rng.standard_normal(shape, np.float32) * 0.02)
               for shape in [(hidden, hidden)] * 4 + [(hidden, inner), (inner, hidden)]]

    # NumPy arrays become Const nodes of the graph that uses them (a captured tensor would be
    # an input): TensorFlow then fuses each matmul with the bias after it into a oneDNN inner
    # product that keeps its constant weights packed from call to call.
    weights = [kernel.numpy() for kernel in kernels]
    biases = [rng.standard_normal(kernel.shape[1], np.float32) * 0.02 for kernel in kernels]
    transposed = [tf.constant(w.T) for w in weights]  # inputs of the graph, as `kernels`

    def as_columns(rows, i):
        return tf.transpose(tf.matmul(transposed[i], rows, transpose_b=True))

    def convolution(rows, i):
        out = tf.nn.conv2d(rows[None, None], weights[i][None, None], 1, "VALID")
        return tf.nn.bias_add(out, biases[i])[0, 0]

    # The same matmuls as TensorFlow can be asked for them: which form its kernels run fastest.
    dense_forms = {
        "as the model": lambda rows, i: tf.matmul(rows, kernels[i]),
        "graph constants with their biases":
            lambda rows, i: tf.nn.bias_add(tf.matmul(rows, weights[i]), biases[i]),
        "weights transposed (W^T x^T)": as_columns,
        "batch matmul": lambda rows, i: tf.linalg.matmul(rows[None], kernels[i][None])[0],
        "1x1 convolution, constants with biases": convolution,
    }
    matmul_chains = {name: dense_chain(dense, sizes["num_hidden_layers"], hidden)
                     for name, dense in dense_forms.items()}

    @tf.function(input_signature=[serving_text_spec()])
    def empty(text):
        return tf.identity(text)

    tokens = [int(f["input_mask"].numpy().sum()) for f in features]
    compile_start = time.perf_counter()
    for length in sorted(set(tokens)):
        encoder_xla(next(f for f, n in zip(features, tokens) if n == length))
    print(f"XLA: {len(set(tokens))} lengths compiled in {time.perf_counter() - compile_start:.1f} s "
          "(the first call of each length)")
    rows = {
        "signature": lambda t: serve(text_a=tf.constant([t]))["probabilities"].numpy(),
        "in-process serve": lambda t: module.serve(tf.constant([t]))["probabilities"].numpy(),
        "tokenizer+pack": lambda t: tokenize_pack(tf.constant([t]))["input_ids"].numpy(),
        "encoder": lambda f: encoder(f).numpy(),
        "encoder, grid": lambda f: encoder_grid(f).numpy(),
        "encoder, XLA": lambda f: encoder_xla(f).numpy(),
        "empty call": lambda t: empty(tf.constant([t])).numpy(),
    }
    print(f"word-pieces per sentence: median {int(np.median(tokens))}, max {max(tokens)}")
    figures = []  # {"part", "rows" (dense matmuls), "p50_ms"}
    for name, run in rows.items():
        items = features if name.startswith("encoder") else texts
        figures.append({"part": name, "p50_ms": p50(run, items, FLAGS.repeats)})
        print(f"{name:18s} p50 {figures[-1]['p50_ms']:7.2f} ms", flush=True)
    for name, other in (("grid", encoder_grid), ("XLA", encoder_xla)):
        difference = max(np.abs(encoder(f).numpy() - other(f).numpy()).max() for f in features)
        print(f"max |logit difference|, {name} vs exported layout: {difference:.1e}")
    ort_matmuls = onnx_dense_matmuls(kernels, sizes["num_hidden_layers"])
    for rows_count in (int(np.median(tokens)), 32):
        x = rng.standard_normal((rows_count, hidden), np.float32)
        inputs = [tf.constant(x)] * 16
        print(f"dense matmuls alone, {rows_count} rows:")
        for name, chain in matmul_chains.items():
            figures.append({"part": f"dense matmuls, {name}", "rows": rows_count,
                            "p50_ms": p50(lambda x: chain(x).numpy(), inputs, FLAGS.repeats)})
            print(f"  {name:40s} p50 {figures[-1]['p50_ms']:7.2f} ms")
        if ort_matmuls is not None:
            figures.append({"part": "dense matmuls, in ONNX Runtime", "rows": rows_count,
                            "p50_ms": p50(ort_matmuls, [x] * 16, FLAGS.repeats)})
            print(f"  {'in ONNX Runtime':40s} p50 {figures[-1]['p50_ms']:7.2f} ms", flush=True)
    if FLAGS.op_stats:
        run_ms, ops, by_type = step_stats(FLAGS.export_dir, texts)
        print(f"{'Session.run':18s} p50 {run_ms:7.2f} ms; {ops:.0f} ops executed per call")
        figures.append({"part": "Session.run", "p50_ms": run_ms, "ops_per_call": ops})
        total = sum(by_type.values())
        print(f"traced op time per call (sum over ops, overlapping across threads): {total:.2f} ms")
        for op, ms in sorted(by_type.items(), key=lambda kv: -kv[1])[:12]:
            print(f"  {op:40s} {ms:7.2f} ms")
    if FLAGS.onnx_dir:
        figures += onnx_rows(model, texts)
    harness.write_results("serving_profile", figures, FLAGS.num_threads,
                         ("tensorflow", "tensorflow-text", "keras", "onnxruntime"))


def dense_chain(dense, layers, hidden):
    """The encoder's dense matmuls alone, `dense(rows, i)` the product with kernel i (query, key,
    value, attention output, intermediate, output): a tf.function of `x [rows, hidden]`."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None, hidden], tf.float32)])
    def chain(x):
        for _ in range(layers):
            y = tf.add_n([dense(x, i) for i in range(4)])
            x = x + 0.01 * dense(dense(y, 4), 5)
        return x

    return chain


def onnx_rows(model, texts):
    """Prints and returns the figures of ONNX Runtime behind our tokenizer and of its session."""
    from bert_runner.serving import onnx
    from bert_tasks.classifier import raw_text

    if not os.path.exists(FLAGS.onnx_dir):
        onnx.write_onnx(raw_text.convertible(model, LABELS), FLAGS.vocab_file, True,
                        FLAGS.max_seq_length, FLAGS.onnx_dir)
    text_model = onnx.OnnxTextModel(FLAGS.onnx_dir, num_threads=FLAGS.num_threads)
    feeds = [text_model.features([t]) for t in texts]
    figures = [
        {"part": "ONNX Runtime",
         "p50_ms": p50(lambda t: text_model([t])["probabilities"], texts, FLAGS.repeats)},
        {"part": "ORT session alone",
         "p50_ms": p50(lambda f: text_model.session.run(None, f), feeds, FLAGS.repeats)}]
    for figure in figures:
        print(f"{figure['part']:18s} p50 {figure['p50_ms']:7.2f} ms")
    return figures


def onnx_dense_matmuls(kernels, layers):
    """`dense_chain`'s matmuls as an ONNX Runtime session (`x [rows, hidden]` -> numpy), the
    same kernels and arithmetic; None without onnxruntime."""
    try:
        import onnxruntime
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None

    names = [f"kernel_{i}" for i in range(len(kernels))]
    nodes, x = [], "x"
    for layer in range(layers):
        products = [f"l{layer}_q{i}" for i in range(4)]
        nodes += [helper.make_node("MatMul", [x, names[i]], [products[i]]) for i in range(4)]
        nodes += [helper.make_node("Sum", products, [f"l{layer}_y"]),
                  helper.make_node("MatMul", [f"l{layer}_y", names[4]], [f"l{layer}_i"]),
                  helper.make_node("MatMul", [f"l{layer}_i", names[5]], [f"l{layer}_o"]),
                  helper.make_node("Mul", [f"l{layer}_o", "scale"], [f"l{layer}_s"]),
                  helper.make_node("Add", [x, f"l{layer}_s"], [f"l{layer}_x"])]
        x = f"l{layer}_x"
    hidden = int(kernels[0].shape[0])
    graph = helper.make_graph(
        nodes, "dense_matmuls",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, hidden])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [None, hidden])],
        [numpy_helper.from_array(np.asarray(k), n) for k, n in zip(kernels, names)]
        + [numpy_helper.from_array(np.asarray(0.01, np.float32), "scale")])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = FLAGS.num_threads
    session = onnxruntime.InferenceSession(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(),
        options, providers=["CPUExecutionProvider"])
    return lambda x: session.run(None, {"x": x})[0]


def serving_text_spec():
    import tensorflow as tf

    return tf.TensorSpec([None], tf.string)


if __name__ == "__main__":
    harness.run(main)
