r"""Pre-training throughput on CPU: our training step against Hugging Face `BertForPreTraining`
on PyTorch CPU, same shapes, same batches, same weights at the start, one process.

    python -m bench.pretraining                    # BERT-Small, batch 8, sequence 128, fp32 + bf16
    python -m bench.pretraining --config=mini --steps=2 --repeats=2     # smoke run

Contenders, for each of --precisions (rows "ours" per --modes, then "peer"):
  ours   the real training step, built as `run_pretraining.py` builds it: `BertPretrainer`,
         `create_optimizer("adamw", ...)` (the original AdamWeightDecay and schedule),
         `bert_runner.trainer.Trainer` with `bert_tasks.pretraining.task.pretraining_loss` (global-norm clipping
         at 1.0), `steps_per_loop=--steps`; `jit_compile` off ("function") or on ("xla").
         bfloat16 is `--mixed_precision=bf16`, the Keras `mixed_bfloat16` policy.
  peer   `transformers.BertForPreTraining` in train mode (dropout 0.1 like ours), labels -100
         at unmasked positions, `torch.optim.AdamW` (weight decay 0.01 except biases and
         LayerNorm, eps 1e-6) with the same warm-up/decay schedule, `clip_grad_norm_(1.0)`;
         bfloat16 under `torch.autocast("cpu", dtype=torch.bfloat16)` (forward only, as usual).
Both use the original's tanh GELU (the peer's `gelu_new`). Before timing, the two models (ours
holding the peer's initial weights) must agree on the loss of the first batch in eval mode.

Input: --num_batches random pre-training batches held in memory (`tf.data` from tensors for
ours), cycled, so I/O is not measured: full-length sequences of random ids, two segments,
--max_predictions_per_seq masked positions per sequence (all real, weight 1.0), random
next-sentence labels.

Timing: one round calls every contender for --steps training steps, in turns, so that load from
other processes hits all alike. Ours is one `trainer.train(...)` call of --steps steps, and its
time is the `Trainer`'s own wall time of the `iterations_per_loop` call (what it logs as
examples/s): it leaves out `train()`'s per-call set-up and the checkpoint it saves at the end.
The peer's is the wall time of its --steps steps (ending with `loss.item()`). The first call of
each contender (tracing, XLA compilation) and --warmup rounds are untimed; the table shows the
median over --repeats rounds. `vs peer` is our examples/s over the peer's at the same precision,
from the medians; `paired` is the median of the per-round ratios (each from one round's
back-to-back calls), the steadier figure under background load. Model TFLOP/s counts the same
useful work for both (`bert_runner.task.encoder_training_flops`, 20 predicted positions):
the peer's MLM head scores all positions, so it does more arithmetic than that (~1.9x ours at
BERT-Small, ~1.2x at Base).
"""
import os
import tempfile

import numpy as np
from bench import harness, training_steps
from absl import app, flags, logging

# Named shapes (the BERT release's names): Base is the target; Small and Mini fit a 2-core
# machine's patience (Base: ~70 GFLOPs per training example, Small ~12, Mini ~4); Tiny is
# tests/test_bench.py's smoke run.
CONFIGS = {
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "small": dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048),
    "mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "tiny": dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64),
}
COMMON = dict(vocab_size=30522, max_position_embeddings=512, type_vocab_size=2)
OUR_MODES = {"function": False, "xla": True}  # mode -> jit_compile
SCHEDULE = training_steps.Schedule(1e-4, 10000, 1000, "bert")

flags.DEFINE_enum(
    "config", "small", sorted(CONFIGS),
    "Model shape (vocab 30522, 512 positions, 2 token types). The peer's BertForPreTraining "
    "scores every position with the vocab matmul (and ours only the masked ones), so the "
    "smaller the encoder, the more that difference weighs.")
training_steps.define_flags(
    steps=4, max_predictions=20, max_predictions_help="Masked positions per sequence (all used).",
    num_threads=os.cpu_count(), workdir_note="BERT-Small needs ~0.5 GB per row, Base ~1.4 GB.")
