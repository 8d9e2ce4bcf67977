r"""Forward throughput of the BERT encoder: ours (Keras 3 on TensorFlow) against Hugging Face
`transformers.BertModel` on PyTorch CPU, same weights, same inputs, one process.

    python -m bench.encoder                       # BERT-Base, batch 8, sequence 128, fp32 + bf16
    python -m bench.encoder --config=tiny --repeats=3 --batch_size=2 --seq_length=32   # smoke run

For each precision it times, round-robin so that background load hits every row alike:
  ours eager            `model(inputs, training=False)`
  ours tf.function      the same call in `tf.function`
  ours XLA              the same call in `tf.function(jit_compile=True)`
  ours real rows        `model(inputs, training=False, skip_padding=True)` in `tf.function`:
                        the encoder layers on the real tokens only (`modeling.layers.token_rows`);
                        the same values at every real position and for the pooled output,
                        what a classifier, a tagger or a feature extractor reads
  peer transformers     `BertModel` in eval mode under `torch.inference_mode()`
                        (and `torch.autocast("cpu", torch.bfloat16)` for bfloat16).
bfloat16 for ours is the Keras `mixed_bfloat16` policy (float32 variables, bfloat16 compute,
float32 softmax and LayerNorm statistics), which is what autocast does for the peer; the row
"ours bf16 weights" is the same model with its weights cast to bfloat16 once
(`modeling.inference.with_bfloat16_weights`: the same outputs, no per-call weight casts; what
`extract_features.py` and `export_model.py` run with `--mixed_precision=bf16`, on the real rows),
compared also with "peer bf16 weights", the peer after `model.to(torch.bfloat16)` (no autocast).

Both models hold the same random weights (the peer's are copied into ours) and both use the tanh
GELU of the original release (the peer's `gelu_new`, or `gelu_pytorch_tanh`: the same function
as one fused kernel; `--peer_hidden_act`). Before timing, the outputs are compared.

Each row reports the median over `--repeats` timed rounds after one untimed compile/first call
and `--warmup` untimed rounds; `vs peer` is the peer's median time over ours (> 1: ours faster).
"""
import os
import statistics
import time

import numpy as np
from bench import harness
from absl import app, flags

# Named encoder shapes: BERT-Base (the target) and smaller ones for quick runs.
def _shape(hidden, layers, heads, intermediate):
    return dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                intermediate_size=intermediate)


CONFIGS = {"base": _shape(768, 12, 12, 3072), "small": _shape(512, 4, 8, 2048),
           "tiny": _shape(128, 2, 2, 512)}
COMMON = dict(vocab_size=30522, max_position_embeddings=512, type_vocab_size=2)
OUR_MODES = ("eager", "function", "xla", "real_rows")
PRECISIONS = ("float32", "bfloat16")
PEER = "peer transformers"
# The peer with its weights converted to bfloat16 (`model.to(torch.bfloat16)`, no autocast): the
# counterpart of our bf16-weight rows.
PEER_BF16 = "peer bf16 weights"

flags.DEFINE_enum("config", "base", sorted(CONFIGS),
                  "Encoder shape; all have vocab 30522, 512 positions, 2 token types.")
