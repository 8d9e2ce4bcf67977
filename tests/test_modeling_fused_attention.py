"""The encoder mode `EncoderModes.fused_attention` gives the values and gradients of the usual
attention: the backend's fused attention where no attention dropout is drawn, on TensorFlow (in
this process) and under JAX (XLA's implementation on a CPU) in the large tier; and the
flash-attention kernel with the hashed dropout (`modeling.layers.kernels.flash`, in Pallas'
interpreter on a CPU), which draws the reference's masks."""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from optional_packages import needs, require

def fused_attention_gaps(outputs_and_gradients):
    """On the session's backend: the tiny encoder (padded rows in the batch, hidden dropout on,
    attention dropout 0) with and without the mode, the same weights; the largest difference of
    the outputs and of the gradients of a training call (`outputs_and_gradients(model, inputs)`:
    the output arrays and the gradient arrays, both calls with the last layer's [CLS] rows apart:
    the fused attention on part of the queries too), bidirectional then causal."""
    import keras

    from modeling import BertModel
    from modeling_helpers import encoder_inputs, tiny_config, tiny_expected

    found = []
    for causal in (False, True):
        config = tiny_config().with_objective("ltr" if causal else "mlm")
        config.attention_probs_dropout_prob = 0.0
        inputs = encoder_inputs(tiny_expected())
        keras.utils.set_random_seed(3)
        models = [BertModel(config, modes=dict(fused_attention=fused)) for fused in (False, True)]
        for variable, value in zip(models[1].variables, models[0].variables):
            variable.assign(value)
        (outputs, grads), (fused_outputs, fused_grads) = (outputs_and_gradients(m, inputs)
                                                          for m in models)
        for pair in (zip(outputs, fused_outputs), zip(grads, fused_grads)):
            found.append(max(float(np.max(np.abs(a - b))) for a, b in pair))
    return found


def tf_outputs_and_gradients(model, inputs):
    """Eager: the outputs of an inference call, the gradients of a training call."""
    import tensorflow as tf

    outputs = model(inputs, first_row_apart=True)
    with tf.GradientTape() as tape:
        out = model(inputs, training=True, first_row_apart=True)
        loss = (tf.reduce_mean(tf.square(out["sequence_output"]))
                + tf.reduce_sum(out["pooled_output"]))
    return ([outputs[k].numpy() for k in ("sequence_output", "pooled_output")],
            [tf.convert_to_tensor(g).numpy()
             for g in tape.gradient(loss, model.trainable_variables)])


def jax_outputs_and_gradients(model, inputs):
    """In one jitted function, as a training step runs the model (eager JAX compiles each
    operation apart, most of the test's time on a CPU)."""
    from keras import ops

    jax = require("jax")
    fixed = [v.value for v in model.non_trainable_variables]

    def call(trainable, training):
        return model.stateless_call(trainable, fixed, inputs, training=training,
                                    first_row_apart=True)[0]

    def loss(trainable):
        out = call(trainable, True)
        return ops.mean(ops.square(out["sequence_output"])) + ops.sum(out["pooled_output"])

    outputs, grads = jax.jit(lambda t: (call(t, False), jax.grad(loss)(t)))(
        [v.value for v in model.trainable_variables])
    return ([np.asarray(outputs[k]) for k in ("sequence_output", "pooled_output")],
            [np.asarray(g) for g in grads])


def test_fused_attention_gives_the_same_values_on_tensorflow():
    assert np.max(fused_attention_gaps(tf_outputs_and_gradients)) < 1e-5


@pytest.mark.large  # JAX: the large tier's packages
@needs("jax")
def test_fused_attention_gives_the_same_values_under_jax():
    script = (f"import sys; sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]\n"
              "import test_modeling_fused_attention as t\n"
              "print(*t.fused_attention_gaps(t.jax_outputs_and_gradients))")
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert np.max([float(x) for x in result.stdout.split()[-4:]]) < 1e-5


