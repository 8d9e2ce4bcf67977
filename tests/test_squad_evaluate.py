"""Official SQuAD v1.1 / v2.0 scores: hand-checked cases, the fixtures' predictions, the CLI.

The expected fixture figures were cross-checked against the official evaluate-v1.1.py and
evaluate-v2.0.py functions (and 300 random datasets agreed exactly) when this was written.
"""
import json

import pytest

from bert_tasks.squad import evaluate as ev
from bert_tasks.squad.io_utils import SquadFormatError


def _data(*qas):
    return {"version": "x", "data": [{"paragraphs": [{"context": "c", "qas": list(qas)}]}]}


def _qa(qid, *answers, **extra):
    return dict({"id": qid, "question": "?", "answers": [{"text": a, "answer_start": 0}
                                                          for a in answers]}, **extra)


def test_normalization_and_token_f1():
    assert ev.normalize_answer("The  Cat's, hat!") == "cats hat"
    assert ev.normalize_answer("an apple a day") == "apple day"
    assert ev.f1_score_v1("the cat sat", "cat sat down") == pytest.approx(0.8)
    assert ev.exact_match_score_v1("The Cat.", "cat") is True
    # An empty answer: v1.1 gives F1 0 even against an empty gold, v2.0 gives 1.
    assert (ev.f1_score_v1("", ""), ev.compute_f1("", "")) == (0, 1)
    assert (ev.compute_f1("", "x"), ev.compute_exact("", "a")) == (0, 1)


def test_v1_max_over_gold_answers_and_unanswered():
    data = _data(_qa("a", "Paris", "the city of Paris"), _qa("b", "blue sky"), _qa("c", "x"))
    got = ev.evaluate(data, {"a": "city of paris", "b": "sky"})
    # a: EM 1 (second gold); b: F1 2/3; c: no prediction, scored 0.
    assert got == {"exact_match": pytest.approx(100 / 3), "f1": pytest.approx(100 * 5 / 9)}
    assert list(got) == ["exact_match", "f1"]


def test_best_constant_answer_beside_the_scores():
    """run_squad's baseline: the most frequent first gold answer given to every question, or,
    for v2.0, no answer where that scores more."""
    data = _data(_qa("a", "Mr Darcy", "Darcy"), _qa("b", "Mr Darcy"), _qa("c", "Elizabeth"),
                 _qa("d", "Darcy, Mr"))
    # a, b exact; c 0; d: F1 2/2 after normalisation ("darcy mr" against "mr darcy"), not exact.
    assert ev.constant_baselines(data, False) == {"exact_match": 'always "Mr Darcy" 50.00',
                                                  "f1": 'always "Mr Darcy" 75.00'}
    unanswerable = dict(is_impossible=True)
    v2 = _data(_qa("a", "Jane"), _qa("b", "Jane"), _qa("c", **unanswerable),
               _qa("d", **unanswerable), _qa("e", **unanswerable))
    assert ev.constant_baselines(v2, True) == {"exact": "always no answer 60.00",
                                               "f1": "always no answer 60.00"}
    v2 = _data(_qa("a", "Jane"), _qa("b", "Jane"), _qa("c", "Jane"), _qa("d", **unanswerable))
    assert ev.constant_baselines(v2, True) == {"exact": 'always "Jane" 75.00',
                                               "f1": 'always "Jane" 75.00'}


def test_v2_thresholds_and_best_threshold_search():
    data = _data(_qa("a", "Paris"), _qa("b", is_impossible=True), _qa("c", "blue sky"))
    preds = {"a": "Paris", "b": "something", "c": "sky"}
    na_probs = {"a": -2.0, "b": 4.0, "c": 3.0}
    got = ev.evaluate(data, preds, na_probs)
    # Values above na_prob_thresh=1.0 (b, c) count as predicting no answer: b right, c wrong.
    # The sweep over a, c, b: EM best after a (2 of 3); F1 best after c (1 + 1 + 2/3).
    assert got == pytest.approx({
        "exact": 200 / 3, "f1": 200 / 3, "total": 3,
        "HasAns_exact": 50.0, "HasAns_f1": 50.0, "HasAns_total": 2,
        "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": 1,
        "best_exact": 200 / 3, "best_exact_thresh": -2.0,
        "best_f1": 800 / 9, "best_f1_thresh": 3.0})
    assert list(got) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                         "NoAns_exact", "NoAns_f1", "NoAns_total", "best_exact",
                         "best_exact_thresh", "best_f1", "best_f1_thresh"]
    # Without no-answer values: raw scores, no threshold search.
    assert ev.evaluate(data, preds) == pytest.approx({
        "exact": 100 / 3, "f1": 500 / 9, "total": 3, "HasAns_exact": 50.0,
        "HasAns_f1": 250 / 3, "HasAns_total": 2, "NoAns_exact": 0.0, "NoAns_f1": 0.0,
        "NoAns_total": 1})


