"""SQuAD examples, windows and features against the original's outputs, and bad input."""
import json
import re

import pytest
import tensorflow as tf

import vocab
from bert_runner.inputs import decode_record
from bert_runner.tfrecords import write_records
from bert_tasks.squad import examples as sq_examples
from bert_tasks.squad import features as sq_features
from bert_tasks.squad.io_utils import SquadFormatError
from vocab import tokenization
from refusals import message

VERSIONS = ["v1.1", "v2.0"]
MODES = ["train", "eval"]


@pytest.fixture(scope="module")
def tokenizer():
    return tokenization.FullTokenizer(vocab.bundled_vocab_file(), do_lower_case=True)


def _settings(fixtures_dir, version):
    return json.loads((fixtures_dir / "squad" / version / "settings.json").read_text())


def _read(fixtures_dir, version, mode):
    settings = _settings(fixtures_dir, version)
    return sq_examples.parse_squad_examples(
        json.loads((fixtures_dir / "squad" / settings["input_file"]).read_text("utf-8")),
        is_training=(mode == "train"),
        version_2_with_negative=settings["version_2_with_negative"])


def _convert(tokenizer, settings, examples, is_training):
    return list(sq_features.convert_examples_to_features(
        examples, tokenizer, settings["max_seq_length"], settings["doc_stride"],
        settings["max_query_length"], is_training))


def _parse_records(path):
    """Each record as {name: list of int64 values} (records are compared by value, not bytes)."""
    out = []
    for raw in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
        example = tf.train.Example.FromString(raw)
        out.append({k: list(v.int64_list.value) for k, v in example.features.feature.items()})
    return out


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("mode", MODES)
def test_examples_match_original(fixtures_dir, version, mode):
    want = json.loads((fixtures_dir / "squad" / version / ("%s_examples.json" % mode)).read_text())
    result = _read(fixtures_dir, version, mode)
    if mode == "train":
        assert [s.message for s in result.skipped] == want["read_squad_examples_warnings"]
        want_examples = want["examples"]
        shuffled = list(result.examples)
        sq_examples.shuffle_examples(shuffled)
        assert [e.qas_id for e in shuffled] == want["main_shuffle_random_Random_12345_order"]
    else:
        assert result.skipped == []
        want_examples = want
    got = [{"qas_id": e.qas_id, "question_text": e.question_text, "doc_tokens": e.doc_tokens,
            "orig_answer_text": e.orig_answer_text, "start_position": e.start_position,
            "end_position": e.end_position, "is_impossible": e.is_impossible}
           for e in result.examples]
    assert got == want_examples


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("mode", MODES)
def test_features_match_original(fixtures_dir, tokenizer, version, mode):
    settings = _settings(fixtures_dir, version)
    examples = _read(fixtures_dir, version, mode).examples
    want = json.loads((fixtures_dir / "squad" / version / ("%s_features.json" % mode)).read_text())
    got = _convert(tokenizer, settings, examples, mode == "train")
    assert len(got) == len(want) == settings["num_%s_features" % mode]
    for feature, expected in zip(got, want):
        for key in ("token_to_orig_map", "token_is_max_context"):
            expected[key] = {int(k): v for k, v in expected[key].items()}
        assert vars(feature) == expected, feature.unique_id


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("mode", MODES)
def test_tfrecord_matches_original(fixtures_dir, tokenizer, tmp_path, version, mode):
    """As main() writes it: training examples shuffled first, so unique ids follow that order."""
    settings = _settings(fixtures_dir, version)
    examples = _read(fixtures_dir, version, mode).examples
    is_training = mode == "train"
    if is_training:
        sq_examples.shuffle_examples(examples)
    path = tmp_path / ("%s.tf_record" % mode)
    window_settings = (settings["max_seq_length"], settings["doc_stride"],
                       settings["max_query_length"], is_training)
    windows = tuple(sq_features.iter_windows(examples, tokenizer, *window_settings))
    # As `SquadTask.records` makes them: training streams its records, prediction keeps the
    # windows and writes theirs.
    records = (sq_features.tf_examples(examples, tokenizer, *window_settings) if is_training
               else sq_features.window_records(windows, examples, tokenizer,
                                               settings["max_seq_length"], is_training))
    num_records, _ = write_records(str(path), records)
    want = _parse_records(fixtures_dir / "squad" / version / ("%s.tf_record" % mode))
    assert _parse_records(path) == want
    assert num_records == len(want)
    assert len(windows) == len(examples)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # No temporary file left.


def test_windows_agree_with_features(fixtures_dir, tokenizer):
    """What prediction keeps (ExampleWindows) answers the same questions as the full features."""
    settings = _settings(fixtures_dir, "v1.1")
    examples = _read(fixtures_dir, "v1.1", "eval").examples
    features = iter(_convert(tokenizer, settings, examples, False))
    for windows in sq_features.iter_windows(
            examples, tokenizer, settings["max_seq_length"], settings["doc_stride"],
            settings["max_query_length"], False):
        for span_index in range(len(windows.doc_spans)):
            feature = next(features)
            assert feature.unique_id == windows.first_unique_id + span_index
            for position in range(settings["max_seq_length"] + 2):
                piece = windows.piece_index(span_index, position)
                assert (piece is not None) == (position in feature.token_to_orig_map)
                if piece is not None:
                    assert windows.piece_to_word[piece] == feature.token_to_orig_map[position]
                    assert windows.doc_pieces[piece] == feature.tokens[position]
                assert windows.is_max_context(span_index, position) == \
                    feature.token_is_max_context.get(position, False)
    assert next(features, None) is None


