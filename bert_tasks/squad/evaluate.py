"""The official SQuAD v1.1 and v2.0 scores (EM and F1), built in.

The metrics are the official evaluation scripts' (evaluate-v1.1.py, evaluate-v2.0.py),
operation for operation, so the figures are identical:

* answers are normalized by lower-casing, removing ASCII punctuation, the articles a/an/the and
  extra whitespace; EM and F1 take the maximum over the gold answers;
* v1.1 returns {"exact_match", "f1"}; a question without prediction scores 0;
* v2.0 returns {"exact", "f1", "total", "HasAns_*", "NoAns_*"}; gold answers that normalize to ""
  are dropped and an unanswerable question's only gold answer is "". With a no-answer
  probability file (the `null_odds.json` written by prediction), a question whose value exceeds
  `na_prob_thresh` (default 1.0) counts as predicted unanswerable, and the best-threshold search
  adds best_exact, best_exact_thresh, best_f1, best_f1_thresh.

Command line (the official scripts' arguments):

    python -m bert_tasks.squad.evaluate dev-v2.0.json predictions.json --na-prob-file null_odds.json \\
        [--na-prob-thresh 1.0] [--out-file eval.json] [--version {auto,1.1,2.0}]

`auto` scores with v2.0 when the data has `is_impossible` fields or an `--na-prob-file` is given,
otherwise with v1.1. Differences from the official scripts, on bad input only: malformed files
fail with the file and JSON path; for v2.0 missing predictions (or no-answer values) raise a
clear error where the official script raises a bare KeyError.
"""
import argparse
import collections
import json
import re
import string
import sys

from absl import logging

from bert_tasks.squad.io_utils import SquadFormatError, check_type, field, read_json

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


# ----------------------------------------------------------------------------------------------
# Input checking: both official scripts assume well-formed files.

def gold_answers(dataset, source="<data>", require_answers=True):
    """Checks the data part of a SQuAD file and lists its questions.

    Args:
      dataset: the parsed JSON document ({"data": [...]}).
      source: str naming the input in error messages.
      require_answers: bool; if False a question without "answers" has no gold answers.
    Returns:
      list of (qas_id, [answer texts]) in file order (duplicates kept, as v1.1 counts them).
    Raises:
      SquadFormatError: a missing or mistyped field, with its JSON path.
    """
    check_type(dataset, dict, "(top level)", source)
    questions = []
    for i, article in enumerate(field(dataset, "data", list, "", source)):
        article_path = "data[%d]" % i
        check_type(article, dict, article_path, source)
        for j, paragraph in enumerate(field(article, "paragraphs", list, article_path, source)):
            paragraph_path = "%s.paragraphs[%d]" % (article_path, j)
            check_type(paragraph, dict, paragraph_path, source)
            for k, qa in enumerate(field(paragraph, "qas", list, paragraph_path, source)):
                qa_path = "%s.qas[%d]" % (paragraph_path, k)
                check_type(qa, dict, qa_path, source)
                qid = field(qa, "id", str, qa_path, source)
                texts = []
                if "answers" not in qa and not require_answers:
                    questions.append((qid, texts))
                    continue
                for m, answer in enumerate(field(qa, "answers", list, qa_path, source)):
                    answer_path = "%s.answers[%d]" % (qa_path, m)
                    check_type(answer, dict, answer_path, source)
                    texts.append(field(answer, "text", str, answer_path, source))
                questions.append((qid, texts))
    return questions


def _check_string_map(obj, value_kind, source):
    check_type(obj, dict, "(top level)", source)
    for key, value in obj.items():
        check_type(value, value_kind, json.dumps(key), source)
    return obj


def is_version_2(dataset):
    """True if any question of the parsed SQuAD document has an `is_impossible` field."""
    return any("is_impossible" in qa
               for article in dataset.get("data", []) for paragraph in article.get("paragraphs", [])
               for qa in paragraph.get("qas", []))


# ----------------------------------------------------------------------------------------------
# SQuAD v1.1 (evaluate-v1.1.py)

