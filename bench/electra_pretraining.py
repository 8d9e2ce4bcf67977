r"""ELECTRA pre-training step on CPU: ours against the same step built from Hugging Face
`ElectraForMaskedLM` (generator) + `ElectraForPreTraining` (discriminator) on PyTorch CPU, same
shapes, same masked batches, same weights at the start, one process.

    python -m bench.electra_pretraining                  # ELECTRA-Small, batch 8 x 128, fp32 + bf16
    python -m bench.electra_pretraining --num_layers=2 --batch_size=4 --steps=2 --repeats=2  # smoke

What one step is, on both sides: the generator's forward on the masked batch, its masked-LM loss,
tokens sampled from its softmax at the masked positions (Gumbel-max, the original's
`sample_from_softmax`), the discriminator's input (the original ids with the samples written at
the masked positions) and labels (replaced != original there), the discriminator's forward and
its sigmoid loss over the real tokens, total = 1.0 x generator + 50.0 x discriminator, the
backward, global-norm clipping at 1.0 and the decoupled-weight-decay Adam update (weight decay
0.01 except biases and LayerNorm). Dropout 0.1 in both. The samples carry no gradient.

Model: ELECTRA-Small as released (hidden 256, 12 layers, 4 heads, intermediate 1024, embedding
128, vocab 30522, exact GELU) with configure_pretraining's default generator, a quarter of the
discriminator's width (`generator_hidden_size` 0.25: hidden 64, 1 head, intermediate 256, 12
layers); both share the embedding tables (word, position, token type, their LayerNorm) and the
generator's output layer is the word table transposed, as ELECTRA does.

Contenders, for each of --precisions:
  ours             the real training step, built as `run_pretraining.py --pretraining_objective=
                   electra` builds it: `ElectraPretrainer` (`families.build_model`), the task's
                   loss (`ElectraPretrainingTask.loss`, i.e. `electra_outputs`),
                   `create_optimizer("adamw", ..., warmup_rule="electra")` (the original
                   AdamWeightDecay), `bert_runner.trainer.Trainer` (tape, global-norm clipping at
                   1.0, the optimizer update), `steps_per_loop=--steps`; `jit_compile` per
                   --jit_compile ("ours" off, "ours XLA" on). bfloat16 is
                   `--mixed_precision=bf16`, the Keras `mixed_bfloat16` policy.
  peer             `ElectraForMaskedLM` called as usual (`labels` -100 where nothing is
                   predicted): its head (dense, LayerNorm, the 30,522-way output layer) runs at
                   every position; the samples are drawn from its logits gathered at the masked
                   positions. Then `ElectraForPreTraining(labels=...)` on the replaced ids,
                   `torch.optim.AdamW` (eps 1e-6, the same schedule), `clip_grad_norm_(1.0)`;
                   bfloat16 under `torch.autocast("cpu", dtype=torch.bfloat16)`.
  peer masked head the same, but the generator's head runs at the masked positions only (its
                   sequence output gathered first, as the original and ours do): the same
                   arithmetic as ours. --peer_heads picks the peer rows.
Before timing, ours (holding the peer's initial weights) and the peer must agree on the total loss
of the first batch in eval mode, given the same sampled tokens.

Input: --num_batches random masked batches held in memory (`tf.data` from tensors for ours),
cycled, so I/O is not measured: full-length sequences of random ids, two segments,
--max_predictions_per_seq distinct masked positions per sequence (after [CLS]; weight 1.0), their
ids replaced by [MASK].

Timing: one round calls every contender for --steps training steps, in turns, so that load from
other processes hits all alike. Ours is one `trainer.train(...)` call of --steps steps, timed by
the Trainer itself (the wall time of its `iterations_per_loop` call, which ends on the step's
metrics as Python floats; `train()`'s set-up and the checkpoint it writes at the end are left
out). The peer's is the wall time of its --steps steps, ending with `loss.item()`. The first call
of each contender (tracing, XLA compilation) and --warmup rounds are untimed; the first call's
time is printed apart. The table shows the median over --repeats rounds; `vs peer` is our
steps/s over the peer row's at the same precision from the medians, `paired` the median of the
per-round ratios (the steadier figure under background load).
"""
import os
import tempfile

