"""Processors on small files in the real GLUE layouts, and bad-input errors (file and line)."""
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_runner import cli
from bert_tasks.classifier import features, processors
from bert_runner.inputs import decode_record
from bert_runner.tfrecords import write_records
from bert_tasks.classifier.features import InputExample
from refusals import message as refusal_message


def _write(directory, files):
    for name, rows in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return str(directory)


# task -> (files, {split: expected examples}); rows are lists of columns.
LAYOUTS = {
    "sst-2": (
        {"train.tsv": [["sentence", "label"], ["a gorgeous film ", "1"], ["dull", "0"]],
         "dev.tsv": [["sentence", "label"], ["it 's a charming trip .", "1"]],
         "test.tsv": [["index", "sentence"], ["0", "uneasy mishmash"], ["1", "fine"]]},
        {"train": [InputExample("train-1", "a gorgeous film ", None, "1"),
                   InputExample("train-2", "dull", None, "0")],
         "dev": [InputExample("dev-1", "it 's a charming trip .", None, "1")],
         "test": [InputExample("test-1", "uneasy mishmash", None, "0", index="0"),
                  InputExample("test-2", "fine", None, "0", index="1")]}),
    "qqp": (
        {"train.tsv": [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                       ["133273", "213221", "213222", "How is it?", "What is it?", "0"]],
         "dev.tsv": [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                     ["201359", "303345", "303346", "Why \"so\"?", "Why so?", "1"]],
         "test.tsv": [["id", "question1", "question2"], ["0", "Would you?", "Could you?"]]},
        {"train": [InputExample("train-133273", "How is it?", "What is it?", "0")],
         "dev": [InputExample("dev-201359", "Why \"so\"?", "Why so?", "1")],
         "test": [InputExample("test-0", "Would you?", "Could you?", "0", index="0")]}),
    "qnli": (
        {"train.tsv": [["index", "question", "sentence", "label"],
                       ["0", "When?", "In 1900.", "entailment"]],
         "dev.tsv": [["index", "question", "sentence", "label"],
                     ["0", "Who?", "Nobody knows.", "not_entailment"]],
         "test.tsv": [["index", "question", "sentence"], ["7", "Where?", "Here."]]},
        {"train": [InputExample("train-0", "When?", "In 1900.", "entailment")],
         "dev": [InputExample("dev-0", "Who?", "Nobody knows.", "not_entailment")],
         "test": [InputExample("test-7", "Where?", "Here.", "entailment", index="7")]}),
    "rte": (
        {"train.tsv": [["index", "sentence1", "sentence2", "label"],
                       ["0", "A dog barks.", "An animal makes noise.", "entailment"]],
         "dev.tsv": [["index", "sentence1", "sentence2", "label"],
                     ["0", "It rains.", "It is dry.", "not_entailment"]],
         "test.tsv": [["index", "sentence1", "sentence2"], ["0", "Snow.", "Cold."]]},
        {"train": [InputExample("train-0", "A dog barks.", "An animal makes noise.", "entailment")],
         "dev": [InputExample("dev-0", "It rains.", "It is dry.", "not_entailment")],
         "test": [InputExample("test-0", "Snow.", "Cold.", "entailment", index="0")]}),
    "wnli": (
        {"train.tsv": [["index", "sentence1", "sentence2", "label"],
                       ["0", "I stuck a pin.", "I stuck it.", "1"]],
         "dev.tsv": [["index", "sentence1", "sentence2", "label"], ["0", "A.", "B.", "0"]],
         "test.tsv": [["index", "sentence1", "sentence2"], ["0", "C.", "D."]]},
        {"train": [InputExample("train-0", "I stuck a pin.", "I stuck it.", "1")],
         "dev": [InputExample("dev-0", "A.", "B.", "0")],
         "test": [InputExample("test-0", "C.", "D.", "0", index="0")]}),
    "sts-b": (
        {"train.tsv": [["index", "genre", "filename", "year", "old_index", "source1", "source2",
                        "sentence1", "sentence2", "score"],
                       ["0", "main-captions", "MSRvid", "2012test", "0001", "none", "none",
                        "A plane is taking off.", "An air plane is taking off.", "5.000"]],
         "dev.tsv": [["index", "genre", "filename", "year", "old_index", "source1", "source2",
                      "sentence1", "sentence2", "score"],
                     ["3", "main-captions", "MSRvid", "2012test", "0004", "none", "none",
                      "A man plays.", "A man sings.", "1.2"]],
         "test.tsv": [["index", "genre", "filename", "year", "old_index", "source1", "source2",
                       "sentence1", "sentence2"],
                      ["0", "main-captions", "MSRvid", "2012test", "0024", "none", "none",
                       "A girl styles her hair.", "A girl is brushing her hair."]]},
        {"train": [InputExample("train-0", "A plane is taking off.",
                                "An air plane is taking off.", "5.000")],
         "dev": [InputExample("dev-3", "A man plays.", "A man sings.", "1.2")],
         "test": [InputExample("test-0", "A girl styles her hair.",
                               "A girl is brushing her hair.", "0", index="0")]}),
    "mnli-mm": (
        {"train.tsv": [["index"] + ["c%d" % i for i in range(1, 8)]
                       + ["sentence1", "sentence2", "label1", "gold_label"],
                       ["5"] + ["x"] * 7 + ["P.", "H.", "neutral", "neutral"]],
         "dev_mismatched.tsv": [["index"] + ["c%d" % i for i in range(1, 8)]
                                + ["sentence1", "sentence2", "l1", "l2", "l3", "l4", "l5",
                                   "gold_label"],
                                ["9"] + ["x"] * 7 + ["P2.", "H2."] + ["entailment"] * 6],
         "test_mismatched.tsv": [["index"] + ["c%d" % i for i in range(1, 8)]
                                 + ["sentence1", "sentence2"],
                                 ["0"] + ["x"] * 7 + ["P3.", "H3."]]},
        {"train": [InputExample("train-5", "P.", "H.", "neutral")],
         "dev": [InputExample("dev_mismatched-9", "P2.", "H2.", "entailment")],
         "test": [InputExample("test-0", "P3.", "H3.", "contradiction", index="0")]}),
    "ax": (
        {"diagnostic.tsv": [["index", "sentence1", "sentence2"],
                            ["0", "The cat sat.", "The cat did not sit."]]},
        {"test": [InputExample("test-0", "The cat sat.", "The cat did not sit.",
                               "contradiction", index="0")]}),
}


