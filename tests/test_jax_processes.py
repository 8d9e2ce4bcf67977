"""Under KERAS_BACKEND=jax, several processes make the run one process makes
(`bert_runner.engines.jax_processes`): two local processes of one CPU device each, joined through
Keras' variables and reducing over gloo, sharing one output_dir, against one process on one device
and on two. The same losses at every step and evaluation (2e-4), with micro-batches too; one
writer; a run of two processes resumed and continued by one; processes told different runs stop
at once, writing nothing; --deterministic runs are bit for bit. The large tier (JAX)."""
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT
from modeling_helpers import TINY
from optional_packages import needs
from pretraining_helpers import model_checkpoint_values, pretraining_command, write_records
from test_jax_training import _assert_same_eval, _assert_same_losses, _resumable_copy
from test_xla import _eval_results, _numbers, _train_losses

pytestmark = [pytest.mark.large, needs("jax")]

ENV = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2",
       "BERT_TESTS_FORK": "0"}


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _launch(cmd, layout):
    """Runs `cmd` as `layout` lays it out: "1 device", "2 devices" (one process) or
    "2 processes" (one CPU device each, Keras' variables); returns each process's result."""
    env = {**os.environ, **ENV}
    if layout != "2 processes":
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={layout[0]}"
        return [subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)]
    return _processes([cmd, cmd])


def _processes(commands):
    """Runs `commands[i]` as process i of a launch of `len(commands)` (Keras' variables, one
    CPU device each); each process's result, in order."""
    address = f"localhost:{_free_port()}"
    processes = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, **ENV,
                                       "KERAS_DISTRIBUTION_JOB_ADDRESSES": address,
                                       "KERAS_DISTRIBUTION_NUM_PROCESSES": str(len(commands)),
                                       "KERAS_DISTRIBUTION_PROCESS_ID": str(index)})
                 for index, cmd in enumerate(commands)]
    results = []
    for cmd, process in zip(commands, processes):
        stdout, stderr = process.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(cmd, process.returncode, stdout, stderr))
    return results


def _run(cmd, layout):
    results = _launch(cmd, layout)
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    return results[0].stderr


def _pretrain(data, output_dir, layout, *flags):
    return _run(pretraining_command(
        data, output_dir, "--do_train", "--do_eval", "--train_batch_size=8",
        "--eval_batch_size=5", "--num_train_steps=4", "--num_warmup_steps=1",
        "--save_checkpoints_steps=2", "--iterations_per_loop=1", "--max_eval_steps=2",
        "--learning_rate=1e-3", "--compilation_cache_dir=", *flags,
        config=TINY / "bert_config.json"), layout)


LAYOUTS = ("1 device", "2 devices", "2 processes")


@pytest.mark.parametrize("objective, accumulations", [
    pytest.param("mlm", (1, 2), marks=pytest.mark.xdist_group("jax_processes_mlm")),
    pytest.param("electra", (2,), marks=pytest.mark.xdist_group("jax_processes_electra"))])
def test_two_processes_make_the_one_process_run(tmp_path, objective, accumulations):
    """BERT from the tiny checkpoint, ELECTRA from scratch: every layout's losses and
    evaluation, with and without micro-batches; the two processes' output_dir holds one
    writer's files; two processes, and one, resume it at step 2 and train the uninterrupted
    steps."""
    data = write_records(tmp_path / "train.tfrecord", 32)
    start = [f"--pretraining_objective={objective}"]
    if objective == "mlm":
        start.append(f"--init_checkpoint={TINY / 'bert_model.ckpt'}")
    for k in accumulations:
        runs = {layout: tmp_path / f"{layout.replace(' ', '_')}_{k}" for layout in LAYOUTS}
        for layout, output_dir in runs.items():
            _pretrain(data, output_dir, layout, *start, f"--gradient_accumulation_steps={k}")
        want = runs["1 device"]
        for layout in LAYOUTS[1:]:
            _assert_same_losses(_train_losses(runs[layout]), _train_losses(want))
            _assert_same_eval(_eval_results(runs[layout]), _eval_results(want))
    two = runs["2 processes"]
    # One writer: one event file, the checkpoints and results of one run, nothing of a second.
    assert len(list((two / "train").glob("events.out.tfevents.*"))) == 1
    assert sorted(p.name for p in two.glob("ckpt-*.index")) == ["ckpt-2.index", "ckpt-4.index"]
    gap = max(float(np.max(np.abs(a - model_checkpoint_values(want / "ckpt-4")[n])))
              for n, a in model_checkpoint_values(two / "ckpt-4").items())
    assert gap < 1e-5
    # Stopped at step 2 (as a killed run leaves it), resumed by two processes and by one (once:
    # ELECTRA's checkpoints resume as BERT's do).
    for layout in ("2 processes", "1 device") if objective == "mlm" else ():
        resumed = _resumable_copy(two, tmp_path / f"resumed_{layout[0]}", 2)
        log = _pretrain(data, resumed, layout, *start,
                        f"--gradient_accumulation_steps={accumulations[-1]}")
        assert "Resuming from" in log and "(step 2)" in log
        losses, uninterrupted = _train_losses(resumed), _train_losses(want)
        assert sorted(losses) == [3, 4]
        np.testing.assert_allclose([losses[s] for s in (3, 4)],
                                   [uninterrupted[s] for s in (3, 4)], rtol=0, atol=2e-4)