@pytest.mark.parametrize("version, args, want", [
    ("v1.1", [], {"exact_match": 100 * 5 / 12, "f1": 100 * 5 / 12}),
    ("v2.0", ["null_odds.json"], {
        "exact": 300 / 9, "f1": 300 / 9, "total": 9, "HasAns_exact": 40.0, "HasAns_f1": 40.0,
        "HasAns_total": 5, "NoAns_exact": 25.0, "NoAns_f1": 25.0, "NoAns_total": 4,
        "best_exact": 500 / 9, "best_exact_thresh": -8.694457292556763,
        "best_f1": 500 / 9, "best_f1_thresh": -8.694457292556763}),
])
def test_cli_on_fixture_predictions(fixtures_dir, tmp_path, capsys, version, args, want):
    squad_dir = fixtures_dir / "squad"
    argv = [str(squad_dir / ("squad_%s_tiny.json" % version)),
            str(squad_dir / version / "predictions.json")]
    argv += ["--na-prob-file=%s" % (squad_dir / version / a) for a in args]
    assert ev.main(argv) == 0
    assert json.loads(capsys.readouterr().out) == pytest.approx(want)
    out_file = tmp_path / "eval.json"
    assert ev.main(argv + ["-o", str(out_file)]) == 0
    assert json.loads(out_file.read_text()) == pytest.approx(want)


def test_version_selection(fixtures_dir):
    data = json.loads((fixtures_dir / "squad" / "squad_v1.1_tiny.json").read_text("utf-8"))
    preds = {"q_light_1": "Margaret"}
    assert "exact_match" in ev.evaluate(data, preds)
    assert "HasAns_exact" in ev.evaluate(data, dict.fromkeys(
        [qa["id"] for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]], ""),
        version="2.0")
    assert ev.is_version_2(json.loads(
        (fixtures_dir / "squad" / "squad_v2.0_tiny.json").read_text("utf-8")))
    assert ev.has_gold_answers(data)
    assert not ev.has_gold_answers(_data({"id": "t", "question": "?"}))
    with pytest.raises(ValueError, match="version must be"):
        ev.evaluate(data, preds, version="3")


def test_bad_input_is_named(tmp_path, capsys):
    data = tmp_path / "data.json"
    data.write_text(json.dumps(_data(_qa("a", "x"), {"id": "b", "question": "?",
                                                       "answers": [{"answer_start": 1}]})))
    preds = tmp_path / "pred.json"
    preds.write_text(json.dumps({"a": "x", "b": "y"}))
    assert ev.main([str(data), str(preds)]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: %s: data[0].paragraphs[0].qas[1].answers[0].text: missing" % data)

    data.write_text(json.dumps(_data(_qa("a", "x"), _qa("b", is_impossible=True))))
    preds.write_text(json.dumps({"a": ["x"]}))
    with pytest.raises(SquadFormatError, match=r'pred\.json: "a": expected a string, got list'):
        ev.evaluate_files(str(data), str(preds))
    preds.write_text(json.dumps({"a": "x"}))
    with pytest.raises(ValueError, match=r"no prediction for 1 of 2 questions \(e\.g\. b\)"):
        ev.evaluate_files(str(data), str(preds))
    preds.write_text(json.dumps({"a": "x", "b": ""}))
    na = tmp_path / "na.json"
    na.write_text(json.dumps({"a": 0.5}))
    with pytest.raises(ValueError, match=r"no no-answer value for 1 predictions \(e\.g\. b\)"):
        ev.evaluate_files(str(data), str(preds), str(na))
    with pytest.raises(ValueError, match="question b has no gold answers"):
        ev.evaluate_files(str(data), str(preds), version="1.1")
    na.write_text("{")
    with pytest.raises(SquadFormatError, match=r"na\.json: line 1 column 2: invalid JSON"):
        ev.evaluate_files(str(data), str(preds), str(na))