import numpy as np
from absl import app, flags, logging

from bench import harness, training_steps

JIT_CHOICES = {"off": (False,), "on": (True,), "both": (False, True)}
PEER_HEADS = ("all", "masked")
# run_pretraining.py's ELECTRA default learning rate, and the ELECTRA family's warm-up rule (as
# the driver picks it for ours).
SCHEDULE = training_steps.Schedule(5e-4, 10000, 1000, "electra")
GEN_WEIGHT, DISC_WEIGHT = 1.0, 50.0
MASK_ID = 103
GUMBEL_EPSILON = 1e-9  # the original's sample_from_softmax

flags.DEFINE_integer("hidden_size", 256, "Discriminator hidden size (ELECTRA-Small: 256).")
flags.DEFINE_integer("num_layers", 12, "Layers of the discriminator (and of the generator).")
flags.DEFINE_integer("num_heads", 4, "Discriminator attention heads (ELECTRA-Small: 4).")
flags.DEFINE_integer("intermediate_size", 1024, "Discriminator feed-forward width.")
flags.DEFINE_integer("embedding_size", 128, "Width of the shared embedding tables.")
flags.DEFINE_float("generator_hidden_size", 0.25,
                   "The generator's width as a fraction of the discriminator's "
                   "(configure_pretraining's default 0.25); heads width/64, feed-forward 4x.")
flags.DEFINE_integer("vocab_size", 30522, "Vocabulary size.")
training_steps.define_flags(
    steps=2, max_predictions=19, num_threads=2,
    max_predictions_help="Masked positions per sequence, all used (ELECTRA's rule at 128 tokens: "
                         "int((0.15 + 0.005) x 128) = 19).")
flags.DEFINE_enum("jit_compile", "off", sorted(JIT_CHOICES),
                  "Our step's jit_compile (the Trainer's, as run_pretraining.py --jit_compile): "
                  "off (faster on CPU: XLA:CPU's dot uses no AVX512_BF16), on, or both rows.")
flags.DEFINE_list("peer_heads", list(PEER_HEADS),
                  "Peer rows: all (ElectraForMaskedLM's head at every position, as it is "
                  "called), masked (the head at the masked positions only, as ours).")
flags.adopt_module_key_flags(training_steps)
FLAGS = flags.FLAGS


def electra_config():
    from modeling.electra.config import ElectraConfig

    return ElectraConfig(
        FLAGS.vocab_size, embedding_size=FLAGS.embedding_size, hidden_size=FLAGS.hidden_size,
        num_hidden_layers=FLAGS.num_layers, num_attention_heads=FLAGS.num_heads,
        intermediate_size=FLAGS.intermediate_size,
        generator_hidden_size=FLAGS.generator_hidden_size).validate()


def make_batches(count, batch_size, seq_length, max_predictions, vocab_size, rng):
    """`count` masked batches as numpy, stacked `[count, B, ...]`, in the schema of the
    pre-training records after decoding (`training_steps.make_batches`): the ids at the masked
    positions are `masked_lm_ids`, replaced by [MASK] in the input."""
    batches = training_steps.make_batches(count, batch_size, seq_length, max_predictions,
                                          vocab_size, rng)
    positions = batches["masked_lm_positions"]
    batches["masked_lm_ids"] = np.take_along_axis(batches["input_ids"], positions, axis=-1)
    np.put_along_axis(batches["input_ids"], positions, MASK_ID, axis=-1)
    return batches


def first_sampled_ids(batches, rng):
    """Tokens standing for the generator's samples of the first batch, `[B, P]`, for the
    equivalence check: a third equal to the original token (labelled original), the rest random."""
    original = batches["masked_lm_ids"][0]
    random_ids = rng.integers(1000, FLAGS.vocab_size, size=original.shape).astype(np.int32)
    return np.where(rng.random(original.shape) < 1 / 3, original, random_ids)


# ---------------------------------------------------------------------------------- the peer