flags.DEFINE_list("modes", list(OUR_MODES), "Our jit_compile settings: function (off), xla (on).")
flags.adopt_module_key_flags(training_steps)
FLAGS = flags.FLAGS


def make_batches(count, batch_size, seq_length, max_predictions, vocab_size, rng):
    """`count` pre-training batches as numpy, stacked `[count, B, ...]` in the TFRecord schema
    after decoding (`training_steps.make_batches`), with random `masked_lm_ids` (the input keeps
    its ids there) and random `next_sentence_labels` `[B, 1]`."""
    batches = training_steps.make_batches(count, batch_size, seq_length, max_predictions,
                                          vocab_size, rng)
    shape = (count, batch_size)
    batches["masked_lm_ids"] = rng.integers(1000, vocab_size,
                                            size=shape + (max_predictions,)).astype(np.int32)
    batches["next_sentence_labels"] = rng.integers(0, 2, size=shape + (1,)).astype(np.int32)
    return batches


# ---------------------------------------------------------------------------------- the peer


def peer_batches(batches):
    """Our batches as `BertForPreTraining` keyword arguments: MLM labels `[B, S]`, -100 where
    nothing is predicted, and `next_sentence_label` `[B]`."""
    return training_steps.peer_batches(
        batches, next_sentence_label=lambda b: b["next_sentence_labels"][:, 0])


def build_peer(c, seed):
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(**c, **COMMON, hidden_act="gelu_new")
    return transformers.BertForPreTraining(config)


def peer_trainer(model, batches, precision):
    """`run(steps) -> (seconds, last loss)`: the usual PyTorch training loop."""
    return training_steps.peer_trainer(model, lambda batch: model(**batch).loss, batches,
                                       precision, SCHEDULE)


def peer_eval_loss(model, batch):
    import torch

    model.eval()
    with torch.no_grad():
        return float(model(**batch).loss)


# ---------------------------------------------------------------------------------- ours


def our_config(c):
    from modeling import BertConfig

    return BertConfig(**c, **COMMON)


def build_ours(c, peer_state):
    """`BertPretrainer` under the current dtype policy, holding the peer's weights."""
    import tensorflow as tf

    from modeling import BertPretrainer

    with tf.distribute.get_strategy().scope():
        model = BertPretrainer(our_config(c))
    return harness.assign_peer_weights(model, peer_state)


def our_eval_loss(model, batches):
    import tensorflow as tf

    from bert_tasks.pretraining.task import pretraining_loss

    first = {k: tf.constant(v[0]) for k, v in batches.items()}
    return float(pretraining_loss(model, first, training=False)[0])


# ---------------------------------------------------------------------------------- report


def our_row(c, precision, mode, peer_state, peer_loss, batches, output_dir):
    """Our model with the peer's weights, checked against `peer_loss`; returns its `run`."""
    from bert_tasks.pretraining.task import pretraining_loss

    model = build_ours(c, peer_state)
    # "ours " and the mode padded to 8, as the table's rows are named.
    training_steps.check_same_model(precision, f"ours {mode}", our_eval_loss(model, batches),
                                    peer_loss, name_width=13)
    return training_steps.our_trainer(model, pretraining_loss, batches, SCHEDULE,
                                      FLAGS.batch_size, OUR_MODES[mode], FLAGS.steps, output_dir)


def add_row(runners, first_call, key, make_run):
    training_steps.add_row(runners, first_call, key, make_run, FLAGS.steps, name_width=14)


