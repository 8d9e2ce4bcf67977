"""`HashedDropout`: `keras.layers.Dropout` with the encoder's hashed masks (`kernels.dropout`)."""
import keras

from modeling.layers.kernels import dropout, use_fast


class HashedDropout(keras.layers.Layer):
    """Dropout at `rate` whose mask is a hash of each element's index and a seed drawn from the
    layer's `SeedGenerator` (`modeling.layers.kernels.dropout`), where `keras.layers.Dropout` draws
    it from the backend's random ops. The same seed gives the same mask whether the step runs op
    by op or XLA-compiles (TensorFlow's random ops give XLA another stream), so a
    `--jit_compile` run trains what the same run without it trains.

    On TensorFlow the mask is applied by one XLA kernel forward and one backward
    (`kernels.dropout`'s `fast`): several times quicker than `keras.layers.Dropout` there, and
    the same values as the `keras.ops` reference on every backend.

    Call args: `x` float `[...]`, `training`. Returns `x`'s shape and dtype.
    """

    def __init__(self, rate, **kwargs):
        super().__init__(**kwargs)
        self.rate = rate
        self.seed_generator = keras.random.SeedGenerator() if rate else None
        self.built = True

    def call(self, x, training=False):
        if not training or self.seed_generator is None:
            return x
        return dropout(x, self.rate, self.seed_generator.next(), fast=use_fast("fast"))

    def get_config(self):
        return {**super().get_config(), "rate": self.rate}
