"""What the fast kernels share: TensorFlow imported only when one is built (`modeling` imports
without it, for the JAX backend), XLA compilation, their custom gradients, and the bias a kernel
adds for the dense layer before it."""
import keras
from keras import ops


def tf():
    import tensorflow

    return tensorflow


def compiled(fn):
    """`fn` as one XLA kernel: a `tf.function` with `jit_compile`, traced once per input
    signature with the first axis of every input of two or more axes left open, and compiled
    per input shape.

    The first axis is the one whose length varies within a run: the rows of a real-row block
    and of its two groups (first rows, the others), the batch of the last or of an evaluation
    batch, a model's variables of one width. One trace serves them all (tracing a kernel takes
    longer than loading its compiled program); the kernels read no length of that axis as a
    Python number. Inputs of fewer axes (biases, seeds, row indices) keep their shapes.

    An eager call goes through a plain `tf.function` around the kernel, so that it runs the
    program a call inside a traced function (training, serving) runs: TensorFlow keys an eager
    call's compilation by the call's attributes too (among them the process's session
    configuration), and would compile the same kernel at the same shapes a second time for it."""
    function = tf().function(fn, jit_compile=True, autograph=False)

    def in_graph(*args):
        return function.get_concrete_function(*map(_open_first_axis, args))(*args)

    eager_entry = tf().function(in_graph, autograph=False)

    def call(*args):
        args = [tf().convert_to_tensor(a) if _is_array(a) else a for a in args]
        if tf().executing_eagerly():
            return eager_entry.get_concrete_function(*map(_open_first_axis, args))(*args)
        return in_graph(*args)

    call.function = function  # the `tf.function` (its traces, its compiler IR)
    return call


def _is_array(value):
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _open_first_axis(value):
    """The `tf.TensorSpec` of a tensor, its first axis open if it has two or more; other
    arguments (Python numbers) as they are."""
    if not _is_array(value):
        return value
    shape = value.shape
    if shape.rank is not None and shape.rank >= 2:
        shape = [None, *shape[1:]]
    return tf().TensorSpec(shape, value.dtype)


def custom_gradient(fn):
    """`keras.ops.custom_gradient(fn)` (`tf.custom_gradient` on TensorFlow), whose forward pass an
    eager gradient tape does not look into.

    The gradient is `fn`'s own, so nothing a tape records inside `fn` is ever used. But an eager
    tape that sees a compiled kernel's inputs makes the kernel ready to be differentiated itself:
    it traces the kernel's gradient and traces and compiles a second kernel that also returns
    every intermediate, which the tape then keeps until it is done. Inside a `tf.function`
    (training) the tape defers that work until a gradient asks for it, which none does; so only
    eager callers (a custom training loop, a test's tape) see the inputs through
    `tf.stop_gradient` instead: the same values, no tape behind them.
    """
    def forward(*args):
        if keras.backend.backend() == "tensorflow" and tf().executing_eagerly():
            args = [tf().stop_gradient(a) for a in args]
        return fn(*args)

    return ops.custom_gradient(forward)


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
