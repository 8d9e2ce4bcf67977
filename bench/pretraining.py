r"""Pre-training throughput on CPU: our training step against Hugging Face `BertForPreTraining`
on PyTorch CPU, same shapes, same batches, same weights at the start, one process.

    python bench/pretraining.py                    # BERT-Small, batch 8, sequence 128, fp32 + bf16
    python bench/pretraining.py --config=mini --steps=2 --repeats=2     # smoke run

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
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The peer's OpenMP threads otherwise spin at every barrier; on a machine with more runnable
# threads than cores, spinning while a sibling thread is descheduled slows its steps down
# severalfold (TensorFlow's thread pool does not use OpenMP). Must be set before torch is
# imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import re  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from bench import common  # noqa: E402
from absl import app, flags, logging  # noqa: E402

# Named shapes (the BERT release's names): Base is the target; Small and Mini fit a 2-core
# machine's patience (Base: ~70 GFLOPs per training example, Small ~12, Mini ~4).
CONFIGS = {
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "small": dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048),
    "mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
}
COMMON = dict(vocab_size=30522, max_position_embeddings=512, type_vocab_size=2)
PRECISIONS = ("float32", "bfloat16")
OUR_MODES = {"function": False, "xla": True}  # mode -> jit_compile
LEARNING_RATE, TOTAL_STEPS, WARMUP_STEPS = 1e-4, 10000, 1000

flags.DEFINE_enum(
    "config", "small", sorted(CONFIGS),
    "Model shape (vocab 30522, 512 positions, 2 token types). The peer's BertForPreTraining "
    "scores every position with the vocab matmul (and ours only the masked ones), so the "
    "smaller the encoder, the more that difference weighs.")
flags.DEFINE_integer("batch_size", 8, "Sequences per training step (both).")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence (all used).")
flags.DEFINE_integer("steps", 4, "Training steps per timed call (ours: steps_per_loop).")
flags.DEFINE_integer("repeats", 5, "Timed rounds; every row reports its median.")
flags.DEFINE_integer("warmup", 1, "Untimed rounds after the first (tracing/compiling) call.")
flags.DEFINE_integer("num_batches", 4, "Distinct random batches, cycled.")
flags.DEFINE_list("precisions", list(PRECISIONS), f"Any of {', '.join(PRECISIONS)}.")
flags.DEFINE_list("modes", list(OUR_MODES), "Our jit_compile settings: function (off), xla (on).")
flags.DEFINE_integer(
    "num_threads", os.cpu_count(),
    "Threads for both frameworks, intra-op and inter-op (bench.common.set_threads).")
flags.DEFINE_integer("seed", 0, "Seed of the weights and of the batches.")
flags.DEFINE_string(
    "workdir", "/dev/shm" if os.path.isdir("/dev/shm") else None,
    "Where our Trainer's output_dir goes (a temporary directory inside, removed at the end). "
    "Every train() call restores and saves a checkpoint (untimed); in memory that is quicker. "
    "BERT-Small needs ~0.5 GB per row, Base ~1.4 GB.")
FLAGS = flags.FLAGS


def make_batches(count, batch_size, seq_length, max_predictions, vocab_size, rng):
    """`count` pre-training batches as numpy, stacked `[count, B, ...]` in the TFRecord schema
    after decoding (int32; `masked_lm_weights` float32; `next_sentence_labels` `[B, 1]`)."""
    shape = (count, batch_size)
    ids = rng.integers(1000, vocab_size, size=shape + (seq_length,))
    ids[..., 0] = 101  # [CLS]
    segments = (np.arange(seq_length) >= rng.integers(seq_length // 4, 3 * seq_length // 4,
                                                      size=shape + (1,))).astype(np.int32)
    # Distinct positions after [CLS], ascending, as create_pretraining_data writes them.
    positions = np.sort(np.argsort(rng.random(shape + (seq_length - 1,)), axis=-1)
                        [..., :max_predictions] + 1, axis=-1)
    return {
        "input_ids": ids.astype(np.int32),
        "input_mask": np.ones(shape + (seq_length,), np.int32),
        "segment_ids": segments,
        "masked_lm_positions": positions.astype(np.int32),
        "masked_lm_ids": rng.integers(1000, vocab_size, size=shape + (max_predictions,)).astype(np.int32),
        "masked_lm_weights": np.ones(shape + (max_predictions,), np.float32),
        "next_sentence_labels": rng.integers(0, 2, size=shape + (1,)).astype(np.int32),
    }


def lr_factor(step):
    """The original schedule (modeling.optimization.WarmupPolynomialDecay) over LEARNING_RATE."""
    if step < WARMUP_STEPS:
        return step / WARMUP_STEPS
    return 1.0 - min(step, TOTAL_STEPS) / TOTAL_STEPS


# ---------------------------------------------------------------------------------- the peer


def peer_batches(batches):
    """Our batches as `BertForPreTraining` keyword arguments: MLM labels `[B, S]`, -100 where
    nothing is predicted."""
    import torch

    out = []
    for i in range(len(batches["input_ids"])):
        b = {k: v[i] for k, v in batches.items()}
        labels = np.full(b["input_ids"].shape, -100, np.int64)
        np.put_along_axis(labels, b["masked_lm_positions"], b["masked_lm_ids"], axis=1)
        out.append({
            "input_ids": torch.from_numpy(b["input_ids"]).long(),
            "attention_mask": torch.from_numpy(b["input_mask"]).long(),
            "token_type_ids": torch.from_numpy(b["segment_ids"]).long(),
            "labels": torch.from_numpy(labels),
            "next_sentence_label": torch.from_numpy(b["next_sentence_labels"][:, 0]).long(),
        })
    return out


def build_peer(c, seed):
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(**c, **COMMON, hidden_act="gelu_new")
    return transformers.BertForPreTraining(config)


def peer_trainer(model, batches, precision):
    """`run(steps) -> (seconds, last loss)`: the usual PyTorch training loop."""
    import torch

    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=LEARNING_RATE, betas=(0.9, 0.999), eps=1e-6)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    model.train()
    position = [0]

    def step():
        batch = batches[position[0] % len(batches)]
        position[0] += 1
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        return loss

    def run(steps):
        start = time.perf_counter()
        for _ in range(steps):
            loss = step()
        loss = loss.item()
        return time.perf_counter() - start, loss

    return run


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
    return common.assign_peer_weights(model, peer_state)


def check_same_model(precision, mode, loss, expected):
    """Same weights, same batch, eval mode: the two losses agree (in float32, to rounding)."""
    print(f"  {precision:8s} ours {mode:8s}: first-batch eval loss {loss:.5f}, peer {expected:.5f}")
    if precision == "float32" and abs(loss - expected) > 1e-3 * abs(expected):
        raise ValueError(f"ours and the peer disagree on the first batch: {loss} vs {expected}")


def our_eval_loss(model, batches):
    import tensorflow as tf

    from bert_tasks.pretraining.task import pretraining_loss

    first = {k: tf.constant(v[0]) for k, v in batches.items()}
    return float(pretraining_loss(model, first, training=False)[0])


def our_trainer(model, batches, jit_compile, steps, output_dir):
    """`run(steps) -> (seconds, last loss)`: `steps` more steps of `Trainer.train`.

    The time is the Trainer's own `history[-1].seconds`: the wall time of the `iterations_per_loop`
    call alone (`train()` also restores from and saves a checkpoint, once per call).
    """
    import tensorflow as tf

    from modeling.optimization import create_optimizer
    from bert_tasks.pretraining import task as pretraining
    from bert_runner.trainer import Trainer

    strategy = tf.distribute.get_strategy()
    with strategy.scope():
        optimizer = create_optimizer("adamw", LEARNING_RATE, TOTAL_STEPS, WARMUP_STEPS)
    trainer = Trainer(
        strategy, model, optimizer, pretraining.pretraining_loss, output_dir,
        global_batch_size=FLAGS.batch_size, save_checkpoints_steps=10**9, steps_per_loop=steps,
        keep_checkpoint_max=1, jit_compile=jit_compile)
    def dataset_fn(context):
        del context  # one replica
        return tf.data.Dataset.from_tensor_slices(batches).repeat().prefetch(1)

    def run(run_steps):
        metrics = trainer.train(dataset_fn, trainer.step + run_steps, checkpoint_iterator=False)
        return trainer.history[-1].seconds, metrics["loss"]

    return run


# ---------------------------------------------------------------------------------- report


def our_row(c, precision, mode, peer_state, peer_loss, batches, output_dir):
    """Our model with the peer's weights, checked against `peer_loss`; returns its `run`."""
    model = build_ours(c, peer_state)
    check_same_model(precision, mode, our_eval_loss(model, batches), peer_loss)
    return our_trainer(model, batches, OUR_MODES[mode], FLAGS.steps, output_dir)


