"""SWAG CSV reading (both header layouts, errors naming file and line) and multiple-choice
features."""
import csv
import re

import numpy as np
import pytest
import tensorflow as tf

from conftest import FIXTURES
from refusals import message
from bert_runner.inputs import decode_record
from bert_runner.tfrecords import write_records
from bert_tasks.swag import examples as swag_examples
from bert_tasks.swag import features as swag_features
from bert_tasks.swag.examples import SwagExample
from vocab.tokenization import FullTokenizer

HEADER = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
          "ending0", "ending1", "ending2", "ending3", "label"]
ROW = ["anetv_1", "5", "The dog runs. The cat", "The dog runs.", "The cat", "gold",
       "sleeps.", "eats, then drinks.", "sings \"loud\".", "reads.", "2"]


def _write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    return str(path)


def _read(path, require_label=True):
    return swag_examples.read_swag_examples(path, "dev", require_label)


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(str(FIXTURES / "modeling" / "tiny" / "vocab.txt"), do_lower_case=True)


EXPECTED = SwagExample(guid="dev-0", context="The dog runs.", start_ending="The cat",
                       endings=("sleeps.", "eats, then drinks.", "sings \"loud\".", "reads."),
                       label=2, line=2)


def test_reads_release_layout_with_and_without_index_column(tmp_path):
    plain = _write_csv(tmp_path / "plain.csv", [HEADER, ROW])
    # The swagaf release: a leading unnamed pandas index column.
    indexed = _write_csv(tmp_path / "indexed.csv", [[""] + HEADER, ["0"] + ROW])
    assert _read(plain) == [EXPECTED]
    assert _read(indexed) == [EXPECTED]


def test_columns_found_by_name_in_any_order(tmp_path):
    order = list(reversed(range(len(HEADER))))
    path = _write_csv(tmp_path / "val.csv",
                      [[HEADER[i] for i in order], [ROW[i] for i in order]])
    assert _read(path) == [EXPECTED]


def test_test_file_without_label_and_guids_lines(tmp_path):
    rows = [HEADER[:-1], ROW[:-1], ["v", "1", "x", "A \"quoted\nline\".", "B", "gen",
                                    "e0", "e1", "e2", "e3"], ROW[:-1]]
    path = _write_csv(tmp_path / "test.csv", rows)
    read = swag_examples.read_swag_examples(path, "test", require_label=False)
    assert [e.guid for e in read] == ["test-0", "test-1", "test-2"]
    assert [e.label for e in read] == [None, None, None]
    # A quoted field spans two lines, so the next row starts one line later.
    assert [e.line for e in read] == [2, 3, 5]
    assert read[1].context == "A \"quoted\nline\"."


def test_unlabelled_split_still_reads_a_label_column(tmp_path):
    path = _write_csv(tmp_path / "test.csv", [HEADER, ROW])
    assert swag_examples.read_swag_examples(path, "test", require_label=False)[0].label == 2


@pytest.mark.parametrize("rows, message", [
    ([HEADER[:-1], ROW[:-1]], r"x\.csv:1: header lacks column\(s\) label"),
    ([[h for h in HEADER if h != "ending2"], ROW[:-1]],
     r"x\.csv:1: header lacks column\(s\) ending2\b"),
    ([HEADER, ROW, ROW[:-1]], r"x\.csv:3: 10 fields, but the header has 11"),
    ([HEADER, ROW, ROW[:-1] + ["4"]], r"x\.csv:3: label '4' is not one of 0\.\.3"),
    ([HEADER, ROW[:-1] + ["-1"]], r"x\.csv:2: label '-1'"),
    ([HEADER, ROW[:-1] + ["one"]], r"x\.csv:2: label 'one'"),
    ([HEADER, ROW, ROW, ROW[:7] + [" "] + ROW[8:]], r"x\.csv:4: ending1 is empty"),
    ([HEADER + ["sent1"], ROW + ["x"]], r"x\.csv:1: header repeats column\(s\) sent1"),
])
def test_bad_csv_names_file_and_line(tmp_path, rows, message):
    path = _write_csv(tmp_path / "x.csv", rows)
    with pytest.raises(ValueError, match=message):
        _read(path)


def test_fields_unlike_the_header_are_the_table_case(tmp_path):
    path = _write_csv(tmp_path / "x.csv", [HEADER, ROW + ["extra"]])
    with pytest.raises(ValueError, match=re.escape(message("csv-fields"))):
        _read(path)


def test_a_field_of_800_kb_is_read(tmp_path):
    """csv's default field limit (131072 characters) made a valid long row "bad CSV"."""
    context = "The dog runs, far. " * 42_000
    path = _write_csv(tmp_path / "long.csv", [HEADER, ROW[:3] + [context] + ROW[4:]])
    assert len(context) > 790_000
    assert _read(path)[0].context == context


def test_a_directory_where_the_csv_is_expected(tmp_path):
    (tmp_path / "train.csv").mkdir()
    with pytest.raises(IsADirectoryError, match=re.escape(
            "%s: %s" % (tmp_path / "train.csv", message("input-is-a-directory")))):
        _read(str(tmp_path / "train.csv"))


