"""run_checkpoint_sweep.py (the paper's Figure 2 as a command): checkpoints chosen from
pre-training output dirs, each fine-tuned through the driver in this process, the CSV table and
the PNG (matplotlib optional: the CSV is written without it), the metric beside the task's
majority baseline."""
import csv
import dataclasses
import io
import json
import logging
import re
import sys

import keras
import pytest

from modeling import BertPretrainer, BertConfig
from modeling.bert.config import OBJECTIVE_KEY
from modeling_helpers import TINY, TINY_TRAIN, save_like_the_trainer
from optional_packages import require
from bert_runner.run_config import RunConfig
from experiments import figure2
from refusals import message


def _config_dir(path, objective):
    """`path` made, with the tiny model's bert_config.json for `objective`; returns its values."""
    values = json.loads((TINY_TRAIN / "bert_config.json").read_text())
    if objective == "ltr":
        values[OBJECTIVE_KEY] = "ltr"
    path.mkdir(parents=True)
    (path / "bert_config.json").write_text(json.dumps(values))
    return values


def _pretraining_dir(path, objective, steps):
    """A run_pretraining-like output_dir: bert_config.json and ckpt-<step> of a tiny model."""
    values = _config_dir(path, objective)
    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertConfig.from_dict(values))
    for step in steps:
        save_like_the_trainer(model, path, step)
    return str(path)


def test_checkpoints_are_chosen_by_step_or_every_n(tmp_path):
    run = figure2.read_run(_pretraining_dir(tmp_path / "pt_ltr", "ltr", [2, 4, 6]))
    assert run.objective == "ltr" and run.label == "pt_ltr (LTR)"
    assert figure2.choose_steps(run) == [2, 4, 6]
    assert figure2.choose_steps(run, every=4) == [4]
    assert figure2.choose_steps(run, steps=[0, 6]) == [0, 6]
    assert message("sweep-step-without-checkpoint") == "has no checkpoint at step(s)"
    with pytest.raises(ValueError, match=r"has no checkpoint at step\(s\) 5; it has 2, 4, 6"):
        figure2.choose_steps(run, steps=[5])
    with pytest.raises(ValueError, match=r"--checkpoint_every=5: no checkpoint"):
        figure2.choose_steps(run, every=5)
    with pytest.raises(ValueError, match=message("sweep-dir-without-config")):
        figure2.read_run(str(tmp_path))
    with pytest.raises(ValueError, match="steps >= 0"):
        figure2.parse_steps(["1", "x"])


def _fake_run_dir(path, objective, files):
    """A pre-training dir for runs that fine-tune nothing: its config and empty `files`."""
    _config_dir(path, objective)
    for name in files:
        (path / name).write_text("")
    return figure2.read_run(str(path))


def test_the_table_has_one_row_per_checkpoint_and_objective_beside_the_baseline(tmp_path,
                                                                                 caplog):
    """`sweep` and the CSV without fine-tuning: each chosen checkpoint of each dir is handed to
    `fine_tune` once, in its own folder, and its metric lands in the row of its run and step."""
    caplog.set_level(logging.INFO, logger="absl")
    mlm = _fake_run_dir(tmp_path / "pt_mlm", "mlm", [
        "checkpoint", "ckpt-1500.index", "ckpt-1500.data-00000-of-00001", "ckpt-300.index",
        "ckpt-300.data-00000-of-00001", "ckpt-20.data-00000-of-00001"])  # 20: no index
    ltr = _fake_run_dir(tmp_path / "pt_ltr", "ltr", ["ckpt-700.index", "ckpt-1400.index"])
    steps = {mlm.directory: figure2.choose_steps(mlm),
             ltr.directory: figure2.choose_steps(ltr, steps=[0, 1400])}
    assert steps == {mlm.directory: [300, 1500], ltr.directory: [0, 1400]}
    calls = []

    def fine_tune(config_file, checkpoint, output_dir):
        calls.append((config_file, checkpoint, output_dir))
        return {"eval_accuracy": len(calls) / 8, "eval_loss": 0.25 * len(calls)}

    baseline = figure2.Baseline("majority class '1'", 0.5625)
    rows = figure2.sweep([mlm, ltr], steps, fine_tune, str(tmp_path / "out"), baseline=baseline)
    out = tmp_path / "out"
    assert calls == [
        (mlm.config_file, str(tmp_path / "pt_mlm" / "ckpt-300"), str(out / "pt_mlm" / "step_300")),
        (mlm.config_file, str(tmp_path / "pt_mlm" / "ckpt-1500"),
         str(out / "pt_mlm" / "step_1500")),
        (ltr.config_file, None, str(out / "pt_ltr" / "step_0")),
        (ltr.config_file, str(tmp_path / "pt_ltr" / "ckpt-1400"),
         str(out / "pt_ltr" / "step_1400"))]
    table = list(csv.DictReader(io.StringIO(figure2.csv_text(rows))))
    assert list(table[0]) == list(figure2.CSV_COLUMNS)
    assert [{k: v for k, v in r.items() if k != "pretraining_dir"} for r in table] == [
        {"run": "pt_mlm", "objective": "mlm", "pretraining_step": "300",
         "metric": "eval_accuracy", "value": "0.1250", "baseline": "0.5625", "eval_loss": "0.2500"},
        {"run": "pt_mlm", "objective": "mlm", "pretraining_step": "1500",
         "metric": "eval_accuracy", "value": "0.2500", "baseline": "0.5625", "eval_loss": "0.5000"},
        {"run": "pt_ltr", "objective": "ltr", "pretraining_step": "0",
         "metric": "eval_accuracy", "value": "0.3750", "baseline": "0.5625", "eval_loss": "0.7500"},
        {"run": "pt_ltr", "objective": "ltr", "pretraining_step": "1400",
         "metric": "eval_accuracy", "value": "0.5000", "baseline": "0.5625",
         "eval_loss": "1.0000"}]
    assert [r["pretraining_dir"] for r in table] == [mlm.directory] * 2 + [ltr.directory] * 2
    assert ("pt_ltr (LTR) at pre-training step 1400: eval_accuracy = 0.5000 (baseline: majority "
            "class '1' 0.5625)") in caplog.text
    with pytest.raises(ValueError, match="--metric=eval_f1: the task's eval_results have "
                                         "eval_accuracy, eval_loss"):
        figure2.sweep([ltr], {ltr.directory: [0]}, lambda *a: {"eval_accuracy": 1.0,
                                                             "eval_loss": 0.0},
                    str(out), metric="eval_f1")