@pytest.mark.parametrize("task", sorted(LAYOUTS))
def test_glue_layouts(tmp_path, task):
    files, expected = LAYOUTS[task]
    data_dir = _write(tmp_path, files)
    processor = processors.get_processor(task.upper())
    for split, want in expected.items():
        assert getattr(processor, "get_%s_examples" % split)(data_dir) == want


def test_registry_labels_and_submission_names():
    want = {
        "cola": (["0", "1"], "CoLA"), "mrpc": (["0", "1"], "MRPC"),
        "mnli": (["contradiction", "entailment", "neutral"], "MNLI-m"),
        "mnli-mm": (["contradiction", "entailment", "neutral"], "MNLI-mm"),
        "ax": (["contradiction", "entailment", "neutral"], "AX"),
        "xnli": (["contradiction", "entailment", "neutral"], None),
        "sst-2": (["0", "1"], "SST-2"), "qqp": (["0", "1"], "QQP"),
        "qnli": (["entailment", "not_entailment"], "QNLI"),
        "rte": (["entailment", "not_entailment"], "RTE"), "wnli": (["0", "1"], "WNLI"),
        "sts-b": (None, "STS-B"), "rerank": (["0", "1"], None),
    }
    # multilabel's labels come from its data (tests/test_classifier_multi_label.py).
    assert set(processors.PROCESSORS) == set(want) | {"multilabel"}
    for task, (labels, submission_name) in want.items():
        processor = processors.get_processor(task)
        assert (processor.get_labels(), processor.submission_name) == (labels, submission_name)
        assert processor.is_regression == (task == "sts-b")
        assert processor.num_labels == (1 if labels is None else len(labels))


