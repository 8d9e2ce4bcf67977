"""The scripts under KERAS_BACKEND=jax (JAX's CPU backend) run the TensorFlow run: the same flags,
records and seed give each step's loss and the evaluation within 2e-4 (fp32, dropout on: the
masks are hashed by position and seed), the checkpoints are the same files, and a checkpoint
written under either backend is resumed or predicted from under the other. The large tier (JAX
is not a project requirement: tests/requirements-large.txt installs it); each JAX run is a
process of its own (the forked scripts share the session's backend)."""
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT
from modeling_helpers import TINY
from optional_packages import needs
from pretraining_helpers import model_checkpoint_values, pretraining_command, write_records
from test_run_classifier import write_keyword_mrpc
from test_xla import _eval_results, _train_losses

pytestmark = [pytest.mark.large, needs("jax")]

TOLERANCE = 2e-4


def _run(cmd, backend):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if backend == "jax":
        env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


def _assert_same_losses(got, want):
    assert sorted(got) == sorted(want) and len(want) > 1
    np.testing.assert_allclose([got[s] for s in sorted(want)], [want[s] for s in sorted(want)],
                               rtol=0, atol=TOLERANCE)


def _assert_same_eval(got, want):
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=0, atol=TOLERANCE, err_msg=name)


def _resumable_copy(output_dir, destination, step):
    """`output_dir` with its checkpoints up to `step` alone (as a run stopped there leaves it),
    without its TensorBoard events and results."""
    import tensorflow as tf

    shutil.copytree(output_dir, destination, ignore=shutil.ignore_patterns(
        "train", "eval_*", "ckpt-*"))
    for path in output_dir.glob(f"ckpt-{step}.*"):
        shutil.copy(path, destination)
    tf.compat.v1.train.update_checkpoint_state(str(destination), f"ckpt-{step}", [f"ckpt-{step}"],
                                               all_model_checkpoint_timestamps=[time.time()])
    return destination


def test_pretraining_under_jax_is_the_tensorflow_run_and_resumes_across_backends(tmp_path):
    data = write_records(tmp_path / "train.tfrecord", 64)

    def pretrain(output_dir, backend):
        return _run(pretraining_command(
            data, output_dir, "--do_train", "--do_eval", "--train_batch_size=8",
            "--eval_batch_size=8", "--num_train_steps=6", "--num_warmup_steps=2",
            "--save_checkpoints_steps=3", "--iterations_per_loop=1", "--max_eval_steps=2",
            "--learning_rate=1e-3", f"--init_checkpoint={TINY / 'bert_model.ckpt'}",
            config=TINY / "bert_config.json"), backend)

    runs = {backend: tmp_path / backend for backend in ("tensorflow", "jax")}
    for backend, output_dir in runs.items():
        pretrain(output_dir, backend)
    tf_run, jax_run = runs["tensorflow"], runs["jax"]
    _assert_same_losses(_train_losses(jax_run), _train_losses(tf_run))
    _assert_same_eval(_eval_results(jax_run), _eval_results(tf_run))
    # The same checkpoint files: every key in the same dtype, the values within float rounding.
    import tensorflow as tf

    for step in (3, 6):
        want = tf.train.load_checkpoint(str(tf_run / f"ckpt-{step}"))
        got = tf.train.load_checkpoint(str(jax_run / f"ckpt-{step}"))
        assert got.get_variable_to_dtype_map() == want.get_variable_to_dtype_map()
        assert got.get_variable_to_shape_map() == want.get_variable_to_shape_map()
    want, got = (model_checkpoint_values(run / "ckpt-6") for run in (tf_run, jax_run))
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-5, err_msg=name)

    # Stopped at step 3 under one backend, resumed under the other: the uninterrupted run's
    # steps 4-6 (its input position restored too) and evaluation.
    for first, then in (("jax", "tensorflow"), ("tensorflow", "jax")):
        resumed = _resumable_copy(runs[first], tmp_path / f"{first}_then_{then}", 3)
        log = pretrain(resumed, then)
        assert "Resuming from" in log and "(step 3)" in log
        losses = _train_losses(resumed)
        assert sorted(losses) == [4, 5, 6]
        want = _train_losses(tf_run)
        np.testing.assert_allclose([losses[s] for s in (4, 5, 6)], [want[s] for s in (4, 5, 6)],
                                   rtol=0, atol=TOLERANCE)
        _assert_same_eval(_eval_results(resumed), _eval_results(tf_run))


def _classifier(output_dir, backend, *args):
    return _run([
        sys.executable, str(ROOT / "run_classifier.py"), f"--vocab_file={TINY / 'vocab.txt'}",
        f"--bert_config_file={TINY / 'bert_config.json'}", "--task_name=MRPC",
        f"--data_dir={output_dir.parent / 'data'}", "--max_seq_length=24",
        "--train_batch_size=16", "--learning_rate=1e-3", f"--output_dir={output_dir}", *args],
        backend)


def _predicted_from_copy(output_dir, backend):
    """The probabilities predicted under `backend` from a copy of `output_dir`'s checkpoint."""
    copy = output_dir.parent / f"{output_dir.name}_predicted_under_{backend}"
    shutil.copytree(output_dir, copy, ignore=shutil.ignore_patterns("test_results.tsv"))
    _classifier(copy, backend, "--do_predict")
    return np.loadtxt(copy / "test_results.tsv")


def test_classifier_predictions_agree_across_backends_from_either_backends_checkpoint(tmp_path):
    write_keyword_mrpc(tmp_path / "data", num_train=64, num_dev=8, num_test=20)
    for backend in ("tensorflow", "jax"):
        output_dir = tmp_path / backend
        _classifier(output_dir, backend, "--do_train", "--do_predict", "--num_train_epochs=1",
                    f"--init_checkpoint={TINY / 'bert_model.ckpt'}")
        predicted = np.loadtxt(output_dir / "test_results.tsv")
        assert predicted.shape == (20, 2)
        other = "jax" if backend == "tensorflow" else "tensorflow"
        np.testing.assert_allclose(_predicted_from_copy(output_dir, other), predicted, rtol=0,
                                   atol=1e-3)
