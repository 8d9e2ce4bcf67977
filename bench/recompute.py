r"""Peak memory of a training step with and without activation recomputation
(`BertModel(modes={"recompute": True})`), same weights, same batch, same dropout seeds.

    python -m bench.recompute                                   # BERT-Large, batch 2 x 512
    python -m bench.recompute --config=base --seq_length=128    # quicker

For each setting it builds the encoder (random weights; the recomputing model gets the first
model's weights and dropout-generator states) with a 2-way classifier on the pooled output, and
runs --steps training steps (forward + backward, dropout 0.1, `tf.function`; no optimizer: its
state is the same either way). It prints, per setting, the TensorFlow allocator's peak during the
last step (`tf.config.experimental.get_memory_info`) above what was allocated before it (the
step's activations and gradients), the process's peak resident memory so far, the step time and
the losses, which must agree.
"""
import resource
import time

import numpy as np
from absl import flags

from bench import harness

CONFIGS = {
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                  intermediate_size=4096),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072),
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64),  # tests/test_bench.py's smoke run
}
flags.DEFINE_enum("config", "large", sorted(CONFIGS), "Encoder shape (vocab 30522, 512 positions).")
flags.DEFINE_integer("batch_size", 2, "Sequences per step.")
flags.DEFINE_integer("seq_length", 512, "Tokens per sequence (all real).")
flags.DEFINE_integer("steps", 2, "Training steps per setting; the last one is measured.")
flags.DEFINE_enum("mixed_precision", None, ["bf16"], "bf16: the Keras mixed_bfloat16 policy.")
FLAGS = flags.FLAGS
MB = 2 ** 20


def _peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def build(recompute, source=None):
    """Encoder + classifier, with `source`'s variables (weights and dropout seeds) if given."""
    import keras

    from modeling import BertConfig, BertModel

    config = BertConfig(vocab_size=30522, max_position_embeddings=512, type_vocab_size=2,
                        **CONFIGS[FLAGS.config])
    encoder = BertModel(config, modes={"recompute": recompute})
    classifier = keras.layers.Dense(2, name="classifier")
    classifier.build((None, config.hidden_size))
    if source is not None:
        for variable, value in zip(encoder.variables + classifier.variables, source):
            variable.assign(value)
    return encoder, classifier


def train_steps(encoder, classifier, batch):
    """Runs --steps steps; returns (losses, seconds of the last step, its allocator peak above
    the memory held before it, in MB)."""
    import tensorflow as tf

    variables = encoder.trainable_variables + classifier.trainable_variables

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            pooled = encoder(batch, training=True, first_row_apart=True)["pooled_output"]
            logits = tf.cast(classifier(pooled), tf.float32)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                batch["labels"], logits))
        grads = tape.gradient(loss, variables)
        return loss, tf.add_n([tf.reduce_sum(tf.cast(g, tf.float32)) for g in grads])

    losses = []
    for _ in range(FLAGS.steps):
        before = tf.config.experimental.get_memory_info("CPU:0")["current"]
        tf.config.experimental.reset_memory_stats("CPU:0")
        start = time.perf_counter()
        loss, _ = step()
        losses.append(float(loss))
        seconds = time.perf_counter() - start
        peak = tf.config.experimental.get_memory_info("CPU:0")["peak"] - before
    return losses, seconds, peak / MB


def main(argv):
    del argv
    import keras

    if FLAGS.mixed_precision:
        keras.config.set_dtype_policy("mixed_bfloat16")
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    shape = (FLAGS.batch_size, FLAGS.seq_length)
    batch = {"input_ids": rng.integers(1000, 30522, shape).astype("int32"),
             "input_mask": np.ones(shape, "int32"),
             "token_type_ids": (np.arange(FLAGS.seq_length) >= FLAGS.seq_length // 2)
             .astype("int32")[None].repeat(FLAGS.batch_size, 0),
             "labels": rng.integers(0, 2, FLAGS.batch_size).astype("int32")}
    print(harness.describe_machine(None, packages=("tensorflow", "keras")))
    print(f"model: {FLAGS.config} {CONFIGS[FLAGS.config]}, batch {FLAGS.batch_size} x "
          f"{FLAGS.seq_length}, dropout 0.1, {FLAGS.mixed_precision or 'float32'}")
    stored = build(recompute=False)
    source = [v.numpy() for v in stored[0].variables + stored[1].variables]
    rows = {"stored activations": train_steps(*stored, batch)}
    rss_stored = _peak_rss_mb()
    rows["recompute=True"] = train_steps(*build(recompute=True, source=source), batch)
    print(f"\n{'setting':20s} {'step s':>7s} {'step peak MB':>13s}  losses")
    for name, (losses, seconds, peak) in rows.items():
        print(f"{name:20s} {seconds:7.1f} {peak:13.0f}  {', '.join(f'{x:.6f}' for x in losses)}")
    (losses, _, peak), (losses_r, _, peak_r) = rows.values()
    print(f"\nrecompute: step peak {peak_r / peak:.2f}x, losses max |difference| "
          f"{max(abs(a - b) for a, b in zip(losses, losses_r)):.1e}; process peak RSS "
          f"{rss_stored:.0f} MB after the first setting, {_peak_rss_mb():.0f} MB after both")
    harness.write_results("recompute", [
        {"setting": name, "step_s": seconds, "step_peak_mb": peak, "losses": losses}
        for name, (losses, seconds, peak) in rows.items()], packages=("tensorflow", "keras"))


if __name__ == "__main__":
    harness.run(main)
