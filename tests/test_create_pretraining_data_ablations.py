"""The paper's ablations in the data: masking rates (Table 8), no next sentence prediction (Table 5).

The defaults are the original's records byte for byte (test_create_pretraining_data.py); here the
other settings, on real text.
"""
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tasks.pretraining.data import pipeline
from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus
from bert_tasks.pretraining.data.documents import LineTokenizer, build_documents
from bert_tasks.pretraining.data.features import name_to_features
from bert_tasks.pretraining.data.instances import MaskingRates
from bert_tasks.pretraining.data.reading import InputError, iter_line_blocks
import vocab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_FILE = vocab.bundled_vocab_file()
MASK_ID = 103
VOCAB_SIZE = 30522


@pytest.fixture(scope="module")
def austen_corpus(tmp_path_factory):
    """The first 12 chapters of Persuasion, one sentence per line (about 240 KB)."""
    path = tmp_path_factory.mktemp("corpus") / "persuasion.txt"
    with open(os.path.join(ROOT, "data", "austen", "persuasion.txt"), encoding="utf-8") as f:
        documents = gutenberg_to_corpus(f.read()).split("\n\n")
    path.write_text("\n\n".join(documents[:13]) + "\n\n", encoding="utf-8")
    return path


def _make(corpus, output, **overrides):
    flags = dict(input_file=str(corpus), output_file=str(output), vocab_file=VOCAB_FILE,
                 dupe_factor=1)
    flags.update(overrides)
    pipeline.write_records(pipeline.Options(**flags))
    return output


def _parse(path, max_seq_length=128, max_predictions_per_seq=20, next_sentence=True):
    """All records of `path` as numpy arrays {feature: [N, ...]}."""
    spec = name_to_features(max_seq_length, max_predictions_per_seq, next_sentence)
    batch = next(iter(tf.data.TFRecordDataset(str(path)).batch(1 << 20)))
    return {k: v.numpy() for k, v in tf.io.parse_example(batch, spec).items()}


def _fates(features):
    """Counts over all masked positions: (total, became [MASK], kept their token, other)."""
    weights = features["masked_lm_weights"] > 0
    at = np.take_along_axis(features["input_ids"], features["masked_lm_positions"], 1)[weights]
    labels = features["masked_lm_ids"][weights]
    mask = int(np.sum(at == MASK_ID))
    kept = int(np.sum((at == labels) & (at != MASK_ID)))
    return len(at), mask, kept, len(at) - mask - kept


@pytest.mark.parametrize("rates,whole_word", [
    ((1.0, 0.0), False), ((0.0, 1.0), False), ((0.5, 0.25), False), ((0.6, 0.3), True),
    ((0.0, 0.0), True), ((0.8, 0.1), False)])
def test_masking_rates(tmp_path, austen_corpus, rates, whole_word):
    """Shares of [MASK] / random / kept among the masked word-pieces, within 5 binomial standard
    deviations (and, at 0% or 100%, up to the chance that a random pick is the original token
    or [MASK]: 1 in 30522 each). Whole-word masking decides per word-piece too."""
    mask_prob, random_prob = rates
    features = _parse(_make(austen_corpus, tmp_path / "out.tfrecord", mask_token_prob=mask_prob,
                            random_token_prob=random_prob, do_whole_word_mask=whole_word,
                            dupe_factor=2))
    total, mask, kept, other = _fates(features)
    assert total > 15000
    # A random pick equal to the original token counts as kept, one that is [MASK] as [MASK].
    chance = random_prob / VOCAB_SIZE
    expected = {"mask": mask_prob + chance, "kept": 1 - mask_prob - random_prob + chance,
                "random": random_prob * (1 - 2.0 / VOCAB_SIZE)}
    for name, count in (("mask", mask), ("kept", kept), ("random", other)):
        p = expected[name]
        tolerance = 5 * math.sqrt(p * (1 - p) / total) + 3.0 / total
        assert abs(count / total - p) <= tolerance, (name, count, total, p)


def test_default_rates_keep_the_original_thresholds():
    """(1 - 0.8 - 0.1) / (1 - 0.8) is not 0.5 in floating point; the original compares with 0.5."""
    assert MaskingRates(0.8, 0.1).keep_threshold == 0.5
    assert MaskingRates(1.0, 0.0).keep_threshold == 1.0
    assert MaskingRates(0.5, 0.25).keep_threshold == 0.5
    with pytest.raises(ValueError, match="sum at most 1"):
        MaskingRates(0.9, 0.2)