def peer_batches(batches):
    """Our batches as torch tensors, plus the generator's MLM `labels` `[B, S]` (-100 where
    nothing is predicted), the masked `positions` and their `masked_lm_ids`."""
    return training_steps.peer_batches(batches, positions=lambda b: b["masked_lm_positions"],
                                       masked_lm_ids=lambda b: b["masked_lm_ids"])


def hf_configs(config):
    """transformers `ElectraConfig`s of the generator and the discriminator of our `config`."""
    import transformers

    def hf(c):
        return transformers.ElectraConfig(
            vocab_size=c.vocab_size, embedding_size=c.embedding_size, hidden_size=c.hidden_size,
            num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
            intermediate_size=c.intermediate_size, hidden_act="gelu",  # the exact GELU, as ours
            max_position_embeddings=c.max_position_embeddings, type_vocab_size=c.type_vocab_size)

    return hf(config.generator_config()), hf(config)


class PeerElectra:
    """Hugging Face's generator and discriminator with the embedding module shared (ELECTRA's
    tied tables: word, position, token type and their LayerNorm; the generator's output layer is
    tied to the word table by transformers itself)."""

    def __init__(self, config, seed):
        import torch
        import transformers

        torch.manual_seed(seed)
        gen_config, disc_config = hf_configs(config)
        self.generator = transformers.ElectraForMaskedLM(gen_config)
        self.discriminator = transformers.ElectraForPreTraining(disc_config)
        self.discriminator.electra.embeddings = self.generator.electra.embeddings
        assert (self.generator.generator_lm_head.weight
                is self.generator.electra.embeddings.word_embeddings.weight)

    def named_parameters(self):
        """Every parameter once (the shared ones are the generator's): `[(name, parameter)]`."""
        seen, out = set(), []
        for prefix, model in (("generator.", self.generator),
                              ("discriminator.", self.discriminator)):
            for name, p in model.named_parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append((prefix + name, p))
        return out

    def state(self):
        """`{name: tensor}` of the initial weights, names prefixed "generator." or
        "discriminator."."""
        return {f"{prefix}.{k}": v.detach().clone()
                for prefix, model in (("generator", self.generator),
                                      ("discriminator", self.discriminator))
                for k, v in model.state_dict().items()}

    def train(self, mode=True):
        self.generator.train(mode)
        self.discriminator.train(mode)

    def loss(self, batch, masked_head, sampled=None):
        """The total loss of one batch; `sampled` `[B, P]` replaces the sampling when given."""
        import torch

        positions = batch["positions"]
        if masked_head:
            # The head at the masked positions only: gather the sequence output first.
            hidden = self.generator.electra(
                batch["input_ids"], attention_mask=batch["attention_mask"],
                token_type_ids=batch["token_type_ids"]).last_hidden_state
            index = positions[:, :, None].expand(-1, -1, hidden.shape[-1])
            logits = self.generator.generator_lm_head(self.generator.generator_predictions(
                torch.gather(hidden, 1, index)))
            gen_loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(), batch["masked_lm_ids"].reshape(-1))
        else:
            out = self.generator(
                batch["input_ids"], attention_mask=batch["attention_mask"],
                token_type_ids=batch["token_type_ids"], labels=batch["labels"])
            gen_loss = out.loss
            index = positions[:, :, None].expand(-1, -1, out.logits.shape[-1])
            logits = torch.gather(out.logits, 1, index)
        if sampled is None:
            with torch.no_grad():
                # Gumbel-max, as the original's sample_from_softmax.
                uniform = torch.rand(logits.shape)
                gumbel = -torch.log(-torch.log(uniform + GUMBEL_EPSILON) + GUMBEL_EPSILON)
                sampled = torch.argmax(logits.detach().float() + gumbel, dim=-1)
        original = batch["input_ids"].scatter(1, positions, batch["masked_lm_ids"])
        replaced = original.scatter(1, positions, sampled)
        is_replaced = (replaced != original).long()  # differs at masked positions only
        disc = self.discriminator(
            replaced, attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"], labels=is_replaced)
        return GEN_WEIGHT * gen_loss + DISC_WEIGHT * disc.loss


def peer_trainer(peer, batches, precision, masked_head):
    """`run(steps) -> (seconds, last loss)`: the usual PyTorch training loop."""
    return training_steps.peer_trainer(peer, lambda batch: peer.loss(batch, masked_head),
                                       batches, precision, SCHEDULE)


def peer_eval_loss(peer, batch, sampled):
    import torch

    peer.train(False)
    with torch.no_grad():
        return float(peer.loss(batch, masked_head=False, sampled=torch.from_numpy(sampled).long()))


# ---------------------------------------------------------------------------------- ours


def assign_peer_weights(model, state):
    """Gives our `ElectraPretrainer` the peer's weights, matched by the family's Hugging Face
    names: the generator's own layers and head from the generator, the rest (the shared tables
    included) from the discriminator."""
    from modeling import checkpoint as checkpoints, families

    hf_name = families.of_model(model).hf_name
    for original, variable in checkpoints.variables_by_name(model).items():
        name, transpose = hf_name(original)
        if name.startswith("generator."):  # the generator's encoder: "electra." in its model
            name = "generator.electra." + name.removeprefix("generator.")
        elif name.startswith(("generator_predictions.", "generator_lm_head.")):
            name = "generator." + name
        else:
            name = "discriminator." + name
        value = state[name].float().numpy()
        variable.assign(value.T if transpose else value)
    return model


def electra_task():
    from bert_tasks.pretraining.electra_task import ElectraPretrainingTask

    return ElectraPretrainingTask(FLAGS.seq_length, FLAGS.max_predictions_per_seq,
                                  num_train_steps=SCHEDULE.total_steps,
                                  num_warmup_steps=SCHEDULE.warmup_steps,
                                  gen_weight=GEN_WEIGHT, disc_weight=DISC_WEIGHT)


def build_ours(task, config, peer_state, jit_compile):
    """`ElectraPretrainer` under the current dtype policy, as the driver builds it, holding the
    peer's weights."""
    import tensorflow as tf

    from modeling.bert.modes import EncoderModes

    # bert_runner.driver.build_trainer: XLA-compiled steps compute on static shapes.
    with tf.distribute.get_strategy().scope():
        model = task.build_model(task.model_config(config),
                                 modes=EncoderModes(static_shapes=jit_compile))
    return assign_peer_weights(model, peer_state)


def our_eval_loss(model, batches, sampled):
    import tensorflow as tf

    from bert_tasks.pretraining.electra_task import electra_outputs

    first = {k: tf.constant(v[0]) for k, v in batches.items()}
    first["sampled_ids"] = tf.constant(sampled)
    return float(electra_outputs(model, first, False, GEN_WEIGHT, DISC_WEIGHT)[0])


# ---------------------------------------------------------------------------------- report


def add_row(runners, first_call, key, make_run):
    training_steps.add_row(runners, first_call, key, make_run, FLAGS.steps, name_width=16)


def peer_names():
    return [{"all": "peer", "masked": "peer masked head"}[h] for h in FLAGS.peer_heads]


def print_table(times, first_call):
    peers = peer_names()
    print(training_steps.rounds_line(FLAGS.repeats, FLAGS.steps, FLAGS.warmup))
    header = (f"{'precision':9s}  {'implementation':16s} {'first call s':>12s} {'s/step':>7s} "
              f"{'steps/s':>8s}")
    for peer in peers:
        header += f"  {'vs ' + peer:>20s} {'paired':>7s}"
    print(header)
    figures = []
    for precision, name, samples, median in training_steps.table_rows(times, FLAGS.precisions):
        line = (f"{precision:9s}  {name:16s} {first_call[precision, name]:12.1f} "
                f"{median / FLAGS.steps:7.3f} {FLAGS.steps / median:8.3f}")
        row = {"precision": precision, "implementation": name,
               "first_call_s": first_call[precision, name], "s_per_step": median / FLAGS.steps,
               "steps_per_s": FLAGS.steps / median, "seconds": samples}
        for peer in peers:
            ratio, paired = (training_steps.vs_peer(times.get((precision, peer)), samples)
                             if name.startswith("ours") else (None, None))
            line += (f"  {training_steps.ratio_cell(ratio):>20s} "
                     f"{training_steps.ratio_cell(paired):>7s}")
            row.update({f"vs {peer}": ratio, f"paired vs {peer}": paired})
        print(line)
        figures.append(row)
    harness.write_results("electra_pretraining", figures, FLAGS.num_threads)


def main(argv):
    del argv
    unknown = ((set(FLAGS.precisions) - set(training_steps.PRECISIONS))
               | (set(FLAGS.peer_heads) - set(PEER_HEADS)))
    if unknown:
        raise app.UsageError(f"unknown --precisions/--peer_heads values: {sorted(unknown)}")
    logging.set_verbosity(logging.WARNING)  # the Trainer logs every loop at INFO
    harness.set_threads(FLAGS.num_threads)
    import keras

    keras.utils.set_random_seed(FLAGS.seed)
    config = electra_config()
    generator = config.generator_config()
    task = electra_task()
    rng = np.random.default_rng(FLAGS.seed)
    batches = make_batches(FLAGS.num_batches, FLAGS.batch_size, FLAGS.seq_length,
                           FLAGS.max_predictions_per_seq, FLAGS.vocab_size, rng)
    sampled = first_sampled_ids(batches, rng)
    torch_batches = peer_batches(batches)
    print(harness.describe_machine(FLAGS.num_threads))
    print(f"model: discriminator hidden {config.hidden_size}, {config.num_hidden_layers} layers, "
          f"{config.num_attention_heads} heads, intermediate {config.intermediate_size}; "
          f"generator (generator_hidden_size {FLAGS.generator_hidden_size}; configure_"
          f"pretraining's default 0.25) hidden {generator.hidden_size}, "
          f"{generator.num_hidden_layers} layers, "
          f"{generator.num_attention_heads} head(s), intermediate {generator.intermediate_size}; "
          f"embedding {config.embedding_size}, vocab {config.vocab_size}")
    print(f"batch {FLAGS.batch_size} x sequence {FLAGS.seq_length}, "
          f"{FLAGS.max_predictions_per_seq} masked positions per sequence; ours: "
          f"{task.flops_per_example(config) / 1e9:.2f} model GFLOPs per training example")

    runners, first_call = {}, {}
    with tempfile.TemporaryDirectory(prefix="bench_electra_", dir=FLAGS.workdir) as workdir:
        for precision in FLAGS.precisions:
            peer = PeerElectra(config, FLAGS.seed)
            state = peer.state()
            expected = peer_eval_loss(peer, torch_batches[0], sampled)
            for jit_compile in JIT_CHOICES[FLAGS.jit_compile]:
                name = "ours XLA" if jit_compile else "ours"
                output_dir = os.path.join(workdir, f"{precision}_{jit_compile}")

                def make(jit_compile=jit_compile, name=name, output_dir=output_dir):
                    model = build_ours(task, config, state, jit_compile)
                    training_steps.check_same_model(
                        precision, name, our_eval_loss(model, batches, sampled), expected,
                        name_width=16)
                    return training_steps.our_trainer(
                        model, task.loss, batches, SCHEDULE, FLAGS.batch_size, jit_compile,
                        FLAGS.steps, output_dir)

                add_row(runners, first_call, (precision, name), make)
            for head, name in zip(FLAGS.peer_heads, peer_names()):
                # A fresh peer per row, from the same seed: the same initial weights.
                add_row(runners, first_call, (precision, name),
                        lambda head=head: peer_trainer(PeerElectra(config, FLAGS.seed),
                                                       torch_batches, precision, head == "masked"))
            print(f"  {precision:8s} peer: attention={peer.generator.config._attn_implementation}")
        times = harness.time_rounds(runners, FLAGS.repeats, FLAGS.warmup,
                                   training_steps.step_seconds(FLAGS.steps))
    print_table(times, first_call)


if __name__ == "__main__":
    # The peer's OpenMP threads otherwise spin at every barrier; on a machine with more runnable
    # threads than cores that slows its steps down severalfold (see bench/pretraining.py). Must be
    # set before torch is imported.
    harness.run(main, OMP_WAIT_POLICY="PASSIVE")