@pytest.mark.xdist_group("jax_processes_classifier")
def test_two_processes_fine_tune_evaluate_and_predict_as_one(tmp_path):
    """run_classifier from the tiny checkpoint: the same losses, evaluation and predictions;
    one process predicts from the two processes' checkpoints as they did."""
    from test_run_classifier import write_keyword_mrpc

    write_keyword_mrpc(tmp_path / "data", num_train=32, num_dev=8, num_test=8)

    def classifier(output_dir, layout, *flags):
        return _run([sys.executable, str(ROOT / "run_classifier.py"), "--task_name=MRPC",
                     f"--data_dir={tmp_path / 'data'}", f"--vocab_file={TINY / 'vocab.txt'}",
                     f"--bert_config_file={TINY / 'bert_config.json'}",
                     f"--init_checkpoint={TINY / 'bert_model.ckpt'}", "--max_seq_length=32",
                     "--train_batch_size=8", "--eval_batch_size=8", "--predict_batch_size=8",
                     "--learning_rate=1e-3", "--iterations_per_loop=1",
                     "--compilation_cache_dir=", f"--output_dir={output_dir}", *flags], layout)

    runs = {layout: tmp_path / layout[0] for layout in ("1 device", "2 processes")}
    for layout, output_dir in runs.items():
        classifier(output_dir, layout, "--do_train", "--do_eval", "--do_predict")
    one, two = runs["1 device"], runs["2 processes"]
    _assert_same_losses(_train_losses(two), _train_losses(one))
    _assert_same_eval(_eval_results(two), _eval_results(one))
    predicted = tmp_path / "predicted_by_one"
    shutil.copytree(two, predicted, ignore=shutil.ignore_patterns("test_results.tsv"))
    classifier(predicted, "1 device", "--do_predict")
    for run in (two, predicted):
        np.testing.assert_allclose(_numbers(run / "test_results.tsv"),
                                   _numbers(one / "test_results.tsv"), rtol=0, atol=1e-3)


def test_processes_told_different_runs_stop_at_once_writing_nothing(tmp_path):
    data = write_records(tmp_path / "train.tfrecord", 8)
    started = time.monotonic()
    results = _processes([pretraining_command(
        data, tmp_path / "out", "--do_train", "--train_batch_size=8", "--num_train_steps=2",
        "--num_warmup_steps=0", f"--learning_rate={rate}", "--compilation_cache_dir=",
        f"--init_checkpoint={TINY / 'bert_model.ckpt'}", config=TINY / "bert_config.json")
        for rate in ("1e-3", "2e-3")])
    for result in results:
        assert result.returncode == 2, result.stderr[-3000:]
        assert "Traceback" not in result.stderr
        assert result.stderr.strip().splitlines()[-1] == (
            "run_pretraining.py: error: process 1 was told another run than process 0: "
            "flags.learning_rate 0.001 on process 0, 0.002 on process 1; start every process "
            "with the same command")
    assert time.monotonic() - started < 60
    assert not (tmp_path / "out").exists()


def test_deterministic_runs_under_jax_are_bit_for_bit(tmp_path):
    data = write_records(tmp_path / "train.tfrecord", 16)
    runs = [tmp_path / name for name in ("first", "second")]
    for output_dir in runs:
        _pretrain(data, output_dir, "2 devices", "--deterministic",
                  f"--init_checkpoint={TINY / 'bert_model.ckpt'}")
    first, second = (model_checkpoint_values(run / "ckpt-4") for run in runs)
    assert first.keys() == second.keys() and first
    for name, value in first.items():
        assert np.array_equal(value, second[name]), name


def test_keras_variables_are_checked_in_one_line(tmp_path):
    data = write_records(tmp_path / "train.tfrecord", 8)
    result = subprocess.run(
        pretraining_command(data, tmp_path / "out", "--do_train", "--num_train_steps=1",
                            "--num_warmup_steps=0", config=TINY / "bert_config.json"),
        capture_output=True, text=True, timeout=300,
        env={**os.environ, **ENV, "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
             "KERAS_DISTRIBUTION_PROCESS_ID": "2",
             "KERAS_DISTRIBUTION_JOB_ADDRESSES": "localhost:1"})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert re.search(r"error: KERAS_DISTRIBUTION_PROCESS_ID=2 is not a process of "
                     r"KERAS_DISTRIBUTION_NUM_PROCESSES=2 \(0 to 1\)$", result.stderr.strip())
    assert not (tmp_path / "out").exists()
