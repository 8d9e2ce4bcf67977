"""The fine-tuning protocol's guards (experiments.protocol, .glue, .squad_grid) on setting folders
made by hand, without training: only a comparable run is reused, a diverged run never wins, the
chosen model predicts only from the checkpoint its report scored, the inputs are checked first,
and the table holds the spread, the other metrics and every task of submission/."""
import json
import math
import pathlib
import re

import pytest

from bert_runner.run_config import RunConfig
from bert_tasks.squad.task import SquadTask
from experiments import glue, protocol, squad_grid
from modeling_helpers import TINY
from refusals import message
from test_run_glue import _write, write_mini_glue

GRID = dict(learning_rates=[1e-3, 1e-5], epochs=[1.0], batch_sizes=[8], restarts=1)
STSB_HEADER = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
               "sentence1", "sentence2"]


def _run(out, **changes):
    return RunConfig(output_dir=str(out), bert_config_file=str(TINY / "bert_config.json"),
                     vocab_file=str(TINY / "vocab.txt"),
                     init_checkpoint=str(TINY / "bert_model.ckpt"), **changes)


def _finished(setting, run, record, metrics, report="eval_report.json"):
    """A setting folder as a finished run leaves it: run.json and its dev report."""
    folder = setting.output_dir(run.output_dir)
    _write_json(f"{folder}/run.json", record)
    _write_json(f"{folder}/{report}", {"metrics": metrics, "baselines": {}}
                if report == "eval_report.json" else metrics)
    return folder


def _write_json(path, value):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


def _checkpoint(folder, step):
    """The files `tf.train.latest_checkpoint` finds for `ckpt-<step>`."""
    (folder / "checkpoint").write_text(f'model_checkpoint_path: "ckpt-{step}"\n'
                                       f'all_model_checkpoint_paths: "ckpt-{step}"\n')
    (folder / f"ckpt-{step}.index").write_bytes(b"")
    (folder / f"ckpt-{step}.data-00000-of-00001").write_bytes(b"")


def _glue(tasks, glue_dir, run, **grid):
    return glue.run_glue(tasks, str(glue_dir), 16, run, select_only=True, **{**GRID, **grid})


@pytest.fixture
def mini_glue(tmp_path):
    glue_dir = tmp_path / "glue"
    write_mini_glue(glue_dir)
    stsb = glue_dir / "STS-B"
    rows = [[str(i), "g", "f", "y", str(i), "s", "s", "a dog", "a cat"] for i in range(3)]
    for name in ("train", "dev"):
        _write(stsb / f"{name}.tsv", STSB_HEADER + ["score"],
               [row + [str(i + 1.5)] for i, row in enumerate(rows)])
    _write(stsb / "test.tsv", STSB_HEADER, rows)
    return glue_dir


def test_incomparable_setting_folders_are_refused_before_anything(mini_glue, tmp_path):
    run = _run(tmp_path / "out")
    first, second = glue.grid(["mnli"], **GRID)
    identity = glue.identity(first, run, str(mini_glue), 16)
    # Another seed, as run.json records the run's identity.
    folder = _finished(first, run, {**identity, "random_seed": 1}, {"eval_accuracy": 0.9})
    with pytest.raises(ValueError, match=re.escape(message("grid-setting-not-comparable"))) as e:
        _glue(["mnli", "wnli"], mini_glue, run)
    assert f"{folder} holds a run of other settings" in str(e.value)
    assert "random_seed 1 -> 12345" in str(e.value)
    assert not (tmp_path / "out" / "submission").exists()
    # As the driver records a run without the identity's names: another --max_seq_length.
    older = {name: identity[name] for name in (
        "task", "learning_rate", "train_batch_size", "num_train_epochs", "init_checkpoint")}
    _finished(first, run, {**older, "max_seq_length": 128}, {"eval_accuracy": 0.9})
    with pytest.raises(ValueError, match="max_seq_length 128 -> 16"):
        _glue(["mnli"], mini_glue, run)
    # Another checkpoint's content at the same path; and a report without run.json.
    _finished(first, run, {**identity, "init_checkpoint_sha256": "0" * 16},
              {"eval_accuracy": 0.9})
    with pytest.raises(ValueError, match="starting checkpoint's content differs"):
        _glue(["mnli"], mini_glue, run)
    _finished(first, run, identity, {"eval_accuracy": 0.9})
    (tmp_path / "out" / "mnli" / second.name).mkdir()
    (tmp_path / "out" / "mnli" / second.name / "eval_report.json").write_text("{}")
    with pytest.raises(ValueError, match=re.escape(message("grid-setting-not-comparable"))) as e:
        _glue(["mnli"], mini_glue, run)
    assert "lr1e-05_ep1_bs8_r1 holds a run without its run.json" in str(e.value)