def test_ax_also_reads_glue_site_file_name(tmp_path):
    files, expected = LAYOUTS["ax"]
    data_dir = _write(tmp_path, {"AX.tsv": files["diagnostic.tsv"]})
    assert processors.get_processor("ax").get_test_examples(data_dir) == expected["test"]


def test_xnli_language_is_a_parameter(tmp_path):
    header = ["language", "gold_label"] + ["c%d" % i for i in range(2, 19)]
    row = lambda lang, a: [lang, "neutral", "", "", "", "", a, "h"] + ["x"] * 11
    data_dir = _write(tmp_path, {
        "xnli.dev.tsv": [header, row("zh", "zh text"), row("fr", "texte")],
        "multinli/multinli.train.fr.tsv": [["premise", "hypo", "label"],
                                            ["p", "h", "contradictory"]]})
    processor = processors.XnliProcessor(language="fr")
    assert processor.get_dev_examples(data_dir) == [InputExample("dev-2", "texte", "h", "neutral")]
    assert processor.get_train_examples(data_dir) == [
        InputExample("train-1", "p", "h", "contradiction")]


def test_regression_features_carry_float_score(tmp_path):
    files, expected = LAYOUTS["sts-b"]
    examples = expected["train"] + [features.PaddingInputExample()]

    class CharTokenizer:  # the layout logic does not depend on the vocabulary
        def tokenize(self, text):
            return text.split()

        def convert_tokens_to_ids(self, tokens):
            return [len(t) for t in tokens]

    output_file = str(tmp_path / "stsb.tf_record")
    write_records(output_file, features.tf_examples(examples, None, 16, CharTokenizer()))
    spec = features.name_to_features(16, is_regression=True)
    records = [decode_record(r, spec) for r in tf.data.TFRecordDataset(output_file)]
    assert records[0]["label_ids"].dtype == tf.float32
    assert [float(r["label_ids"]) for r in records] == [5.0, 0.0]
    assert [int(r["is_real_example"]) for r in records] == [1, 0]
    assert np.asarray(records[0]["segment_ids"]).tolist() == [0] * 7 + [1] * 7 + [0] * 2


def test_file_reading_matches_tf1_gfile(tmp_path):
    # GFile drops every \r (not only before \n); quotes are literal; no header in CoLA train.
    (tmp_path / "train.tsv").write_bytes(
        b'src\t1\t\t"Quoted\r" start.\r\nsrc\t0\t*\tlast line without newline')
    examples = processors.get_processor("cola").get_train_examples(str(tmp_path))
    assert examples == [InputExample("train-0", '"Quoted" start.', None, "1"),
                        InputExample("train-1", "last line without newline", None, "0")]
    assert processors.DataProcessor._read_tsv(str(tmp_path / "train.tsv"))[0] == [
        "src", "1", "", '"Quoted" start.']


def _error(tmp_path, task, files, split="train"):
    data_dir = _write(tmp_path, files)
    with pytest.raises((ValueError, FileNotFoundError, NotImplementedError)) as info:
        getattr(processors.get_processor(task), "get_%s_examples" % split)(data_dir)
    return str(info.value)


