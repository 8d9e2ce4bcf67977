"""run_swag.py end to end (CLI): fine-tunes the tiny original checkpoint on a small four-choice
task it can learn, writes eval_results.txt, test_results.tsv and both checkpoint layouts; in
process: bad CSV input fails naming its file and line, before any record is written."""
import csv
import os
import random
import subprocess
import sys
import time

import numpy as np
import pytest

import refusals
from conftest import ROOT
from modeling_helpers import TINY

# Words of the tiny fixture vocabulary; "good"/"bad" are left out: the true ending holds "good",
# the three others "bad".
WORDS = ("the a dog cat bird fish tree house car road river city hill sun moon star rain snow "
         "wind red blue green small big old new happy sad run walk jump swim read write sing "
         "play eat drink sleep see").split()
HEADER = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
          "ending0", "ending1", "ending2", "ending3", "label"]


def _phrase(rng, count):
    return " ".join(rng.choice(WORDS) for _ in range(count))


def _ending(rng, keyword):
    words = _phrase(rng, 3).split()
    words.insert(rng.randrange(4), keyword)
    return " ".join(words)


def _rows(rng, count):
    rows = []
    for i in range(count):
        label = rng.randrange(4)
        sent1, sent2 = _phrase(rng, 5), _phrase(rng, 2)
        endings = [_ending(rng, "good" if j == label else "bad") for j in range(4)]
        rows.append([f"video{i}", str(i), f"{sent1} {sent2}", sent1, sent2, "gold",
                     *endings, str(label)])
    return rows


def _write_csv(path, header, rows, index_column):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        # The swagaf release files start with an unnamed index column.
        writer.writerow([""] + header if index_column else header)
        writer.writerows([str(i)] + row if index_column else row for i, row in enumerate(rows))


def write_keyword_swag(data_dir, num_train=64, num_dev=32, num_test=12):
    """SWAG-layout CSVs of the keyword task; returns the test rows' labels (test.csv has none)."""
    rng = random.Random(0)
    data_dir.mkdir(parents=True, exist_ok=True)
    _write_csv(data_dir / "train.csv", HEADER, _rows(rng, num_train), index_column=True)
    _write_csv(data_dir / "val.csv", HEADER, _rows(rng, num_dev), index_column=False)
    test = _rows(rng, num_test)
    _write_csv(data_dir / "test.csv", HEADER[:-1], [row[:-1] for row in test], index_column=True)
    return [int(row[-1]) for row in test]


def start_swag(*args):
    """run_swag.py with the tiny model's files, started (a Popen, text pipes)."""
    cmd = [sys.executable, str(ROOT / "run_swag.py"), f"--vocab_file={TINY / 'vocab.txt'}",
           f"--bert_config_file={TINY / 'bert_config.json'}", *args]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def run_swag(*args):
    process = start_swag(*args)
    stdout, stderr = process.communicate(timeout=600)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def read_eval_results(path):
    return dict(line.rstrip("\n").split(" = ") for line in open(path, encoding="utf-8"))


def test_fine_tunes_the_tiny_original_checkpoint_above_chance(tmp_path):
    import tensorflow as tf

    test_labels = write_keyword_swag(tmp_path / "data")
    out = tmp_path / "out"
    run_flags = ("--do_train=true", "--do_eval=true", "--do_predict=true",
                 f"--data_dir={tmp_path / 'data'}", f"--init_checkpoint={TINY / 'bert_model.ckpt'}",
                 "--max_seq_length=16", "--train_batch_size=8", "--num_train_epochs=4",
                 "--save_tf1_checkpoint=true", f"--output_dir={out}")
    first = start_swag("--learning_rate=3e-3", *run_flags)
    # A second run into the same output_dir, once the first holds it, is refused and changes
    # nothing there (before the lock, both trained, and run.json described the other run).
    deadline = time.monotonic() + 300
    while not (out / "run.lock").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[1][-3000:]
        time.sleep(0.1)
    second = run_swag("--learning_rate=1e-3", *run_flags)
    refusals.assert_refused(second, "output-dir-busy")
    assert f"pid {first.pid} on" in second.stderr and "--learning_rate=3e-3" in second.stderr
    stdout, stderr = first.communicate(timeout=600)
    result = subprocess.CompletedProcess(first.args, first.returncode, stdout, stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    assert '"learning_rate": 0.003' in (out / "run.json").read_text()
    assert not (out / "run.lock").exists()
    # The encoder comes from the checkpoint; the scoring vector is the only new variable.
    assert "bert/embeddings/word_embeddings, shape = [99, 32], *INIT_FROM_CKPT*" in result.stderr
    assert "newly initialised: cls/swag/output_weights" in result.stderr
    assert "baseline: chance 0.2500" in result.stderr

    results = read_eval_results(out / "eval_results.txt")
    assert sorted(results) == ["eval_accuracy", "eval_loss", "global_step", "loss"]
    assert results["global_step"] == "32"  # int(64 / 8 * 4)
    assert float(results["eval_accuracy"]) >= 0.75  # chance: 0.25
    # 32 dev examples in full batches of 8: the batch mean equals the example mean.
    assert float(results["loss"]) == pytest.approx(float(results["eval_loss"]), rel=1e-5)

    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (12, 4)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert np.mean(np.argmax(probabilities, axis=1) == test_labels) >= 0.75

    # Both checkpoint layouts: ours (resumable) and the original's, with the head's TF1 name.
    assert (out / "ckpt-32.index").exists()
    reader = tf.train.load_checkpoint(str(out / "bert_model.ckpt"))
    shapes = reader.get_variable_to_shape_map()
    assert shapes["cls/swag/output_weights"] == [1, 32]
    assert shapes["bert/embeddings/word_embeddings"] == [99, 32]
    assert int(reader.get_tensor("global_step")) == 32
    assert (out / "bert_config.json").exists()
    assert sorted(p.name for p in out.glob("*.tf_record")) == [
        "dev.tf_record", "test.tf_record", "train.tf_record"]
    assert not list(out.glob("*.tmp-*"))


def test_bad_csv_names_file_and_line(tmp_path):
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.swag.task import SwagTask

    write_keyword_swag(tmp_path / "data", num_train=4, num_dev=3, num_test=1)
    val = tmp_path / "data" / "val.csv"
    lines = val.read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3].rsplit(",", 1)[0] + ",7"
    val.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = RunConfig(str(tmp_path / "out"), bert_config_file=str(TINY / "bert_config.json"),
                    vocab_file=str(TINY / "vocab.txt"), do_train=True, do_eval=True)
    with pytest.raises(ValueError, match=f"{val}:4: label '7' is not one of 0..3"):
        driver.run_command(SwagTask(16, str(tmp_path / "data")), run)
    assert not (tmp_path / "out" / "train.tf_record").exists()  # failed before any conversion
