"""run_glue.py and run_squad_grid.py (the paper's fine-tuning protocol as one command) on a
miniature GLUE and SQuAD of the tiny model. run_glue:
a 2-value learning-rate grid with 2 restarts, one setting run first as a printed
run_classifier.py command (a job array's), the rest by the command, which continues from it;
the choice on the dev metric, the submission files in the GLUE server's layout (MNLI-m, MNLI-mm
and AX from the MNLI model, WNLI the training set's majority class), the table, and
--select_only."""
import json
import os
import pathlib
import random
import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT
from modeling_helpers import TINY
from bert_tasks.squad import evaluate
from experiments import protocol
from refusals import assert_refused
from test_run_squad import squad_data, write_json

WORDS = "the a dog cat bird fish tree house car road river city hill sun moon star".split()
NLI = ("contradiction", "entailment", "neutral")
MNLI_TRAIN_HEADER = ["index"] + [f"c{i}" for i in range(1, 8)] + [
    "sentence1", "sentence2", "label1", "gold_label"]
MNLI_DEV_HEADER = ["index"] + [f"c{i}" for i in range(1, 8)] + [
    "sentence1", "sentence2", "label1", "label2", "label3", "label4", "label5", "gold_label"]
MNLI_TEST_HEADER = ["index"] + [f"c{i}" for i in range(1, 8)] + ["sentence1", "sentence2"]
PAIR_HEADER = ["index", "sentence1", "sentence2"]


def _sentence(rng):
    return " ".join(rng.choice(WORDS) for _ in range(4))


def _write(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(row) + "\n" for row in [header, *rows]), encoding="utf-8")


def write_mini_glue(glue_dir):
    """MNLI (train, matched and mismatched dev and test), diagnostic/ (AX) and WNLI in GLUE's
    layout; returns {file: number of test rows}."""
    rng = random.Random(0)

    def mnli_rows(count, label_columns):
        """Rows of `count` examples; the gold label last of `label_columns` label columns."""
        return [[str(i)] + ["x"] * 7 + [_sentence(rng), _sentence(rng)]
                + [NLI[i % 3]] * label_columns for i in range(count)]

    mnli = glue_dir / "MNLI"
    _write(mnli / "train.tsv", MNLI_TRAIN_HEADER, mnli_rows(24, 2))
    for which in ("matched", "mismatched"):
        _write(mnli / f"dev_{which}.tsv", MNLI_DEV_HEADER, mnli_rows(9, 6))
        _write(mnli / f"test_{which}.tsv", MNLI_TEST_HEADER, mnli_rows(5, 0))
    _write(glue_dir / "diagnostic" / "diagnostic.tsv", PAIR_HEADER,
           [[str(i), _sentence(rng), _sentence(rng)] for i in range(4)])
    wnli = glue_dir / "WNLI"
    _write(wnli / "train.tsv", PAIR_HEADER + ["label"],
           [[str(i), _sentence(rng), _sentence(rng), "1" if i % 3 else "0"] for i in range(6)])
    _write(wnli / "dev.tsv", PAIR_HEADER + ["label"], [["0", "a dog", "the dog", "1"]])
    _write(wnli / "test.tsv", PAIR_HEADER, [[str(i), _sentence(rng), "a cat"] for i in range(3)])
    return {"MNLI-m.tsv": 5, "MNLI-mm.tsv": 5, "AX.tsv": 4, "WNLI.tsv": 3}


