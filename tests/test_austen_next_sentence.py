"""The demo's next-sentence choice task (`demo_data.next_sentence`, SWAG layout): the true
ending is the sentence that follows the context in the novel, at a random position; the distractors are sentences of the other novel;
the splits come from different chapters, so nothing a model remembers from training is on dev;
sentences the classifier trains on are left out."""
import csv
import io

import pytest

from demo_data import TASK_NOVELS, read_novel
from demo_data.next_sentence import SWAG_HEADER, next_sentence_choice_csvs
from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus

COUNTS = (60, 20, 20)


def _rows(text):
    return list(csv.DictReader(io.StringIO(text)))


def _chapters(novel):
    return gutenberg_to_corpus(read_novel(novel)).split("\n\n")


@pytest.fixture(scope="module")
def novels():
    """{novel: (corpus text, set of its sentences)}."""
    out = {}
    for novel in TASK_NOVELS:
        text = "\n\n".join(_chapters(novel))
        out[novel] = (text, set(text.split("\n")))
    return out


@pytest.fixture(scope="module")
def task():
    # Leave out the first sentences the full-size task would use, as the demo leaves out the
    # classifier's.
    full, _ = next_sentence_choice_csvs(COUNTS)
    excluded = {row["ending0"] for row in _rows(full["train.csv"])[:10]}
    texts, test_labels = next_sentence_choice_csvs(COUNTS, excluded)
    return texts, test_labels, excluded


def test_layout_and_labels(task):
    texts, test_labels, _ = task
    assert sorted(texts) == ["test.csv", "train.csv", "val.csv"]
    for name, count in zip(("train.csv", "val.csv", "test.csv"), COUNTS):
        header = next(csv.reader(io.StringIO(texts[name])))
        assert header == (SWAG_HEADER[:-1] if name == "test.csv" else SWAG_HEADER)
        rows = _rows(texts[name])
        assert len(rows) == count
        assert all(row["sent2"] == "" and row["startphrase"] == row["sent1"] for row in rows)
    labels = [int(row["label"]) for row in _rows(texts["train.csv"])]
    # The true ending's position is drawn at random: every position occurs.
    assert set(labels) == {0, 1, 2, 3}
    assert len(test_labels) == COUNTS[2] and set(test_labels) <= {0, 1, 2, 3}
    # Same arguments, same files.
    assert next_sentence_choice_csvs(COUNTS, task[2]) == (texts, test_labels)


def test_true_ending_follows_its_context_and_distractors_are_the_other_novels(task, novels):
    texts, test_labels, _ = task
    for name, labels in (("train.csv", None), ("val.csv", None), ("test.csv", test_labels)):
        rows = _rows(texts[name])
        labels = labels or [int(row["label"]) for row in rows]
        for row, label in zip(rows, labels):
            endings = [row[f"ending{i}"] for i in range(4)]
            passage = f"{row['sent1']} {endings[label]}"
            home = [n for n, (text, _) in novels.items() if passage in text.replace("\n", " ")]
            assert len(home) == 1, passage
            other = [n for n in TASK_NOVELS if n != home[0]][0]
            distractors = [e for i, e in enumerate(endings) if i != label]
            assert len(set(distractors)) == 3
            assert all(d in novels[other][1] and d not in novels[home[0]][1]
                       for d in distractors), (passage, distractors)


def test_splits_share_no_sentence_and_leave_out_the_excluded(task):
    texts, _, excluded = task

    def sentences(name):
        rows = _rows(texts[name])
        return {s for row in rows for s in [row["sent1"]] + [row[f"ending{i}"] for i in range(4)]}

    train, val, test = (sentences(n) for n in ("train.csv", "val.csv", "test.csv"))
    assert not train & val and not train & test and not val & test
    contexts = " ".join(row["sent1"] for name in texts for row in _rows(texts[name]))
    assert not excluded & (train | val | test)
    assert not any(s in contexts for s in excluded)


def test_too_many_examples_asked_is_an_error():
    with pytest.raises(ValueError, match="next-sentence examples for val, 100000 asked for"):
        next_sentence_choice_csvs((10, 100000, 10))
