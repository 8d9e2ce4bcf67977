"""run_checkpoint_sweep.py (the paper's Figure 2 as a command): checkpoints chosen from
pre-training output dirs, each fine-tuned through the driver in this process, the CSV table and
the PNG (matplotlib optional: the CSV is written without it)."""
import csv
import json
import sys

import keras
import pytest

from modeling import BertPretrainer, BertConfig
from modeling.config import OBJECTIVE_KEY
from modeling_helpers import TINY, TINY_TRAIN, save_like_the_trainer
from bert_runner.run_config import RunConfig
from bert_tasks.pretraining import sweep
from refusals import message


def _pretraining_dir(path, objective, steps):
    """A run_pretraining-like output_dir: bert_config.json and ckpt-<step> of a tiny model."""
    values = json.loads((TINY_TRAIN / "bert_config.json").read_text())
    if objective == "ltr":
        values[OBJECTIVE_KEY] = "ltr"
    path.mkdir(parents=True)
    (path / "bert_config.json").write_text(json.dumps(values))
    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertConfig.from_dict(values))
    for step in steps:
        save_like_the_trainer(model, path, step)
    return str(path)


def test_checkpoints_are_chosen_by_step_or_every_n(tmp_path):
    run = sweep.read_run(_pretraining_dir(tmp_path / "pt_ltr", "ltr", [2, 4, 6]))
    assert run.objective == "ltr" and run.label == "pt_ltr (LTR)"
    assert sweep.choose_steps(run) == [2, 4, 6]
    assert sweep.choose_steps(run, every=4) == [4]
    assert sweep.choose_steps(run, steps=[0, 6]) == [0, 6]
    assert message("sweep-step-without-checkpoint") == "has no checkpoint at step(s)"
    with pytest.raises(ValueError, match=r"has no checkpoint at step\(s\) 5; it has 2, 4, 6"):
        sweep.choose_steps(run, steps=[5])
    with pytest.raises(ValueError, match=r"--checkpoint_every=5: no checkpoint"):
        sweep.choose_steps(run, every=5)
    with pytest.raises(ValueError, match=message("sweep-dir-without-config")):
        sweep.read_run(str(tmp_path))
    with pytest.raises(ValueError, match="steps >= 0"):
        sweep.parse_steps(["1", "x"])


def _rows():
    return [sweep.Row("pt_mlm", "mlm", "/pt_mlm", 100, "eval_accuracy", 0.75, 0.5),
            sweep.Row("pt_mlm", "mlm", "/pt_mlm", 0, "eval_accuracy", 0.5, 0.7),
            sweep.Row("pt_ltr", "ltr", "/pt_ltr", 100, "eval_accuracy", 0.625, None)]


def test_the_csv_is_written_without_matplotlib(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    png = sweep.write_outputs(_rows(), str(tmp_path / "sweep.csv"), str(tmp_path / "sweep.png"),
                              "title")
    assert png is None and not (tmp_path / "sweep.png").exists()
    assert "matplotlib is not installed" in caplog.text and "requirements-plot.txt" in caplog.text
    table = list(csv.DictReader(open(tmp_path / "sweep.csv")))
    assert [(r["run"], r["pretraining_step"], r["value"]) for r in table] == [
        ("pt_mlm", "100", "0.7500"), ("pt_mlm", "0", "0.5000"), ("pt_ltr", "100", "0.6250")]


def test_the_png_is_drawn(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (requirements-plot.txt) not installed")
    png = sweep.write_outputs(_rows(), str(tmp_path / "sweep.csv"), str(tmp_path / "sweep.png"),
                              "title")
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_sweep_fine_tunes_each_checkpoint_through_the_driver(tmp_path):
    """The smallest real run: an LTR dir with 2 checkpoints (its config builds the causal
    encoder), each fine-tuned 2 steps on the keyword task without --bilstm_on_top (with it:
    tests/test_ltr_model.py); one CSV row per checkpoint."""
    from test_run_classifier import write_keyword_mrpc

    directory = _pretraining_dir(tmp_path / "pt_ltr", "ltr", [1, 2])
    write_keyword_mrpc(tmp_path / "data", num_train=32, num_dev=16, num_test=4)
    template = RunConfig(str(tmp_path / "sweep"), vocab_file=str(TINY / "vocab.txt"),
                         train_batch_size=16, num_train_epochs=1.0, learning_rate=1e-3)
    rows, _ = sweep.run_sweep([directory], "mrpc", str(tmp_path / "data"), 16, template)
    assert [(r.run, r.objective, r.pretraining_step) for r in rows] == [
        ("pt_ltr", "ltr", 1), ("pt_ltr", "ltr", 2)]
    assert all(0 <= r.value <= 1 and r.eval_loss > 0 for r in rows)
    for step in (1, 2):
        run_json = json.loads((tmp_path / "sweep" / "pt_ltr" / f"step_{step}" / "run.json")
                              .read_text())
        assert run_json["init_checkpoint"].endswith(f"ckpt-{step}")
    assert len((tmp_path / "sweep" / "sweep.csv").read_text().splitlines()) == 3
