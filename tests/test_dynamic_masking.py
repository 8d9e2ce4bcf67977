"""Dynamic masking (run_pretraining --input_format=text|unmasked_records): the masks made in
tf.data follow create_pretraining_data's distribution on the same text (masked count per
sequence, the 80/10/10 split and its ablations, whole words, positions), pairs are made anew
each pass, and a run from text trains. Statistics in process, without a model; fixed seeds, so
nothing here can flake, with tolerances of 5 standard errors of the sample sizes."""
import collections
import random
import re
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from bert_tasks.pretraining.data import corpus, documents as documents_lib
from bert_tasks.pretraining.data import dynamic_masking
from bert_tasks.pretraining.data.instances import InstanceBuilder, MaskingRates, masked_count
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
    arrays = pairs.arrays(PASSES)
    features = pairs.features({k: tf.constant(v) for k, v in arrays.items()})
    masked = {k: v.numpy() for k, v in masker(features, tf.constant([seed, 0])).items()}
    out = []
    for i, (row, n) in enumerate(zip(arrays["input_ids"].tolist(), arrays["length"])):
        original = row[:n]
        weights = masked["masked_lm_weights"][i] > 0
        positions = masked["masked_lm_positions"][i][weights].tolist()
        assert masked["masked_lm_ids"][i][weights].tolist() == [original[p] for p in positions]
        out.append((original, masked["input_ids"][i][:n].tolist(), positions))
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


def test_the_greedy_fit_is_the_originals_loop():
    # Words in order, each taken if it still fits (create_masked_lm_predictions' loop), on
    # sizes where later, shorter words fill what a longer one left.
    rng = np.random.default_rng(0)
    size = rng.choice([0, 1, 1, 1, 2, 3, 5], size=(64, 40)).astype(np.int32)
    capacity = rng.integers(1, 21, size=64).astype(np.int32)
    taken = dynamic_masking._greedy_fit(tf.constant(size), tf.constant(capacity)).numpy()
    for row, left, got in zip(size, capacity, taken):
        expected = []
        for s in row:
            expected.append(bool(0 < s <= left))
            left -= s if expected[-1] else 0
        assert got.tolist() == expected


def test_each_pass_pairs_and_masks_anew(corpus_documents):
    documents, vocab = corpus_documents
    pairs = dynamic_masking.TextPairs(documents, vocab, SEQ, 0.1, True, 3)
    first, second = pairs.instances(0), pairs.instances(1)
    assert [i.input_ids for i in first] != [i.input_ids for i in second]
    assert pairs.instances(0) == first  # reproducible
    masker = dynamic_masking.Masker(vocab, PRED, PROB)
    batch = pairs.features({k: tf.constant(v[:32]) for k, v in pairs.arrays(1).items()})
    a, b = masker(batch, tf.constant([1, 0])), masker(batch, tf.constant([1, 1]))
    assert not np.array_equal(a["masked_lm_positions"], b["masked_lm_positions"])
    again = masker(batch, tf.constant([1, 0]))
    assert np.array_equal(a["input_ids"], again["input_ids"])


def _tiny_text_model(folder):
    """(text file, vocab file, config file): a one-sentence-per-line text whose words are each a
    token of a small vocab (two pieces for the plural, so whole words span ##s), and the tiny
    training config (one layer) at that vocab size."""
    import json
    words = ["cat", "dog", "bird", "fish", "sees", "likes", "chases", "the", "a", "big", "small",
             "red", "blue", "and", "then", "runs", "home"]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, "##s", "."]
    (folder / "vocab.txt").write_text("\n".join(tokens) + "\n")
    rng = random.Random(0)
    lines = []
    for _ in range(12):  # documents
        for _ in range(rng.randint(2, 5)):
            lines.append(" ".join(rng.choice(words) + rng.choice(["", "s"])
                                  for _ in range(rng.randint(3, 8))) + " .")
        lines.append("")
    (folder / "text.txt").write_text("\n".join(lines) + "\n")
    config = json.loads((ROOT / "tests" / "fixtures" / "modeling" / "tiny_train" /
                         "bert_config.json").read_text())
    config.update(vocab_size=len(tokens), num_hidden_layers=1)
    (folder / "bert_config.json").write_text(json.dumps(config))
    return folder / "text.txt", folder / "vocab.txt", folder / "bert_config.json"


