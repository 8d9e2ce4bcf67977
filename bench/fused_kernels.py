r"""The encoder's fast kernels (`modeling.layers.kernels`, `modeling.layers.attention`;
`fast=True`) against the same functions run op by op (`fast=False`, the `keras.ops` reference),
forward and forward + backward, in one process, round-robin. Shapes are a MiniLM-L6 fine-tuning
step's (batch 32 x 128, about 3,072 real rows of width 384, 12 heads):

    python -m bench.fused_kernels                  # float32 and bfloat16, ~1 minute
    python -m bench.fused_kernels --rows=1024 --width=768 --heads=12 --batch_size=8   # BERT-Base

Rows: the attention (its two batched matmuls, the scale and mask that oneDNN adds inside the
first, oneDNN's softmax and the XLA kernel of the probability dropout on `[B, N, S, S]`), dropout +
residual + LayerNorm with the dense bias (`[rows, width]`), and the GELU with its bias
(`[rows, 4 x width]`).
`speed-up` is the reference's median time over the fused one's.
"""
import statistics

from absl import flags

from bench import harness

flags.DEFINE_integer("rows", 3072, "Real token rows.")
flags.DEFINE_integer("width", 384, "Hidden size; the intermediate size is 4x.")
flags.DEFINE_integer("heads", 12, "Attention heads.")
flags.DEFINE_integer("batch_size", 32, "Sequences of the attention grid.")
flags.DEFINE_integer("seq_length", 128, "Sequence length of the attention grid.")
flags.DEFINE_list("precisions", ["float32", "bfloat16"], "Compute dtypes.")
flags.DEFINE_integer("repeats", 15, "Timed rounds (after one untimed round).")
FLAGS = flags.FLAGS


def cases(dtype, fast):
    """`{name: (function of the inputs, inputs)}` for one compute dtype, the fast kernels or the
    reference."""
    import numpy as np
    import tensorflow as tf

    from modeling.layers import kernels
    from modeling.layers.attention import attention

    rng = np.random.default_rng(0)

    def tensor(shape, cast=dtype):
        return tf.cast(tf.constant(rng.normal(size=shape), tf.float32), cast)

    b, n, s = FLAGS.batch_size, FLAGS.heads, FLAGS.seq_length
    d = FLAGS.width // n
    lengths = rng.integers(s // 2, s + 1, b)
    mask = tf.constant((np.arange(s)[None] < lengths[:, None]).astype("int32"))
    seed = tf.constant([7, 1], tf.int64)
    rows, width = FLAGS.rows, FLAGS.width
    gamma, beta = tensor([width], "float32"), tensor([width], "float32")
    return {
        "attention (softmax + dropout)": (
            lambda q, k, v: attention(q, k, v, mask, 0.1, seed, fast=fast),
            [tensor([b, n, s, d]), tensor([b, n, s, d]), tensor([b, n, s, d])]),
        "dropout + residual + LayerNorm": (
            lambda h, residual, bias: kernels.dropout_add_layer_norm(
                h, residual, gamma, beta, epsilon=1e-12, rate=0.1, seed=seed, bias=bias,
                fast=fast),
            [tensor([rows, width]), tensor([rows, width]), tensor([width])]),
        "GELU (erf) with bias": (
            lambda x, bias: kernels.gelu(x, approximate=False, bias=bias, fast=fast),
            [tensor([rows, 4 * width]), tensor([4 * width])]),
    }


def timed(fn, inputs, backward):
    """A zero-argument callable running `fn` (and its gradient) in a `tf.function`."""
    import tensorflow as tf

    def run(*xs):
        if not backward:
            return fn(*xs)
        with tf.GradientTape() as tape:
            tape.watch(xs)
            y = fn(*xs)
            total = tf.reduce_sum(tf.cast(y, tf.float32))
        return tape.gradient(total, xs)

    compiled = tf.function(run)
    return lambda: [t.numpy() for t in tf.nest.flatten(compiled(*inputs))]


def main(argv):
    del argv
    print(harness.describe_machine(None, packages=("tensorflow", "keras")))
    runners = {}
    for dtype in FLAGS.precisions:
        versions = {fast: cases(dtype, fast) for fast in (True, False)}
        for name in versions[True]:
            for backward in (False, True):
                for fast in (True, False):
                    fn, inputs = versions[fast][name]
                    run = timed(fn, inputs, backward)
                    run()  # traced and compiled here, untimed
                    runners[dtype, name, backward, fast] = run
    times = harness.time_rounds(runners, FLAGS.repeats, warmup=1)
    print(f"\nmedian of {FLAGS.repeats} rounds; rows {FLAGS.rows} x {FLAGS.width}, attention "
          f"[{FLAGS.batch_size}, {FLAGS.heads}, {FLAGS.seq_length}, {FLAGS.seq_length}]")
    print(f"{'dtype':9s} {'kernel':32s} {'pass':17s} {'fused ms':>9s} {'op by op ms':>12s} "
          f"{'speed-up':>9s}")
    figures = []
    for (dtype, name, backward, fast), samples in times.items():
        if not fast:
            continue
        ours = statistics.median(samples)
        reference = statistics.median(times[dtype, name, backward, False])
        print(f"{dtype:9s} {name:32s} {'forward+backward' if backward else 'forward':17s} "
              f"{ours * 1e3:9.2f} {reference * 1e3:12.2f} {reference / ours:8.2f}x")
        figures.append({"dtype": dtype, "kernel": name, "backward": backward,
                        "fused_ms": ours * 1e3, "op_by_op_ms": reference * 1e3,
                        "speed_up": reference / ours})
    harness.write_results("fused_kernels", figures, packages=("tensorflow", "keras"))


if __name__ == "__main__":
    harness.run(main)
