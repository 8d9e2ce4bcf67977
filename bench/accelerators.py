r"""BERT pre-training steps on one accelerator: this project's JAX step engine
(`bert_runner.engines.jax_step`, the model under Keras' JAX backend) against Hugging Face
`BertForPreTraining` in PyTorch, eager and under `torch.compile`, on the same device in the same
run. It imports no TensorFlow.

    python -m bench.accelerators --out=/tmp/acc          # BERT-Base at 128x128 and 32x512
    python -m bench.accelerators --config=tiny --steps=2 # the CPU smoke run (tests/test_bench.py)

Each contender trains `--steps` timed steps (after `--warmup` untimed ones, the first of which
compiles) on in-memory batches of the pre-training records' shapes (batch x sequence, masked
positions: `--shapes`), MLM + NSP losses, the original's AdamW and schedule, dropout 0.1, and
prints one JSON line: `contender` ("ours ..." or "peer ..."), `seq_per_s` (timed steps over their
wall time, the device kept busy as a training loop keeps it: waited for once, after them), `mfu`
(model FLOPs utilisation against `--peak_tflops`: 6 x matmul parameters x tokens + attention + the
masked-LM head, `bert_runner.task.encoder_training_flops`, the head counted where the contender
computes it: at the masked positions for ours and the peer's "masked" head, at every position for
its "all" one), `first_step_s` (compilation included), the device; ours `input` ("device": the
batches placed on the device before the steps, the step alone; "host": numpy batches fed a step at
a time as the scripts feed them), the peer's `mlm_head` ("all" or "masked"). Contenders:

  ours bf16                     `JaxStep` on `BertPretrainer` as the scripts build it, Keras
                                mixed_bfloat16; under JAX on a GPU the attention fused
                                (`--fused_attention=auto`: `EncoderModes(fused_attention)`, a
                                Pallas flash kernel drawing the same dropout masks: the same run)
  ours bf16 host-fed            the scripts' loop under JAX (`JaxTrainer._run_loop`): host
                                batches through a `DeviceFeed` and `JaxStep.place` each step, the
                                metrics read back as floats once after the steps; the same step
                                as "ours bf16", so the two differ by the input's path alone
  peer compiled bf16, peer eager bf16
                                transformers' `BertForPreTraining` (sdpa attention) as users run
                                it, its MLM head at every position, fused AdamW, `torch.autocast`
                                bf16; `torch.compile` / eager
  peer compiled bf16 masked-head
                                the same model and weights, its MLM head at the masked positions
                                only, as NVIDIA's DeepLearningExamples run it (`dense_seq_output`):
                                the work ours does. Eager runs users' head alone: the compiled
                                pair already says what the head costs
  ours bf16 unfused             --fused_attention=false
  ours bf16 no-attention-dropout
                                attention dropout 0: cuDNN's flash attention (a different
                                model run, named so)
  ours fp32                     Keras float32 (on GPUs float32 matmuls run in TF32, XLA's
                                default)

Each contender runs in a process of its own (JAX and PyTorch each take the device), both shapes
in it, under `--timeout` seconds (what it printed before is kept; a contender killed or failed
gets a JSON line with `error`). The lines are written to `--out`/accelerators.jsonl and, as every
bench's figures, to --results_jsonl.

On a lent GPU machine (JAX with CUDA, torch and transformers there; no TensorFlow), keras 3.15.1,
namex 0.1.0 and optree 0.20.0 travel as Python 3.12 wheels in `.whl/`:

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit
    nvidia-smi -L; PYTHONUNBUFFERED=1 python3 -m bench.accelerators --out=$OUT --peak_tflops=989

The default run is the first 5 contenders (through "peer eager bf16") x 2 shapes, 20 timed steps
each, 380-420 s on an H200 (a process each, 25-130 s); --budget (480 s) bounds it whatever
happens. The other 3, whose figures held from run to run, by --contenders. bench/measured/ keeps
what it printed on an H200, with its times.
"""
import contextlib
import functools
import itertools
import json
import os
import subprocess
import sys
import time

