"""run_ner_feature_based.py (paper Table 7) end to end: a frozen 4-layer tiny BERT (so that "last
four" exists), activations computed once and cached, BiLSTM taggers that learn well above the
all-O baseline, and the table beside the paper's figures. In process: every input checked before
any activation is computed, and the temporary files of a killed run removed from the cache."""
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
import types

import keras
import numpy as np
import pytest

from conftest import ROOT
from bert_runner import cli
from bert_tasks.ner import feature_based_run
from bert_tasks.ner.activations import ActivationCache
from modeling import BertConfig, BertModel
from modeling.checkpoint import original as original_layout
from ner_helpers import TINY, write_conll_dir

LABELS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


def four_layer_checkpoint(directory):
    """A randomly initialised 4-layer tiny BERT in the original layout; returns its config path."""
    config = json.loads((TINY / "bert_config.json").read_text())
    config["num_hidden_layers"] = 4
    directory.mkdir()
    (directory / "bert_config.json").write_text(json.dumps(config))
    keras.utils.set_random_seed(0)
    original_layout.save_tf1_checkpoint(BertModel(BertConfig.from_dict(config)),
                                       directory / "bert_model.ckpt")
    return directory


def run_script(*args):
    command = [sys.executable, str(ROOT / "run_ner_feature_based.py"), *args]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    return subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)


def test_table7_command(tmp_path):
    model_dir = four_layer_checkpoint(tmp_path / "model")
    args = ["--data_dir=%s" % write_conll_dir(tmp_path / "data", 40),
            "--bert_config_file=%s" % (model_dir / "bert_config.json"),
            "--init_checkpoint=%s" % (model_dir / "bert_model.ckpt"),
            "--vocab_file=%s" % (TINY / "vocab.txt"), "--max_seq_length=32",
            "--output_dir=%s" % (tmp_path / "out"), "--lstm_units=16", "--num_train_epochs=4",
            "--train_batch_size=8", "--learning_rate=1e-2"]
    proc = run_script(*args, "--choices=embeddings,concat_last_four")
    assert proc.returncode == 0, proc.stdout[-5000:]
    # Once per file for all the rows (reuse by a later run: test_ner_models).
    assert proc.stdout.count("Computing the activations of") == 2
    table = (tmp_path / "out" / "table7.txt").read_text()
    assert table in proc.stdout
    rows = {line[:33].strip(): line[33:].split() for line in table.splitlines()[2:]}
    assert list(rows) == ["Fine-tuning approach (run_ner.py)", "Embeddings",
                          "Concat Last Four Hidden", "Majority baseline (every word O)"]
    assert rows["Embeddings"][1] == "91.0" and rows["Concat Last Four Hidden"][1] == "96.1"
    assert rows["Majority baseline (every word O)"][0] == "0.00"
    for name in ("Embeddings", "Concat Last Four Hidden"):
        assert float(rows[name][0]) >= 60.0, table
    cache = tmp_path / "out" / "activations"
    assert sorted(p.name for p in cache.iterdir()) == ["dev", "train"]
    assert len(list((cache / "train").glob("layer_*.npy"))) == 5  # embeddings + 4 layers


# In process: the checks before the activations, and the cache's stale temporary files.

def _table7_flags(tmp_path, **changes):
    data_dir = tmp_path / "data"
    if not data_dir.exists():
        write_conll_dir(data_dir, 3, 2, 1)
    flags = dict(data_dir=str(data_dir), bert_config_file=str(TINY / "bert_config.json"),
                 vocab_file=str(TINY / "vocab.txt"),
                 init_checkpoint=str(TINY / "bert_model.ckpt"), output_dir=str(tmp_path / "out"),
                 max_seq_length=32, choices=["embeddings", "last"])
    flags.update(changes)
    return feature_based_run.Table7Flags(**flags)


def _bad_dev_tag(tmp_path):
    with open(tmp_path / "data" / "dev.txt", "a", encoding="utf-8") as f:
        f.write("zebra NN I-NP I-MISC\n")
    return {}, r"dev\.txt:\d+: tag 'I-MISC' is not in the label list"


def _train_is_a_directory(tmp_path):
    (tmp_path / "data" / "train.txt").unlink()
    (tmp_path / "data" / "train.txt").mkdir()
    return {}, r"train\.txt: is a directory, expected a file"


def _output_dir_below_a_file(tmp_path):
    (tmp_path / "file").write_text("")
    return {"output_dir": str(tmp_path / "file" / "out")}, r"--output_dir=.*file/out: cannot write there"