def test_max_context_table(fixtures_dir):
    case = json.loads((fixtures_dir / "squad" / "edge_cases.json").read_text())[
        "_check_is_max_context"]
    spans = [sq_features.DocSpan(*s) for s in case["doc_spans"]]
    best = sq_features._max_context_spans(len(case["table"][0]), spans)
    assert [[b == i for b in best] for i in range(len(spans))] == case["table"]


def test_feature_spec_and_decode(fixtures_dir):
    raw = next(iter(tf.data.TFRecordDataset(
        str(fixtures_dir / "squad" / "v2.0" / "train.tf_record"))))
    spec = sq_features.name_to_features(64, is_training=True)
    assert sorted(spec) == ["end_positions", "input_ids", "input_mask", "segment_ids",
                            "start_positions", "unique_ids"]
    decoded = decode_record(raw, spec)
    assert all(t.dtype == tf.int32 for t in decoded.values())
    assert decoded["input_ids"].shape == (64,) and decoded["unique_ids"].shape == ()
    assert sorted(sq_features.name_to_features(64, is_training=False)) == [
        "input_ids", "input_mask", "segment_ids", "unique_ids"]


def test_failed_write_leaves_no_file(tmp_path, tokenizer):
    bad = [sq_examples.SquadExample("q", "what?", ["a", "b"])]
    path = tmp_path / "out.tf_record"
    path.write_text("previous")
    with pytest.raises(TypeError):  # Training needs answer positions; these are None.
        write_records(str(path), sq_features.tf_examples(bad, tokenizer, 64, 16, 12,
                                                         is_training=True))
    assert [p.name for p in tmp_path.iterdir()] == ["out.tf_record"]
    assert path.read_text() == "previous"


def test_window_settings_rejected(tokenizer):
    with pytest.raises(ValueError, match=r"max_seq_length \(15\) must be greater"):
        next(sq_features.iter_windows([], tokenizer, 15, 4, 12, False))
    with pytest.raises(ValueError, match="doc_stride"):
        next(sq_features.iter_windows([], tokenizer, 64, 0, 12, False))


def test_empty_context_gives_no_features(tokenizer):
    """A question whose context has no tokens (or only ones the tokenizer deletes)."""
    result = sq_examples.parse_squad_examples(
        {"data": [{"paragraphs": [
            {"context": " \n ", "qas": [{"id": "a", "question": "Why?", "answers": []}]},
            {"context": "\u200b", "qas": [{"id": "b", "question": "Why?", "answers": []}]},
            {"context": "Yes.", "qas": [{"id": "c", "question": "Why?", "answers": []}]}]}]},
        is_training=False)
    assert [e.doc_tokens for e in result.examples] == [[], ["\u200b"], ["Yes."]]
    features = list(sq_features.convert_examples_to_features(
        result.examples, tokenizer, 64, 16, 12, is_training=False))
    assert [(f.example_index, f.unique_id) for f in features] == [(2, 1000000000)]


def _squad(qa, context="Hello world."):
    return {"data": [{"paragraphs": [{"context": context, "qas": [qa]}]}]}


@pytest.mark.parametrize("doc, is_training, v2, message", [
    ({}, False, False, r"^t\.json: data: missing$"),
    ({"data": {}}, False, False, r"^t\.json: data: expected a list, got object$"),
    ({"data": [{"paragraphs": [{"qas": []}]}]}, False, False,
     r"^t\.json: data\[0\]\.paragraphs\[0\]\.context: missing$"),
    (_squad({"question": "q"}), False, False, r"data\[0\]\.paragraphs\[0\]\.qas\[0\]\.id: missing"),
    (_squad({"id": "x", "question": 3}), False, False,
     r"qas\[0\]\.question: expected a string, got integer"),
    (_squad({"id": "x", "question": "q", "answers": [{"text": "Hello"}]}), True, False,
     r"^t\.json: data\[0\]\.paragraphs\[0\]\.qas\[0\]\.answers\[0\]\.answer_start: missing$"),
    (_squad({"id": "x", "question": "q", "answers": [{"text": "Hello", "answer_start": "0"}]}),
     True, False, r"answers\[0\]\.answer_start: expected an integer, got string"),
    (_squad({"id": "x", "question": "q", "answers": [{"text": "Hello", "answer_start": True}]}),
     True, False, r"answers\[0\]\.answer_start: expected an integer, got boolean"),
    (_squad({"id": "x", "question": "q", "answers": []}), True, False,
     r"qas\[0\]\.answers: For training, each question should have exactly 1 answer \(got 0\)"),
    (_squad({"id": "x", "question": "q", "answers": []}), True, True,
     r"qas\[0\]\.is_impossible: missing"),
])
def test_bad_structure_names_json_path(doc, is_training, v2, message):
    with pytest.raises(SquadFormatError, match=message):
        sq_examples.parse_squad_examples(doc, is_training, v2, source="t.json")