from absl import app, flags

from bench import harness

# The encoder's widths: hidden size, layers, heads, intermediate size (vocab 30522, 512
# positions); tiny is the CPU smoke run's.
SIZES = {"base": (768, 12, 12, 3072), "large": (1024, 24, 16, 4096), "tiny": (64, 2, 2, 128)}
# name: (framework, its settings), in the order they run (the figures the acceptance
# compares first: the scripts' loop against the step alone, ours against the peer as users run it
# and as NVIDIA's examples do).
CONTENDERS = {
    "ours bf16": ("ours", dict(policy="mixed_bfloat16")),
    "ours bf16 host-fed": ("ours", dict(policy="mixed_bfloat16", fed="host")),
    "peer compiled bf16": ("peer", dict(compiled=True)),
    "peer compiled bf16 masked-head": ("peer", dict(compiled=True, mlm_head="masked")),
    "peer eager bf16": ("peer", dict(compiled=False)),
    "ours bf16 unfused": ("ours", dict(policy="mixed_bfloat16", fused=False)),
    "ours bf16 no-attention-dropout": (
        "ours", dict(policy="mixed_bfloat16", attention_dropout=False)),
    "ours fp32": ("ours", dict(policy="float32")),
}
# What a run without --contenders times: the first five, 380-420 s on the H200 of bench/measured/,
# within --budget with a margin.
DEFAULT_CONTENDERS = list(CONTENDERS)[:5]
flags.DEFINE_enum("config", "base", sorted(SIZES), "Encoder shape (vocab 30522, 512 positions).")
# The records' shapes (batch x max_seq_length x max_predictions_per_seq) of each config's run.
SHAPES = {"base": ["128x128x20", "32x512x80"], "large": ["128x128x20", "32x512x80"],
          "tiny": ["4x64x5"]}
flags.DEFINE_list("shapes", None, "BATCHxSEQxMASKED per step (default: the config's, "
                  "128x128x20,32x512x80; tiny 4x64x5).")
flags.DEFINE_list("contenders", DEFAULT_CONTENDERS, f"Which of: {', '.join(CONTENDERS)}.")
flags.DEFINE_integer("steps", 20, "Timed steps per contender and shape.", lower_bound=1)
flags.DEFINE_integer("warmup", 2, "Untimed steps first (the first compiles).", lower_bound=1)
flags.DEFINE_float("peak_tflops", 989.0, "The device's dense bf16 peak, for the MFU (H100/H200 "
                   "SXM: 989).")
flags.DEFINE_integer("timeout", 200, "Seconds each contender's process may take (both shapes).")
flags.DEFINE_integer("budget", 480, "Seconds the whole run may take: a contender gets what is "
                     "left of it when less than --timeout.")
flags.DEFINE_integer("profile_steps", 0, "Steps each contender then runs under its framework's "
                     "profiler (0: none): the device's busiest kernels go into its row, "
                     "`profile`.", lower_bound=0)
flags.DEFINE_string("out", None, "A folder for accelerators.jsonl (the contenders' lines).")
flags.DEFINE_string("contender_run", None, "Internal: run this contender (its JSON settings) in "
                    "this process.")
FLAGS = flags.FLAGS

VOCAB, POSITIONS = 30522, 512


def model_config(attention_dropout=True):
    return dict(vocab_size=VOCAB, max_position_embeddings=POSITIONS, type_vocab_size=2,
                hidden_act="gelu", hidden_dropout_prob=0.1,
                attention_probs_dropout_prob=0.1 if attention_dropout else 0.0,
                initializer_range=0.02, **dict(zip(
                    ("hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size"), SIZES[FLAGS.config])))


def parse_shape(text):
    """"BATCHxSEQxMASKED" -> (batch, seq, masked)."""
    batch, seq, masked = (int(x) for x in text.split("x"))
    return batch, seq, masked


