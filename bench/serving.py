r"""Serving on CPU, raw text in, probabilities out: our SavedModel, our LiteRT model at each
precision and ONNX Runtime on our ONNX export, against the Hugging Face text-classification
pipeline (PyTorch) and KerasHub's `BertTextClassifier.predict`; same weights, same sentences, same
threads, one process.

    python bench/serving.py --num_threads=2       # BERT-Base, seq 128, 2 labels, batch 1 and 32
    python bench/serving.py --config=tiny --sentences=16 --repeats=1 --warmup=1   # smoke run

Contenders (each: a list of raw strings in, the two class probabilities out, truncation to
--max_seq_length; tokenization is included wherever the user pays for it):
  SavedModel     `export_model.py`'s SavedModel (classifier's raw_text module: tf.text tokenizer, packing,
                 BertClassifier, softmax in one graph), `tf.saved_model.load`, its
                 `serving_default` signature on a string tensor of the batch.
  SavedModel bf16  the same exported with `--mixed_precision=bf16` (bfloat16 weights and
                 matmuls, `modeling.inference.with_bfloat16_weights`), with --bfloat16: for CPUs
                 with bfloat16 units (AMX, AVX512_BF16); its probabilities' difference from the
                 float32 SavedModel's is printed with the others'.
  LiteRT <q>     `export_model.py --format=litert --quantization=<q>` (bert_runner.serving.litert:
                 tokenizer inside, one text at a time in the graph), ai-edge-litert's interpreter
                 (XNNPACK) with tf.text's ops, `num_threads` threads. int8 is calibrated on
                 --calibration_sentences Austen sentences outside the timed ones, and called
                 one text per call (its export.json's `texts_per_call`), a batch of 32 as 32
                 calls; left out, with the export's reason, where its accuracy check refuses it.
  ONNX Runtime   `export_model.py --format=onnx` (tf2onnx, ids in) on onnxruntime's CPU provider,
                 behind our tokenizer (`serving.onnx.OnnxTextModel`: tf.text tokenizer and packing,
                 padding to the batch's longest row).
  HF pipeline    `transformers.pipeline("text-classification")`, `BertForSequenceClassification`
                 (eval mode, SDPA attention), `BertTokenizerFast` on the same vocab, `batch_size`.
  KerasHub       `keras_hub.models.BertTextClassifier` (its `BertBackbone` and
                 `BertTextClassifierPreprocessor`, sequence_length --max_seq_length, softmax
                 activation) with the same weights ported by KerasHub's own Hugging Face
                 converter (`keras_hub.src.utils.transformers.convert_bert.convert_weights`),
                 `.predict(texts, batch_size)`.
All hold the same random BERT weights (the peer's, copied into ours) and the original's tanh
GELU (the peer's `gelu_new`, KerasHub's `gelu_approximate`); the probabilities are compared to
the SavedModel's before timing.

Last, `predict.py`'s first answer: the seconds from starting it on the SavedModel with one
sentence to its exit (median of 3), what a one-off user waits for.

Input: sentences of the Austen novels in `data/austen/`, shuffled with --seed. Each round runs
every contender in turn (so load from other processes hits all alike) on the same --sentences
sentences: at batch 1, one call per sentence, each timed (latency p50 and p99 over all calls of
all timed rounds); at batch 32, the sentences in calls of 32 (throughput: sentences/s, median of
the rounds). --warmup untimed rounds first. Threads: --num_threads intra-op and inter-op for
TensorFlow and torch (and the peer's Rust tokenizer; `common.set_threads`), intra-op for
onnxruntime and LiteRT. Peers: bench/requirements.txt; a contender whose package is missing is
left out with a line saying so.
"""
import glob
import os
import sys

# Thread settings must be in place before the libraries start their pools.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Hugging Face's BERT imports torch._dynamo, whose LLVM aborts the process ("Option ... registered
# more than once") when TensorFlow's was loaded first; loaded before TensorFlow, both work.
try:
    import transformers.models.bert.modeling_bert  # noqa: E402, F401
except ImportError:
    pass

import random  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from bench import common  # noqa: E402
from absl import app, flags  # noqa: E402

# Named encoder shapes: BERT-Base (the target) and smaller ones for quick runs.
CONFIGS = {
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072),
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=512),
}
LABELS = ["0", "1"]
BASELINE = "HF pipeline"

flags.DEFINE_enum("config", "base", sorted(CONFIGS),
                  "Encoder shape (512 positions, 2 token types).")