def test_run_pretraining_trains_from_text(tmp_path):
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.pretraining.task import PretrainingTask

    text, vocab, config = _tiny_text_model(tmp_path)
    options = dynamic_masking.MaskingOptions(vocab_file=str(vocab), do_whole_word_mask=True)
    task = PretrainingTask(16, 4, None, str(text), num_train_steps=2, num_warmup_steps=0,
                           dynamic_input=dynamic_masking.DynamicInput(options, 16, 4,
                                                                      tokenizer="faithful"))
    out = tmp_path / "out"
    result = driver.run_command(task, RunConfig(
        str(out), bert_config_file=str(config), vocab_file=str(vocab), do_train=True,
        train_batch_size=4, learning_rate=1e-3, save_checkpoints_steps=2,
        iterations_per_loop=2))
    assert len(task.dynamic_input.documents) == 12  # read and tokenized once, by the task
    # Text pairs have next-sentence labels.
    assert '"next_sentence_prediction": true' in (out / "run.json").read_text()
    assert result.trainer.step == 2
    (record,) = result.trainer.history
    assert np.isfinite(record.metrics["loss"]) and record.metrics["masked_lm_loss"] > 0
    assert "next_sentence_loss" in record.metrics
    assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-2")
    assert (out / "bert_config.json").is_file()
    assert not list(out.glob("*.tf_record"))  # nothing written but the run's own files


def test_a_dynamic_format_without_vocab_is_refused():
    from absl import flags

    from bert_runner.flags import config_from_flags
    from refusals import message
    values = flags.FlagValues()
    flags.DEFINE_string("vocab_file", None, "", flag_values=values)
    flags.DEFINE_bool("do_lower_case", True, "", flag_values=values)
    flags.DEFINE_integer("random_seed", 1, "", flag_values=values)
    flags.DEFINE_integer("max_sequences_per_row", 1, "", flag_values=values)
    for name, default in (("input_format", "text"), ("do_whole_word_mask", False)):
        (flags.DEFINE_string if isinstance(default, str) else flags.DEFINE_bool)(
            name, default, "", flag_values=values)
    for name in ("masked_lm_prob", "mask_token_prob", "random_token_prob", "short_seq_prob"):
        flags.DEFINE_float(name, 0.1, "", flag_values=values)
    values(["prog"])

    def options():  # as run_pretraining.py makes them
        return config_from_flags(dynamic_masking.MaskingOptions, values)

    with pytest.raises(ValueError, match="needs --vocab_file") as refused:
        options().dynamic()
    assert message("dynamic-masking-without-vocab") in str(refused.value)
    values.input_format = "records"
    assert options().dynamic() is None
    values.max_sequences_per_row = 2  # records carry their own packing
    with pytest.raises(ValueError, match=re.escape(message("packed-dynamic-masking"))):
        options().dynamic()


@pytest.mark.parametrize("input_format, renamed, case", [
    ("text", "[MASK]", "dynamic-masking-vocab-lacks-token"),
    ("unmasked_records", "[MASK]", "dynamic-masking-vocab-lacks-token"),
    ("text", None, "dynamic-masking-vocab-unreadable"),
])
def test_a_dynamic_formats_bad_vocab_is_refused_before_the_output_dir(tmp_path, input_format,
                                                                      renamed, case):
    """The masks and pairs need [CLS], [SEP], [MASK] (and [UNK] for text): without one, the run
    died with a KeyError after output_dir held run.json and bert_config.json."""
    from pretraining_helpers import pretraining_command
    from refusals import assert_refused

    text, vocab, config = _tiny_text_model(tmp_path)
    if renamed:
        vocab.write_text(vocab.read_text().replace(renamed + "\n", renamed.lower() + "\n"))
    else:
        vocab = tmp_path / "absent" / "vocab.txt"
    out = tmp_path / "out"
    process = subprocess.run(pretraining_command(
        text, out, f"--input_format={input_format}", f"--vocab_file={vocab}", "--do_train",
        "--num_train_steps=1", "--num_warmup_steps=0", "--train_batch_size=2", config=config),
        capture_output=True, text=True, timeout=300)
    assert_refused(process, case)
    assert str(vocab) in process.stderr
    if renamed:
        assert renamed in process.stderr, process.stderr[-3000:]
    assert not out.exists()


def test_pairs_per_row_is_known_before_the_dataset_is_made(tmp_path):
    """The pairs a packed row of text holds, for the progress lines: the same asked before any
    dataset is made as counted by the dataset's own packing."""
    from bert_runner.run_config import RunConfig
    from bert_tasks.pretraining.task import PretrainingTask

    text, vocab, _ = _tiny_text_model(tmp_path)
    options = dynamic_masking.MaskingOptions(vocab_file=str(vocab), max_sequences_per_row=3)

    def settled():
        return PretrainingTask(32, 8, None, str(text), dynamic_input=dynamic_masking.DynamicInput(
            options, 32, 8, tokenizer="faithful")).settle({}, None)

    run = RunConfig(str(tmp_path / "out"), random_seed=7)
    before = settled().examples_per_row(run)
    task = settled()
    task.input_dataset([str(text)], 4, is_training=True, seed=7)
    assert task.examples_per_row(run) == before > 1