def _truncated_checkpoint(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    for path in TINY.glob("bert_model.ckpt.*"):
        shutil.copy(path, model / path.name)
    data = next(model.glob("bert_model.ckpt.data-*"))
    data.write_bytes(data.read_bytes()[:data.stat().st_size // 2])
    return ({"init_checkpoint": str(model / "bert_model.ckpt")},
            r"model/bert_model\.ckpt\b.*truncated")


def _too_shallow(tmp_path):
    return {"choices": ["concat_last_four"]}, "needs at least 4 encoder layers; the model has 2"


def _remote_cache(tmp_path):
    return {"cache_dir": "gs://bucket/cache"}, "must be on a local disk"


@pytest.mark.parametrize("bad", [_bad_dev_tag, _train_is_a_directory, _output_dir_below_a_file,
                                 _truncated_checkpoint, _too_shallow, _remote_cache])
def test_bad_input_is_refused_before_any_activation(tmp_path, bad):
    _table7_flags(tmp_path)  # the data
    changes, message = bad(tmp_path)
    with pytest.raises((ValueError, OSError), match=message) as info:
        feature_based_run.prepare(_table7_flags(tmp_path, **changes))
    assert cli.refusal(info.value) is not None  # one line, exit code 2
    assert not list(tmp_path.rglob("*.npy*"))


def test_prepare_checks_and_windows_then_a_reusable_cache_needs_none(tmp_path):
    flags = _table7_flags(tmp_path)
    run = feature_based_run.prepare(flags)
    assert [c.key for c in run.choices] == ["embeddings", "last"]
    # The paper's all-layer row takes every layer of the model at hand, and says how many.
    assert [c.title for c in feature_based_run.resolve_choices(["weighted_sum_all"], 6)] == [
        "Weighted Sum All 6 Layers"]
    assert all(data.windows for data in run.sets.values())
    assert not list(tmp_path.rglob("*.npy*"))  # nothing computed yet
    run.build_caches(batch_size=4)  # divides both files' windows (12, 8): one shape traced
    assert len(list((tmp_path / "out" / "activations" / "dev").glob("layer_*.npy"))) == 3
    again = feature_based_run.prepare(flags)
    assert all(data.windows is None for data in again.sets.values())
    # The same weights read by another config are other activations: computed again.
    config = json.loads((TINY / "bert_config.json").read_text())
    relu = tmp_path / "relu_config.json"
    relu.write_text(json.dumps({**config, "hidden_act": "relu"}))
    other = feature_based_run.prepare(dataclasses.replace(flags, bert_config_file=str(relu)))
    assert all(data.windows for data in other.sets.values())


def _fake_complete_cache(directory, settings):
    directory.mkdir(parents=True)
    np.save(directory / "sentence_starts.npy", np.array([0, 2], np.int64))
    np.save(directory / "label_ids.npy", np.array([0, 0], np.int32))
    (directory / "settings.json").write_text(json.dumps(dict(settings, num_hidden_layers=2)))


def test_a_killed_runs_temporaries_are_removed_live_ones_kept(tmp_path):
    """kill -9 while the activations are written leaves `layer_NN.npy.tmp-*` files of gigabytes;
    the next build removes those whose writer is gone."""
    directory = tmp_path / "cache" / "train"
    settings = {"data": "train.txt"}
    _fake_complete_cache(directory, settings)
    finished = subprocess.Popen(["true"])
    finished.wait()
    hour_ago = time.time() - 3600
    writer = subprocess.Popen(["sleep", "60"])  # a live writer, started after the next file
    try:
        time.sleep(0.05)
        names = {
            "dead_writer": "layer_00.npy.tmp-%d-0123abcd" % finished.pid,
            "old_without_pid": "layer_01.npy.tmp-%s" % ("ab" * 16),
            "own": "layer_02.npy.tmp-%d-0123abcd" % os.getpid(),
            "live_writer": "layer_03.npy.tmp-%d-0123abcd" % writer.pid,
            "older_than_its_pid": "layer_04.npy.tmp-%d-4567abcd" % writer.pid,
            "new_without_pid": "layer_05.npy.tmp-%s" % ("cd" * 16),
            "old_but_open": "layer_06.npy.tmp-%s" % ("ef" * 16),
            "other": "notes.txt",
        }
        for name in names.values():
            (directory / name).write_bytes(b"\0" * 64)
        for key in ("dead_writer", "old_without_pid", "older_than_its_pid", "old_but_open"):
            os.utime(directory / names[key], (hour_ago, hour_ago))
        started = time.time() - 1.0
        os.utime(directory / names["new_without_pid"], (started + 0.5, started + 0.5))
        bert = types.SimpleNamespace(config=types.SimpleNamespace(num_hidden_layers=2))
        with open(directory / names["old_but_open"], "rb"):
            cache = ActivationCache.build(str(directory), settings, bert, [], None, LABELS, 32, 8,
                                          started=started)
    finally:
        writer.kill()
        writer.wait()
    assert cache.num_sentences == 1  # reused
    left = {key for key, name in names.items() if (directory / name).exists()}
    assert left == {"own", "live_writer", "new_without_pid", "old_but_open", "other"}