flags.DEFINE_string("input", "data/austen/*.txt", "Glob of UTF-8 text files, paragraphs separated "
                    "by blank lines.")
flags.DEFINE_string("vocab_file", "vocab/uncased_L-12_H-768_A-12/vocab.txt",
                    "Uncased WordPiece vocab.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length limit (truncation) of all.")
flags.DEFINE_integer("batch_size", 32, "Sentences per call for the throughput figures.")
flags.DEFINE_integer("sentences", 64, "Sentences per round (batch-1 calls and throughput).")
flags.DEFINE_integer("repeats", 3, "Timed rounds.")
flags.DEFINE_integer("warmup", 1, "Untimed rounds before them.")
flags.DEFINE_list("litert", ["float32", "float16", "dynamic_int8", "int8"],
                  "LiteRT precisions to time (empty: none).")
flags.DEFINE_integer("calibration_sentences", 100, "Sentences calibrating LiteRT int8.")
flags.DEFINE_list("peers", ["onnx", "hf", "keras_hub"], "Other contenders to time.")
flags.DEFINE_bool("bfloat16", True, "Also time the SavedModel exported with bfloat16 weights.")
flags.DEFINE_integer("num_threads", os.cpu_count(), "Threads of every contender (see above).")
flags.DEFINE_integer("seed", 0, "Seed of the weights and of the sentence order.")
FLAGS = flags.FLAGS


def read_sentences(pattern, count, seed):
    """`count` sentences (str) of the files' paragraphs, in a seeded random order."""
    sentences = []
    for path in sorted(glob.glob(pattern)):
        with open(path, encoding="utf-8") as f:
            for paragraph in re.split(r"\n\s*\n", f.read()):
                text = " ".join(paragraph.split())
                sentences += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'])", text)
                              if len(s.split()) >= 3]
    if len(sentences) < count:
        raise SystemExit("%s: %d sentences, %d needed" % (pattern, len(sentences), count))
    random.Random(seed).shuffle(sentences)
    return sentences[:count]


def build_peer(sizes, num_labels, seed):
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(
        **sizes, vocab_size=30522, max_position_embeddings=512, type_vocab_size=2,
        hidden_act="gelu_new", num_labels=num_labels)
    return transformers.BertForSequenceClassification(config).eval()


def build_ours(sizes, peer_state):
    """Our `BertClassifier` with the peer's weights."""
    from modeling import BertClassifier, BertConfig

    model = BertClassifier(BertConfig(**sizes, vocab_size=30522, max_position_embeddings=512,
                                      type_vocab_size=2, hidden_act="gelu"), len(LABELS))
    return common.assign_peer_weights(model, peer_state)


def saved_model_runner(export_dir):
    import tensorflow as tf

    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    return lambda texts: serve(text_a=tf.constant(texts))["probabilities"].numpy()


def litert_runner(path, num_threads):
    from bert_runner.serving import litert

    runner = litert.interpreter(model_path=path, num_threads=num_threads) \
        .get_signature_runner("serving_default")
    per_call = litert.texts_per_call(path)
    if per_call is None:
        return lambda texts: runner(text_a=np.array(texts))["probabilities"]
    # Full int8 answers `texts_per_call` texts a call (larger calls are at chance): a batch
    # costs its client that many calls, and is timed so.
    return lambda texts: np.concatenate([
        runner(text_a=np.array(texts[i:i + per_call]))["probabilities"]
        for i in range(0, len(texts), per_call)])


def onnx_runner(export_dir, num_threads):
    from bert_runner.serving import onnx

    model = onnx.OnnxTextModel(export_dir, num_threads=num_threads)
    return lambda texts: model(texts)["probabilities"]


def hf_runner(peer, vocab_file, max_seq_length):
    import transformers

    tokenizer = transformers.BertTokenizerFast(vocab=vocab_file, do_lower_case=True)
    pipe = transformers.pipeline("text-classification", model=peer, tokenizer=tokenizer,
                                 device="cpu", top_k=None)

    def run(texts):
        results = pipe(texts, batch_size=len(texts), truncation=True, max_length=max_seq_length)
        return np.array([[s["score"] for s in sorted(r, key=lambda s: s["label"])]
                         for r in results])

    return run


class _StateDictLoader:
    """What KerasHub's converter reads weights through, on a torch state dict."""

    def __init__(self, state):
        self.state = {k[len("bert."):] if k.startswith("bert.") else k: v.numpy()
                      for k, v in state.items()}

    def get_tensor(self, key):
        return self.state[key]

    def port_weight(self, keras_variable, hf_weight_key, hook_fn=None):
        value = self.state[hf_weight_key]
        if hook_fn is not None:
            value = hook_fn(value, list(keras_variable.shape))
        keras_variable.assign(value)


