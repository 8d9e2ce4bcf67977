"""`modeling.layers.kernels` and `modeling.layers.attention`: the fast kernels against their
`keras.ops` reference (values and gradients, float32 and bfloat16): GELU, the attention's softmax
and dropout, dropout + residual + LayerNorm; dropout masks from a hash of the seed (the same on both
paths); a model with `kernels="fast"` against one with `kernels="reference"`."""
import functools
import importlib
import os
import pathlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.layers import kernels
from modeling.layers.attention import attention


def _value_and_grad(fn, x, upstream):
    x = tf.convert_to_tensor(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
        total = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
    return y, tape.gradient(total, x)


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_matches_the_reference(approximate):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 8)).astype("float32") * 3
    upstream = rng.normal(size=x.shape).astype("float32")
    results = []
    for fast in (True, False):
        results.append(_value_and_grad(
            lambda x: kernels.gelu(x, approximate=approximate, fast=fast), x, upstream))
    (y, dx), (want_y, want_dx) = results
    np.testing.assert_allclose(np.asarray(y), np.asarray(want_y), atol=2e-6)
    np.testing.assert_allclose(np.asarray(dx), np.asarray(want_dx), atol=2e-6)


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_with_a_bias_matches_the_reference(approximate):
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=(2, 5, 8)) * 3, tf.float32)
    bias = tf.constant(rng.normal(size=(8,)), tf.float32)
    upstream = tf.constant(rng.normal(size=(2, 5, 8)), tf.float32)
    results = []
    for fast in (True, False):
        with tf.GradientTape() as tape:
            tape.watch([x, bias])
            y = kernels.gelu(x, approximate=approximate, bias=bias, fast=fast)
            total = tf.reduce_sum(y * upstream)
        results.append([y] + tape.gradient(total, [x, bias]))
    for got, want in zip(*results):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)


def test_gelu_in_bfloat16_is_the_float32_result_rounded_once():
    x = tf.cast(tf.random.stateless_normal([4, 64], seed=[1, 2]) * 3, tf.bfloat16)
    got = kernels.gelu(x, approximate=True, fast=True)
    assert got.dtype == tf.bfloat16
    want = tf.cast(kernels.gelu(tf.cast(x, tf.float32), approximate=True, fast=True), tf.bfloat16)
    np.testing.assert_array_equal(np.asarray(tf.cast(got, tf.float32)),
                                  np.asarray(tf.cast(want, tf.float32)))


def test_dropout_mask_is_a_function_of_the_seed_at_the_rate():
    seed = keras.random.SeedGenerator(7).next()
    mask = np.asarray(kernels.keep_mask((256, 1024), 0.25, seed))
    assert abs(mask.mean() - 0.75) < 0.005
    np.testing.assert_array_equal(np.asarray(kernels.keep_mask((256, 1024), 0.25, seed)), mask)
    # Other seeds (the next draw, another seed word) give unrelated masks: they agree where two
    # independent draws would (0.75^2 + 0.25^2), and neighbouring elements are independent too.
    for other in (seed + [0, 1], seed + [1, 0]):
        agree = (np.asarray(kernels.keep_mask((256, 1024), 0.25, other)) == mask).mean()
        assert abs(agree - 0.625) < 0.005
    assert abs((mask[:, 1:] == mask[:, :-1]).mean() - 0.625) < 0.005
    assert np.asarray(kernels.keep_mask((4096,), 0.0, seed)).all()


def test_numbered_rows_draw_their_masks_wherever_they_are_computed():
    """With `rows`, a row's mask depends on its number only: rows numbered by their grid
    positions draw the grid's flat-index masks, whether computed on the grid, as a gathered
    block of some rows, or as a group of them; a query's attention mask likewise, beside any
    other queries."""
    seed = keras.random.SeedGenerator(9).next()
    batch, seq, width, heads = 3, 5, 8, 2
    grid = np.asarray(kernels.keep_mask((batch, seq, width), 0.5, seed))
    positions = np.asarray(kernels.grid_positions(batch, seq))
    np.testing.assert_array_equal(
        kernels.keep_mask((batch, seq, width), 0.5, seed, rows=positions[..., None]), grid)
    some = np.array([0, 5, 7, 14, 2, 0])  # gathered rows, in any order, some twice
    np.testing.assert_array_equal(
        kernels.keep_mask((len(some), width), 0.5, seed, rows=some[:, None]),
        grid.reshape(-1, width)[some])
    np.testing.assert_array_equal(
        kernels.keep_mask((batch, seq - 1, width), 0.5, seed, rows=positions[:, 1:, None]),
        grid[:, 1:])
    # The attention's probabilities [B, N, Sq, S]: numbered by query.
    full = np.asarray(kernels.keep_mask((batch, heads, seq, seq), 0.5, seed,
                                        rows=positions[:, None, :, None]))
    for queries in (slice(0, 1), slice(1, seq)):
        np.testing.assert_array_equal(
            kernels.keep_mask((batch, heads, queries.stop - queries.start, seq), 0.5, seed,
                              rows=positions[:, None, queries, None]), full[:, :, queries])
    assert 0.4 < full.mean() < 0.6