# Each comparison jitted, as a step runs the kernel (eager, Pallas' interpreter dispatches each
# operation of the kernel's body apart).
FLASH_SCRIPT = """
import sys
import jax
import jax.numpy as jnp
import numpy as np
sys.path.insert(0, {root!r})
from modeling.layers.attention import attention
from modeling.layers.kernels.dropout import grid_positions, seed_words
from modeling.layers.kernels.flash import flash_attention

rng = np.random.default_rng(1)
B, N, S, D = 2, 2, 128, 16
q, k, v = (jnp.asarray(rng.normal(size=(B, N, S, D)), jnp.float32) for _ in range(3))
mask = np.ones((B, S), "int32")
mask[1, 70:] = 0
seed = jnp.asarray([7, 11], jnp.int32)
weights = jnp.asarray(rng.normal(size=(B, N, S, D)), jnp.float32)
gaps = []
for rate in (0.0, 0.1):
    for causal in (False, True):
        def reference(q, k, v):
            return attention(q, k, v, mask, rate, seed, fast=False, causal=causal)
        def flash(q, k, v):
            return flash_attention(q, k, v, jnp.asarray(mask), 1 / np.sqrt(D), rate,
                                   jnp.stack(seed_words(seed)), grid_positions(B, S), causal,
                                   interpret=True)
        for fn in (lambda f: jax.jit(f)(q, k, v),
                   lambda f: jax.jit(jax.grad(lambda *x: jnp.sum(f(*x) * weights),
                                              (0, 1, 2)))(q, k, v)):
            gaps += [float(jnp.max(jnp.abs(a - b))) for a, b in zip(
                jax.tree.leaves(fn(reference)), jax.tree.leaves(fn(flash)))]
# Queries of part of the grid (a layer's first rows apart, `first_row_apart`), padded to blocks.
for part in (slice(0, 1), slice(1, S)):
    positions = grid_positions(B, S)[:, part]
    def reference(q, k, v):
        return attention(q, k, v, mask, 0.1, seed, fast=False, query_positions=positions)
    def flash(q, k, v):
        return flash_attention(q, k, v, jnp.asarray(mask), 1 / np.sqrt(D), 0.1,
                               jnp.stack(seed_words(seed)), positions, interpret=True)
    loss = lambda f: lambda *x: jnp.sum(f(*x) * weights[:, :, part])
    gaps += [float(jnp.max(jnp.abs(a - b))) for a, b in zip(
        jax.jit(jax.grad(loss(reference), (0, 1, 2)))(q[:, :, part], k, v),
        jax.jit(jax.grad(loss(flash), (0, 1, 2)))(q[:, :, part], k, v))]
    gaps.append(float(jnp.max(jnp.abs(jax.jit(reference)(q[:, :, part], k, v)
                                      - jax.jit(flash)(q[:, :, part], k, v)))))
# The kernels lower for CUDA (Pallas to Triton) on this machine without a GPU.
args = [jax.ShapeDtypeStruct((B, N, S, 64), jnp.bfloat16)] * 3 + [
    jax.ShapeDtypeStruct((B, S), jnp.int32), jax.ShapeDtypeStruct((2,), jnp.uint32),
    jax.ShapeDtypeStruct((B, S), jnp.int32)]
grad = jax.grad(lambda q, k, v, *rest: jnp.sum(flash_attention(q, k, v, *rest[:1], 0.125, 0.1,
                                                                  *rest[1:]).astype(jnp.float32)),
                (0, 1, 2))
text = jax.jit(grad).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
assert all(name in text for name in ("flash_attention_forward", "flash_attention_key_grads",
                                     "flash_attention_query_grads")), "not lowered"
print(max(gaps))
"""


@pytest.mark.large  # JAX (with its Pallas): the large tier's packages
@needs("jax")
def test_the_flash_kernel_draws_the_reference_dropout():
    """Values and gradients with and without dropout, causal or not, one sequence padded, for
    every query or part of them; and the kernels lower for CUDA."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    result = subprocess.run([sys.executable, "-c", FLASH_SCRIPT.format(root=str(ROOT))],
                            env=env, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert float(result.stdout.split()[-1]) < 1e-5


SHARDED_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
import jax, keras, numpy as np
import jax.numpy as jnp
from modeling.layers.attention import flash_attention
from modeling.layers.kernels.dropout import grid_positions, seed_words

rng = np.random.default_rng(2)
B, N, S, D = 4, 2, 64, 16
q, k, v, weights = (jnp.asarray(rng.normal(size=(B, N, S, D)), jnp.float32) for _ in range(4))
mask = np.ones((B, S), "int32")
mask[1, 40:] = 0
args = (jnp.asarray(mask), jnp.stack(seed_words(jnp.asarray([3, 5], jnp.int32))),
        grid_positions(B, S))

def values_and_grads():
    def loss(q, k, v):
        out = flash_attention(q, k, v, args[0], 0.25, 0.1, *args[1:], interpret=True)
        return jnp.sum(out * weights), out
    (_, out), grads = jax.jit(jax.value_and_grad(loss, (0, 1, 2), has_aux=True))(q, k, v)
    return [np.asarray(x) for x in (out, *grads)]

alone = values_and_grads()
keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))
sharded = values_and_grads()
assert "shard_map" in str(jax.make_jaxpr(lambda q: flash_attention(
    q, k, v, args[0], 0.25, 0.1, *args[1:], interpret=True))(q))
print(len(jax.devices()), max(float(np.max(np.abs(a - b))) for a, b in zip(alone, sharded)))
"""


@pytest.mark.large
@needs("jax")
def test_the_flash_kernel_runs_on_each_devices_part_of_the_batch():
    """Under a data-parallel distribution over 2 devices the kernel runs per device
    (`jax.shard_map`) with the batch's grid positions: the one-device values and gradients
    (to float rounding: XLA may order a half batch's sums otherwise on another CPU)."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    result = subprocess.run([sys.executable, "-c", SHARDED_SCRIPT.format(root=str(ROOT))],
                            env=env, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    devices, gap = result.stdout.split()[-2:]
    assert devices == "2" and float(gap) < 1e-5
