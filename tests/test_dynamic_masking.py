"""Dynamic masking (run_pretraining --input_format=text|unmasked_records): the masks made in
tf.data follow create_pretraining_data's distribution on the same text (masked count per
sequence, the 80/10/10 split and its ablations, whole words, positions), pairs are made anew
each pass, and a run from text trains. Statistics in process, without a model; fixed seeds, so
nothing here can flake, with tolerances of 5 standard errors of the sample sizes."""
import collections
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tasks.pretraining.data import corpus, documents as documents_lib
from bert_tasks.pretraining.data import dynamic_masking
from bert_tasks.pretraining.data.instances import InstanceBuilder, MaskingRates
from conftest import ROOT

VOCAB = str(ROOT / "vocab" / "uncased_L-12_H-768_A-12" / "vocab.txt")
SEQ, PRED, PROB = 64, 10, 0.15
PASSES = 2
SIGMAS = 5.0


@pytest.fixture(scope="module")
def corpus_documents():
    """(documents of token ids, vocab) of the first 1,500 lines of Persuasion's corpus."""
    text = (ROOT / "data" / "austen" / "persuasion.txt").read_text(encoding="utf-8")
    lines = corpus.gutenberg_to_corpus(text).splitlines()[:1500]
    tokenizer = documents_lib.LineTokenizer(VOCAB, True, "faithful")
    documents, _ = documents_lib.build_documents([lines], tokenizer)
    return documents, tokenizer.vocab


_RECORD_STATS = {}


def _record_stats(documents, vocab, whole_word, rates):
    """`_stats` of the record path, computed once per setting."""
    key = (whole_word, rates)
    if key not in _RECORD_STATS:
        _RECORD_STATS[key] = _stats(_record_path(documents, vocab, whole_word, rates), vocab,
                                    whole_word)
    return _RECORD_STATS[key]


def _record_path(documents, vocab, whole_word, rates, seed=1):
    """create_pretraining_data's instances (its own masking) as arrays."""
    builder = InstanceBuilder(vocab, SEQ, 0.1, PROB, PRED, whole_word, rates)
    instances = builder.create_training_instances(
        [list(d) for d in documents], PASSES, random.Random(seed))
    originals = []
    for inst in instances:  # the unmasked ids: labels back at their positions
        ids = list(inst.input_ids)
        for position, label in zip(inst.masked_lm_positions, inst.masked_lm_ids):
            ids[position] = label
        originals.append(ids)
    return [(orig, inst.input_ids, inst.masked_lm_positions) for orig, inst
            in zip(originals, instances)]


def _dynamic_path(documents, vocab, whole_word, rates, seed=1):
    """Pairs of `TextPairs`, masked by `Masker` in TensorFlow, as the same triples."""
    pairs = dynamic_masking.TextPairs(documents, vocab, SEQ, 0.1, True, seed)
    masker = dynamic_masking.Masker(vocab, PRED, PROB, whole_word, rates)
    out = []
    for epoch in range(PASSES):
        instances = pairs.instances(epoch)
        batch = pairs._arrays(instances, SEQ)
        masked = {k: v.numpy() for k, v in masker(
            {k: tf.constant(v) for k, v in batch.items()}, tf.constant([seed, epoch])).items()}
        for i, inst in enumerate(instances):
            n = len(inst.input_ids)
            weights = masked["masked_lm_weights"][i] > 0
            positions = masked["masked_lm_positions"][i][weights].tolist()
            assert masked["masked_lm_ids"][i][weights].tolist() == [
                inst.input_ids[p] for p in positions]
            out.append((inst.input_ids, masked["input_ids"][i][:n].tolist(), positions))
    return out


def _stats(samples, vocab, whole_word):
    """Counts of what the masks did, over all `samples` (original ids, masked ids, positions)."""
    mask_id = vocab["[MASK]"]
    subword = {i for w, i in vocab.items() if w.startswith("##")}
    s = collections.Counter()
    relative = []
    for original, masked, positions in samples:
        n = len(original)
        s["sequences"] += 1
        s["masked"] += len(positions)
        s["fraction_sum"] += len(positions) / n
        s["fraction_sq"] += (len(positions) / n) ** 2
        s["full"] += len(positions) == min(PRED, max(1, round(n * PROB)))
        for p in positions:
            s["mask" if masked[p] == mask_id else "kept" if masked[p] == original[p]
              else "random"] += 1
            relative.append(p / n)
        unchosen = set(range(n)) - set(positions)
        assert all(masked[p] == original[p] for p in unchosen)
        assert all(original[p] not in (vocab["[CLS]"], vocab["[SEP]"]) for p in positions)
        if whole_word:  # every word is masked whole or not at all
            chosen = set(positions)
            words = s["words"]
            for p in positions:
                s["words"] += original[p] not in subword or p - 1 not in chosen
                if p + 1 < n and original[p + 1] in subword:
                    assert p + 1 in chosen, (original, positions)
            assert s["words"] > words
    s["relative"] = np.histogram(relative, bins=8, range=(0, 1))[0]
    return s