def keras_hub_runner(peer, sizes, vocab_file, max_seq_length):
    import keras_hub
    from keras_hub.src.utils.transformers import convert_bert

    state = peer.state_dict()
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30522, num_layers=sizes["num_hidden_layers"],
        num_heads=sizes["num_attention_heads"], hidden_dim=sizes["hidden_size"],
        intermediate_dim=sizes["intermediate_size"], max_sequence_length=512)
    convert_bert.convert_weights(backbone, _StateDictLoader(state),
                                 {"num_hidden_layers": sizes["num_hidden_layers"]})
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocab_file, lowercase=True),
        sequence_length=max_seq_length)
    model = keras_hub.models.BertTextClassifier(backbone, len(LABELS), preprocessor=preprocessor,
                                                activation="softmax")
    model.get_layer("logits").kernel.assign(state["classifier.weight"].numpy().T)
    model.get_layer("logits").bias.assign(state["classifier.bias"].numpy())
    return lambda texts: np.asarray(model.predict(texts, batch_size=len(texts), verbose=0))


def time_rounds(runners, sentences, batch_size, repeats, warmup):
    """({name: [seconds of each batch-1 call]}, {name: [seconds per round at batch_size]})."""
    latencies = {name: [] for name in runners}
    rounds = {name: [] for name in runners}
    for round_index in range(warmup + repeats):
        timed = round_index >= warmup
        for name, run in runners.items():
            for sentence in sentences:
                start = time.perf_counter()
                run([sentence])
                if timed:
                    latencies[name].append(time.perf_counter() - start)
            start = time.perf_counter()
            for i in range(0, len(sentences), batch_size):
                run(sentences[i:i + batch_size])
            if timed:
                rounds[name].append(time.perf_counter() - start)
        print(f"round {round_index + 1}/{warmup + repeats} done", flush=True)
    return latencies, rounds


def directory_mb(directory):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(directory)
               for f in fs) / 1e6


def build_runners(model, peer, sizes, calibration, tmp):
    """{name: batch -> probabilities}; contenders whose packages are missing are left out."""
    from bert_runner.serving import litert, onnx
    from bert_tasks.classifier import raw_text

    runners = {}
    convertible = raw_text.convertible(model, LABELS)
    export_dir = raw_text.export_classifier(
        model, FLAGS.vocab_file, True, FLAGS.max_seq_length, LABELS,
        os.path.join(tmp, "saved_model"))
    runners["SavedModel"] = saved_model_runner(export_dir)
    sizes_mb = {"SavedModel": directory_mb(export_dir)}
    if FLAGS.bfloat16:
        from modeling.inference import with_bfloat16_weights

        bf16_dir = raw_text.export_classifier(
            with_bfloat16_weights(model), FLAGS.vocab_file, True, FLAGS.max_seq_length, LABELS,
            os.path.join(tmp, "saved_model_bf16"))
        runners["SavedModel bf16"] = saved_model_runner(bf16_dir)
        sizes_mb["SavedModel bf16"] = directory_mb(bf16_dir)
    if FLAGS.litert:
        module = litert.text_module(convertible, FLAGS.vocab_file, True, FLAGS.max_seq_length)
        for quantization in FLAGS.litert:
            start = time.perf_counter()
            try:
                path = litert.write_litert(module, quantization,
                                           os.path.join(tmp, "litert_" + quantization),
                                           calibration)
            except ValueError as e:  # full int8 refused by its accuracy check
                print(f"LiteRT {quantization} left out: {e}")
                continue
            print(f"LiteRT {quantization}: converted in {time.perf_counter() - start:.0f} s",
                  flush=True)
            runners["LiteRT " + quantization] = litert_runner(path, FLAGS.num_threads)
            sizes_mb["LiteRT " + quantization] = os.path.getsize(path) / 1e6
    makers = {
        "onnx": ("ONNX Runtime", lambda: onnx_runner(
            os.path.dirname(onnx.write_onnx(convertible, FLAGS.vocab_file, True,
                                            FLAGS.max_seq_length, os.path.join(tmp, "onnx"))),
            FLAGS.num_threads)),
        "hf": (BASELINE, lambda: hf_runner(peer, FLAGS.vocab_file, FLAGS.max_seq_length)),
        "keras_hub": ("KerasHub", lambda: keras_hub_runner(peer, sizes, FLAGS.vocab_file,
                                                           FLAGS.max_seq_length)),
    }
    for key in FLAGS.peers:
        name, make = makers[key]
        try:
            runners[name] = make()
        except (ImportError, ValueError) as e:
            print(f"{name} left out: {e}")
    return runners, sizes_mb