def f1_score_v1(prediction, ground_truth):
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def exact_match_score_v1(prediction, ground_truth):
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def evaluate_v1(questions, predictions):
    """Official v1.1 scores.

    Args:
      questions: list of (qas_id, [gold texts]) from `gold_answers`.
      predictions: dict qas_id -> predicted text.
    Returns:
      {"exact_match": float, "f1": float}, percentages.
    """
    f1 = exact_match = total = 0
    for qid, ground_truths in questions:
        total += 1
        if qid not in predictions:
            logging.warning("Unanswered question %s will receive score 0.", qid)
            continue
        if not ground_truths:
            raise ValueError("question %s has no gold answers; SQuAD 2.0 data is scored with "
                             "version 2.0" % qid)
        prediction = predictions[qid]
        exact_match += max(exact_match_score_v1(prediction, gt) for gt in ground_truths)
        f1 += max(f1_score_v1(prediction, gt) for gt in ground_truths)
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


# ----------------------------------------------------------------------------------------------
# SQuAD v2.0 (evaluate-v2.0.py)

def _get_tokens(s):
    return normalize_answer(s).split() if s else []


def compute_exact(a_gold, a_pred):
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
    gold_toks = _get_tokens(a_gold)
    pred_toks = _get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if not gold_toks or not pred_toks:
        # If either is no-answer, then F1 is 1 if they agree, 0 otherwise.
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def _raw_scores_v2(questions, preds):
    exact_scores = {}
    f1_scores = {}
    for qid, texts in questions:
        gold = [a for a in texts if normalize_answer(a)] or [""]
        exact_scores[qid] = max(compute_exact(a, preds[qid]) for a in gold)
        f1_scores[qid] = max(compute_f1(a, preds[qid]) for a in gold)
    return exact_scores, f1_scores


def _apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
    return {qid: float(not qid_to_has_ans[qid]) if na_probs[qid] > na_prob_thresh else s
            for qid, s in scores.items()}


def _make_eval_dict(exact_scores, f1_scores, qid_list=None):
    if not qid_list:
        total = len(exact_scores)
        exact = sum(exact_scores.values())
        f1 = sum(f1_scores.values())
    else:
        total = len(qid_list)
        exact = sum(exact_scores[k] for k in qid_list)
        f1 = sum(f1_scores[k] for k in qid_list)
    return {"exact": 100.0 * exact / total, "f1": 100.0 * f1 / total, "total": total}


def _find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    """Sweeps the no-answer threshold over the sorted na_probs; returns (best %, threshold)."""
    cur_score = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    best_score = cur_score
    best_thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def evaluate_v2(questions, predictions, na_probs=None, na_prob_thresh=1.0):
    """Official v2.0 scores.

    Args:
      questions: list of (qas_id, [gold texts]) from `gold_answers` (empty list: unanswerable).
      predictions: dict qas_id -> predicted text ("" predicts no answer).
      na_probs: dict qas_id -> no-answer value (e.g. null_odds.json), or None (all 0.0).
      na_prob_thresh: float; values above it count as predicting no answer.
    Returns:
      dict in the official key order: exact, f1, total, HasAns_exact, HasAns_f1, HasAns_total,
      NoAns_exact, NoAns_f1, NoAns_total (the subsets that are non-empty), and with na_probs
      best_exact, best_exact_thresh, best_f1, best_f1_thresh.
    Raises:
      ValueError: a question has no prediction, or a prediction has no na_probs value.
    """
    missing = [qid for qid, _ in questions if qid not in predictions]
    if missing:
        raise ValueError("no prediction for %d of %d questions (e.g. %s); the official v2.0 "
                         "script cannot score this either" % (len(missing), len(questions),
                                                              ", ".join(missing[:5])))
    use_na_probs = na_probs is not None
    if not use_na_probs:
        na_probs = {k: 0.0 for k in predictions}
    missing = [qid for qid in predictions if qid not in na_probs]
    if missing:
        raise ValueError("no no-answer value for %d predictions (e.g. %s)"
                         % (len(missing), ", ".join(missing[:5])))
    qid_to_has_ans = {qid: bool(texts) for qid, texts in questions}
    has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
    no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
    exact_raw, f1_raw = _raw_scores_v2(questions, predictions)
    exact_thresh = _apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    f1_thresh = _apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    out_eval = _make_eval_dict(exact_thresh, f1_thresh)
    for prefix, qids in (("HasAns", has_ans_qids), ("NoAns", no_ans_qids)):
        if qids:
            for key, value in _make_eval_dict(exact_thresh, f1_thresh, qids).items():
                out_eval["%s_%s" % (prefix, key)] = value
    if use_na_probs:
        best_exact, exact_thresh_value = _find_best_thresh(predictions, exact_raw, na_probs,
                                                           qid_to_has_ans)
        best_f1, f1_thresh_value = _find_best_thresh(predictions, f1_raw, na_probs,
                                                     qid_to_has_ans)
        out_eval["best_exact"] = best_exact
        out_eval["best_exact_thresh"] = exact_thresh_value
        out_eval["best_f1"] = best_f1
        out_eval["best_f1_thresh"] = f1_thresh_value
    return out_eval