def test_squad_grid_refuses_a_folder_of_the_other_version(tmp_path):
    assert SquadTask(32, doc_stride=8, max_query_length=8).recorded_settings()[
        "version_2_with_negative"] is False
    from test_run_squad import squad_data, write_json

    run = _run(tmp_path / "out")
    # Files both versions read: every question answerable, each saying so.
    train, dev = squad_data(4, seed=1)[0], squad_data(4, seed=2)[0]
    for document in (train, dev):
        for paragraph in document["data"][0]["paragraphs"]:
            for question in paragraph["qas"]:
                question["is_impossible"] = False
    train = str(write_json(tmp_path / "train.json", train))
    dev = str(write_json(tmp_path / "dev.json", dev))
    files = squad_grid.SquadFiles(train, dev, version_2_with_negative=True,
                                  max_seq_length=32, doc_stride=8, max_query_length=8)
    setting = protocol.grid([squad_grid.TASK], **GRID)[0]
    v1 = squad_grid.SquadFiles(train, dev, max_seq_length=32, doc_stride=8, max_query_length=8)
    # A v1.1 run recorded before run.json held the version: its scores say which it was.
    record = squad_grid.identity(setting, run, v1)
    del record["version_2_with_negative"]
    _finished(setting, run, record, {"exact_match": 50.0, "f1": 60.0}, squad_grid.REPORT)
    with pytest.raises(ValueError, match=re.escape(message("squad-grid-version-mixed"))):
        squad_grid.run_squad_grid(files, run, select_only=True, **GRID)
    # A v2.0 folder asked for v1.1 scores: its run.json records the version.
    _finished(setting, run, squad_grid.identity(setting, run, files),
              {"exact": 50.0, "f1": 60.0, "best_f1": 61.0, "best_f1_thresh": 0.0},
              squad_grid.REPORT)
    with pytest.raises(ValueError, match="version_2_with_negative True -> False"):
        squad_grid.run_squad_grid(v1, run, select_only=True, **GRID)


def test_a_diverged_setting_never_wins(mini_glue, tmp_path):
    settings = protocol.grid(["sts-b"], [1e4, 1e-3, 1e-4], [1.0], [8], 2)
    values = [math.nan, math.nan, 0.5, 0.7, math.inf, 0.6]
    reports = {s: {"metrics": {"eval_spearman": v}} for s, v in zip(settings, values)}
    choice = protocol.choose(settings, reports, glue.metric_of, glue.value_of)["sts-b"]
    assert (choice.setting, choice.value, choice.finished, choice.diverged) == (
        settings[3], 0.7, 6, 3)
    assert choice.restart_values() == [0.5, 0.7]
    assert protocol.spread(choice.restart_values(), 100) == "60.00 ± 14.14 (2)"

    # Every setting of STS-B diverged: no STS-B.tsv, the table says so, the command fails.
    run = _run(tmp_path / "out")
    for setting in glue.grid(["sts-b"], **GRID):
        _finished(setting, run, glue.identity(setting, run, str(mini_glue), 16),
                  {"eval_spearman": math.nan, "eval_pearson": math.nan})
    choices, text = _glue(["sts-b"], mini_glue, run)
    assert not (tmp_path / "out" / "submission" / "STS-B.tsv").exists()
    rows = {line.split("\t")[0]: dict(zip(glue.HEADER, line.split("\t")))
            for line in (tmp_path / "out" / glue.RESULTS).read_text().splitlines()[1:]}
    assert rows["sts-b"]["chosen setting"] == "(all 2 diverged)"
    assert rows["sts-b"]["submission"] == "none"
    with pytest.raises(ValueError, match=re.escape(message("grid-every-setting-diverged"))):
        protocol.check_not_diverged(choices.values(), glue.submission_name)