def step_flops(config, batch, seq, head_positions):
    """Training model FLOPs of one step (`bert_runner.task.encoder_training_flops`: the matmuls,
    attention, and the masked-LM head at `head_positions` of each example's `seq`: the masked
    ones, or all `seq` where the head runs at every position)."""
    from bert_runner.task import encoder_training_flops
    from modeling import BertConfig

    return batch * encoder_training_flops(BertConfig.from_dict(config), seq, head_positions)


def batches(batch, seq, masked, count=2):
    """`count` random pre-training batches (numpy), every token real, two segments."""
    import numpy as np

    rng = np.random.default_rng(0)
    made = []
    for _ in range(count):
        positions = np.sort(np.stack([rng.choice(np.arange(1, seq), masked, replace=False)
                                      for _ in range(batch)]), axis=1)
        made.append(dict(
            input_ids=rng.integers(1000, VOCAB, (batch, seq)).astype("int32"),
            input_mask=np.ones((batch, seq), "int32"),
            segment_ids=(np.arange(seq) >= seq // 2).astype("int32")[None].repeat(batch, 0),
            masked_lm_positions=positions.astype("int32"),
            masked_lm_ids=rng.integers(1000, VOCAB, (batch, masked)).astype("int32"),
            masked_lm_weights=np.ones((batch, masked), "float32"),
            next_sentence_labels=rng.integers(0, 2, (batch,)).astype("int32")))
    return made


def pretraining_loss(model, features, training):
    """MLM + NSP, run_pretraining's total loss (`modeling.losses`)."""
    from modeling import classification_loss, masked_lm_loss

    outputs = model(features, training=training)
    mlm = masked_lm_loss(outputs["masked_lm_logits"], features["masked_lm_ids"],
                         features["masked_lm_weights"])[0]
    nsp = classification_loss(outputs["next_sentence_logits"],
                              features["next_sentence_labels"])[0]
    return mlm + nsp, {"masked_lm_loss": mlm}


def run_ours(shape, policy, fused=None, attention_dropout=True, fed="device"):
    """Times `JaxStep` on `BertPretrainer` in the modes the scripts build it in (`fused` None:
    `--fused_attention=auto`'s choice, False: unfused), its batches `fed` as `ours_input` says;
    returns the row's figures."""
    import jax
    import keras

    from bert_runner.engines.jax_step import JaxStep, data_parallel
    from modeling import BertPretrainer, EncoderModes
    from modeling.layers.attention import fused_attention_pays
    from modeling.optimization import create_optimizer

    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(0)
    distribution = data_parallel()
    if distribution is not None:
        keras.distribution.set_distribution(distribution)
    if fused is None:
        fused = fused_attention_pays(keras.config.dtype_policy().compute_dtype)
    modes = EncoderModes(fused_attention=True) if fused else None
    model = BertPretrainer(model_config(attention_dropout), modes=modes)
    engine = JaxStep(model, create_optimizer("adamw", 1e-4, 10000, 100), pretraining_loss)
    state = engine.initial_state()
    with ours_input(fed, batches(*shape), engine.place) as batch:

        def step(i):
            nonlocal state
            state, metrics = engine(state, batch(i))
            return metrics

        # The metrics read back as floats once the steps are dispatched, as the trainer reads
        # them once per loop call.
        first, losses, seconds = _time(
            step, lambda metrics: {name: float(value) for name, value in metrics.items()},
            lambda metrics: float(metrics["loss"]))
        profile = guarded(jax_profile, step) if FLAGS.profile_steps else None
    device = jax.devices()[0]
    return dict(input=fed, first_step_s=first, step_s=seconds, losses=losses, profile=profile,
                device=getattr(device, "device_kind", str(device)),
                devices=jax.device_count(), versions=harness.versions(("jax", "jaxlib", "keras")))


@contextlib.contextmanager
def ours_input(fed, host, place):
    """`i -> the batch of step i` from the `host` batches (numpy) placed by `place`
    (`JaxStep.place`), `fed` "device": on the device once, before the steps (the step alone);
    "host": through a `DeviceFeed`, a batch a step, as `JaxTrainer._run_loop` feeds the scripts'
    steps (with these batches for `tf.data`'s)."""
    from bert_runner.engines.device_feed import DeviceFeed

    if fed == "device":
        placed = [place(b) for b in host]
        yield lambda i: placed[i % len(placed)]
        return
    taken = itertools.count()
    with DeviceFeed(lambda: host[next(taken) % len(host)], place) as feed:
        # The input never ends and no checkpoint waits for its position: the trainer lets the
        # feed read up to its next save, here up to the last step.
        feed.allow_through(sys.maxsize)
        yield lambda i: feed.next()


def run_peer(shape, compiled, mlm_head="all"):
    """Times transformers' `BertForPreTraining` (bf16 autocast, fused AdamW), its masked-LM head
    at every position as its `forward` computes it (`mlm_head` "all") or at the masked ones
    (`masked_head_loss`); the row's figures."""
    import torch
    from transformers import BertConfig, BertForPreTraining

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    c = model_config()
    config = BertConfig(vocab_size=VOCAB, hidden_size=c["hidden_size"],
                        num_hidden_layers=c["num_hidden_layers"],
                        num_attention_heads=c["num_attention_heads"],
                        intermediate_size=c["intermediate_size"],
                        max_position_embeddings=POSITIONS, type_vocab_size=2,
                        attn_implementation="sdpa")
    model = BertForPreTraining(config).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01,
                                  fused=device == "cuda")
    data = []
    for b in batches(*shape):
        t = {name: torch.tensor(value, device=device) for name, value in b.items()}
        positions, ids = t["masked_lm_positions"].long(), t["masked_lm_ids"].long()
        batch = dict(input_ids=t["input_ids"], attention_mask=t["input_mask"],
                     token_type_ids=t["segment_ids"],
                     next_sentence_label=t["next_sentence_labels"].long())
        if mlm_head == "all":  # the labels a data collator gives: -100 where nothing is masked
            batch["labels"] = torch.full(t["input_ids"].shape, -100, dtype=torch.long,
                                         device=device).scatter_(1, positions, ids)
        else:
            batch.update(masked_lm_positions=positions, masked_lm_ids=ids)
        data.append(batch)
    loss_fn = ((lambda **batch: model(**batch).loss) if mlm_head == "all" else
               functools.partial(masked_head_loss, model))

    def forward(batch):
        with torch.autocast(device, dtype=torch.bfloat16):
            return loss_fn(**batch)

    # On a CPU (the smoke run) dynamo traces into its eager backend: inductor's C++ compilation
    # takes minutes there, and the CPU's figures are not the comparison.
    loss_of = (torch.compile(forward, backend="inductor" if device == "cuda" else "eager")
               if compiled else forward)

    def step(i):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(data[i % len(data)])
        loss.backward()
        optimizer.step()
        return loss

    def sync(_):
        if device == "cuda":
            torch.cuda.synchronize()

    first, losses, seconds = _time(step, sync, lambda loss: float(loss.detach()))
    profile = guarded(torch_profile, step, sync) if FLAGS.profile_steps else None
    return dict(mlm_head=mlm_head, first_step_s=first, step_s=seconds, losses=losses,
                profile=profile, device=torch.cuda.get_device_name() if device == "cuda" else "cpu",
                attention=model.config._attn_implementation,
                versions=harness.versions(("torch", "transformers")))