# ----------------------------------------------------------------------------------------------
# Files and command line

def evaluate(dataset, predictions, na_probs=None, version="auto", na_prob_thresh=1.0,
             source="<data>"):
    """Scores `predictions` against a parsed SQuAD document.

    Args:
      dataset: parsed SQuAD JSON ({"data": [...]}).
      predictions: dict qas_id -> text.
      na_probs: dict qas_id -> float, or None.
      version: "1.1", "2.0" or "auto" (2.0 if the data has is_impossible or na_probs is given).
      na_prob_thresh: float, v2.0 only.
      source: str naming the data in error messages.
    Returns:
      dict of metrics (see evaluate_v1 / evaluate_v2).
    """
    questions = gold_answers(dataset, source)
    if version == "auto":
        version = "2.0" if na_probs is not None or is_version_2(dataset) else "1.1"
    if version == "1.1":
        return evaluate_v1(questions, predictions)
    if version == "2.0":
        return evaluate_v2(questions, predictions, na_probs, na_prob_thresh)
    raise ValueError("version must be 'auto', '1.1' or '2.0', got %r" % (version,))


def has_gold_answers(dataset, source="<data>"):
    """True if the parsed SQuAD document can be scored: it has at least one gold answer (test
    sets have none, or no "answers" fields at all).

    Raises:
      SquadFormatError: the document is malformed in another way (see `gold_answers`).
    """
    return any(texts for _, texts in gold_answers(dataset, source, require_answers=False))


def should_score(do_eval, gold_data, source):
    """Whether to score the predictions of `gold_data` (the parsed predict file).

    Args:
      do_eval: the `--do_eval` flag: None scores when the file has gold answers (dev sets do,
        test sets do not); True requires them; False never scores.
      source: str, the file name for messages.
    Raises:
      SquadFormatError: the file is malformed (checked before any work is done).
      ValueError: `do_eval` is True but the file has no answers.
    """
    if do_eval is False:
        return False
    has_answers = has_gold_answers(gold_data, source)
    if do_eval and not has_answers:
        raise ValueError("--do_eval needs gold answers, but %s has none" % source)
    return has_answers


def score_predictions(gold_data, predictions, version_2_with_negative, source="<data>"):
    """The official scores of run_squad's predictions against its predict file.

    v2.0 is scored as `evaluate-v2.0.py data.json predictions.json --na-prob-file
    null_odds.json` (the original README's command), so the result includes the best-threshold
    search that tells which `--null_score_diff_threshold` to use. Otherwise the data decides
    (v2.0 definitions if it has `is_impossible` fields, else v1.1).

    Args:
      gold_data: the parsed predict file.
      predictions: `postprocess.Predictions` (from `write_predictions`).
      version_2_with_negative: bool, the flag the predictions were made with.
      source: str, the predict file's name for error messages.
    Returns:
      dict of metrics.
    """
    if version_2_with_negative:
        return evaluate(gold_data, predictions.predictions, predictions.null_odds, version="2.0",
                        source=source)
    return evaluate(gold_data, predictions.predictions, source=source)


