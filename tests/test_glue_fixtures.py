"""Golden tests: processors, features and TFRecords against the original run_classifier outputs.

Every case of tests/fixtures/classifier is run (max_seq_length 32, uncased vocab).
"""
import json

import pytest
import tensorflow as tf

from bert_tasks.classifier import features, processors
from bert_runner.inputs import decode_record
from bert_runner.tfrecords import write_records
from vocab import tokenization

TASK_DIRS = {"mrpc": "MRPC", "cola": "CoLA", "mnli": "MNLI", "xnli": "XNLI"}
SPLITS = ("train", "dev", "test")
MAX_SEQ_LENGTH = 32


@pytest.fixture(scope="module")
def tokenizer(fixtures_dir):
    return tokenization.FullTokenizer(
        str(fixtures_dir.parent.parent / "vocab" / "uncased_L-12_H-768_A-12" / "vocab.txt"),
        do_lower_case=True)


def _expected(fixtures_dir, task):
    return json.loads((fixtures_dir / "classifier" / ("%s_features.json" % task)).read_text())


def _examples(fixtures_dir, task, split):
    processor = processors.get_processor(task)
    data_dir = str(fixtures_dir / "classifier" / "data" / TASK_DIRS[task])
    return getattr(processor, "get_%s_examples" % split)(data_dir)


def _parsed_records(path):
    """list of {name: (kind, values)} for each record; never compare TFRecord bytes."""
    records = []
    for raw in tf.data.TFRecordDataset(str(path)):
        example = tf.train.Example.FromString(raw.numpy())
        records.append({name: (f.WhichOneof("kind"), list(getattr(f, f.WhichOneof("kind")).value))
                        for name, f in example.features.feature.items()})
    return records


GOLDEN_CASES = [(t, s) for t in TASK_DIRS for s in SPLITS if (t, s) != ("xnli", "test")]


@pytest.mark.parametrize("task,split", GOLDEN_CASES)
def test_examples_and_features_match_original(fixtures_dir, tokenizer, task, split):
    expected = _expected(fixtures_dir, task)
    processor = processors.get_processor(task)
    assert processor.get_labels() == expected["label_list"]
    examples = _examples(fixtures_dir, task, split)
    assert len(examples) == len(expected[split])
    for ex_index, (example, want) in enumerate(zip(examples, expected[split])):
        assert (example.guid, example.text_a, example.text_b, example.label) == (
            want["guid"], want["text_a"], want["text_b"], want["label"])
        got = features.convert_single_example(ex_index, example, processor.get_labels(),
                                              MAX_SEQ_LENGTH, tokenizer)
        assert tokenizer.convert_ids_to_tokens(
            got.input_ids[:sum(got.input_mask)]) == want["tokens_from_ids"]
        assert (got.input_ids, got.input_mask, got.segment_ids, got.label_id,
                got.is_real_example) == (want["input_ids"], want["input_mask"],
                                         want["segment_ids"], want["label_id"],
                                         want["is_real_example"])


@pytest.mark.parametrize("task,split", GOLDEN_CASES)
def test_tfrecord_matches_original(fixtures_dir, tokenizer, tmp_path, task, split):
    output_file = tmp_path / "out.tf_record"
    write_records(str(output_file), features.tf_examples(
        _examples(fixtures_dir, task, split), processors.get_processor(task).get_labels(),
        MAX_SEQ_LENGTH, tokenizer))
    original = fixtures_dir / "classifier" / "tfrecord" / ("%s_%s.tf_record" % (task, split))
    assert _parsed_records(output_file) == _parsed_records(original)
    assert [p.name for p in tmp_path.iterdir()] == ["out.tf_record"]  # no temporary left behind


def test_xnli_has_no_test_set_like_original(fixtures_dir):
    assert "NotImplementedError" in _expected(fixtures_dir, "xnli")["test"]
    with pytest.raises(NotImplementedError, match="XNLI has no test set"):
        _examples(fixtures_dir, "xnli", "test")


def test_padding_example_matches_original(fixtures_dir, tokenizer, tmp_path):
    want = json.loads((fixtures_dir / "classifier" / "padding_input_example.json").read_text())
    got = features.convert_single_example(0, features.PaddingInputExample(), ["0", "1"],
                                          MAX_SEQ_LENGTH, tokenizer)
    assert (got.input_ids, got.input_mask, got.segment_ids, got.label_id, got.is_real_example) == (
        want["input_ids"], want["input_mask"], want["segment_ids"], want["label_id"],
        want["is_real_example"])

    # The driver's TPU padding of run_classifier's eval set (batch 2) gives the original's file.
    from bert_runner.splits import write_split
    from bert_runner.run_config import RunConfig
    from bert_tasks.classifier.task import ClassifierTask

    original = fixtures_dir / "classifier" / "tfrecord" / "padding_example.tf_record"
    max_seq_length = len(_parsed_records(original)[0]["input_ids"][1])
    run = RunConfig(str(tmp_path), use_tpu=True, eval_batch_size=2)
    split = write_split(ClassifierTask("mrpc", max_seq_length),
                        [features.InputExample("dev-1", "Hello world.", None, "1")], "eval",
                        tokenizer, run)
    output_file = tmp_path / "eval.tf_record"
    assert (split.files, split.num_examples, split.num_padding) == ([str(output_file)], 1, 1)
    assert _parsed_records(output_file) == _parsed_records(original)

    # Read back the way the training input does: int64 features arrive as int32.
    spec = features.name_to_features(max_seq_length)
    decoded = [decode_record(r, spec)
               for r in tf.data.TFRecordDataset(str(output_file))]
    assert [int(d["is_real_example"]) for d in decoded] == [1, 0]
    assert all(t.dtype == tf.int32 for d in decoded for t in d.values())