def masked_head_loss(model, masked_lm_positions, masked_lm_ids, next_sentence_label, **inputs):
    """`BertForPreTraining`'s MLM + NSP loss with the masked-LM head at the masked positions
    only, as NVIDIA's DeepLearningExamples compute it (`dense_seq_output`): the encoder's
    sequence output gathered at `masked_lm_positions` before `model.cls.predictions` (its
    transform and decoder), `model.cls.seq_relationship` on the pooled output. The same
    cross-entropies as `forward`'s, whose labels are -100 away from the masked positions."""
    import torch.nn.functional as F

    outputs = model.bert(**inputs)
    hidden = outputs.last_hidden_state
    rows = hidden.gather(1, masked_lm_positions[..., None].expand(-1, -1, hidden.shape[-1]))
    logits = model.cls.predictions(rows)
    nsp_logits = model.cls.seq_relationship(outputs.pooler_output)
    return (F.cross_entropy(logits.flatten(0, 1), masked_lm_ids.flatten())
            + F.cross_entropy(nsp_logits, next_sentence_label))


def guarded(profile, *args):
    """`profile(*args)`, or `{"error": ...}`: a profile that fails leaves the timings standing."""
    try:
        return profile(*args)
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"[:400]}


def jax_profile(step):
    """`--profile_steps` steps under `jax.profiler.trace`: per line of the device's trace (its
    streams' kernels, XLA's ops), the total milliseconds per step and the busiest 25 names."""
    import glob
    import tempfile

    import jax
    from jax.profiler import ProfileData

    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder):
            for i in range(FLAGS.profile_steps):
                metrics = step(i)
            jax.block_until_ready(metrics)
        data = ProfileData.from_file(glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)[0])
        lines = {}
        for plane in data.planes:
            if not plane.name.startswith("/device:"):
                continue
            for line in plane.lines:
                totals = {}
                for event in line.events:
                    totals[event.name] = totals.get(event.name, 0.0) + event.duration_ns
                lines[f"{plane.name} {line.name}"] = totals
    return {name: _busiest(totals, FLAGS.profile_steps) for name, totals in lines.items()}


