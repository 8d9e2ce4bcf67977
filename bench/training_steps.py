"""What the training-step benches (bench/pretraining.py: BERT, bench/electra_pretraining.py:
ELECTRA) share: their common flags, the learning-rate schedule on both sides, random masked
batches, our step (`bert_runner.trainer.Trainer`) and the peer's PyTorch loop, the rows, the
rounds and the table's cells.

A row is `(precision, name)`; its `run(steps) -> (seconds, last loss)` makes `steps` more
training steps and times them (ours: the Trainer's own time; the peer: its loop's wall time).
"""
import os
import re
import statistics
import time
from typing import NamedTuple

import numpy as np
from absl import flags

from bench import harness

PRECISIONS = ("float32", "bfloat16")
CLS_ID = 101


def define_flags(*, steps, max_predictions, max_predictions_help, num_threads, workdir_note=""):
    """Defines the flags both benches have, with the given defaults; the bench then adopts them
    (`flags.adopt_module_key_flags`) so that its --help lists them."""
    flags.DEFINE_integer("batch_size", 8, "Sequences per training step (both).")
    flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
    flags.DEFINE_integer("max_predictions_per_seq", max_predictions, max_predictions_help)
    flags.DEFINE_integer("steps", steps, "Training steps per timed call (ours: steps_per_loop).")
    flags.DEFINE_integer("repeats", 5, "Timed rounds; every row reports its median.")
    flags.DEFINE_integer("warmup", 1, "Untimed rounds after the first (tracing/compiling) call.")
    flags.DEFINE_integer("num_batches", 4, "Distinct random batches, cycled.")
    flags.DEFINE_list("precisions", list(PRECISIONS), f"Any of {', '.join(PRECISIONS)}.")
    flags.DEFINE_integer(
        "num_threads", num_threads,
        "Threads for both frameworks, intra-op and inter-op (bench.harness.set_threads).")
    flags.DEFINE_integer("seed", 0, "Seed of the weights and of the batches.")
    flags.DEFINE_string(
        "workdir", "/dev/shm" if os.path.isdir("/dev/shm") else None,
        "Where our Trainer's output_dir goes (a temporary directory inside, removed at the end). "
        "Every train() call restores and saves a checkpoint (untimed); in memory that is quicker."
        + (" " + workdir_note if workdir_note else ""))


class Schedule(NamedTuple):
    """One learning-rate schedule for ours and the peer: `WarmupPolynomialDecay` (power 1) with
    peak `learning_rate`, `total_steps` N, `warmup_steps` W and `warmup_rule` ("bert" or
    "electra"). Its length only sets the learning rate's value, not the work of a step."""

    learning_rate: float
    total_steps: int
    warmup_steps: int
    warmup_rule: str

    def factor(self, step):
        """The schedule at `step` over `learning_rate` (the peer's `LambdaLR` factor)."""
        decayed = 1.0 - min(step, self.total_steps) / self.total_steps
        if self.warmup_rule == "electra":
            return decayed * min(1.0, step / self.warmup_steps)
        return step / self.warmup_steps if step < self.warmup_steps else decayed


def make_batches(count, batch_size, seq_length, max_predictions, vocab_size, rng):
    """`count` batches as numpy, stacked `[count, B, ...]`, in the pre-training records' schema
    after decoding (int32; `masked_lm_weights` float32), all but `masked_lm_ids`, which each bench
    draws its own way (from `rng`, after these): full-length sequences of random ids after
    [CLS], two segments, `max_predictions` masked positions per sequence, all real (weight 1.0)."""
    shape = (count, batch_size)
    ids = rng.integers(1000, vocab_size, size=shape + (seq_length,))
    ids[..., 0] = CLS_ID
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
        "masked_lm_weights": np.ones(shape + (max_predictions,), np.float32),
    }


# ---------------------------------------------------------------------------------- the peer


def peer_batches(batches, **extra):
    """Our batches as a list of transformers keyword arguments (int64 tensors): ids, attention
    mask, token types and the masked-LM `labels` `[B, S]` (-100 where nothing is predicted),
    plus `extra` `{keyword: function of one numpy batch -> array}`."""
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
            **{k: torch.from_numpy(field(b)).long() for k, field in extra.items()},
        })
    return out


