"""SQuAD post-processing against the original's predictions (byte for byte) and edge cases."""
import json

import numpy as np
import pytest

import vocab
from bert_tasks.squad import examples as sq_examples
from bert_tasks.squad import features as sq_features
from bert_tasks.squad import postprocess
from vocab import tokenization

VERSIONS = ["v1.1", "v2.0"]


@pytest.fixture(scope="module")
def tokenizer():
    return tokenization.FullTokenizer(vocab.bundled_vocab_file(), do_lower_case=True)


@pytest.fixture(scope="module")
def edge_cases(fixtures_dir):
    return json.loads((fixtures_dir / "squad" / "edge_cases.json").read_text())


def _predict_setup(fixtures_dir, tokenizer, version):
    """(settings, examples, windows, results) for the fixture's eval set and fixed logits."""
    folder = fixtures_dir / "squad" / version
    settings = json.loads((folder / "settings.json").read_text())
    examples = sq_examples.read_squad_examples(
        str(fixtures_dir / "squad" / settings["input_file"]), False,
        settings["version_2_with_negative"])
    windows = list(sq_features.iter_windows(
        examples, tokenizer, settings["max_seq_length"], settings["doc_stride"],
        settings["max_query_length"], is_training=False))
    results = [postprocess.RawResult(r["unique_id"], r["start_logits"], r["end_logits"])
               for r in json.loads((folder / "logits.json").read_text())]
    return settings, examples, windows, results


def _write(settings, examples, windows, results, out_dir):
    postprocess.write_predictions(
        examples, windows, results, settings["n_best_size"], settings["max_answer_length"],
        settings["do_lower_case"], str(out_dir / "predictions.json"),
        str(out_dir / "nbest_predictions.json"), str(out_dir / "null_odds.json"),
        settings["version_2_with_negative"], settings["null_score_diff_threshold"])