def constant_baselines(gold_data, version_2_with_negative, source="<data>"):
    """The best constant answer's scores, printed beside run_squad's as a classifier's are beside
    the evaluated set's majority label: the same text given to every question, either the most
    frequent first gold answer or, with `version_2_with_negative`, no answer ("").

    Args:
      gold_data, version_2_with_negative, source: as `score_predictions` takes them.
    Returns:
      dict metric name -> text naming the answer and its score, for the metrics both share.
    """
    questions = gold_answers(gold_data, source)
    counts = collections.Counter(texts[0] for _, texts in questions if texts)
    candidates = [text for text, _ in counts.most_common(1)]
    if version_2_with_negative:
        candidates.append("")
    best = None
    for text in candidates:
        # Scored as `score_predictions` scores the model's answers.
        scored = evaluate(gold_data, {qid: text for qid, _ in questions},
                          version="2.0" if version_2_with_negative else "auto", source=source)
        if best is None or scored["f1"] > best[1]["f1"]:
            best = (text, scored)
    if best is None:
        return {}
    text, scored = best
    name = "always no answer" if text == "" else "always %s" % json.dumps(text, ensure_ascii=False)
    return {key: "%s %.2f" % (name, value) for key, value in scored.items()
            if key in ("exact_match", "exact", "f1")}


def evaluate_files(data_file, pred_file, na_prob_file=None, version="auto", na_prob_thresh=1.0,
                   out_file=None):
    """Reads the three files, scores, logs the metrics and writes them to `out_file` (JSON, as the
    official v2.0 script's --out-file) when given. Returns the metrics dict."""
    dataset = read_json(data_file)
    predictions = _check_string_map(read_json(pred_file), str, pred_file)
    na_probs = None
    if na_prob_file:
        na_probs = _check_string_map(read_json(na_prob_file), (int, float), na_prob_file)
    metrics = evaluate(dataset, predictions, na_probs, version, na_prob_thresh, source=data_file)
    logging.info("SQuAD scores of %s: %s", pred_file, json.dumps(metrics))
    if out_file:
        write_metrics(out_file, metrics)
    return metrics


def write_metrics(path, metrics):
    """Writes the metrics dict as one line of JSON (the official v2.0 script's --out-file),
    atomically."""
    # Imported here: modeling.checkpoint loads TensorFlow, which scoring to stdout does not need.
    from modeling.checkpoint.files import write_text_atomic
    write_text_atomic(path, json.dumps(metrics))


def _parse_args(argv):
    # argparse, not absl flags: these are the official scripts' positional and dashed arguments.
    parser = argparse.ArgumentParser(
        prog="python -m bert_tasks.squad.evaluate",
        description="Official SQuAD v1.1 / v2.0 evaluation (EM and F1).")
    parser.add_argument("data_file", metavar="data.json", help="Input data JSON file.")
    parser.add_argument("pred_file", metavar="pred.json", help="Model predictions.")
    parser.add_argument("--out-file", "-o", metavar="eval.json",
                        help="Write accuracy metrics to file (default is stdout).")
    parser.add_argument("--na-prob-file", "-n", metavar="na_prob.json",
                        help="Model estimates of probability of no answer (v2.0).")
    parser.add_argument("--na-prob-thresh", "-t", type=float, default=1.0,
                        help='Predict "" if no-answer probability exceeds this (default = 1.0).')
    parser.add_argument("--version", choices=("auto", "1.1", "2.0"), default="auto",
                        help="Which official definition to use (default: from the data).")
    return parser.parse_args(argv)


def main(argv=None):
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    try:
        metrics = evaluate_files(args.data_file, args.pred_file, args.na_prob_file, args.version,
                                 args.na_prob_thresh, args.out_file)
    except (SquadFormatError, ValueError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    if not args.out_file:
        # v1.1 printed one line, v2.0 an indented object.
        print(json.dumps(metrics, indent=2 if "exact" in metrics else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
