"""A cross-encoder reranker: run_classifier.py --task_name=rerank ranks each dev query's
candidates (MRR@10, nDCG@10, recall@1 beside the first stage's order and a random one), and
predict.py --rerank serves a query and its candidates in score order."""
import json
import random
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from modeling_helpers import TINY
from test_run_classifier import read_eval_results, run_in_process
from test_sentence_embedding_training import ADJECTIVES, NOUNS, VERBS


def test_candidate_lists_and_their_metrics_by_hand():
    from bert_tasks import ranking

    lists = ranking.candidate_lists(["a", "a", "a", "b", "b", "c"])
    assert lists == [[0, 1, 2], [3, 4], [5]]
    relevant = np.array([False, False, True, True, False, False])  # "c" has none: left out
    scores = np.array([0.1, 0.9, 0.5, 0.2, 0.8, 0.3])
    metrics = ranking.list_metrics(lists, scores, relevant)
    assert metrics["mrr_at_10"] == pytest.approx((1 / 2 + 1 / 2) / 2)
    assert metrics["recall_at_1"] == 0.0
    first_stage = ranking.list_metrics(lists, -np.arange(6.0), relevant)
    assert first_stage["mrr_at_10"] == pytest.approx((1 / 3 + 1) / 2)


def write_rerank_task(data_dir, seed=0, queries=(48, 16, 4), candidates=4):
    """train/dev/test TSVs: each query ("the red dog") has one relevant passage among
    `candidates`, at a random place of the first stage's order. Relevance is a word the tiny
    model learns in seconds ("good" in the relevant passage, "bad" in the others), so that the
    test checks the ranking, not what a 2-layer model of 99 word-pieces can understand."""
    rng = random.Random(seed)
    topics = rng.sample([(a, n) for a in ADJECTIVES for n in NOUNS], sum(queries))
    data_dir.mkdir(parents=True, exist_ok=True)
    start = 0
    for name, count in zip(("train", "dev", "test"), queries):
        rows = []
        for adjective, noun in topics[start:start + count]:
            others = rng.sample([n for n in NOUNS if n != noun], candidates - 1)
            group = [(f"the {n} is {'good' if n == noun else 'bad'} and can "
                      f"{rng.choice(VERBS)} .", int(n == noun)) for n in [noun, *others]]
            rng.shuffle(group)
            rows += [(f"the {adjective} {noun}", passage, label) for passage, label in group]
        start += count
        header, lines = ("query\tpassage\tlabel", [f"{q}\t{p}\t{l}" for q, p, l in rows])
        if name == "test":
            header, lines = "query\tpassage", [f"{q}\t{p}" for q, p, _ in rows]
        (data_dir / f"{name}.tsv").write_text("\n".join([header, *lines]) + "\n")


@pytest.mark.large
def test_a_reranker_trains_ranks_and_serves(tmp_path):
    write_rerank_task(tmp_path / "data")
    out = tmp_path / "out"
    run_in_process(tmp_path / "data", out, task_name="rerank", do_train=True, do_eval=True,
                   do_predict=True, init_checkpoint=str(TINY / "bert_model.ckpt"),
                   train_batch_size=16, num_train_epochs=16, learning_rate=1e-3)
    results = read_eval_results(out / "eval_results.txt")
    report = json.loads((out / "eval_report.json").read_text())
    baseline = report["baselines"]["eval_mrr_at_10"]
    assert baseline.startswith("first-stage order") and "(16 queries)" in baseline
    first_stage = float(baseline.split()[2].rstrip(","))
    assert float(results["eval_mrr_at_10"]) > first_stage + 0.2, (results, baseline)
    assert {"eval_ndcg_at_10", "eval_recall_at_1", "eval_accuracy"} <= set(results)

    # predict.py --rerank's answers, from a classifier export's answers (its format's shape: a
    # probability per label) here given by the run's test probabilities.
    from bert_runner.serving.predictor import Input
    from bert_tasks.classifier import reranking

    probabilities = np.loadtxt(out / "test_results.tsv")

    class Export:
        format, export_dir = "classifier", "export"

        @staticmethod
        def predict(inputs):
            return [{"probabilities": {"0": 1 - p, "1": p}} for p in probabilities[:, 1]]

    lines = (tmp_path / "data" / "test.tsv").read_text().splitlines()[1:]
    inputs = [Input(line, f"line {i}") for i, line in enumerate(lines, 1)]
    reranking.check_pairs(inputs)
    answers = reranking.rerank(Export, inputs)
    assert len(answers) == 4 and all(len(a["ranked"]) == 4 for a in answers)
    for number, answer in enumerate(answers):
        assert answer["query"] == lines[4 * number].split("\t")[0]
        scores = [c["score"] for c in answer["ranked"]]
        assert scores == sorted(scores, reverse=True)
        expected = probabilities[4 * number:4 * number + 4, 1]
        for candidate in answer["ranked"]:
            assert candidate["score"] == expected[candidate["was"] - 1]
            assert candidate["passage"] == lines[4 * number + candidate["was"] - 1].split("\t")[1]
        assert answer["ranked"][0]["passage"].split()[3] == "good"  # the relevant one first
    assert reranking.describe(answers[0]).splitlines()[1].startswith("  1. ")
    # The export is refused before it is loaded when a line is not a pair.
    single = subprocess.run([sys.executable, str(ROOT / "predict.py"), f"--model={tmp_path}",
                             "--rerank", "just a query"], capture_output=True, text=True)
    assert single.returncode == 2 and "is not query<TAB>passage" in single.stderr


@pytest.mark.large
def test_a_reranker_predicts_the_same_from_its_cross_encoder_export(tmp_path):
    """A reranker's Hugging Face export is a one-logit cross-encoder; given back as
    --init_checkpoint to a predicting run_classifier --task_name=rerank (two labels), it gives
    the run's own test probabilities (its logit z read as the labels' [0, z])."""
    from test_export import _export_huggingface

    write_rerank_task(tmp_path / "data", queries=(16, 4, 4))
    run_in_process(tmp_path / "data", tmp_path / "run", task_name="rerank", do_train=True,
                   do_predict=True, init_checkpoint=str(TINY / "bert_model.ckpt"),
                   train_batch_size=16, num_train_epochs=1.0)
    hf = tmp_path / "hf"
    _export_huggingface(tmp_path / "run", hf, max_seq_length=24)
    assert len(json.loads((hf / "config.json").read_text())["id2label"]) == 1
    run_in_process(tmp_path / "data", tmp_path / "again", task_name="rerank", do_predict=True,
                   init_checkpoint=str(hf), bert_config_file=None,
                   vocab_file=str(hf / "vocab.txt"))
    np.testing.assert_allclose(np.loadtxt(tmp_path / "again" / "test_results.tsv"),
                               np.loadtxt(tmp_path / "run" / "test_results.tsv"), atol=1e-6)