@pytest.mark.parametrize("version", VERSIONS)
def test_prediction_files_byte_identical(fixtures_dir, tokenizer, tmp_path, version):
    settings, examples, windows, results = _predict_setup(fixtures_dir, tokenizer, version)
    _write(settings, examples, windows, results[::-1], tmp_path)  # Result order does not matter.
    names = ["predictions.json", "nbest_predictions.json"]
    if settings["version_2_with_negative"]:
        names.append("null_odds.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)  # No temporary files.
    for name in names:
        assert (tmp_path / name).read_bytes() == \
            (fixtures_dir / "squad" / version / name).read_bytes(), name


@pytest.mark.parametrize("version", VERSIONS)
def test_float32_array_logits_give_the_same_files(fixtures_dir, tokenizer, tmp_path, version):
    """What a Keras model returns (float32 arrays) equals the original's Python floats."""
    settings, examples, windows, results = _predict_setup(fixtures_dir, tokenizer, version)
    arrays = [postprocess.RawResult(r.unique_id, np.asarray(r.start_logits, np.float32),
                                    np.asarray(r.end_logits, np.float32)) for r in results]
    _write(settings, examples, windows, arrays, tmp_path)
    for name in ("predictions.json", "nbest_predictions.json"):
        assert (tmp_path / name).read_bytes() == \
            (fixtures_dir / "squad" / version / name).read_bytes(), name


def test_missing_result_is_reported(fixtures_dir, tokenizer):
    settings, examples, windows, results = _predict_setup(fixtures_dir, tokenizer, "v1.1")
    with pytest.raises(ValueError, match=r"no result for unique_id 1000000000 \(example "
                                         r"'q_light_1', window 0\)"):
        postprocess.compute_predictions(examples, windows, results[1:], 5, 10, True)


def test_get_final_text_cases(edge_cases):
    for case in edge_cases["get_final_text"]:
        assert postprocess.get_final_text(case["pred_text"], case["orig_text"],
                                          case["do_lower_case"]) == case["output"], case


def test_softmax_and_best_indexes(edge_cases):
    for case in edge_cases["_compute_softmax"]:
        assert postprocess.compute_softmax(case["scores"]) == case["probs"]
    for case in edge_cases["_get_best_indexes"]:
        assert postprocess.get_best_indexes(case["logits"], case["n_best_size"]) == case["output"]


def _edge_example(tokenizer, edge_cases):
    """The edge case's one feature: every top-2 start/end lies in the question."""
    case = edge_cases["write_predictions_no_valid_span_n_best_size_2"]
    example = sq_examples.SquadExample("edge1", "What is it?", ["It", "is", "a", "test."])
    seq_length = len(case["start_logits"])
    windows = list(sq_features.iter_windows([example], tokenizer, seq_length, 128, 8, False))
    feature, = sq_features.convert_examples_to_features([example], tokenizer, seq_length, 128,
                                                        8, False)
    assert feature.tokens == case["feature_tokens"]
    result = postprocess.RawResult(feature.unique_id, case["start_logits"], case["end_logits"])
    return case, [example], windows, [result]


def test_v1_without_valid_span_predicts_empty(tokenizer, edge_cases):
    case, examples, windows, results = _edge_example(tokenizer, edge_cases)
    out = postprocess.compute_predictions(examples, windows, results, 2, 10, True)
    want = case["version_2_with_negative=False"]
    assert (out.predictions, out.nbest, out.null_odds) == (want["predictions"], want["nbest"], {})


def test_v2_without_valid_span_predicts_null_instead_of_crashing(tokenizer, edge_cases):
    """The original raises AttributeError here; we predict "" (see postprocess docstring)."""
    case, examples, windows, results = _edge_example(tokenizer, edge_cases)
    assert case["version_2_with_negative=True"]["exception"].startswith("AttributeError")
    out = postprocess.compute_predictions(examples, windows, results, 2, 10, True,
                                          version_2_with_negative=True)
    assert out.predictions == {"edge1": ""}
    assert out.nbest == {"edge1": [
        {"text": "", "probability": 1.0, "start_logit": -10.0, "end_logit": -10.0}]}
    assert out.null_odds == {"edge1": -20.0}  # score_null - 0.0 - 0.0


@pytest.mark.parametrize("v2, prediction, nbest, null_odds", [
    (False, "empty", [{"text": "empty", "probability": 1.0, "start_logit": 0.0,
                       "end_logit": 0.0}], {}),
    (True, "", [{"text": "", "probability": 1.0, "start_logit": 0.0, "end_logit": 0.0}],
     {"blank": 1000000.0}),
])
def test_question_without_context_tokens(tokenizer, v2, prediction, nbest, null_odds):
    """No features at all: v1 gives the original's "empty"; v2 (IndexError originally) gives ""."""
    examples = [sq_examples.SquadExample("blank", "Why?", [])]
    windows = list(sq_features.iter_windows(examples, tokenizer, 64, 16, 12, False))
    out = postprocess.compute_predictions(examples, windows, [], 5, 10, True, v2)
    assert out == postprocess.Predictions({"blank": prediction}, {"blank": nbest}, null_odds)


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_the_word_by_word_basic_tokens_are_the_whole_texts(do_lower_case):
    """`get_final_text` tokenizes its text a word at a time (the words cached): the tokens are
    the original's of the whole text, for text where a step could act across words (final
    sigma, CJK, accents, control and other whitespace characters, punctuation, double spaces)."""
    from vocab.tokenization import BasicTokenizer

    texts = ["Steve Smith's  dog", "ΟΔΟΣ ΣΑΣ Σ", "naïve café\u00a0bar", "中文字 mixed文 x",
             "a\tb\nc\r d", "", " ", "  x ", "x\x00y \ufffd z", "Ünïcödé, test!...", "İstanbul ǅ ß",
             "(1,2) -- \"quoted\"", "e\u0301t\u00e9"]
    tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    for text in texts:
        words = [t for word in text.split(" ") for t in postprocess._basic_tokens(
            word, do_lower_case)]
        assert words == tokenizer.tokenize(text), text
