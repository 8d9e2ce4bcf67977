r"""Serving throughput on CPU: our raw-text SavedModel against the Hugging Face text-classification
pipeline (PyTorch), same model size, same weights, same sentences, one process.

    python bench/serving.py                          # BERT-Base, seq 128, 2 labels, batch 1 and 32
    python bench/serving.py --config=tiny --repeats=2 --sentences=32   # smoke run

Contenders (both: raw strings in, the two class probabilities out, truncation to --max_seq_length):
  ours   `export_model.py`'s SavedModel (bert_runner.export: tf.text tokenizer, packing, BertClassifier,
         softmax in one graph), loaded with `tf.saved_model.load`, called through its
         `serving_default` signature with a string tensor of the batch.
  peer   `transformers.pipeline("text-classification")` with `BertForSequenceClassification`
         (eval mode, default SDPA attention) and `BertTokenizerFast` on the same vocab, called
         with the list of sentences and `batch_size`.
Both hold the same random BERT weights (the peer's are copied into ours) and the tanh GELU of
the original release (the peer's `gelu_new`); the probabilities are compared before timing.

Input: sentences of the Austen novels in `data/austen/` (paragraphs split after . ! ?), shuffled
with --seed. Each timed round classifies the same --sentences sentences at every batch size, in
turns (ours, peer) so that load from other processes hits both alike; the figures are medians of
--repeats rounds after --warmup untimed rounds. Threads: --num_threads intra-op for TensorFlow and
torch (and the peer's Rust tokenizer), as many inter-op threads in both (`common.set_threads`).
"""
import glob
import os
import sys

# Thread settings must be in place before the libraries start their pools.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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

flags.DEFINE_enum("config", "base", sorted(CONFIGS),
                  "Encoder shape (512 positions, 2 token types).")
flags.DEFINE_string("input", "data/austen/*.txt", "Glob of UTF-8 text files, paragraphs separated "
                    "by blank lines.")
flags.DEFINE_string("vocab_file", "vocab/uncased_L-12_H-768_A-12/vocab.txt",
                    "Uncased WordPiece vocab.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length limit (truncation) of both.")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Sentences per call.")
flags.DEFINE_integer("sentences", 64, "Sentences classified per round at each batch size.")
flags.DEFINE_integer("repeats", 5, "Timed rounds; every row reports its median.")
flags.DEFINE_integer("warmup", 1, "Untimed rounds before them.")
flags.DEFINE_integer("num_threads", os.cpu_count(), "Intra-op and inter-op threads of both "
                     "(and of the peer's tokenizer).")
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
    from modeling.hf_checkpoint import hf_name
    from modeling.tf1_checkpoint import variable_map

    model = BertClassifier(BertConfig(**sizes, vocab_size=30522, max_position_embeddings=512,
                                      type_vocab_size=2, hidden_act="gelu"), len(LABELS))
    for tf1, variable in variable_map(model).items():
        name, transpose = hf_name(tf1)
        value = peer_state[name].numpy()
        variable.assign(value.T if transpose else value)
    return model


def our_runner(export_dir):
    """Batch (list of str) -> probabilities [N, 2], through the loaded SavedModel's signature."""
    import tensorflow as tf

    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    return lambda texts: serve(text_a=tf.constant(texts))["probabilities"].numpy()


def peer_runner(peer, vocab_file, max_seq_length):
    """Batch (list of str) -> probabilities [N, 2], through the Hugging Face pipeline."""
    import transformers

    tokenizer = transformers.BertTokenizerFast(vocab=vocab_file, do_lower_case=True)
    pipe = transformers.pipeline("text-classification", model=peer, tokenizer=tokenizer,
                                 device="cpu", top_k=None)

    def run(texts):
        results = pipe(texts, batch_size=len(texts), truncation=True, max_length=max_seq_length)
        return np.array([[s["score"] for s in sorted(r, key=lambda s: s["label"])]
                         for r in results])

    return run


def time_rounds(runners, sentences, batch_sizes, repeats, warmup):
    """`{(batch size, name): [seconds per round]}`; each round classifies every sentence."""
    times = {(b, name): [] for b in batch_sizes for name in runners}
    for round_index in range(warmup + repeats):
        for b in batch_sizes:
            for name, run in runners.items():
                start = time.perf_counter()
                for i in range(0, len(sentences), b):
                    run(sentences[i:i + b])
                if round_index >= warmup:
                    times[b, name].append(time.perf_counter() - start)
    return times


def main(argv):
    del argv
    from bert_runner import export

    batch_sizes = [int(b) for b in FLAGS.batch_sizes]
    common.set_threads(FLAGS.num_threads)
    sizes = CONFIGS[FLAGS.config]
    sentences = read_sentences(FLAGS.input, FLAGS.sentences, FLAGS.seed)
    peer = build_peer(sizes, len(LABELS), FLAGS.seed)
    model = build_ours(sizes, peer.state_dict())
    with tempfile.TemporaryDirectory() as tmp:
        export_dir = export.export_classifier(model, FLAGS.vocab_file, True, FLAGS.max_seq_length,
                                              LABELS, os.path.join(tmp, "1"))
        runners = {"ours": our_runner(export_dir),
                   "peer": peer_runner(peer, FLAGS.vocab_file, FLAGS.max_seq_length)}
        print(common.describe_machine(FLAGS.num_threads, (
            "tensorflow", "tensorflow-text", "keras", "tokenizers", "torch", "transformers")))
        lengths = [len(s.split()) for s in sentences]
        print(f"model: {FLAGS.config} {sizes}, {len(LABELS)} labels, max_seq_length "
              f"{FLAGS.max_seq_length}; {len(sentences)} Austen sentences per round "
              f"({statistics.median(lengths)} words median, {max(lengths)} max)")
        check = sentences[:32]
        diff = np.abs(runners["ours"](check) - runners["peer"](check)).max()
        print(f"max |ours - peer| probability on {len(check)} sentences: {diff:.2e}")
        times = time_rounds(runners, sentences, batch_sizes, FLAGS.repeats, FLAGS.warmup)

    print(f"\nmedian of {FLAGS.repeats} rounds after {FLAGS.warmup} warm-up round(s)")
    print(f"{'batch':>5s}  {'contender':9s} {'s/round':>8s} {'sentences/s':>12s} {'vs peer':>8s}")
    for b in batch_sizes:
        peer_median = statistics.median(times[b, "peer"])
        for name in runners:
            median = statistics.median(times[b, name])
            ratio = f"{peer_median / median:7.2f}x" if name != "peer" else ""
            print(f"{b:5d}  {name:9s} {median:8.3f} {len(sentences) / median:12.1f} {ratio:>8s}")


if __name__ == "__main__":
    app.run(main)