def _busiest(totals, steps, count=25):
    """`{"ms_per_step": total, "top": [[name, ms per step], ...]}` of `{name: ns}`."""
    top = sorted(totals.items(), key=lambda item: -item[1])[:count]
    return {"ms_per_step": round(sum(totals.values()) / steps / 1e6, 3),
            "top": [[name[:160], round(ns / steps / 1e6, 3)] for name, ns in top]}


def torch_profile(step, sync):
    """`--profile_steps` steps under `torch.profiler`: the device's busiest 25 kernels, ms per
    step (CPU time where there is no GPU)."""
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        for i in range(FLAGS.profile_steps):
            loss = step(i)
        sync(loss)
    totals = {}
    for event in profiler.key_averages():
        ns = 1e3 * (event.device_time_total if torch.cuda.is_available()
                    else event.self_cpu_time_total)
        if ns:
            totals[event.key] = totals.get(event.key, 0.0) + ns
    return {"kernels": _busiest(totals, FLAGS.profile_steps)}


def _time(step, wait, value):
    """(seconds of the first step, [first and last timed loss], seconds per timed step):
    `--warmup` steps, then `--steps` dispatched back to back and waited for once."""
    start = time.perf_counter()
    loss = step(0)
    wait(loss)
    first = time.perf_counter() - start
    losses = [value(loss)]
    for i in range(1, FLAGS.warmup):
        wait(step(i))
    start = time.perf_counter()
    for i in range(FLAGS.steps):
        loss = step(FLAGS.warmup + i)
    wait(loss)
    seconds = (time.perf_counter() - start) / FLAGS.steps
    return round(first, 2), losses + [value(loss)], seconds


def contender_main(settings):
    """In the contender's process: each shape's JSON line, printed as it is measured."""
    name, kind = settings["name"], CONTENDERS[settings["name"]][0]
    options = CONTENDERS[name][1]
    for text in FLAGS.shapes:
        shape = parse_shape(text)
        row = dict(contender=name, config=FLAGS.config, shape=text)
        try:
            figures = run_ours(shape, **options) if kind == "ours" else run_peer(shape, **options)
        except Exception as error:  # the others' lines still count
            row["error"] = f"{type(error).__name__}: {error}"[:800]
        else:
            config = model_config(options.get("attention_dropout", True))
            batch, seq, masked = shape
            head_positions = seq if figures.get("mlm_head") == "all" else masked
            tflops = step_flops(config, batch, seq, head_positions) / figures["step_s"] / 1e12
            row.update(seq_per_s=round(batch / figures["step_s"], 1),
                       mfu=round(tflops / FLAGS.peak_tflops, 4), tflops=round(tflops, 1),
                       **{**figures, "step_s": round(figures["step_s"], 5)})
        print("ROW " + json.dumps(row), flush=True)