def add_row(runners, first_call, key, make_run):
    """Builds row `key` = (precision, name) under its dtype policy and makes its first
    (tracing, compiling) call; a row that raises is reported and left out, not the run."""
    import keras

    from bert_runner import distribution

    precision, name = key
    distribution.set_precision("bf16" if precision == "bfloat16" else None)
    try:
        run = make_run()
        start = time.perf_counter()
        run(FLAGS.steps)
        first_call[key] = time.perf_counter() - start
        runners[key] = run
    except Exception as e:  # noqa: BLE001 -- any failure of one row is a finding to print
        print(f"  {precision:8s} {name:14s} FAILED: {type(e).__name__}:")
        lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(e)).splitlines()]
        print("    " + " ".join(line for line in lines if line)[:400])
    finally:
        keras.config.set_dtype_policy("float32")


def time_rounds(runners, steps, repeats, warmup):
    """Calls every runner for `steps` steps per round, in turn; `{key: [seconds per timed round]}`."""
    times = {key: [] for key in runners}
    for round_index in range(warmup + repeats):
        for key, run in runners.items():
            seconds, _ = run(steps)
            if round_index >= warmup:
                times[key].append(seconds)
    return times


def print_table(times, first_call, flops_per_example):
    examples = FLAGS.batch_size * FLAGS.steps
    print(f"\nmedian of {FLAGS.repeats} rounds of {FLAGS.steps} steps after {FLAGS.warmup} warm-up "
          f"round(s); {flops_per_example / 1e9:.1f} model GFLOPs per training example; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'precision':9s}  {'implementation':18s} {'first call s':>12s} {'s/step':>7s} "
          f"{'examples/s':>10s} {'TFLOP/s':>8s} {'vs peer':>8s} {'paired':>7s}")
    for precision in FLAGS.precisions:
        peer = times.get((precision, "peer"))
        for (p, name), samples in times.items():
            if p != precision:
                continue
            median = statistics.median(samples)
            ratio = paired = ""
            if name != "peer" and peer:
                ratio = f"{statistics.median(peer) / median:7.2f}x"
                paired = f"{statistics.median(a / b for a, b in zip(peer, samples)):6.2f}x"
            print(f"{precision:9s}  {name:18s} {first_call[p, name]:12.1f} {median / FLAGS.steps:7.3f} "
                  f"{examples / median:10.2f} {examples / median * flops_per_example / 1e12:8.3f} "
                  f"{ratio:>8s} {paired:>7s}")


def main(argv):
    del argv
    unknown = set(FLAGS.precisions) - set(PRECISIONS) | set(FLAGS.modes) - set(OUR_MODES)
    if unknown:
        raise app.UsageError(f"unknown --precisions/--modes values: {sorted(unknown)}")
    logging.set_verbosity(logging.WARNING)  # the Trainer logs every loop at INFO
    common.set_threads(FLAGS.num_threads)
    import keras

    from bert_runner.task import encoder_training_flops as training_flops_per_example

    keras.utils.set_random_seed(FLAGS.seed)
    c = CONFIGS[FLAGS.config]
    batches = make_batches(FLAGS.num_batches, FLAGS.batch_size, FLAGS.seq_length,
                           FLAGS.max_predictions_per_seq, COMMON["vocab_size"],
                           np.random.default_rng(FLAGS.seed))
    torch_batches = peer_batches(batches)
    print(common.describe_machine(FLAGS.num_threads))
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
        times = time_rounds(runners, FLAGS.steps, FLAGS.repeats, FLAGS.warmup)
    print_table(times, first_call,
                training_flops_per_example(our_config(c), FLAGS.seq_length, FLAGS.max_predictions_per_seq))


if __name__ == "__main__":
    app.run(main)