def test_structure_not_read_for_prediction_is_ignored():
    """Prediction reads only id, question and context, as the original (test sets lack answers)."""
    doc = _squad({"id": "x", "question": "q", "answers": [{"text": 3}]})
    assert len(sq_examples.parse_squad_examples(doc, False).examples) == 1


def test_unlocatable_answers_are_skipped_and_counted(tmp_path):
    def qa(qid, text, answer_start):
        return {"id": qid, "question": "q", "is_impossible": False,
                "answers": [{"text": text, "answer_start": answer_start}]}

    qas = [qa("ok", "world", 6), qa("moved", "world", 0), qa("beyond", "world", 10),
           qa("negative", "world", -6), qa("empty", "", 0),
           {"id": "imp", "question": "q", "answers": [], "is_impossible": True}]
    doc = {"data": [{"paragraphs": [{"context": "Hello world.", "qas": qas}]}]}
    result = sq_examples.parse_squad_examples(doc, True, version_2_with_negative=True)
    assert [(e.qas_id, e.start_position, e.end_position, e.orig_answer_text)
            for e in result.examples] == [("ok", 1, 1, "world"), ("imp", -1, -1, "")]
    assert [(s.qas_id, s.path) for s in result.skipped] == [
        ("moved", "data[0].paragraphs[0].qas[1]"), ("beyond", "data[0].paragraphs[0].qas[2]"),
        ("negative", "data[0].paragraphs[0].qas[3]"), ("empty", "data[0].paragraphs[0].qas[4]")]
    assert result.skipped[0].message == "Could not find answer: 'Hello' vs. 'world'"
    assert "does not fit in the context" in result.skipped[1].message
    # The file reader returns the kept examples (and logs one warning for the skipped ones).
    path = tmp_path / "d.json"
    path.write_text(json.dumps(doc))
    assert len(sq_examples.read_squad_examples(str(path), True, True)) == 2


def test_skipped_questions_are_one_warning_with_count_and_ids(tmp_path, caplog):
    """The original logs "Could not find answer" once per question; one warning counts them and
    names the file and the first ids, each reason at INFO."""
    context = "Hello world, again."
    qas = [{"id": "q%d" % i, "question": "q", "answers": [
        {"text": "world", "answer_start": 6 if i % 3 == 0 else 0}]} for i in range(9)]
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": context, "qas": qas}]}]}))
    caplog.set_level("INFO")
    caplog.set_level("INFO", logger="absl")  # another test in this process may have raised it
    examples = sq_examples.read_squad_examples(str(path), True)
    assert [e.qas_id for e in examples] == ["q0", "q3", "q6"]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert message("squad-answer-not-found") in warnings[0]
    assert warnings[0].startswith("%s: skipped 6 of 9 training questions" % path)
    assert ": q1, q2, q4, q5, q7 and 1 more." in warnings[0]
    reasons = [r.getMessage() for r in caplog.records
               if r.levelname == "INFO" and "Could not find answer" in r.getMessage()]
    assert len(reasons) == 6 and "(q8) skipped" in reasons[-1]


def test_a_directory_or_bad_utf8_where_the_json_is_expected(tmp_path):
    from bert_tasks.squad.task import SquadTask

    (tmp_path / "train.json").mkdir()
    fragment = re.escape(message("input-is-a-directory"))
    with pytest.raises(IsADirectoryError, match=r"train\.json: " + fragment):
        sq_examples.read_squad_examples(str(tmp_path / "train.json"), True)
    task = SquadTask(64, train_file=str(tmp_path / "train.json"), doc_stride=16,
                     max_query_length=8)
    with pytest.raises(IsADirectoryError, match=r"train\.json \(--train_file\): " + fragment):
        task.read_examples("train")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"data": ["\xff"]}')
    with pytest.raises(SquadFormatError,
                       match=r"bad\.json: " + re.escape(message("input-not-utf8"))):
        sq_examples.read_squad_examples(str(bad), False)


def test_a_byte_order_mark_is_accepted(tmp_path):
    doc = {"version": "1.1", "data": [{"paragraphs": [{"context": "Hello world.", "qas": [
        {"id": "q1", "question": "who?", "answers": [{"text": "world", "answer_start": 6}]}]}]}]}
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(doc).encode("utf-8"))
    assert [e.qas_id for e in sq_examples.read_squad_examples(str(path), True)] == ["q1"]


def test_invalid_json_names_file_line_and_column(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"data": [\n  {"paragraphs": [}\n]}')
    with pytest.raises(SquadFormatError,
                       match=r"bad\.json: line 2 column 19: invalid JSON: Expecting value"):
        sq_examples.read_squad_examples(str(path), False)
    with pytest.raises(SquadFormatError, match=r"missing\.json: cannot read"):
        sq_examples.read_squad_examples(str(tmp_path / "missing.json"), False)