def run_contender(name, timeout):
    """The contender's rows, from its own process under `timeout` seconds."""
    argv = [sys.executable, "-m", "bench.accelerators", f"--contender_run={json.dumps(name)}",
            f"--config={FLAGS.config}", f"--shapes={','.join(FLAGS.shapes)}",
            f"--steps={FLAGS.steps}", f"--warmup={FLAGS.warmup}",
            f"--peak_tflops={FLAGS.peak_tflops}", f"--profile_steps={FLAGS.profile_steps}",
            "--results_jsonl="]
    env = {**os.environ, "KERAS_BACKEND": "jax", "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    start = time.perf_counter()
    try:
        result = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=harness.ROOT,
                                timeout=timeout)
        output, problem = result.stdout, (f"exit {result.returncode}: {result.stderr[-600:]}"
                                          if result.returncode else None)
    except subprocess.TimeoutExpired as expired:
        output = expired.stdout.decode() if isinstance(expired.stdout, bytes) else expired.stdout
        problem = f"timed out after {timeout} s"
    rows = [json.loads(line[4:]) for line in (output or "").splitlines()
            if line.startswith("ROW ")]
    done = {row["shape"] for row in rows}
    rows += [dict(contender=name, config=FLAGS.config, shape=shape, error=problem)
             for shape in FLAGS.shapes if shape not in done]
    for row in rows:
        row["process_s"] = round(time.perf_counter() - start, 1)
    return rows


def main(argv):
    del argv
    if FLAGS.shapes is None:
        FLAGS.shapes = SHAPES[FLAGS.config]
    if FLAGS.contender_run:
        contender_main({"name": json.loads(FLAGS.contender_run)})
        return
    unknown = [name for name in FLAGS.contenders if name not in CONTENDERS]
    if unknown:
        raise app.UsageError(f"--contenders: unknown {', '.join(unknown)}; use "
                             f"{', '.join(CONTENDERS)}")
    for text in FLAGS.shapes:
        try:
            parse_shape(text)
        except ValueError:
            raise app.UsageError(f"--shapes: {text!r} is not BATCHxSEQxMASKED") from None
    print(f"model: {FLAGS.config} {model_config()}, shapes {', '.join(FLAGS.shapes)}, "
          f"{FLAGS.steps} timed steps after {FLAGS.warmup}")
    rows = []
    path = os.path.join(FLAGS.out, "accelerators.jsonl") if FLAGS.out else None
    if path:
        os.makedirs(FLAGS.out, exist_ok=True)
    deadline = time.perf_counter() + FLAGS.budget
    for name in FLAGS.contenders:
        timeout = min(FLAGS.timeout, deadline - time.perf_counter())
        if timeout < 10:
            print(f"{name}: skipped, --budget spent", flush=True)
            continue
        for row in run_contender(name, round(timeout)):
            rows.append(row)
            line = json.dumps(row)
            print(line, flush=True)
            if path:
                with open(path, "a", encoding="utf-8") as f:
                    f.write(line + "\n")
    print(f"\n{'contender':46s} {'shape':>11s} {'seq/s':>8s} {'MFU':>6s} {'first s':>8s}  device")
    for row in rows:
        if "error" in row:
            print(f"{row['contender']:46s} {row['shape']:>11s}  error: {row['error'][:200]}")
        else:
            print(f"{row['contender']:46s} {row['shape']:>11s} {row['seq_per_s']:8.1f} "
                  f"{100 * row['mfu']:5.1f}% {row['first_step_s']:8.1f}  {row['device']}")
    harness.write_results("accelerators", rows, packages=("jax", "keras", "torch",
                                                         "transformers"))


if __name__ == "__main__":
    harness.run(main, KERAS_BACKEND="jax", XLA_PYTHON_CLIENT_PREALLOCATE="false")