def test_the_dropout_hash_traces_its_constants_as_one_op_each():
    """Every dropout kernel traces the hash forward and backward: its uint32 constants are one
    op each, not an int32 or int64 constant and a cast (which `keras.ops` makes of a Python int
    given as uint32)."""
    graph = tf.function(lambda seed: kernels.keep_mask((4, 8), 0.25, seed)).get_concrete_function(
        tf.TensorSpec([2], tf.int64)).graph
    casts = [op for op in graph.get_operations() if op.type == "Cast"]
    assert casts and not [op for op in casts if op.inputs[0].op.type == "Const"]


def test_a_compiled_dropout_kernel_holds_no_constant_of_its_tensors_size():
    """The element index is computed in the kernel from one small range per axis: an index
    constant of the tensor's size (4 bytes an element) would be kept in the program and read
    from memory on every call. So with the rows' numbers (the attention's queries' positions)."""
    kernel = importlib.import_module("modeling.layers.kernels.dropout")._dropout_kernel(0.1)
    for rows in (None, tf.reshape(tf.range(4 * 16), [4, 1, 16, 1])):
        hlo = kernel.function.experimental_get_compiler_ir(
            tf.zeros([4, 3, 16, 16]), tf.constant([1, 2], tf.int64), rows)(stage="optimized_hlo")
        sizes = [np.prod([int(d) for d in dims.split(",") if d]) for dims in
                 re.findall(r"\w+\[([\d,]*)\]\{?[\d,]*\}? constant\(", hlo)]
        assert sizes and max(sizes) <= 16


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_dropout_keeps_the_masked_elements_scaled(dtype):
    """The dropout every fast kernel applies (inside XLA) and the reference path runs."""
    x = tf.cast(tf.random.stateless_normal([16, 48], seed=[3, 4]), dtype)
    seed = keras.random.SeedGenerator(11).next()
    got = kernels.dropout(x, 0.25, seed)
    assert got.dtype == x.dtype
    kept = np.asarray(kernels.keep_mask((16, 48), 0.25, seed))
    np.testing.assert_allclose(np.asarray(tf.cast(got, tf.float32)),
                               np.where(kept, np.asarray(tf.cast(x, tf.float32)) / 0.75, 0),
                               rtol=1e-2 if dtype == "bfloat16" else 1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fast_dropout_is_the_reference(dtype):
    """`HashedDropout` (the heads' and embeddings' dropout) runs the fast kernel on TensorFlow:
    the reference's values and gradient."""
    x = tf.cast(tf.random.stateless_normal([4, 8, 48], seed=[5, 6]), dtype)
    upstream = tf.random.stateless_normal([4, 8, 48], seed=[7, 8])
    seed = keras.random.SeedGenerator(13).next()
    want = _value_and_grad(lambda v: kernels.dropout(v, 0.1, seed), x, upstream)
    got = _value_and_grad(lambda v: kernels.dropout(v, 0.1, seed, fast=True), x, upstream)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(tf.cast(a, tf.float32)),
                                      np.asarray(tf.cast(b, tf.float32)))
    assert np.count_nonzero(np.asarray(tf.cast(got[0], tf.float32)) == 0) > 0  # some dropped


def test_a_kernel_is_traced_once_for_every_length_of_its_first_axis():
    """`xla.compiled` traces a kernel with its inputs' first axis open (the rows of a real-row
    block and of its groups, a last smaller batch): one trace for three lengths, each length
    compiled apart and computing the reference's values and gradient, dropout masks included
    (drawn from the element index, which depends on the length)."""
    # The module, which `modeling.layers.kernels.dropout` (the function) hides.
    kernel = importlib.import_module("modeling.layers.kernels.dropout")._dropout_kernel(0.375)
    seed = keras.random.SeedGenerator(3).next()
    for rows in (5, 7, 1):
        x = tf.random.stateless_normal([rows, 6, 16], seed=[rows, 1])
        upstream = tf.random.stateless_normal([rows, 6, 16], seed=[rows, 2])
        got = _value_and_grad(lambda v: kernels.dropout(v, 0.375, seed, fast=True), x, upstream)
        want = _value_and_grad(lambda v: kernels.dropout(v, 0.375, seed), x, upstream)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert kernel.function.experimental_get_tracing_count() == 1


