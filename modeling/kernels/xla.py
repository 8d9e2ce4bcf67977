"""What the fast kernels share: TensorFlow imported only when one is built (`modeling` imports
without it, for the JAX backend), XLA compilation, and the bias a kernel adds for the dense
layer before it."""
from keras import ops


def tf():
    import tensorflow

    return tensorflow


def compiled(fn):
    """`fn` as one XLA kernel: a `tf.function` with `jit_compile`, traced per input signature."""
    return tf().function(fn, jit_compile=True, autograph=False)


def bias_or_zeros(bias, x):
    """`bias` (`[H]`) in the dtype of `x` (`[..., H]`), or zeros for None: a kernel's signature
    has one bias input whether or not a caller has a bias."""
    return ops.zeros((x.shape[-1],), x.dtype) if bias is None else ops.cast(bias, x.dtype)


def bias_gradient(d_sum, bias):
    """The gradient of a bias broadcast over `d_sum`'s leading axes, summed in float32, in the
    dtype of `bias`; computed inside the backward kernels because TensorFlow's own column sum
    is slower than the rest of such a kernel."""
    outer = tuple(range(len(d_sum.shape) - 1))
    return ops.cast(ops.sum(ops.cast(d_sum, "float32"), axis=outer), bias.dtype)