def _close_proportions(k1, n1, k2, n2):
    """|p1 - p2| within SIGMAS standard errors of the difference of two binomial proportions."""
    p = (k1 + k2) / (n1 + n2)
    se = np.sqrt(p * (1 - p) * (1 / n1 + 1 / n2))
    assert abs(k1 / n1 - k2 / n2) <= SIGMAS * se + 1e-12, (k1, n1, k2, n2)


def _compare(record, dynamic, whole_word):
    # Masked fraction per sequence: mean within SIGMAS standard errors.
    means, variances = [], []
    for s in (record, dynamic):
        mean = s["fraction_sum"] / s["sequences"]
        means.append(mean)
        variances.append(s["fraction_sq"] / s["sequences"] - mean ** 2)
    # The passes pair the same documents again: count one pass's sequences as the sample size.
    se = np.sqrt(PASSES * (variances[0] / record["sequences"] + variances[1] / dynamic["sequences"]))
    assert abs(means[0] - means[1]) <= SIGMAS * se, (means, se)
    # Sequences that got their full number of masks (all of them without whole words).
    if not whole_word:
        assert dynamic["full"] == dynamic["sequences"] and record["full"] == record["sequences"]
    else:
        _close_proportions(record["full"], record["sequences"], dynamic["full"],
                           dynamic["sequences"])
        _close_proportions(record["words"], record["masked"], dynamic["words"], dynamic["masked"])
    for fate in ("mask", "kept", "random"):
        _close_proportions(record[fate], record["masked"], dynamic[fate], dynamic["masked"])
    for k1, k2 in zip(record["relative"], dynamic["relative"]):
        _close_proportions(k1, record["masked"], k2, dynamic["masked"])


@pytest.mark.parametrize("whole_word,rates", [
    (False, MaskingRates()), (True, MaskingRates()), (False, MaskingRates(0.5, 0.3))],
    ids=["80-10-10", "whole-word", "50-30-20"])
def test_masks_follow_create_pretraining_datas_distribution(corpus_documents, whole_word, rates):
    documents, vocab = corpus_documents
    record = _record_stats(documents, vocab, whole_word, rates)
    dynamic = _stats(_dynamic_path(documents, vocab, whole_word, rates), vocab, whole_word)
    assert record["masked"] > 5000 and dynamic["masked"] > 5000
    _compare(record, dynamic, whole_word)
    # The shares are the flags' (the record path's own check of the same counts).
    total = dynamic["masked"]
    for fate, share in (("mask", rates.mask), ("random", rates.random)):
        se = np.sqrt(share * (1 - share) / total)
        assert abs(dynamic[fate] / total - share) <= SIGMAS * se + 1e-3, (fate, dynamic[fate])


def test_a_different_distribution_is_told_apart(corpus_documents):
    # The comparison can fail: masks drawn at 20% against the record path's 15%.
    documents, vocab = corpus_documents
    record = _record_stats(documents, vocab, False, MaskingRates())
    global PROB
    saved, PROB = PROB, 0.2
    try:
        dynamic = _stats(_dynamic_path(documents, vocab, False, MaskingRates()), vocab, False)
    finally:
        PROB = saved
    with pytest.raises(AssertionError):
        _compare(record, dynamic, False)


def test_each_pass_pairs_and_masks_anew(corpus_documents):
    documents, vocab = corpus_documents
    pairs = dynamic_masking.TextPairs(documents, vocab, SEQ, 0.1, True, 3)
    first, second = pairs.instances(0), pairs.instances(1)
    assert [i.input_ids for i in first] != [i.input_ids for i in second]
    assert pairs.instances(0) == first  # reproducible
    masker = dynamic_masking.Masker(vocab, PRED, PROB)
    batch = {k: tf.constant(v) for k, v in pairs._arrays(first[:32], SEQ).items()}
    a, b = masker(batch, tf.constant([1, 0])), masker(batch, tf.constant([1, 1]))
    assert not np.array_equal(a["masked_lm_positions"], b["masked_lm_positions"])
    again = masker(batch, tf.constant([1, 0]))
    assert np.array_equal(a["input_ids"], again["input_ids"])
