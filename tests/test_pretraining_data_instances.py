"""InstanceBuilder against the original's component outputs (fixtures/pretraining_data/unit_cases.json).

Every case is run; random-number consumption is checked call by call where the fixture has a trace
and through the next `random()` value where it has that.
"""
import json
import random

import pytest

from bert_tasks.pretraining.data import instances
from bert_tasks.pretraining.data.instances import InstanceBuilder, shuffle, truncate_seq_pair
import vocab
from vocab import tokenization

VOCAB_FILE = vocab.bundled_vocab_file()


@pytest.fixture(scope="module")
def cases(fixtures_dir):
    with open(fixtures_dir / "pretraining_data" / "unit_cases.json") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def vocab():
    return tokenization.load_vocab(VOCAB_FILE)


def _builder(vocab, max_seq_length=128, short_seq_prob=0.1, masked_lm_prob=0.15,
             max_predictions_per_seq=20, do_whole_word_mask=False):
    return InstanceBuilder(vocab, max_seq_length, short_seq_prob, masked_lm_prob,
                           max_predictions_per_seq, do_whole_word_mask)


class TracingRandom(object):
    """Delegates to random.Random and records the public calls as the fixture's rng_trace does.

    `instances.shuffle` is patched to call `TracingRandom.shuffle` (see `tracing`).
    """

    def __init__(self, seed):
        self._rng = random.Random(seed)
        self.trace = []

    def random(self):
        value = self._rng.random()
        self.trace.append(["random", value])
        return value

    def randint(self, a, b):
        value = self._rng.randint(a, b)
        self.trace.append(["randint", a, b, value])
        return value

    def shuffle(self, x):
        self.trace.append(["shuffle", "len=%d" % len(x), None])
        shuffle(x, self._rng)


@pytest.fixture
def tracing(monkeypatch):
    """TracingRandom factory; the builder's inlined shuffle is routed through it."""
    monkeypatch.setattr(instances, "shuffle", lambda x, rng: rng.shuffle(x))
    return TracingRandom


def test_shuffle_is_random_shuffle():
    """The inlined Fisher-Yates draws what this interpreter's random.Random.shuffle draws."""
    ours, reference = random.Random(7), random.Random(7)
    for n in list(range(0, 70)) + [127, 128, 129, 1023, 1024, 1025, 5000]:
        a, b = list(range(n)), list(range(n))
        shuffle(a, ours)
        reference.shuffle(b)
        assert a == b
    assert ours.random() == reference.random()


def _decode(instance, inv_vocab):
    return {
        "tokens": [inv_vocab[i] for i in instance.input_ids],
        "segment_ids": instance.segment_ids,
        "is_random_next": instance.is_random_next,
        "masked_lm_positions": instance.masked_lm_positions,
        "masked_lm_labels": [inv_vocab[i] for i in instance.masked_lm_ids],
    }


def _inverse(vocab):
    return {i: t for t, i in vocab.items()}


def test_create_masked_lm_predictions_all_cases(cases, vocab):
    inv_vocab = _inverse(vocab)
    assert len(cases["create_masked_lm_predictions"]) == 36
    for case in cases["create_masked_lm_predictions"]:
        builder = _builder(vocab, masked_lm_prob=case["masked_lm_prob"],
                           max_predictions_per_seq=case["max_predictions_per_seq"],
                           do_whole_word_mask=case["do_whole_word_mask"])
        tokens = [vocab[t] for t in case["tokens"]]
        num_a = tokens.index(vocab["[SEP]"]) - 1
        rng = random.Random(case["seed"])
        positions, labels = builder.create_masked_lm_predictions(tokens, num_a, rng)
        assert [inv_vocab[i] for i in tokens] == case["output_tokens"], case
        assert positions == case["masked_lm_positions"]
        assert [inv_vocab[i] for i in labels] == case["masked_lm_labels"]
        assert rng.random() == case["rng_next_random_after"]


def test_truncate_seq_pair_all_cases(cases):
    for case in cases["truncate_seq_pair"]:
        a = ["a%d" % i for i in range(case["tokens_a_in"])]
        b = ["b%d" % i for i in range(case["tokens_b_in"])]
        a_start, a_stop, b_start, b_stop = truncate_seq_pair(
            len(a), len(b), case["max_num_tokens"], random.Random(case["seed"]))
        assert a[a_start:a_stop] == case["tokens_a"]
        assert b[b_start:b_stop] == case["tokens_b"]


def test_create_instances_from_document_all_cases(cases, vocab, tracing):
    inv_vocab = _inverse(vocab)
    fixture = cases["create_instances_from_document"]
    documents = [[[vocab[t] for t in sentence] for sentence in doc]
                 for doc in fixture["all_documents"]]
    for case in fixture["cases"]:
        builder = _builder(vocab, case["max_seq_length"], case["short_seq_prob"],
                           case["masked_lm_prob"], case["max_predictions_per_seq"])
        rng = tracing(case["seed"])
        made = builder.create_instances_from_document(documents, case["document_index"], rng)
        assert [_decode(x, inv_vocab) for x in made] == case["instances"], case["seed"]
        assert rng.trace == case["rng_trace"]


def test_create_training_instances_tiny_with_rng_trace(cases, fixtures_dir, tracing):
    """The whole reading + instance path on tiny_corpus.txt, with every rng call checked."""
    from bert_tasks.pretraining.data.documents import LineTokenizer, build_documents
    from bert_tasks.pretraining.data.reading import iter_line_blocks

    case = cases["create_training_instances_tiny"]
    tokenizer = LineTokenizer(VOCAB_FILE, True, "faithful")
    documents, _ = build_documents(
        iter_line_blocks([str(fixtures_dir / "pretraining_data" / case["input_file"])]), tokenizer)
    builder = _builder(tokenizer.vocab, case["max_seq_length"], case["short_seq_prob"],
                       case["masked_lm_prob"], case["max_predictions_per_seq"],
                       case["do_whole_word_mask"])
    rng = tracing(case["random_seed"])
    made = builder.create_training_instances(documents, case["dupe_factor"], rng)
    inv_vocab = _inverse(tokenizer.vocab)
    assert [_decode(x, inv_vocab) for x in made] == case["instances"]
    assert rng.trace == case["rng_trace"]


def test_random_replacement_maps_through_duplicate_vocab_entries():
    """With a duplicated vocab line the original draws from list(vocab) and maps back by name."""
    # "x" is on lines 5 and 6 of the file: the key keeps its place, the later id wins.
    vocab = {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[MASK]": 3, "x": 5, "y": 6}
    builder = _builder(vocab)
    assert builder.replacement_ids == [0, 1, 2, 3, 5, 6]


def test_banker_rounding_of_mask_count(vocab):
    """round(70 * 0.15) = round(10.5) = 10 (half to even), as Python 3's round in the original."""
    builder = _builder(vocab, max_predictions_per_seq=20)
    tokens = [vocab["[CLS]"]] + [vocab["the"]] * 33 + [vocab["[SEP]"]] + [vocab["the"]] * 34 + [
        vocab["[SEP]"]]
    assert len(tokens) == 70
    positions, _ = builder.create_masked_lm_predictions(tokens, 33, random.Random(0))
    assert len(positions) == 10