def test_only_text_needs_unk(tmp_path):
    """[UNK] is what the text's unknown words become; records already hold their ids."""
    from vocab.tokenization import VocabError
    from refusals import message

    _, vocab, _ = _tiny_text_model(tmp_path)
    vocab.write_text(vocab.read_text().replace("[UNK]\n", "[unk]\n"))
    records = dynamic_masking.MaskingOptions(input_format="unmasked_records", vocab_file=str(vocab))
    assert dynamic_masking.DynamicInput(records, 16, 4).vocab["[MASK]"] == 4
    text = dynamic_masking.MaskingOptions(input_format="text", vocab_file=str(vocab))
    with pytest.raises(VocabError, match=re.escape(message("dynamic-masking-vocab-lacks-token"))
                       + r" \[UNK\] "):
        dynamic_masking.DynamicInput(text, 16, 4)


def test_packed_text_rows_mask_each_pair_as_unpacked(corpus_documents, tmp_path):
    """--input_format=text --max_sequences_per_row: rows of several pairs, each pair masked with
    its own count (the original's rule on its own length), at its own real word-pieces; and a
    run from text trains on such rows."""
    documents, vocab = corpus_documents
    # Every pair of a shorter target length (short_seq_prob 1), in rows twice as long: room to
    # pack.
    pairs = dynamic_masking.TextPairs(documents, vocab, 2 * SEQ, 1.0, True, 3).pack(
        3, 2 * PRED, PROB)
    arrays = pairs.arrays(1)
    unpacked = dynamic_masking.TextPairs(documents, vocab, 2 * SEQ, 1.0, True, 3).arrays(1)
    assert arrays["length"].sum() == unpacked["length"].sum()  # every pair, once
    assert len(arrays["input_ids"]) < 0.8 * len(unpacked["input_ids"])
    features = pairs.features({k: tf.constant(v[:32]) for k, v in arrays.items()})
    masked = {k: np.asarray(v) for k, v in
              dynamic_masking.Masker(vocab, 2 * PRED, PROB)(features, tf.constant([1, 0])).items()}
    ids = np.asarray(features["input_ids"])
    for row in range(32):
        real = masked["masked_lm_weights"][row] > 0
        positions = masked["masked_lm_positions"][row][real]
        slots = masked["sequence_ids"][row][positions]
        for slot, length in enumerate(arrays["length"][row]):
            if not length:
                continue
            want = masked_count(length, 2 * PRED, PROB)
            assert (slots == slot + 1).sum() == want
        assert not np.isin(ids[row][positions], [vocab["[CLS]"], vocab["[SEP]"]]).any()
        np.testing.assert_array_equal(masked["masked_lm_ids"][row][real], ids[row][positions])
        starts = masked["sequence_starts"][row]
        assert (masked["position_ids"][row][starts[arrays["length"][row] > 0]] == 0).all()


@pytest.mark.large
def test_run_pretraining_trains_from_packed_text(tmp_path):
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.pretraining.task import PretrainingTask

    text, vocab, config = _tiny_text_model(tmp_path)
    options = dynamic_masking.MaskingOptions(vocab_file=str(vocab), max_sequences_per_row=3)
    task = PretrainingTask(32, 8, None, str(text), num_train_steps=2, num_warmup_steps=0,
                           dynamic_input=dynamic_masking.DynamicInput(options, 32, 8,
                                                                      tokenizer="faithful"))
    result = driver.run_command(task, RunConfig(
        str(tmp_path / "out"), bert_config_file=str(config), vocab_file=str(vocab),
        do_train=True, train_batch_size=4, learning_rate=1e-3, save_checkpoints_steps=2,
        iterations_per_loop=2))
    (record,) = result.trainer.history
    assert np.isfinite(record.metrics["loss"]) and "next_sentence_loss" in record.metrics


def test_masked_records_are_refused_as_unmasked_records(tmp_path):
    from bert_tasks.pretraining.data import pipeline
    from bert_tasks.pretraining.data.reading import InputError
    from bert_tasks.pretraining.data.validation import check_records
    from refusals import message

    options = dict(input_file=str(ROOT / "tests" / "fixtures" / "pretraining_data" /
                                  "tiny_corpus.txt"),
                   vocab_file=str(ROOT / "tests" / "fixtures" / "modeling" / "tiny" / "vocab.txt"),
                   max_seq_length=64, max_predictions_per_seq=10)
    masked, unmasked = tmp_path / "masked.tfrecord", tmp_path / "unmasked.tfrecord"
    pipeline.write_records(pipeline.Options(output_file=str(masked), **options))
    pipeline.write_records(pipeline.Options(output_file=str(unmasked), mask_token_prob=0.0,
                                            random_token_prob=0.0, **options))
    check = dict(max_seq_length=64, max_predictions_per_seq=10, vocab_size=99, unmasked=True)
    assert check_records([str(unmasked)], **check).next_sentence
    with pytest.raises(InputError, match=re.escape(message("unmasked-records-masked"))):
        check_records([str(masked)], **check)
    # As --input_format=records, both train (the unmasked ones predict visible tokens).
    check["unmasked"] = False
    for path in (masked, unmasked):
        check_records([str(path)], **check)