def test_an_eager_call_runs_the_program_a_traced_call_runs():
    """An eager call of a kernel and a call inside a `tf.function` compile one XLA program for
    one shape: the session's persistent XLA cache (tests/conftest.py) holds one file of it, not
    two (TensorFlow keys an eager call's compilation by the call's attributes too)."""
    cache = os.environ["BERT_TESTS_XLA_CACHE"]
    # A GELU of a width no other test uses. Its program's file holds the kernel's name (made of
    # its content, tests/xla_cache_keys.py): other processes writing to the cache meanwhile
    # write other names.
    x = tf.random.stateless_normal([3, 41], seed=[4, 1])
    bias = tf.random.stateless_normal([41], seed=[4, 2])
    eager = kernels.gelu(x, approximate=True, bias=bias, fast=True)
    traced = tf.function(lambda v: kernels.gelu(v, approximate=True, bias=bias, fast=True))(x)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(traced))
    forward = importlib.import_module("modeling.layers.kernels.gelu")._kernels(True)[0]
    name = forward.function.get_concrete_function(
        tf.TensorSpec([None, 41]), tf.TensorSpec([41])).name
    files = [f for f in os.listdir(cache) if name in pathlib.Path(cache, f).read_bytes()]
    assert len(files) == 1


@pytest.mark.parametrize("rate", [0.0, 0.3])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fast_attention_is_the_reference(dtype, rate):
    """oneDNN's matmul with the scale and mask as post-ops and its softmax, the XLA dropout, and
    the gradient written out: values and the gradients of the queries, keys and values."""
    rng = np.random.default_rng(0)
    q, k, v = (tf.cast(rng.normal(size=[2, 3, 5, 8]), dtype) for _ in range(3))
    mask = tf.constant([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    upstream = tf.constant(rng.normal(size=[2, 3, 5, 8]), tf.float32)
    seed = keras.random.SeedGenerator(3).next() if rate else None

    def value_and_grads(fn):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            y = fn(q, k, v)
            total = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
        return [y] + tape.gradient(total, [q, k, v])

    def fn(q, k, v, fast=True):
        return attention(q, k, v, mask, rate, seed, fast=fast)

    got = value_and_grads(tf.function(fn))
    want = value_and_grads(lambda q, k, v: fn(q, k, v, fast=False))
    tolerance = dict(rtol=2e-2, atol=2e-2) if dtype == "bfloat16" else dict(rtol=1e-5, atol=1e-6)
    for name, a, b in zip(("output", "q", "k", "v"), got, want):
        np.testing.assert_allclose(np.asarray(tf.cast(a, tf.float32)),
                                   np.asarray(tf.cast(b, tf.float32)), err_msg=name, **tolerance)


@pytest.mark.parametrize("rate", [0.0, 0.2])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fast_dropout_add_layer_norm_is_the_reference(dtype, rate):
    rng = np.random.default_rng(1)
    h, residual = (tf.cast(rng.normal(size=[3, 7, 16]), dtype) for _ in range(2))
    gamma = tf.constant(rng.normal(size=[16]), tf.float32)
    beta = tf.constant(rng.normal(size=[16]), tf.float32)
    upstream = tf.constant(rng.normal(size=[3, 7, 16]), tf.float32)
    seed = keras.random.SeedGenerator(5).next() if rate else None
    bias = tf.cast(rng.normal(size=[16]), dtype)

    def value_and_grads(fn):
        with tf.GradientTape() as tape:
            tape.watch([h, residual, gamma, beta, bias])
            y = fn(h, residual, gamma, beta)
            total = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
        return [y] + tape.gradient(total, [h, residual, gamma, beta, bias])

    def fn(h, residual, gamma, beta, fast=True):
        return kernels.dropout_add_layer_norm(h, residual, gamma, beta, epsilon=1e-12, rate=rate,
                                              seed=seed, bias=bias, fast=fast)

    got = value_and_grads(tf.function(fn))
    want = value_and_grads(lambda *args: fn(*args, fast=False))
    tolerance = dict(rtol=2e-2, atol=3e-2) if dtype == "bfloat16" else dict(rtol=1e-5, atol=2e-5)
    for name, a, b in zip(("output", "h", "residual", "gamma", "beta", "bias"), got, want):
        np.testing.assert_allclose(np.asarray(tf.cast(a, tf.float32)),
                                   np.asarray(tf.cast(b, tf.float32)), err_msg=name, **tolerance)


def _tiny_batch_and_model():
    """The fixture's batch, and `make(kernels)`: the tiny encoder with dropout 0.1, the same
    initial weights and dropout seeds on every call."""
    from modeling import BertModel
    from modeling_helpers import encoder_inputs, tiny_config, tiny_expected

    config = tiny_config()
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.1
    batch = {k: tf.constant(v) for k, v in encoder_inputs(tiny_expected()).items()}

    def make(kernels):
        keras.utils.set_random_seed(3)
        return BertModel(config, kernels=kernels)

    return batch, make


def _training_step(model, batch, skip_padding):
    """[loss, sequence_output, *gradients] of one training step, dropout on."""
    weights = tf.cast(batch["input_mask"], tf.float32)[..., None]
    with tf.GradientTape() as tape:
        out = model(batch, training=True, skip_padding=skip_padding)
        loss = (tf.reduce_sum(tf.square(out["pooled_output"]))
                + tf.reduce_sum(tf.square(out["sequence_output"]) * weights))
    return [loss, out["sequence_output"]] + tape.gradient(loss, model.trainable_variables)


@pytest.fixture(scope="module")
def traced_step():
    """`traced_step(kernels, skip_padding)`: `_training_step` of a new model in a `tf.function`,
    as NumPy arrays, computed once in the module."""
    batch, make = _tiny_batch_and_model()

    @functools.cache
    def traced(kernels, skip_padding):
        model = make(kernels)
        step = tf.function(lambda: _training_step(model, batch, skip_padding))
        return [np.asarray(tf.convert_to_tensor(t)) for t in step()]

    return traced


def _assert_rounding_apart(got, want):
    """Rounding only, carried through three layers of backward pass (a different dropout mask
    would differ by the size of the values); the key bias's gradient is 0 in exact arithmetic."""
    scale = max(np.abs(w).max() for w in want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(tf.convert_to_tensor(a)), b, rtol=1e-5,
                                   atol=2e-6 * scale)


@pytest.mark.parametrize("skip_padding", [
    pytest.param(False, id="grid"), pytest.param(True, id="real rows", marks=pytest.mark.large)])
def test_a_reference_model_computes_what_the_fast_one_does(traced_step, skip_padding):
    """The same model (weights and dropout seeds) built with each `kernels`: in training, with
    dropout on, the same outputs and gradients to float rounding (the same dropout masks)."""
    fast_loss, *fast = traced_step("fast", skip_padding)
    reference_loss, *reference = traced_step("reference", skip_padding)
    assert fast_loss == pytest.approx(reference_loss, rel=1e-5)
    _assert_rounding_apart(fast, reference)


def test_an_eager_tape_records_nothing_inside_the_kernels(traced_step):
    """Each kernel's gradient is its own (`xla.custom_gradient`): an eager tape over a model with
    the fast kernels (the row moves, GELU, attention, dropout and LayerNorm) records nothing
    inside them, so TensorFlow makes no second version of a kernel for the tape (a
    `__forward_<kernel>` function that also returns the kernel's intermediates, traced and
    XLA-compiled once more). The gradients are those of the same step in a `tf.function`
    (rounding only: TensorFlow's graph rewrites fuse what eager runs op by op)."""
    from tensorflow.python.eager import context

    batch, make = _tiny_batch_and_model()
    before = set(context.context().list_function_names())
    eager = _training_step(make("fast"), batch, skip_padding=True)
    made = set(context.context().list_function_names()) - before
    assert made, "the step built no kernel"
    assert not sorted(name for name in made if name.startswith("__forward_"))
    _assert_rounding_apart(eager, traced_step("fast", True))


def test_the_kernels_choice_is_part_of_the_config():
    from modeling import BertClassifier, BertModel
    from modeling.inference import with_bfloat16_weights
    from modeling_helpers import tiny_config

    model = BertModel(tiny_config(), kernels="reference")
    assert model.get_config()["kernels"] == "reference"
    assert BertModel.from_config(model.get_config()).encoder_layers[0].kernels == "reference"
    classifier = BertClassifier(tiny_config(), 3, kernels="reference")
    copy = with_bfloat16_weights(classifier)  # built again from the config
    assert copy.encoder.encoder_layers[-1].kernels == "reference"
    with pytest.raises(ValueError, match="kernels must be one of"):
        BertModel(tiny_config(), kernels="fused")
