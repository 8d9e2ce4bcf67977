"""The initial values of every variable a run does not load, drawn on the host with numpy, so that
a run from scratch starts from the same weights under every Keras backend (each backend's own
random functions draw different numbers from the same seed).

The original initialises with `tf.truncated_normal_initializer(stddev=initializer_range)`
(`truncated_normal`); what it leaves to TensorFlow's defaults (ELECTRA's `embeddings_project`,
Keras' dense and LSTM layers) is Glorot-uniform kernels and orthogonal recurrent kernels; LoRA's
`lora_a` is He-uniform, as KerasHub's.

Each initializer takes its seed from Python's `random` when it is made, as Keras' unseeded
initializers do (`keras.utils.set_random_seed` seeds it), and, as Keras' do, gives the same
values on every call: a variable needs an initializer of its own. Registered with Keras, so that
a layer rebuilt from its config (a `Bidirectional`'s backward LSTM) draws with them too.
"""
import math
import random

import keras
import numpy as np


class HostInitializer(keras.initializers.Initializer):
    """Values from numpy's PCG64 generator of the initializer's seed (`draw`), in float32 then
    cast to the variable's dtype."""

    def __init__(self, seed=None):
        self._init_seed = seed
        self.seed = random.randint(1, int(1e9)) if seed is None else seed

    def __call__(self, shape, dtype=None):
        values = self.draw(np.random.Generator(np.random.PCG64(self.seed)), tuple(shape))
        return keras.ops.cast(values.astype(np.float32, copy=False),
                              dtype or keras.config.floatx())

    def draw(self, rng, shape):
        """float `np.ndarray` of `shape` from `rng`."""
        raise NotImplementedError

    def get_config(self):
        return {"seed": self._init_seed}


@keras.saving.register_keras_serializable(package="bert")
class TruncatedNormal(HostInitializer):
    """Normal(0, stddev) redrawn outside ±2·stddev and not rescaled (empirical std ≈
    0.88·stddev): TF1's `truncated_normal_initializer` and Keras' `TruncatedNormal`."""

    def __init__(self, stddev, seed=None):
        super().__init__(seed)
        self.stddev = stddev

    def draw(self, rng, shape):
        values = rng.standard_normal(shape, dtype=np.float32)
        flat = values.reshape(-1)
        # The positions still outside, in order: each round redraws them in one call and looks
        # at those draws alone, not the whole array again (the same numbers in the same places).
        outside = np.flatnonzero(np.abs(flat) > 2.0)
        while outside.size:
            redrawn = rng.standard_normal(outside.size, dtype=np.float32)
            flat[outside] = redrawn
            outside = outside[np.abs(redrawn) > 2.0]
        return values * np.float32(self.stddev)

    def get_config(self):
        return {**super().get_config(), "stddev": self.stddev}


def _fans(shape):
    """(fan_in, fan_out) as Keras counts them: a kernel's `[..., in, out]`, the leading axes a
    receptive field."""
    if len(shape) < 2:
        return (shape[0],) * 2 if shape else (1, 1)
    field = math.prod(shape[:-2])
    return shape[-2] * field, shape[-1] * field


@keras.saving.register_keras_serializable(package="bert")
class GlorotUniform(HostInitializer):
    """Uniform(±sqrt(6 / (fan_in + fan_out))): TensorFlow's and Keras' default kernels."""

    def draw(self, rng, shape):
        fan_in, fan_out = _fans(shape)
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, shape)


@keras.saving.register_keras_serializable(package="bert")
class HeUniform(HostInitializer):
    """Uniform(±sqrt(6 / fan_in))."""

    def draw(self, rng, shape):
        limit = math.sqrt(6.0 / _fans(shape)[0])
        return rng.uniform(-limit, limit, shape)


@keras.saving.register_keras_serializable(package="bert")
class Orthogonal(HostInitializer):
    """An orthogonal matrix (rows or columns, whichever are fewer, orthonormal), Q of a normal
    matrix's QR with R's diagonal made positive: Keras' `Orthogonal` (an LSTM's recurrent
    kernel)."""

    def draw(self, rng, shape):
        rows, columns = math.prod(shape[:-1]), shape[-1]
        normal = rng.standard_normal((max(rows, columns), min(rows, columns)))
        q, r = np.linalg.qr(normal)
        q = q * np.sign(np.diag(r))
        return (q.T if rows < columns else q).reshape(shape)


def truncated_normal(stddev):
    """The original's initializer for `initializer_range` (`TruncatedNormal`)."""
    return TruncatedNormal(stddev)
