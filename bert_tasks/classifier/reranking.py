"""predict.py --rerank: a classifier export (a `--task_name=rerank` model, or any classifier with
a label "1") scores each query's candidates and gives them back in score order.

Inputs are `query<TAB>passage` lines; a query's candidates are its consecutive lines (the first
stage's order, kept as `was`). Each answer is one query:

    {"query": "...", "ranked": [{"passage": "...", "score": 0.97, "was": 3}, ...]}

where `score` is the probability of label "1" (relevant) and `was` the candidate's 1-based place
in the input.
"""
import json

from bert_tasks import ranking

RELEVANT_LABEL = "1"


def check_pairs(inputs):
    """Refuses (ValueError naming it) an input that is not `query<TAB>passage`: checked before
    the model is loaded."""
    for item in inputs:
        if len(item.text.split("\t")) != 2:
            raise ValueError("%s is not query<TAB>passage: --rerank takes a query and one of its "
                             "candidates a line" % item.source)


def rerank(predictor, inputs):
    """The answers (module docstring) of `inputs` (`predictor.Input`s, blank lines left out,
    `check_pairs`) with `predictor` (a `bert_runner.serving.predictor.Predictor` of a classifier
    export). Raises ValueError naming the export that cannot rerank."""
    if predictor.format != "classifier":
        raise ValueError("--rerank needs a classifier export (export_model.py --task_name=rerank); "
                         "--model=%s is a %s export" % (predictor.export_dir, predictor.format))
    results = predictor.predict(inputs)
    if "probabilities" not in results[0] or RELEVANT_LABEL not in results[0]["probabilities"]:
        raise ValueError("--model=%s has no label %r to rank by (labels: %s): export a "
                         "--task_name=rerank model" % (
                             predictor.export_dir, RELEVANT_LABEL,
                             ", ".join(results[0].get("probabilities", {})) or "a score"))
    pairs = [item.text.split("\t") for item in inputs]
    answers = []
    for group in ranking.candidate_lists([query for query, _ in pairs]):
        ranked = sorted(group, key=lambda i: -results[i]["probabilities"][RELEVANT_LABEL])
        answers.append({"query": pairs[group[0]][0], "ranked": [
            {"passage": pairs[i][1], "score": results[i]["probabilities"][RELEVANT_LABEL],
             "was": group.index(i) + 1} for i in ranked]})
    return answers


def describe(answer):
    """Readable lines of one answer: the query, then each candidate with its score and place."""
    lines = [answer["query"]]
    for rank, candidate in enumerate(answer["ranked"], 1):
        lines.append("  %d. %.4f (was %d)  %s" % (rank, candidate["score"], candidate["was"],
                                                  candidate["passage"]))
    return "\n".join(lines)


def print_reranked(export_dir, inputs, output_format, out):
    """predict.py --rerank: checks `inputs` (`predictor.Input`s), loads `export_dir`, writes each
    query's answer to `out` (readable lines, or one JSON object per query)."""
    from bert_runner.serving.predictor import Predictor

    inputs = [item for item in inputs if item.text.strip()]
    check_pairs(inputs)
    # Every input is read: their call builds only the `pairs` signature (as predictor.predict).
    for answer in rerank(Predictor(export_dir, warm_up=False), inputs):
        out.write((json.dumps(answer, ensure_ascii=False) if output_format == "json"
                   else describe(answer)) + "\n")