def main(argv):
    del argv
    common.set_threads(FLAGS.num_threads)
    sizes = CONFIGS[FLAGS.config]
    sentences = read_sentences(FLAGS.input, FLAGS.sentences + FLAGS.calibration_sentences,
                               FLAGS.seed)
    sentences, calibration = sentences[:FLAGS.sentences], sentences[FLAGS.sentences:]
    peer = build_peer(sizes, len(LABELS), FLAGS.seed)
    model = build_ours(sizes, peer.state_dict())
    with tempfile.TemporaryDirectory() as tmp:
        runners, sizes_mb = build_runners(model, peer, sizes, calibration, tmp)
        packages = ["tensorflow", "tensorflow-text", "keras", "tokenizers", "torch",
                    "transformers", "ai-edge-litert", "onnxruntime", "tf2onnx", "keras-hub"]
        print(common.describe_machine(FLAGS.num_threads, [p for p in packages
                                                          if _installed(p)]))
        lengths = [len(s.split()) for s in sentences]
        print(f"model: {FLAGS.config} {sizes}, {len(LABELS)} labels, max_seq_length "
              f"{FLAGS.max_seq_length}; {len(sentences)} Austen sentences per round "
              f"({statistics.median(lengths)} words median, {max(lengths)} max)")
        check = sentences[:32]
        reference = runners["SavedModel"](check)
        for name, run in runners.items():
            print(f"max |p - SavedModel's| on {len(check)} sentences, {name}: "
                  f"{np.abs(run(check) - reference).max():.2e}")
        latencies, rounds = time_rounds(runners, sentences, FLAGS.batch_size, FLAGS.repeats,
                                        FLAGS.warmup)
        first_answer = predict_first_answer(os.path.join(tmp, "saved_model"), sentences[0])
    report(latencies, rounds, sizes_mb, len(sentences))
    print(f"predict.py's first answer (process start to its output, one sentence, the SavedModel;"
          f" median of {len(first_answer)}): {statistics.median(first_answer):.2f} s")


def predict_first_answer(export_dir, sentence, runs=3):
    """Seconds from starting `predict.py --model=export_dir SENTENCE` to its exit, `runs` times:
    what a one-off user waits for (Python, TensorFlow, the SavedModel's load, one call)."""
    import subprocess

    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "predict.py")
    environment = dict(os.environ, TF_NUM_INTRAOP_THREADS=str(FLAGS.num_threads),
                       TF_NUM_INTEROP_THREADS=str(FLAGS.num_threads))
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, script, f"--model={export_dir}", sentence], check=True,
                       capture_output=True, env=environment)
        seconds.append(time.perf_counter() - start)
    return seconds


def _installed(package):
    import importlib.metadata

    try:
        importlib.metadata.version(package)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def report(latencies, rounds, sizes_mb, count):
    """The table: batch-1 p50/p99 latency, batch throughput, ratios to the HF pipeline."""
    p50 = {name: np.percentile(values, 50) * 1e3 for name, values in latencies.items()}
    p99 = {name: np.percentile(values, 99) * 1e3 for name, values in latencies.items()}
    throughput = {name: count / statistics.median(values) for name, values in rounds.items()}
    print(f"\nbatch 1: {len(next(iter(latencies.values())))} calls each; batch "
          f"{FLAGS.batch_size}: median of {FLAGS.repeats} rounds after {FLAGS.warmup} warm-up")
    base = BASELINE if BASELINE in p50 else "SavedModel"
    print(f"{'contender':20s} {'size MB':>8s} {'p50 ms':>8s} {'p99 ms':>8s} "
          f"{'sent/s @' + str(FLAGS.batch_size):>11s}   {'p50 vs ' + base:>22s} "
          f"{'sent/s vs ' + base:>22s}")
    for name in latencies:
        size = f"{sizes_mb[name]:8.1f}" if name in sizes_mb else f"{'':8s}"
        print(f"{name:20s} {size} {p50[name]:8.1f} {p99[name]:8.1f} {throughput[name]:11.1f}   "
              f"{p50[base] / p50[name]:21.2f}x {throughput[name] / throughput[base]:21.2f}x")


if __name__ == "__main__":
    app.run(main)