def test_no_prediction_without_the_chosen_runs_checkpoint(mini_glue, tmp_path):
    run = _run(tmp_path / "out")
    first, second = glue.grid(["mnli"], **GRID)
    for setting, accuracy in ((first, 0.4), (second, 0.6)):
        folder = _finished(setting, run, glue.identity(setting, run, str(mini_glue), 16),
                           {"eval_accuracy": accuracy, "global_step": 3.0})
    with pytest.raises(ValueError, match=re.escape(message("grid-chosen-checkpoint-missing"))) \
            as e:
        _glue(["mnli"], mini_glue, run)
    assert str(e.value).startswith(f"{folder} holds the chosen run's dev report")
    assert not (tmp_path / "out" / "submission").exists()
    # A checkpoint of another step than the report's is not the model it scored.
    _checkpoint(tmp_path / "out" / "mnli" / second.name, 2)
    with pytest.raises(ValueError, match=r"report of step 3 but its newest checkpoint is .*ckpt-2"):
        _glue(["mnli"], mini_glue, run)
    assert not (tmp_path / "out" / "submission").exists()


def test_every_input_is_checked_before_any_run(mini_glue, tmp_path):
    with pytest.raises(ValueError, match=re.escape(message("glue-dir-missing"))):
        glue.check_tasks(["mnli"], str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match=re.escape(message("glue-tasks-empty"))):
        glue.check_tasks([], str(mini_glue))
    kept = (mini_glue / "MNLI" / "test_mismatched.tsv").read_bytes()
    (mini_glue / "MNLI" / "test_mismatched.tsv").unlink()
    with pytest.raises(ValueError, match=re.escape(message("glue-input-missing"))) as e:
        glue.check_tasks(["wnli", "mnli"], str(mini_glue))
    assert "test_mismatched.tsv: the MNLI-mm test set" in str(e.value)
    (mini_glue / "STS-B" / "train.tsv").unlink()
    with pytest.raises(ValueError, match="STS-B/train.tsv: the STS-B train set"):
        glue.check_tasks(["sts-b"], str(mini_glue))
    (mini_glue / "MNLI" / "test_mismatched.tsv").write_bytes(kept)
    (mini_glue / "diagnostic" / "diagnostic.tsv").unlink()
    (mini_glue / "diagnostic").rmdir()
    with pytest.raises(ValueError, match=re.escape(message("glue-task-folder-missing"))) as e:
        glue.check_tasks(["mnli"], str(mini_glue))
    assert "has no diagnostic/ (or AX/) folder" in str(e.value)


def test_the_table_keeps_the_tasks_of_earlier_commands(mini_glue, tmp_path):
    """A command on WNLI alone keeps the rows of the tasks whose files submission/ holds."""
    run = _run(tmp_path / "out")
    submission = tmp_path / "out" / "submission"
    mnli = [{"task": "mnli", "chosen setting": "lr2e-05_ep3_bs32_r1", "dev": "84.10",
             "submission": "MNLI-m.tsv"}, {"task": "mnli-mm", "dev": "83.90"}]
    _write_json(submission / glue.CHOSEN, {"mnli": {"setting": "lr2e-05_ep3_bs32_r1",
                                                     "rows": mnli}, "rte": "lr3e-05_ep3_bs32_r2"})
    _, text = _glue(["wnli"], mini_glue, run)
    rows = [dict(zip(glue.HEADER, line.split("\t")))
            for line in (tmp_path / "out" / glue.RESULTS).read_text().splitlines()[1:]]
    assert [row["task"] for row in rows] == ["mnli", "mnli-mm", "rte", "wnli"]
    assert rows[0]["dev"] == "84.10" and rows[1]["dev"] == "83.90"
    assert rows[2]["chosen setting"] == "lr3e-05_ep3_bs32_r2"
    assert "--tasks=rte --select_only" in rows[2]["submission"]
    assert rows[3]["chosen setting"] == "majority class '1'"
    assert sorted(json.loads((submission / glue.CHOSEN).read_text())) == ["mnli", "rte", "wnli"]
    assert "lr2e-05_ep3_bs32_r1" in text
