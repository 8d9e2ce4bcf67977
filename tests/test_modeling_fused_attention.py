"""The encoder mode `EncoderModes.fused_attention` (the backend's fused attention where no attention
dropout is drawn) gives the values and gradients of the usual attention: on TensorFlow here, under
JAX (XLA's implementation on a CPU) in the large tier."""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from optional_packages import needs

# Both backends: the tiny encoder (padded rows in the batch, hidden dropout on, attention dropout
# 0) with and without the mode, the same weights; the largest difference of the outputs and of
# the gradients of a training call.
SCRIPT = """
import sys
import numpy as np
sys.path[:0] = [{root!r}, {tests!r}]
import keras
from keras import ops
from modeling import BertModel
from modeling_helpers import encoder_inputs, tiny_config, tiny_expected

def gaps(causal):
    config = tiny_config().with_objective("ltr" if causal else "mlm")
    config.attention_probs_dropout_prob = 0.0
    inputs = encoder_inputs(tiny_expected())
    keras.utils.set_random_seed(3)
    models = [BertModel(config, modes=dict(fused_attention=fused)) for fused in (False, True)]
    for variable, value in zip(models[1].variables, models[0].variables):
        variable.assign(value)
    outputs = [m(inputs) for m in models]
    gap = max(float(np.max(np.abs(ops.convert_to_numpy(a[k]) - ops.convert_to_numpy(b[k]))))
              for a, b in [outputs] for k in ("sequence_output", "pooled_output"))
    grads = [gradients(m, inputs) for m in models]
    return gap, max(float(np.max(np.abs(a - b))) for a, b in zip(*grads))

{gradients}
print(*gaps(False), *gaps(True))
"""

TF_GRADIENTS = """
import tensorflow as tf
def gradients(model, inputs):
    with tf.GradientTape() as tape:
        out = model(inputs, training=True)
        loss = (tf.reduce_mean(tf.square(out["sequence_output"]))
                + tf.reduce_sum(out["pooled_output"]))
    grads = tape.gradient(loss, model.trainable_variables)
    return [tf.convert_to_tensor(g).numpy() for g in grads]
"""

JAX_GRADIENTS = """
import jax
def gradients(model, inputs):
    def loss(trainable):
        out, _ = model.stateless_call(trainable, [v.value for v in model.non_trainable_variables],
                                      inputs, training=True)
        return (ops.mean(ops.square(out["sequence_output"])) + ops.sum(out["pooled_output"]))
    return [np.asarray(g) for g in jax.grad(loss)([v.value for v in model.trainable_variables])]
"""


def _gaps(backend, gradients):
    script = SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests"), gradients=gradients)
    env = {**os.environ, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu",
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return [float(x) for x in result.stdout.split()[-4:]]


def test_fused_attention_gives_the_same_values_on_tensorflow():
    assert np.max(_gaps("tensorflow", TF_GRADIENTS)) < 1e-5


@pytest.mark.large  # JAX: the large tier's packages
@needs("jax")
def test_fused_attention_gives_the_same_values_under_jax():
    assert np.max(_gaps("jax", JAX_GRADIENTS)) < 1e-5