def test_wrong_column_count_names_file_and_line(tmp_path):
    message = _error(tmp_path, "rte", {"train.tsv": [["index", "sentence1", "sentence2", "label"],
                                                     ["0", "a", "b", "entailment"],
                                                     ["1", "a", "b", "extra", "entailment"]]})
    assert message == "%s:3: expected 4 tab-separated columns, got 5" % (tmp_path / "train.tsv")
    assert refusal_message("tsv-columns") in message
    # Header-less CoLA train uses its fixed 4 columns; a blank line is a row with no columns.
    message = _error(tmp_path, "cola", {"train.tsv": [["s", "1", "", "ok"], []]})
    assert message.endswith("train.tsv:2: expected 4 tab-separated columns, got 0")


def test_unknown_label_lists_task_labels(tmp_path):
    message = _error(tmp_path, "mrpc", {"train.tsv": [["Quality", "a", "b", "c", "d"],
                                                      ["yes", "1", "2", "s1", "s2"]]})
    assert message == ("%s:2: unknown MRPC label 'yes'; expected one of '0', '1'"
                       % (tmp_path / "train.tsv"))
    with pytest.raises(ValueError, match=re.escape("unknown label 'x'; expected one of 'a', 'b'")):
        features.convert_single_example(0, InputExample("g", "t", None, "x"), ["a", "b"], 8, None)


def test_bad_regression_score_names_file_and_line(tmp_path):
    files, _ = LAYOUTS["sts-b"]
    rows = files["dev.tsv"][:1] + [files["dev.tsv"][1][:-1] + ["n/a"]]
    message = _error(tmp_path, "sts-b", {"dev.tsv": rows}, split="dev")
    assert message == "%s:2: STS-B score 'n/a' is not a number" % (tmp_path / "dev.tsv")


def test_missing_split_names_expected_file(tmp_path):
    message = _error(tmp_path, "mnli", {}, split="dev")
    assert message == "MNLI dev set not found: expected %s" % (tmp_path / "dev_matched.tsv")
    message = _error(tmp_path, "ax", {}, split="test")
    assert message == "AX test set not found: expected %s or %s" % (
        tmp_path / "diagnostic.tsv", tmp_path / "AX.tsv")
    assert "fine-tune on MNLI" in _error(tmp_path, "ax", {}, split="train")


def test_invalid_utf8_and_empty_file(tmp_path):
    (tmp_path / "dev.tsv").write_bytes(b"sentence\tlabel\n\xff\xfe\t1\n")
    message = _error(tmp_path, "sst-2", {}, split="dev")
    assert message.startswith("%s:2: not valid UTF-8" % (tmp_path / "dev.tsv"))
    assert refusal_message("input-not-utf8") in message
    assert _error(tmp_path, "sst-2", {"dev.tsv": []}, split="dev") == (
        "%s: empty file, expected the SST-2 dev set" % (tmp_path / "dev.tsv"))


def test_unknown_task_lists_known_tasks():
    with pytest.raises(ValueError) as info:
        processors.get_processor("squad")
    assert str(info.value) == ("Task not found: squad (known tasks: ax, cola, mnli, mnli-mm, mrpc, "
                               "multilabel, qnli, qqp, rerank, rte, sst-2, sts-b, wnli, xnli)")


def test_a_field_of_800_kb_is_read(tmp_path):
    """csv's default field limit (131072 characters) made a valid long passage "bad CSV"."""
    passage = "word " * 160_000
    data_dir = _write(tmp_path, {"dev.tsv": [["sentence", "label"], [passage, "1"]]})
    examples = processors.get_processor("sst-2").get_dev_examples(data_dir)
    assert [len(e.text_a) for e in examples] == [800_000]


def test_a_directory_where_the_tsv_is_expected(tmp_path):
    (tmp_path / "train.tsv").mkdir()
    with pytest.raises(IsADirectoryError,
                       match=re.escape(refusal_message("input-is-a-directory"))) as info:
        processors.get_processor("mrpc").get_train_examples(str(tmp_path))
    # bert_runner.cli's one line names the path.
    assert cli.refusal(info.value) == "%s: %s" % (tmp_path / "train.tsv",
                                                  refusal_message("input-is-a-directory"))