def peer_trainer(model, batch_loss, batches, precision, schedule):
    """`run(steps) -> (seconds, last loss)`: the usual PyTorch training loop. `model` has
    `named_parameters()` (each parameter once) and `train()`; `batch_loss(batch)` is one batch's
    loss tensor. `torch.optim.AdamW` (weight decay 0.01 except biases and LayerNorm, eps 1e-6)
    on `schedule`, `clip_grad_norm_(1.0)`; bfloat16 under `torch.autocast` (forward only)."""
    import torch

    named = list(model.named_parameters())
    decay = [p for n, p in named if not ("bias" in n or "LayerNorm" in n)]
    no_decay = [p for n, p in named if "bias" in n or "LayerNorm" in n]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=schedule.learning_rate, betas=(0.9, 0.999), eps=1e-6)
    lr_schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule.factor)
    params = [p for _, p in named]
    position = [0]

    def step():
        batch = batches[position[0] % len(batches)]
        position[0] += 1
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
            loss = batch_loss(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        lr_schedule.step()
        return loss

    def run(steps):
        model.train()  # the same-model check leaves it in eval mode
        start = time.perf_counter()
        for _ in range(steps):
            loss = step()
        loss = loss.item()
        return time.perf_counter() - start, loss

    return run


# ---------------------------------------------------------------------------------- ours


def check_same_model(precision, name, loss, expected, name_width):
    """Same weights, same batch, eval mode: ours and the peer agree on the first batch's loss
    (in float32, to rounding; bfloat16's is printed only). `name_width`: the bench's name column."""
    print(f"  {precision:8s} {name:{name_width}s}: first-batch eval loss {loss:.5f}, "
          f"peer {expected:.5f}")
    if precision == "float32" and abs(loss - expected) > 1e-3 * abs(expected):
        raise ValueError(f"ours and the peer disagree on the first batch: {loss} vs {expected}")


def our_trainer(model, loss_fn, batches, schedule, batch_size, jit_compile, steps, output_dir):
    """`run(steps) -> (seconds, last loss)`: `steps` more steps of `Trainer.train` with the
    original AdamWeightDecay (`create_optimizer("adamw", ...)`) on `schedule`.

    The time is the Trainer's own `history[-1].seconds`: the wall time of the
    `iterations_per_loop` call alone (`train()` also restores from and saves a checkpoint, once
    per call).
    """
    import tensorflow as tf

    from bert_runner.trainer import Trainer
    from modeling.optimization import create_optimizer

    strategy = tf.distribute.get_strategy()
    with strategy.scope():
        optimizer = create_optimizer("adamw", schedule.learning_rate, schedule.total_steps,
                                     schedule.warmup_steps, warmup_rule=schedule.warmup_rule)
    trainer = Trainer(
        strategy, model, optimizer, loss_fn, output_dir, global_batch_size=batch_size,
        save_checkpoints_steps=10**9, steps_per_loop=steps, keep_checkpoint_max=1,
        jit_compile=jit_compile)

    def dataset_fn(context):
        del context  # one replica
        return tf.data.Dataset.from_tensor_slices(batches).repeat().prefetch(1)

    def run(run_steps):
        metrics = trainer.train(dataset_fn, trainer.step + run_steps, checkpoint_iterator=False)
        return trainer.history[-1].seconds, metrics["loss"]

    return run


# ---------------------------------------------------------------------------------- report


def add_row(runners, first_call, key, make_run, steps, name_width):
    """Builds row `key` = (precision, name) under its dtype policy and makes its first
    (tracing, compiling) call of `steps` steps; a row that raises is reported and left out, not
    the run. `name_width`: the bench's name column."""
    import keras

    from bert_runner import distribution

    precision, name = key
    distribution.set_precision("bf16" if precision == "bfloat16" else None)
    try:
        run = make_run()
        start = time.perf_counter()
        run(steps)
        first_call[key] = time.perf_counter() - start
        runners[key] = run
    except Exception as e:  # noqa: BLE001 -- any failure of one row is a finding to print
        print(f"  {precision:8s} {name:{name_width}s} FAILED: {type(e).__name__}:")
        lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(e)).splitlines()]
        print("    " + " ".join(line for line in lines if line)[:400])
    finally:
        keras.config.set_dtype_policy("float32")


def step_seconds(steps):
    """The `measure` of `harness.time_rounds` for these rows: a round is `steps` steps."""
    return lambda run: run(steps)[0]


def rounds_line(repeats, steps, warmup, *notes):
    """The line above the table: what its medians are of, `notes`, the load average."""
    return "\n" + "; ".join([f"median of {repeats} rounds of {steps} steps after {warmup} "
                             f"warm-up round(s)", *notes,
                             f"load average {os.getloadavg()[0]:.1f}"])


def table_rows(times, precisions):
    """`(precision, name, samples, median seconds)` per row of `times`, `precisions` in their
    order, the rows of each in the order they were built."""
    for precision in precisions:
        for (p, name), samples in times.items():
            if p == precision:
                yield precision, name, samples, statistics.median(samples)


def vs_peer(peer_samples, samples):
    """The `vs peer` and `paired` figures of a row of ours (`harness.ratios` of the peer's times
    over ours); (None, None) without the peer's row."""
    return harness.ratios(peer_samples, samples) if peer_samples else (None, None)


def ratio_cell(ratio):
    """A `vs peer` or `paired` figure as its table shows it."""
    return "" if ratio is None else f"{ratio:.2f}x"