def test_invalid_utf8_and_empty_file(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(",".join(HEADER).encode() + b"\n" + b"a,\xff\n")
    with pytest.raises(ValueError, match=r"bad\.csv:2: " + re.escape(message("input-not-utf8"))):
        _read(str(bad))
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.csv: empty file"):
        _read(str(empty))


def test_byte_order_mark_is_not_part_of_the_header(tmp_path):
    path = tmp_path / "bom.csv"
    _write_csv(path, [HEADER, ROW])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert _read(str(path)) == [EXPECTED]


def _tokens(tokenizer, ids, mask):
    return tokenizer.convert_ids_to_tokens([i for i, m in zip(ids, mask) if m])


def test_choice_layout(tokenizer):
    feature = swag_features.convert_example(0, EXPECTED, 16, tokenizer)
    assert feature.label_id == 2 and feature.is_real_example
    got = [_tokens(tokenizer, ids, mask)
           for ids, mask in zip(feature.input_ids, feature.input_mask)]
    a = ["[CLS]", "the", "dog", "run", "##s", ".", "[SEP]"]
    assert got == [
        a + ["the", "cat", "sleep", "##s", ".", "[SEP]"],
        # 13 pieces fit: B (11) loses its end.
        a + ["the", "cat", "eat", "##s", ",", "the", "##n", "drink", "[SEP]"],
        a + ["the", "cat", "sing", "##s", "[UNK]", "[UNK]", "[UNK]", ".", "[SEP]"],
        a + ["the", "cat", "read", "##s", ".", "[SEP]"],
    ]
    # The second segment is the tokenization of `sent2 + " " + ending_i` (the paper's layout).
    assert got[3][7:-1] == tokenizer.tokenize(EXPECTED.start_ending + " " + EXPECTED.endings[3])
    for i, tokens in enumerate(got):
        padding = [0] * (16 - len(tokens))
        assert feature.segment_ids[i] == [0] * 7 + [1] * (len(tokens) - 7) + padding
        assert feature.input_mask[i] == [1] * len(tokens) + padding
        assert feature.input_ids[i] == tokenizer.convert_tokens_to_ids(tokens) + padding


def test_each_choice_truncated_longest_first(tokenizer):
    example = SwagExample("dev-0", "the dog runs to the big red house", "a cat",
                          ("sleeps", "eats and drinks and sleeps on the hill", "reads", "run"),
                          label=None, line=2)
    feature = swag_features.convert_example(0, example, 12, tokenizer)
    assert feature.label_id == 0
    got = [_tokens(tokenizer, ids, mask)
           for ids, mask in zip(feature.input_ids, feature.input_mask)]
    # 9 pieces fit; A has 9. The longer side loses its last piece, B on ties.
    a5 = ["[CLS]", "the", "dog", "run", "##s", "to", "[SEP]"]
    assert got[0] == a5 + ["a", "cat", "sleep", "##s", "[SEP]"]          # B 4: A cut to 5
    assert got[1] == a5 + ["a", "cat", "eat", "##s", "[SEP]"]            # B 13: both cut
    assert got[2] == a5 + ["a", "cat", "read", "##s", "[SEP]"]
    # Each choice truncates its own copy of the context: a shorter B leaves A longer.
    assert got[3] == a5[:-1] + ["the", "[SEP]", "a", "cat", "run", "[SEP]"]


def test_tfrecord_round_trip_as_choices(tmp_path, tokenizer):
    examples = [EXPECTED, SwagExample("dev-1", "a bird", "it", ("sings", "swims", "reads", "runs"),
                                      label=3, line=3)]
    path = str(tmp_path / "eval.tf_record")
    padding = swag_features.features_to_tf_example(swag_features.padding_features(12))
    assert write_records(path, swag_features.tf_examples(examples, 12, tokenizer), padding,
                         multiple=4) == (2, 2)
    spec = swag_features.name_to_features(12)
    records = [decode_record(r, spec) for r in tf.data.TFRecordDataset(path)]
    assert len(records) == 4
    for example, record in zip(examples, records):
        want = swag_features.convert_example(5, example, 12, tokenizer)
        assert record["input_ids"].shape == (4, 12) and record["input_ids"].dtype == tf.int32
        np.testing.assert_array_equal(record["input_ids"], want.input_ids)
        np.testing.assert_array_equal(record["input_mask"], want.input_mask)
        np.testing.assert_array_equal(record["segment_ids"], want.segment_ids)
        assert int(record["label_ids"]) == example.label
        assert int(record["is_real_example"]) == 1
    for record in records[2:]:
        assert not np.any(record["input_ids"]) and int(record["is_real_example"]) == 0
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_max_seq_length_too_small(tmp_path, tokenizer):
    with pytest.raises(ValueError, match="max_seq_length 2"):
        next(swag_features.tf_examples([EXPECTED], 2, tokenizer))