flags.DEFINE_integer("batch_size", 8, "Sequences per forward call.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("repeats", 5, "Timed rounds; every row reports its median.")
flags.DEFINE_integer("warmup", 1, "Untimed rounds after the first (compiling) call.")
flags.DEFINE_list("precisions", list(PRECISIONS), f"Any of {', '.join(PRECISIONS)}.")
flags.DEFINE_list("modes", list(OUR_MODES), f"Our execution modes, any of {', '.join(OUR_MODES)}.")
flags.DEFINE_integer(
    "num_threads", os.cpu_count(),
    "Threads for both frameworks, intra-op and inter-op (bench.harness.set_threads).",
)
flags.DEFINE_enum(
    "peer_hidden_act", "gelu_new", ["gelu_new", "gelu_pytorch_tanh"],
    "The peer's tanh GELU: composed of elementwise ops (gelu_new) or one fused kernel.",
)
flags.DEFINE_bool(
    "bf16_weights", True,
    "For bfloat16, also time `modeling.inference.with_bfloat16_weights` (weights stored in "
    "bfloat16 once: the same outputs as mixed_bfloat16 without its per-call casts), tf.function, "
    "and the peer with its weights in bfloat16.")
flags.DEFINE_integer("seed", 0, "Seed of the weights and of the inputs.")
FLAGS = flags.FLAGS


def forward_gflops(c, seq_length):
    """Model FLOPs of one sequence's forward pass (2 per multiply-add), in GFLOPs.

    Dense layers: 2·S·(4H² + 2HI) per layer; scores and context: 2·2·S²·H per layer;
    pooler 2H². Embedding gathers, softmax, LayerNorm and GELU are not counted.
    """
    h, i, s = c["hidden_size"], c["intermediate_size"], seq_length
    per_layer = 2 * s * (4 * h * h + 2 * h * i) + 4 * s * s * h
    return (c["num_hidden_layers"] * per_layer + 2 * h * h) / 1e9


def make_inputs(batch_size, seq_length, vocab_size, rng):
    """int32 `[B, S]` arrays: random ids, a key mask with lengths in [S/2, S], two segments."""
    lengths = rng.integers(seq_length // 2, seq_length + 1, size=batch_size)
    positions = np.arange(seq_length)[None, :]
    mask = (positions < lengths[:, None]).astype(np.int32)
    ids = rng.integers(1000, vocab_size, size=(batch_size, seq_length)).astype(np.int32)
    ids *= mask
    segments = ((positions >= lengths[:, None] // 2) & (mask == 1)).astype(np.int32)
    return {"input_ids": ids, "input_mask": mask, "token_type_ids": segments}


def build_peer(c, hidden_act, seed):
    """The Hugging Face `BertModel` (with pooler) in eval mode, default attention (SDPA)."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(**c, **COMMON, hidden_act=hidden_act)
    return transformers.BertModel(config).eval()


def build_ours(c, precision, peer_state):
    """Our `BertModel` under the precision's dtype policy, holding the peer's weights.

    The policy is set globally while building: a `dtype=` argument to `BertModel` would not
    reach its sub-layers.
    """
    import keras

    from modeling import BertConfig, BertModel

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16" if precision == "bfloat16" else "float32")
    try:
        model = BertModel(BertConfig(**c, **COMMON))
    finally:
        keras.config.set_dtype_policy(previous)
    return harness.assign_peer_weights(model, peer_state, prefix="bert.")


def our_runners(model, inputs, modes):
    """`{row name: zero-arg callable}` returning `(sequence_output, pooled_output)` as numpy."""
    import tensorflow as tf

    tensors = {k: tf.constant(v) for k, v in inputs.items()}

    def forward(x, skip_padding=False):
        out = model(x, training=False, skip_padding=skip_padding)
        return out["sequence_output"], out["pooled_output"]

    compiled = {
        "eager": forward,
        "function": tf.function(forward),
        "xla": tf.function(forward, jit_compile=True),
        "real_rows": tf.function(lambda x: forward(x, skip_padding=True)),
    }
    names = {"eager": "ours eager", "function": "ours tf.function", "xla": "ours tf.function XLA",
             "real_rows": "ours real rows"}

    def runner(fn):
        return lambda: tuple(t.numpy() for t in fn(tensors))

    return {names[m]: runner(compiled[m]) for m in modes}


def peer_runner(model, inputs, precision, autocast=True):
    import torch

    tensors = {
        "input_ids": torch.from_numpy(inputs["input_ids"]).long(),
        "attention_mask": torch.from_numpy(inputs["input_mask"]).long(),
        "token_type_ids": torch.from_numpy(inputs["token_type_ids"]).long(),
    }

    def run():
        with torch.inference_mode(), torch.autocast(
            "cpu", dtype=torch.bfloat16, enabled=autocast and precision == "bfloat16"
        ):
            out = model(**tensors)
        return out.last_hidden_state.float().numpy(), out.pooler_output.float().numpy()

    return run


def first_calls(runners, inputs, precision):
    """Calls every row once, printing its max |difference| to the peer on the non-padded
    positions. Returns `{name: first-call seconds}` (the XLA row includes compilation) for the
    rows that ran; a row that raises is reported and left out rather than ending the run."""
    mask = inputs["input_mask"].astype(bool)
    expected = runners[PEER]()
    first_call = {}
    for name, run in runners.items():
        start = time.perf_counter()
        try:
            sequence, pooled = run()
        except Exception as e:  # noqa: BLE001 -- any failure of one row is a finding to print
            print(f"  {precision:8s} {name:28s} FAILED: {type(e).__name__}:")
            print("    " + str(e).strip().replace("\n", "\n    "))
            continue
        first_call[name] = time.perf_counter() - start
        if name.startswith("peer"):
            continue
        seq_diff = np.abs(sequence.astype(np.float32) - expected[0])[mask].max()
        pool_diff = np.abs(pooled.astype(np.float32) - expected[1]).max()
        print(f"  {precision:8s} {name:28s} max|ours - peer|: "
              f"sequence {seq_diff:.2e}, pooled {pool_diff:.2e}")
    return first_call


def main(argv):
    del argv
    unknown = set(FLAGS.precisions) - set(PRECISIONS) | set(FLAGS.modes) - set(OUR_MODES)
    if unknown:
        raise app.UsageError(f"unknown --precisions/--modes values: {sorted(unknown)}")
    harness.set_threads(FLAGS.num_threads)
    c = CONFIGS[FLAGS.config]
    peer = build_peer(c, FLAGS.peer_hidden_act, FLAGS.seed)
    rng = np.random.default_rng(FLAGS.seed)
    inputs = make_inputs(FLAGS.batch_size, FLAGS.seq_length, COMMON["vocab_size"], rng)
    print(harness.describe_machine(FLAGS.num_threads))
    print(
        f"encoder: {FLAGS.config} {c}, batch {FLAGS.batch_size} x sequence {FLAGS.seq_length}; "
        f"peer: hidden_act={FLAGS.peer_hidden_act}, attention={peer.config._attn_implementation}"
    )

    rows = {}  # (precision, name) -> callable
    first_call = {}
    for precision in FLAGS.precisions:
        ours = build_ours(c, precision, peer.state_dict())
        runners = our_runners(ours, inputs, FLAGS.modes)
        runners[PEER] = peer_runner(peer, inputs, precision)
        if precision == "bfloat16" and FLAGS.bf16_weights:
            import copy

            import torch

            from modeling.inference import with_bfloat16_weights

            bf16 = our_runners(with_bfloat16_weights(ours), inputs, ["function", "real_rows"])
            runners["ours bf16 weights"] = bf16["ours tf.function"]
            if "real_rows" in FLAGS.modes:
                runners["ours bf16 weights, real rows"] = bf16["ours real rows"]
            runners[PEER_BF16] = peer_runner(copy.deepcopy(peer).to(torch.bfloat16), inputs,
                                             precision, autocast=False)
        for name, seconds in first_calls(runners, inputs, precision).items():
            rows[precision, name] = runners[name]
            first_call[precision, name] = seconds
    times = harness.time_rounds(rows, FLAGS.repeats, FLAGS.warmup)

    gflops = forward_gflops(c, FLAGS.seq_length) * FLAGS.batch_size
    print(
        f"\nmedian of {FLAGS.repeats} rounds after {FLAGS.warmup} warm-up rounds "
        f"({gflops / FLAGS.batch_size:.1f} GFLOPs per sequence forward)"
    )
    print(f"{'precision':9s}  {'implementation':28s} {'first call s':>12s} {'ms/batch':>9s} "
          f"{'seq/s':>7s} {'GFLOP/s':>8s} {'of peak':>8s} {'vs peer':>8s}")
    figures = []
    for precision in FLAGS.precisions:
        peer_median = statistics.median(times[precision, PEER])
        peak = harness.cpu_peak_tflops(precision)
        for (p, name), samples in times.items():
            if p != precision:
                continue
            median = statistics.median(samples)
            ratio = f"{peer_median / median:7.2f}x" if not name.startswith("peer") else ""
            share = f"{gflops / median / (peak * 1e3):.1%}" if peak else "n/a"
            print(
                f"{precision:9s}  {name:28s} {first_call[p, name]:12.2f} {median * 1e3:9.1f} "
                f"{FLAGS.batch_size / median:7.2f} {gflops / median:8.1f} {share:>8s} {ratio:>8s}"
            )
            figures.append({"precision": precision, "implementation": name,
                            "first_call_s": first_call[p, name], "ms_per_batch": median * 1e3,
                            "seq_per_s": FLAGS.batch_size / median, "gflop_per_s": gflops / median,
                            "of_peak": gflops / median / (peak * 1e3) if peak else None,
                            "vs_peer": peer_median / median if ratio else None,
                            "seconds": samples})
    if ("bfloat16", PEER_BF16) in times:
        peer_bf16 = statistics.median(times["bfloat16", PEER_BF16])
        for (p, name), samples in times.items():
            if p == "bfloat16" and name.startswith("ours bf16 weights"):
                print(f"bfloat16   {name} vs {PEER_BF16}: "
                      f"{peer_bf16 / statistics.median(samples):.2f}x")
    print("of peak: of this CPU's nominal peak (bench.harness.cpu_peak_tflops: "
          + ", ".join(f"{p} {harness.cpu_peak_tflops(p) or float('nan'):.2f} TFLOP/s"
                      for p in FLAGS.precisions) + ")")
    harness.write_results("encoder", figures, FLAGS.num_threads)


if __name__ == "__main__":
    # The peer's OpenMP threads otherwise spin at every barrier, which on a loaded machine slows it
    # down severalfold (see bench/pretraining.py). Must be set before torch is imported.
    harness.run(main, OMP_WAIT_POLICY="PASSIVE")