@pytest.mark.parametrize("overrides,message", [
    ({"mask_token_prob": 1.2}, r"--mask_token_prob=1.2: must be in \[0, 1\]"),
    ({"random_token_prob": -0.1}, r"--random_token_prob=-0.1: must be in \[0, 1\]"),
    ({"mask_token_prob": 0.9, "random_token_prob": 0.2}, "is more than 1"),
])
def test_bad_masking_rates_fail_before_any_work(tmp_path, austen_corpus, overrides, message):
    with pytest.raises(InputError, match=message):
        _make(austen_corpus, tmp_path / "out.tfrecord", **overrides)
    assert os.listdir(tmp_path) == []


def _document_streams(corpus):
    """Each non-empty document of `corpus` as one string of its token ids (' 1 2 3 ')."""
    documents, _ = build_documents(iter_line_blocks([str(corpus)]),
                                   LineTokenizer(VOCAB_FILE, True, "faithful"))
    return [" %s " % " ".join(str(i) for sentence in d for i in sentence) for d in documents if d]


def _segments(features, k):
    """Record k's A and B (B empty for a single segment) as id strings (' 1 2 '); its length."""
    length = int(features["input_mask"][k].sum())
    ids, segments = features["input_ids"][k][:length], features["segment_ids"][k][:length]
    num_a = int(np.sum(segments == 0)) - 2  # [CLS] A [SEP]
    a, b = ids[1:num_a + 1], ids[num_a + 2:length - 1]
    return " %s " % " ".join(map(str, a)), " %s " % " ".join(map(str, b)), length


def _continues(streams, a, b):
    """Whether some document holds A and, after it, B (both possibly truncated at either end)."""
    for stream in streams:
        start = stream.find(a)
        if start >= 0 and (b == "  " or stream.find(b, start + len(a) - 1) >= 0):
            return True
    return False


def test_no_next_sentence_pairs_are_contiguous_text(tmp_path, data_dir):
    """--next_sentence_prediction=false: no label feature, and B always follows A in A's own
    document (checked on unmasked records: 0% [MASK], 0% random). With next sentence prediction
    the same check fails for random-next pairs, so it can fail."""
    corpus = data_dir / "corpus.txt"
    streams = _document_streams(corpus)
    unmasked = dict(mask_token_prob=0.0, random_token_prob=0.0, dupe_factor=3,
                    max_seq_length=64, max_predictions_per_seq=10, short_seq_prob=0.3)
    no_nsp = _make(corpus, tmp_path / "no_nsp.tfrecord", next_sentence_prediction=False,
                   **unmasked)
    example = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(str(no_nsp)))).numpy())
    assert "next_sentence_labels" not in example.features.feature
    features = _parse(no_nsp, 64, 10, next_sentence=False)
    single = 0
    for k in range(len(features["input_ids"])):
        a, b, length = _segments(features, k)
        assert _continues(streams, a, b), "record %d: B does not continue A" % k
        single += b == "  "
        assert length <= 64
    assert 0 < single < len(features["input_ids"]) / 2  # one-sentence chunks: [CLS] A [SEP]

    with_nsp = _parse(_make(corpus, tmp_path / "nsp.tfrecord", **unmasked), 64, 10)
    labels = with_nsp["next_sentence_labels"][:, 0]
    continues = [_continues(streams, *_segments(with_nsp, k)[:2]) for k in range(len(labels))]
    assert all(c for c, label in zip(continues, labels) if label == 0)
    assert sum(not c for c, label in zip(continues, labels) if label == 1) > 0.8 * labels.sum()


def test_no_next_sentence_same_for_any_workers(tmp_path, austen_corpus):
    one = _make(austen_corpus, tmp_path / "one.tfrecord", next_sentence_prediction=False,
                chunk_size_mb=0.05)
    two = _make(austen_corpus, tmp_path / "two.tfrecord", next_sentence_prediction=False,
                chunk_size_mb=0.05, num_workers=2)
    assert one.read_bytes() == two.read_bytes()


@pytest.fixture(scope="module")
def data_dir(fixtures_dir):
    return fixtures_dir / "pretraining_data"