def test_the_majority_baseline_is_the_dev_sets_most_frequent_label(tmp_path):
    from bert_tasks.classifier.task import make_task

    (tmp_path / "dev.tsv").write_text(
        "\t".join(["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]) + "\n" +
        "".join(f"{label}\t{i}\t{i}\ta\tb\n" for i, label in enumerate("0110101111")))
    task = make_task("mrpc", 16, str(tmp_path))
    assert figure2.majority_baseline(task, "eval_accuracy") == figure2.Baseline(
        "majority class '1'", 0.7)
    assert figure2.majority_baseline(task, "eval_f1") is None  # no constant baseline of F1 here
    assert figure2.majority_baseline(make_task("sts-b", 16, str(tmp_path)), "eval_accuracy") is None


def _rows():
    return [figure2.Row("pt_mlm", "mlm", "/pt_mlm", 100, "eval_accuracy", 0.75, 0.5, 0.5),
            figure2.Row("pt_mlm", "mlm", "/pt_mlm", 0, "eval_accuracy", 0.5, 0.7, 0.5),
            figure2.Row("pt_ltr", "ltr", "/pt_ltr", 100, "eval_accuracy", 0.625, None, 0.5)]


def test_the_csv_is_written_without_matplotlib(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    png = figure2.write_outputs(_rows(), str(tmp_path / "sweep.csv"), str(tmp_path / "sweep.png"),
                              "title", figure2.Baseline("majority class '1'", 0.5))
    assert png is None and not (tmp_path / "sweep.png").exists()
    assert "matplotlib is not installed" in caplog.text and "requirements-plot.txt" in caplog.text
    table = list(csv.DictReader(open(tmp_path / "sweep.csv")))
    assert [(r["run"], r["pretraining_step"], r["value"], r["baseline"], r["eval_loss"])
            for r in table] == [("pt_mlm", "100", "0.7500", "0.5000", "0.5000"),
                                ("pt_mlm", "0", "0.5000", "0.5000", "0.7000"),
                                ("pt_ltr", "100", "0.6250", "0.5000", "")]


def test_a_sweep_over_fewer_checkpoints_keeps_the_earlier_rows(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    path = str(tmp_path / "sweep.csv")
    figure2.write_outputs(_rows(), path, str(tmp_path / "sweep.png"), "title")
    assert figure2.read_csv_rows(path) == _rows()
    again = [figure2.Row("pt_mlm", "mlm", "/pt_mlm", 0, "eval_accuracy", 0.625, 0.6, 0.5)]
    figure2.write_outputs(again, path, str(tmp_path / "sweep.png"), "title")
    assert figure2.read_csv_rows(path) == [_rows()[0], again[0], _rows()[2]]


@pytest.mark.large  # matplotlib: the large tier's packages (optional_packages)
def test_the_png_is_drawn_with_the_baseline(tmp_path):
    pyplot = require("matplotlib.pyplot")

    drawn = {}
    original = pyplot.Axes.axhline

    def axhline(axes, y=0, **kwargs):
        drawn.update(y=y, **kwargs)
        return original(axes, y, **kwargs)

    pyplot.Axes.axhline = axhline
    try:
        png = figure2.write_outputs(_rows(), str(tmp_path / "sweep.csv"),
                                  str(tmp_path / "sweep.png"), "title",
                                  figure2.Baseline("majority class '1'", 0.5))
    finally:
        pyplot.Axes.axhline = original
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert drawn["y"] == 0.5 and drawn["linestyle"] == "--"
    assert drawn["label"] == "majority class '1' 0.5000"


@pytest.mark.large
def test_a_sweep_fine_tunes_each_checkpoint_through_the_driver(tmp_path):
    """The smallest real run: an LTR dir with 2 checkpoints (its config builds the causal
    encoder), each fine-tuned 2 steps on the keyword task without --bilstm_on_top (with it:
    tests/test_ltr_model.py); one CSV row per checkpoint."""
    from test_run_classifier import write_keyword_mrpc

    directory = _pretraining_dir(tmp_path / "pt_ltr", "ltr", [1, 2])
    write_keyword_mrpc(tmp_path / "data", num_train=32, num_dev=16, num_test=4)
    template = RunConfig(str(tmp_path / "sweep"), vocab_file=str(TINY / "vocab.txt"),
                         train_batch_size=16, num_train_epochs=1.0, learning_rate=1e-3)
    rows, _ = figure2.run_sweep([directory], "mrpc", str(tmp_path / "data"), 16, template)
    assert [(r.run, r.objective, r.pretraining_step) for r in rows] == [
        ("pt_ltr", "ltr", 1), ("pt_ltr", "ltr", 2)]
    for step in (1, 2):
        run_json = json.loads((tmp_path / "sweep" / "pt_ltr" / f"step_{step}" / "run.json")
                              .read_text())
        assert run_json["init_checkpoint"].endswith(f"ckpt-{step}")
    dev_labels = [line.split("\t")[0] for line in
                  (tmp_path / "data" / "dev.tsv").read_text().splitlines()[1:]]
    majority = max(dev_labels.count("0"), dev_labels.count("1")) / len(dev_labels)
    table = list(csv.DictReader(open(tmp_path / "sweep" / "sweep.csv")))
    assert [(r["run"], r["objective"], r["pretraining_dir"], r["pretraining_step"], r["metric"],
             r["baseline"]) for r in table] == [
        ("pt_ltr", "ltr", directory, str(step), "eval_accuracy", f"{majority:.4f}")
        for step in (1, 2)]
    for row, result in zip(table, rows):
        assert 0 <= float(row["value"]) <= 1 and float(row["eval_loss"]) > 0
        assert row["value"] == f"{result.value:.4f}"
    # Another dir of the same name would join this line: refused before any fine-tuning.
    namesake = _pretraining_dir(tmp_path / "b" / "pt_ltr", "ltr", [1, 2])
    with pytest.raises(ValueError, match="the line 'pt_ltr' of its sweep.csv is of "):
        figure2.run_sweep([namesake], "mrpc", str(tmp_path / "data"), 16, template)
    # Another metric: the earlier rows, of the other one, are not kept beside this sweep's.
    rows, _ = figure2.run_sweep([directory], "mrpc", str(tmp_path / "data"), 16, template,
                                steps=[2], metric="eval_loss")
    assert [(r.pretraining_step, r.metric) for r in figure2.read_csv_rows(
        str(tmp_path / "sweep" / "sweep.csv"))] == [(2, "eval_loss")]
    # The sweep again on other data, or with another seed: refused before any fine-tuning
    # (its step folders would be resumed on the new data, sweep.csv would mix both).
    csv_before = (tmp_path / "sweep" / "sweep.csv").read_text()
    write_keyword_mrpc(tmp_path / "other", num_train=24, num_dev=16, num_test=4)
    for data, run in [("other", template), ("data", dataclasses.replace(template, random_seed=3))]:
        with pytest.raises(ValueError, match=re.escape(message("sweep-another-run"))):
            figure2.run_sweep([directory], "mrpc", str(tmp_path / data), 16, run)
    assert (tmp_path / "sweep" / "sweep.csv").read_text() == csv_before
    # A step folder of another run, where the sweep wrote no sweep.json: refused as well.
    (tmp_path / "sweep" / figure2.SWEEP_RECORD).unlink()
    with pytest.raises(ValueError, match="step_1/run.json\\): the training data differs"):
        figure2.run_sweep([directory], "mrpc", str(tmp_path / "other"), 16, template)
