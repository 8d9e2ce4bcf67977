"""Truncated checkpoints: resuming falls back to the newest readable ckpt-N (end to end, after a
SIGKILL: test_run_pretraining.py); a truncated --init_checkpoint is named; a run refused for its
--init_checkpoint removes the output_dir it created, and only that."""
import re
import shutil
import subprocess

import pytest
import tensorflow as tf

from modeling_helpers import TINY_TRAIN
from pretraining_helpers import (
    pretraining_command, run_in_process, truncate_checkpoint, write_records)
from refusals import assert_refused, message
from bert_runner.trainer import restore_newest_readable


def _manager(directory):
    variable = tf.Variable(0.0)
    checkpoint = tf.train.Checkpoint(v=variable)
    return variable, tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=5)


def test_restore_newest_readable(tmp_path, caplog):
    variable, manager = _manager(tmp_path)
    assert restore_newest_readable(manager, manager.checkpoint.restore) is None
    for step in (1, 2, 3):
        variable.assign(float(step))
        manager.save(checkpoint_number=step)
    truncate_checkpoint(tmp_path / "ckpt-3")
    (tmp_path / "ckpt-2.index").unlink()
    variable.assign(-1.0)
    _, manager = _manager(tmp_path)
    restored = restore_newest_readable(manager, lambda p: manager.checkpoint.restore(p))
    assert restored == str(tmp_path / "ckpt-1")
    assert float(manager.checkpoint.v.numpy()) == 1.0
    warnings = [m for m in caplog.messages if "unreadable" in m]
    assert len(warnings) == 2 and "ckpt-3" in warnings[0] and "ckpt-2" in warnings[1]
    assert any("instead of" in m and "ckpt-3" in m for m in caplog.messages)

    truncate_checkpoint(tmp_path / "ckpt-1", keep=0.0)
    with pytest.raises(ValueError, match=r"No checkpoint in .* can be read .*ckpt-3.*ckpt-2.*"
                                         r"ckpt-1"):
        restore_newest_readable(manager, lambda p: manager.checkpoint.restore(p))


def test_a_truncated_init_checkpoint_is_named(tmp_path):
    """Before training, by the driver (in this process; the script lets the error end it)."""
    for path in TINY_TRAIN.glob("bert_model.ckpt.*"):
        shutil.copy(path, tmp_path / path.name)
    truncate_checkpoint(tmp_path / "bert_model.ckpt")
    data = write_records(tmp_path / "train.tfrecord", 8)
    message = "Checkpoint %s (--init_checkpoint) is unreadable" % (tmp_path / "bert_model.ckpt")
    with pytest.raises(ValueError, match=re.escape(message)):
        run_in_process(data, tmp_path / "out", do_train=True, num_train_steps=1,
                       init_checkpoint=str(tmp_path / "bert_model.ckpt"))
    assert not list((tmp_path / "out").glob("ckpt-*"))


def test_a_refused_run_removes_the_output_dir_it_created(tmp_path):
    """A missing --init_checkpoint is refused once output_dir exists and is locked: the script
    exits 2 and leaves neither output_dir nor the folder it made for it."""
    data = write_records(tmp_path / "train.tfrecord", 8)
    out = tmp_path / "made" / "out"
    process = subprocess.run(pretraining_command(
        data, out, "--do_train", "--num_train_steps=1", "--num_warmup_steps=0",
        "--train_batch_size=2", f"--init_checkpoint={tmp_path / 'bert_model.ckpt'}"),
        capture_output=True, text=True, timeout=300)
    assert_refused(process, "checkpoint-index-missing")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.tfrecord"]


def test_a_refused_run_keeps_an_output_dir_that_existed(tmp_path):
    data = write_records(tmp_path / "train.tfrecord", 8)
    (tmp_path / "empty").mkdir()
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("the user's\n")
    for out, held in (("empty", []), ("kept", ["notes.txt"])):
        with pytest.raises(OSError, match=re.escape(message("checkpoint-index-missing"))):
            run_in_process(data, tmp_path / out, do_train=True, num_train_steps=1,
                           init_checkpoint=str(tmp_path / "bert_model.ckpt"))
        assert sorted(p.name for p in (tmp_path / out).iterdir()) == held
    assert (tmp_path / "kept" / "notes.txt").read_text() == "the user's\n"
