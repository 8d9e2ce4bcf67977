"""bert_tasks.ner.conlleval: conlleval.pl's chunk logic and report, and agreement with seqeval (test-only
dependency, tests/requirements.txt) on many random IOB1 and IOB2 sequences."""
import collections
import random
import warnings

import pytest
from seqeval.metrics import accuracy_score, classification_report
from seqeval.metrics.sequence_labeling import get_entities

from bert_tasks.ner import conlleval

TYPES = ["LOC", "MISC", "ORG", "PER"]


def _random_gold(rng, scheme, length):
    """Tags of random entity spans in `scheme` (IOB1: chunks start with I-, B- only between two
    adjacent chunks of one type)."""
    tags = []
    prev_type = None
    while len(tags) < length:
        if rng.random() < 0.4:
            tags.append("O")
            prev_type = None
            continue
        chunk_type = rng.choice(TYPES)
        size = min(rng.randint(1, 4), length - len(tags))
        first = "B" if scheme == "IOB2" or prev_type == chunk_type else "I"
        tags += [first + "-" + chunk_type] + ["I-" + chunk_type] * (size - 1)
        prev_type = chunk_type
    return tags


def _noisy(rng, tags):
    """A plausible tagger's output: some tags replaced by any tag (I- after O included)."""
    all_tags = ["O"] + ["%s-%s" % (p, t) for p in "BI" for t in TYPES]
    return [rng.choice(all_tags) if rng.random() < 0.25 else tag for tag in tags]


def _seqeval_by_type(sentences):
    counts = collections.Counter()
    for chunk_type, _, _ in get_entities(sentences):
        counts[chunk_type] += 1
    return counts


@pytest.mark.parametrize("scheme", ["IOB1", "IOB2"])
def test_agrees_with_seqeval_on_random_sequences(scheme):
    rng = random.Random(scheme)
    compared = 0
    for _ in range(400):
        gold = [_random_gold(rng, scheme, rng.randint(1, 15)) for _ in range(rng.randint(1, 6))]
        predicted = [_noisy(rng, tags) for tags in gold]
        counts = conlleval.count_sequences(gold, predicted)
        ours = conlleval.metrics(counts)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = classification_report(gold, predicted, output_dict=True, zero_division=0)

        assert dict(counts.found_correct_by_type) == _seqeval_by_type(gold)
        assert dict(counts.found_guessed_by_type) == _seqeval_by_type(predicted)
        assert ours["overall"]["accuracy"] == pytest.approx(
            100 * accuracy_score(gold, predicted), abs=1e-9)
        assert set(ours["by_type"]) == set(theirs) - {"micro avg", "macro avg", "weighted avg"}
        pairs = [(ours["by_type"][t], theirs[t]) for t in ours["by_type"]]
        if counts.found_correct or counts.found_guessed:
            pairs.append((ours["overall"], theirs["micro avg"]))
        for mine, other in pairs:
            assert mine["precision"] == pytest.approx(100 * other["precision"], abs=1e-9)
            assert mine["recall"] == pytest.approx(100 * other["recall"], abs=1e-9)
            assert mine["f1"] == pytest.approx(100 * other["f1-score"], abs=1e-9)
            compared += 1
    assert compared > 1000


def test_iob1_and_iob2_of_the_same_chunks_score_100():
    gold = [["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]]
    predicted = [["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG"]]
    scores = conlleval.metrics(conlleval.count_sequences(gold, predicted))
    assert scores["overall"]["f1"] == 100.0
    assert {t: s["found_correct"] for t, s in scores["by_type"].items()} == {
        "PER": 2, "LOC": 1, "ORG": 1}


def test_chunk_rules():
    def chunks(tags):
        return conlleval.count_sequences([tags], [tags]).found_correct

    assert chunks(["O", "I-PER", "I-PER"]) == 1  # I- after O starts a chunk
    assert chunks(["B-PER", "I-LOC"]) == 2  # a type change starts one
    assert chunks(["I-PER", "E-PER", "I-PER", "E-PER"]) == 2  # IOE: E then I
    assert chunks(["[-PER", "]-PER"]) == 2  # brackets are one-token chunks
    # A sentence boundary ends a chunk: two chunks, not one.
    assert conlleval.count_sequences([["I-PER"], ["I-PER"]], [["O"], ["O"]]).found_correct == 2


def test_correct_needs_the_same_end():
    counts = conlleval.count_sequences([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])
    assert (counts.found_correct, counts.found_guessed, counts.correct_chunks) == (1, 1, 0)
    assert counts.correct_tags == 2 and counts.tokens == 3


def test_report_is_conllevals_text():
    lines = [
        "-DOCSTART- -X- O O\n", "\n",
        "John NNP B-PER B-PER\n", "Smith NNP I-PER I-PER\n", "visited VBD O O\n",
        "New NNP B-LOC B-ORG\n", "York NNP I-LOC I-ORG\n", "\n",
        "Paris NNP B-LOC B-LOC\n",
    ]
    counts = conlleval.count_lines(lines)
    # 7 tokens (the -DOCSTART- line counts), 3 gold chunks, 3 found, 2 correct; 5 tags right.
    assert conlleval.report(counts) == (
        "processed 7 tokens with 3 phrases; found: 3 phrases; correct: 2.\n"
        "accuracy:  71.43%; precision:  66.67%; recall:  66.67%; FB1:  66.67\n"
        "              LOC: precision: 100.00%; recall:  50.00%; FB1:  66.67  1\n"
        "              ORG: precision:   0.00%; recall:   0.00%; FB1:   0.00  1\n"
        "              PER: precision: 100.00%; recall: 100.00%; FB1: 100.00  1\n")


def test_boundary_line_and_perl_split():
    # "-X-" as first column is a boundary whatever its tags; columns are split on single spaces.
    counts = conlleval.count_lines(["a x B-PER B-PER", "-X- x I-PER I-PER", "b x I-PER I-PER"])
    assert (counts.tokens, counts.found_correct, counts.correct_chunks) == (2, 2, 2)
    with pytest.raises(ValueError, match=r"f.txt:2: unexpected number of features: 5 \(4\)"):
        conlleval.count_lines(["a x O O", "b  x O O"], source="f.txt")
    with pytest.raises(ValueError, match="f.txt:1: unexpected number of features in line"):
        conlleval.count_lines(["a"], source="f.txt")


def test_command_line(tmp_path, capsys):
    path = tmp_path / "pred.txt"
    path.write_text("a B-PER B-PER\nb O B-LOC\n\n", encoding="utf-8")
    assert conlleval.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("processed 2 tokens with 1 phrases; found: 2 phrases; correct: 1.\n")
    assert "              LOC: precision:   0.00%; recall:   0.00%; FB1:   0.00  1\n" in out
    path.write_text("a B-PER B-PER\nb O\n", encoding="utf-8")
    assert conlleval.main([str(path)]) == 1
    assert "pred.txt:2: unexpected number of features" in capsys.readouterr().err