def print_table(times, first_call, flops_per_example):
    examples = FLAGS.batch_size * FLAGS.steps
    print(training_steps.rounds_line(
        FLAGS.repeats, FLAGS.steps, FLAGS.warmup,
        f"{flops_per_example / 1e9:.1f} model GFLOPs per training example"))
    print(f"{'precision':9s}  {'implementation':18s} {'first call s':>12s} {'s/step':>7s} "
          f"{'examples/s':>10s} {'TFLOP/s':>8s} {'vs peer':>8s} {'paired':>7s}")
    figures = []
    for precision, name, samples, median in training_steps.table_rows(times, FLAGS.precisions):
        ratio, paired = (None, None) if name == "peer" else training_steps.vs_peer(
            times.get((precision, "peer")), samples)
        print(f"{precision:9s}  {name:18s} {first_call[precision, name]:12.1f} "
              f"{median / FLAGS.steps:7.3f} {examples / median:10.2f} "
              f"{examples / median * flops_per_example / 1e12:8.3f} "
              f"{training_steps.ratio_cell(ratio):>8s} {training_steps.ratio_cell(paired):>7s}")
        figures.append({"precision": precision, "implementation": name,
                        "first_call_s": first_call[precision, name],
                        "s_per_step": median / FLAGS.steps, "examples_per_s": examples / median,
                        "tflop_per_s": examples / median * flops_per_example / 1e12,
                        "vs_peer": ratio, "paired": paired, "seconds": samples})
    harness.write_results("pretraining", figures, FLAGS.num_threads)


def main(argv):
    del argv
    unknown = (set(FLAGS.precisions) - set(training_steps.PRECISIONS)
               | set(FLAGS.modes) - set(OUR_MODES))
    if unknown:
        raise app.UsageError(f"unknown --precisions/--modes values: {sorted(unknown)}")
    logging.set_verbosity(logging.WARNING)  # the Trainer logs every loop at INFO
    harness.set_threads(FLAGS.num_threads)
    import keras

    from bert_runner.task import encoder_training_flops as training_flops_per_example

    keras.utils.set_random_seed(FLAGS.seed)
    c = CONFIGS[FLAGS.config]
    batches = make_batches(FLAGS.num_batches, FLAGS.batch_size, FLAGS.seq_length,
                           FLAGS.max_predictions_per_seq, COMMON["vocab_size"],
                           np.random.default_rng(FLAGS.seed))
    torch_batches = peer_batches(batches)
    print(harness.describe_machine(FLAGS.num_threads))
    print(f"model: {FLAGS.config} {c}, batch {FLAGS.batch_size} x sequence {FLAGS.seq_length}, "
          f"{FLAGS.max_predictions_per_seq} masked positions per sequence")

    runners, first_call = {}, {}
    with tempfile.TemporaryDirectory(prefix="bench_pretraining_", dir=FLAGS.workdir) as workdir:
        for precision in FLAGS.precisions:
            peer = build_peer(c, FLAGS.seed)
            state = {k: v.detach().clone() for k, v in peer.state_dict().items()}
            expected = peer_eval_loss(peer, torch_batches[0])
            for mode in FLAGS.modes:
                output_dir = os.path.join(workdir, f"{precision}_{mode}")
                add_row(runners, first_call, (precision, f"ours {mode}"),
                        lambda: our_row(c, precision, mode, state, expected, batches, output_dir))
            add_row(runners, first_call, (precision, "peer"),
                    lambda: peer_trainer(peer, torch_batches, precision))
            print(f"  {precision:8s} peer: attention={peer.config._attn_implementation}")
        times = harness.time_rounds(runners, FLAGS.repeats, FLAGS.warmup,
                                   training_steps.step_seconds(FLAGS.steps))
    print_table(times, first_call,
                training_flops_per_example(our_config(c), FLAGS.seq_length, FLAGS.max_predictions_per_seq))


if __name__ == "__main__":
    # The peer's OpenMP threads otherwise spin at every barrier; on a machine with more runnable
    # threads than cores, spinning while a sibling thread is descheduled slows its steps down
    # severalfold (TensorFlow's thread pool does not use OpenMP). Must be set before torch is
    # imported.
    harness.run(main, OMP_WAIT_POLICY="PASSIVE")