def run_glue(glue_dir, output_dir, *args):
    command = [sys.executable, str(ROOT / "run_glue.py"), f"--glue_dir={glue_dir}",
               f"--output_dir={output_dir}", f"--vocab_file={TINY / 'vocab.txt'}",
               f"--bert_config_file={TINY / 'bert_config.json'}",
               f"--init_checkpoint={TINY / 'bert_model.ckpt'}", "--tasks=mnli,wnli",
               "--learning_rates=1e-3,1e-5", "--restarts=2", "--epochs=1",
               "--train_batch_sizes=8", "--max_seq_length=16", "--eval_batch_size=16",
               "--predict_batch_size=16", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


def _report(directory):
    return json.loads((directory / "eval_report.json").read_text())["metrics"]


@pytest.mark.large
def test_grid_choice_resume_and_submission_files(tmp_path):
    glue_dir, out = tmp_path / "glue", tmp_path / "out"
    test_rows = write_mini_glue(glue_dir)

    printed = run_glue(glue_dir, out, "--print_commands")
    assert printed.returncode == 0, printed.stderr[-3000:]
    commands = printed.stdout.splitlines()
    assert len(commands) == 4  # MNLI: 2 learning rates x 2 restarts; WNLI is not fine-tuned
    assert all(c.startswith("python run_classifier.py --task_name=mnli ") for c in commands)
    assert "--random_seed=12345" in commands[0] and "--random_seed=12346" in commands[1]
    # A job array ran the first setting: the command continues from it.
    first = shlex.split(commands[0])
    job = subprocess.run([sys.executable, str(ROOT / first[1]), *first[2:]], capture_output=True,
                         text=True, timeout=600, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert job.returncode == 0, job.stderr[-3000:]
    settings = sorted((out / "mnli").glob("lr*"))
    assert [s.name for s in settings] == ["lr0.001_ep1_bs8_r1"]
    kept = {p.name: p.stat().st_mtime_ns for p in settings[0].glob("ckpt-*")}

    result = run_glue(glue_dir, out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "mnli/lr0.001_ep1_bs8_r1: finished before" in result.stderr
    assert {p.name: p.stat().st_mtime_ns for p in settings[0].glob("ckpt-*")} == kept
    reports = {d.name: _report(d)["eval_accuracy"] for d in sorted((out / "mnli").glob("lr*"))}
    assert sorted(reports) == ["lr0.001_ep1_bs8_r1", "lr0.001_ep1_bs8_r2",
                               "lr1e-05_ep1_bs8_r1", "lr1e-05_ep1_bs8_r2"]
    best = max(reports, key=lambda name: (reports[name], -sorted(reports).index(name)))
    table = (out / "glue_results.tsv").read_text().splitlines()
    header = table[0].split("\t")
    assert header[:4] == ["task", "chosen setting", "dev metric", "dev"]
    rows = {line.split("\t")[0]: dict(zip(header, line.split("\t"))) for line in table[1:]}
    assert list(rows) == ["mnli", "mnli-mm", "ax", "wnli"]
    mnli = rows["mnli"]
    assert [mnli["chosen setting"], mnli["dev metric"], mnli["dev"]] == [
        best, "eval_accuracy", f"{100 * reports[best]:.2f}"]
    assert mnli["seed"] == str(12345 + int(best[-1]) - 1)
    restarts = [reports[name] for name in reports if name[:-1] == best[:-1]]
    assert mnli["restarts at chosen"] == protocol.spread(restarts, 100)
    assert mnli["all settings"] == protocol.spread(list(reports.values()), 100)
    assert (mnli["finished"], mnli["diverged"]) == ("4", "0")
    assert mnli["dev baseline"] == "majority 'contradiction' 33.33"
    assert mnli["paper test (Base / Large)"] == "84.6 / 86.7 (MNLI-m accuracy)"
    mismatched = _report(out / "mnli" / "predict_mnli-mm")["eval_accuracy"]
    assert rows["mnli-mm"]["dev"] == f"{100 * mismatched:.2f}"
    assert [rows[task]["submission"] for task in rows] == [
        "MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv", "WNLI.tsv"]
    assert rows["wnli"]["chosen setting"] == "majority class '1'"
    assert "84.6 / 86.7" in result.stdout  # the table is printed too

    # The GLUE server's files: a header, then each test index with a label name, in order.
    submission = out / "submission"
    assert sorted(p.name for p in submission.iterdir()) == sorted([*test_rows, "chosen.json"])
    chosen = json.loads((submission / "chosen.json").read_text())
    assert {task: entry["setting"] for task, entry in chosen.items()} == {
        "mnli": best, "wnli": None}
    for name, count in test_rows.items():
        lines = (submission / name).read_text().splitlines()
        assert lines[0] == "index\tprediction"
        assert [line.split("\t")[0] for line in lines[1:]] == [str(i) for i in range(count)]
        labels = {line.split("\t")[1] for line in lines[1:]}
        assert labels <= ({"1"} if name == "WNLI.tsv" else set(NLI)), (name, labels)

    # --select_only: a setting that never ran is counted out, nothing is trained, and the same
    # choice keeps its predictions.
    again = run_glue(glue_dir, out, "--select_only", "--learning_rates=1e-3,1e-5,5e-6")
    assert again.returncode == 0, again.stderr[-3000:]
    assert not (out / "mnli" / "lr5e-06_ep1_bs8_r1").exists()
    assert "mnli: the same choice as before: its predictions are kept" in again.stderr
    rows = {line.split("\t")[0]: dict(zip(header, line.split("\t")))
            for line in (out / "glue_results.tsv").read_text().splitlines()[1:]}
    assert rows["mnli"]["chosen setting"] == best and rows["mnli"]["finished"] == "4"
    # Another --max_seq_length makes other runs than the folders hold: nothing is reused.
    other = run_glue(glue_dir, out, "--select_only", "--max_seq_length=32")
    assert_refused(other, "grid-setting-not-comparable")
    assert "max_seq_length 16 -> 32" in other.stderr
    # One value twice in a grid list (1e-3 and 0.001) would be one setting counted twice.
    twice = run_glue(glue_dir, out, "--learning_rates=1e-3,0.001")
    assert twice.returncode == 2 and "--learning_rates gives 0.001 more than once" in twice.stderr

    # Another dev set: every finished model is scored on it, none trained again; another test
    # set: the chosen model predicts it (the same choice's files are not kept).
    dev = glue_dir / "MNLI" / "dev_matched.tsv"
    lines = dev.read_text(encoding="utf-8").splitlines(keepends=True)
    dev.write_text("".join(lines[:-1]), encoding="utf-8")
    test = glue_dir / "MNLI" / "test_matched.tsv"
    test.write_text("".join(test.read_text(encoding="utf-8").splitlines(keepends=True)[:-1]),
                    encoding="utf-8")
    rescored = run_glue(glue_dir, out)
    assert rescored.returncode == 0, rescored.stderr[-3000:]
    assert rescored.stderr.count("its report scored otherwise than this command "
                                 "(eval_data_sha256") == 4
    assert "fine-tuning into" not in rescored.stderr
    assert {p.name: p.stat().st_mtime_ns for p in settings[0].glob("ckpt-*")} == kept
    assert "the same choice as before" not in rescored.stderr
    assert len((submission / "MNLI-m.tsv").read_text().splitlines()) == 1 + 4


def test_bad_flags_are_refused_before_any_run(tmp_path):
    glue_dir = tmp_path / "glue"
    write_mini_glue(glue_dir)
    result = run_glue(glue_dir, tmp_path / "out", "--learning_rates=1e-3,-1")
    assert result.returncode == 2 and "each float must be > 0" in result.stderr, result.stderr
    result = run_glue(glue_dir, tmp_path / "out", "--tasks=mnli,cola")
    assert_refused(result, "glue-task-folder-missing")
    assert "has no CoLA/ folder for --tasks cola" in result.stderr
    assert_refused(run_glue(glue_dir, tmp_path / "out", "--tasks=mnli,squad"),
                   "glue-task-folder-missing")
    assert not (tmp_path / "out").exists()


@pytest.mark.large
def test_squad_grid_chooses_the_best_threshold_f1_and_predicts_at_it(tmp_path):
    """SQuAD v2.0 on a 2-value learning-rate grid: the setting of the best `best_f1` chosen, its
    model predicting the dev set again at that setting's best no-answer threshold."""
    train = write_json(tmp_path / "train.json", squad_data(32, seed=1, impossible_every=4)[0])
    dev = write_json(tmp_path / "dev.json", squad_data(8, seed=2, impossible_every=4)[0])
    out = tmp_path / "out"
    command = [sys.executable, str(ROOT / "run_squad_grid.py"), f"--train_file={train}",
               f"--predict_file={dev}", "--version_2_with_negative", f"--output_dir={out}",
               f"--vocab_file={TINY / 'vocab.txt'}",
               f"--bert_config_file={TINY / 'bert_config.json'}",
               f"--init_checkpoint={TINY / 'bert_model.ckpt'}", "--learning_rates=1e-3,1e-5",
               "--epochs=1", "--train_batch_sizes=16", "--max_seq_length=32", "--doc_stride=8",
               "--max_query_length=8", "--predict_batch_size=32"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    printed = subprocess.run([*command, "--print_commands"], capture_output=True, text=True,
                             timeout=600, env=env)
    assert printed.returncode == 0, printed.stderr[-3000:]
    lines = printed.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("python run_squad.py ") for line in lines)
    assert "--version_2_with_negative=true" in lines[0]

    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    scores = {d.name: json.loads((d / "eval_results.json").read_text())
              for d in sorted((out / "squad").glob("lr*"))}
    assert sorted(scores) == ["lr0.001_ep1_bs16_r1", "lr1e-05_ep1_bs16_r1"]
    best = max(scores, key=lambda name: (scores[name]["best_f1"], -sorted(scores).index(name)))
    header, row = [line.split("\t") for line in
                   (out / "squad_results.tsv").read_text().splitlines()[:2]]
    assert row[:4] == ["squad v2.0", best, "best_f1", f"{scores[best]['best_f1']:.2f}"]
    # The dev set's best constant answer: no answer (a quarter of its questions) or a text.
    name, shown = re.fullmatch(r"always (no answer|\".+\") ([\d.]+)",
                               row[header.index("dev baseline")]).groups()
    gold = json.loads(pathlib.Path(dev).read_text())
    text = "" if name == "no answer" else json.loads(name)
    f1 = evaluate.evaluate(gold, {qa["id"]: text for article in gold["data"]
                                  for paragraph in article["paragraphs"]
                                  for qa in paragraph["qas"]}, version="2.0")["f1"]
    assert shown == f"{f1:.2f}" and f1 >= 25.0
    threshold = scores[best]["best_f1_thresh"]
    assert f"best no-answer threshold {threshold:g}" in result.stderr
    at_threshold = json.loads((out / "squad" / "predict_best_threshold" / "eval_results.json")
                              .read_text())
    assert at_threshold["f1"] == pytest.approx(scores[best]["best_f1"], abs=1e-6)
    predictions = json.loads((out / "predictions" / "predictions.json").read_text())
    assert len(predictions) == 8
    assert sorted(p.name for p in (out / "predictions").iterdir()) == [
        "nbest_predictions.json", "null_odds.json", "predictions.json"]

    # Other answer flags: the finished models answer again with them, none is trained again.
    kept = {p.name: p.stat().st_mtime_ns for p in (out / "squad").glob("lr*/ckpt-*")}
    again = subprocess.run([*command, "--n_best_size=2"], capture_output=True, text=True,
                           timeout=600, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count("its report scored otherwise than this command "
                              "(n_best_size 20 -> 2)") == 2
    assert {p.name: p.stat().st_mtime_ns for p in (out / "squad").glob("lr*/ckpt-*")} == kept
    nbest = json.loads((out / "predictions" / "nbest_predictions.json").read_text())
    assert max(len(answers) for answers in nbest.values()) <= 2
