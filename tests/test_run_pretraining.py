"""run_pretraining.py end to end: outputs, initialisation, resume after SIGKILL, two workers, real text."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import ROOT
from modeling import BertPretrainer
from modeling.checkpoint import original as original_layout
from modeling import checkpoint as checkpoints
from modeling_helpers import TINY, tiny_config
from pretraining_helpers import (
    cli_flags, model_checkpoint_values, pretraining_command, run_cli, run_in_process,
    truncate_checkpoint, write_records)
from test_xla import assert_compiled_run_agrees

EVAL_KEYS = ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
             "next_sentence_accuracy", "next_sentence_loss"]


def read_eval_results(output_dir):
    lines = (output_dir / "eval_results.txt").read_text().splitlines()
    return {k: float(v) for k, v in (line.split(" = ") for line in lines)}


def _pretrain(tmp, name, jit_compile):
    """The tiny model (dropout 0.1) pre-trained and evaluated from its checkpoint by the script
    on `tmp`'s records: (output_dir, log)."""
    data = tmp / "train.tfrecord"
    if not data.exists():
        write_records(data, 64)
    out = tmp / name
    result = run_cli(pretraining_command(
        data, out, "--do_train", "--do_eval", "--train_batch_size=8", "--eval_batch_size=8",
        "--num_train_steps=6", "--num_warmup_steps=2", "--save_checkpoints_steps=3",
        "--iterations_per_loop=3", "--max_eval_steps=2", "--save_tf1_checkpoint",
        "--learning_rate=1e-3", f"--jit_compile={jit_compile}",
        f"--init_checkpoint={TINY / 'bert_model.ckpt'}", config=TINY / "bert_config.json"))
    return out, result.stderr


@pytest.fixture(scope="module")
def records_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pretraining")


@pytest.fixture(scope="module")
def trained(records_dir):
    """{"plain": (output_dir, log)} of `_pretrain` as usual."""
    return {"plain": _pretrain(records_dir, "plain", "false")}


@pytest.fixture(scope="module")
def trained_xla(records_dir):
    """(output_dir, log) of `_pretrain` with --jit_compile=true (the large tier's)."""
    return _pretrain(records_dir, "xla", "true")


def test_train_eval_outputs_and_original_layout_export(trained):
    out, log = trained["plain"]
    assert "*INIT_FROM_CKPT*" in log
    assert "examples/s" in log and "ETA" in log
    results = read_eval_results(out)
    assert sorted(results) == EVAL_KEYS
    assert results["global_step"] == 6
    assert results["loss"] == pytest.approx(results["masked_lm_loss"] + results["next_sentence_loss"], rel=0.2)
    # Checkpoints every 3 steps; the final weights also in the original layout, loadable strictly.
    assert (out / "ckpt-3.index").exists() and (out / "ckpt-6.index").exists()
    model = BertPretrainer(tiny_config())
    checkpoints.load_checkpoint(model, out / "bert_model.ckpt")
    assert tf.train.load_checkpoint(str(out / "bert_model.ckpt")).get_tensor("global_step") == 6
    # TensorBoard scalars.
    events = list((out / "train").glob("events.out.tfevents.*"))
    tags = {v.tag for e in tf.compat.v1.train.summary_iterator(str(events[0])) for v in e.summary.value}
    assert {"loss", "learning_rate", "masked_lm_accuracy", "examples_per_second"} <= tags


@pytest.mark.large
def test_jit_compile_trains_and_evaluates_as_without(trained, trained_xla):
    """As tests/test_xla.py checks the fine-tuning scripts."""
    assert_compiled_run_agrees(trained["plain"][0], *trained_xla)


def test_our_checkpoints_initialise_other_task_models(trained):
    from modeling import BertClassifier
    from modeling.checkpoint import initialize_from_checkpoint

    run = trained["plain"][0]
    classifier = BertClassifier(tiny_config(), num_labels=2)
    report = initialize_from_checkpoint(classifier, run)
    assert sorted(report.missing) == ["classifier/output_bias", "classifier/output_weights"]
    saved = model_checkpoint_values(run / "ckpt-6")
    for variable in classifier.encoder.weights:
        key = "model/by_path/" + variable.path.replace("/", ".S") + "/.ATTRIBUTES/VARIABLE_VALUE"
        np.testing.assert_array_equal(np.asarray(variable), saved[key], err_msg=variable.path)
    assert len(report.loaded) == len(original_layout.encoder_names(classifier))


def test_evaluating_with_another_config_leaves_the_run_as_it_was(trained, tmp_path, caplog):
    """A command that only evaluates: checked up front against output_dir's own checkpoints (one
    message naming the config), it never rewrites the run's bert_config.json, and it says that
    the --init_checkpoint its checkpoints take the place of is not used."""
    import logging
    import shutil

    caplog.set_level(logging.INFO)
    run = tmp_path / "run"
    shutil.copytree(trained["plain"][0], run)
    data = trained["plain"][0].parent / "train.tfrecord"
    recorded = (run / "bert_config.json").read_text()
    config = json.loads((TINY / "bert_config.json").read_text())
    wider = tmp_path / "wider.json"
    wider.write_text(json.dumps({**config, "intermediate_size": 2 * config["intermediate_size"]}))
    with pytest.raises(ValueError, match=r"ckpt-6 \(--output_dir\) does not fit the model of "
                       + str(wider)):
        run_in_process(data, run, config=wider, do_eval=True, eval_batch_size=8, max_eval_steps=1)
    relu = tmp_path / "relu.json"
    relu.write_text(json.dumps({**config, "hidden_act": "relu"}))
    run_in_process(data, run, config=relu, do_eval=True, eval_batch_size=8, max_eval_steps=1,
                   init_checkpoint=str(TINY / "bert_model.ckpt"))
    assert (run / "bert_config.json").read_text() == recorded
    assert "--init_checkpoint=%s not used" % (TINY / "bert_model.ckpt") in caplog.text
    assert "trained with other settings than this command's" in caplog.text


@pytest.mark.large
def test_killed_run_resumes_to_the_same_weights_past_a_truncated_checkpoint(tmp_path, caplog):
    """SIGKILL, then the newest checkpoint's data file cut short (as by a full disk): the run
    resumes from the one before and ends with the uninterrupted run's weights. The killed run is
    the script's; the uninterrupted and the resumed ones run the driver in this process."""
    data = write_records(tmp_path / "train.tfrecord", 64)
    # Dropout 0.1: the resumed run must also continue the dropout random streams.
    flags = dict(config=TINY / "bert_config.json", do_train=True, train_batch_size=8,
                 num_train_steps=30, num_warmup_steps=5, save_checkpoints_steps=5,
                 iterations_per_loop=5, deterministic=True, learning_rate=1e-3,
                 keep_checkpoint_max=10)
    run_in_process(data, tmp_path / "straight", **flags)

    interrupted = tmp_path / "interrupted"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    config = flags.pop("config")
    process = subprocess.Popen(
        pretraining_command(data, interrupted, *cli_flags(**flags), config=config), env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    # Until the `checkpoint` file lists ckpt-10, so that an older readable one remains.
    state = interrupted / "checkpoint"
    while (not (state.exists() and "ckpt-10" in state.read_text()) and process.poll() is None
           and time.time() < deadline):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (interrupted / "ckpt-30.index").exists(), "the run finished before it could be killed"
    newest = tf.train.latest_checkpoint(str(interrupted))
    truncate_checkpoint(interrupted / os.path.basename(newest))
    # kill -9 left the killed run's lock: the resumed run takes it over (its process is gone).
    assert f'"pid": {process.pid}' in (interrupted / "run.lock").read_text()
    run_in_process(data, interrupted, config=config, **flags)
    assert any("taking over the lock of a run that no longer runs" in m for m in caplog.messages)
    assert not (interrupted / "run.lock").exists()
    assert any(f"Checkpoint {newest} is unreadable" in m for m in caplog.messages)
    assert any(f"instead of {newest}" in m for m in caplog.messages)

    straight = model_checkpoint_values(tmp_path / "straight" / "ckpt-30")
    resumed = model_checkpoint_values(interrupted / "ckpt-30")
    assert straight.keys() == resumed.keys() and len(straight) > 46  # weights + dropout seeds
    for name in straight:
        np.testing.assert_array_equal(straight[name], resumed[name], err_msg=name)


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


WORKER = """
import sys, numpy as np
sys.path.insert(0, {root!r})
from absl import flags
import run_pretraining
flags.FLAGS(sys.argv)
trainer = run_pretraining.run()
np.savez({out!r}, *[np.asarray(w) for w in trainer.model.get_weights()])
"""


@pytest.mark.large
def test_two_workers_train_like_one_process_with_the_same_global_batch(tmp_path):
    # Every record masks as many tokens: the masked-LM loss, normalised per replica, then
    # weighs each token as one process does (docs/run_pretraining.md).
    data = write_records(tmp_path / "train.tfrecord", 64)
    # --init_checkpoint too: its start-up check must not run TensorFlow before the strategy exists.
    # Evaluation capped at 2 steps of 8 covers the same 16 records as in one process.
    flags = dict(do_train=True, train_batch_size=8, num_train_steps=4, num_warmup_steps=1,
                 learning_rate=1e-3, iterations_per_loop=2, save_checkpoints_steps=4,
                 init_checkpoint=str(TINY / "bert_model.ckpt"), do_eval=True, eval_batch_size=8,
                 max_eval_steps=2)
    args = cli_flags(**flags)
    cluster = {"worker": [f"localhost:{free_port()}", f"localhost:{free_port()}"]}
    processes = []
    for index in range(2):
        script = WORKER.format(root=str(ROOT), out=str(tmp_path / f"worker{index}.npz"))
        cmd = [sys.executable, "-c", script] + pretraining_command(
            data, tmp_path / "multi", *args, "--distribution_strategy=multi_worker_mirrored")[2:]
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2",
               "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})}
        processes.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-3000:]
    # The same flags in one process (this one), with the default strategy.
    single = run_in_process(data, tmp_path / "single", **flags).trainer.model.get_weights()

    workers = [np.load(tmp_path / f"worker{i}.npz") for i in range(2)]
    assert len(workers[0].files) == len(single)
    for index, weight in enumerate(single):
        key = f"arr_{index}"
        np.testing.assert_array_equal(workers[0][key], workers[1][key])
        np.testing.assert_allclose(workers[0][key], np.asarray(weight), atol=1e-5)
    assert (tmp_path / "multi" / "ckpt-4.index").exists()
    assert not list((tmp_path / "multi").glob(".worker_tmp_*"))
    reports = [json.loads((tmp_path / name / "eval_report.json").read_text())
               for name in ("multi", "single")]
    assert reports[0]["baselines"] == reports[1]["baselines"]
    assert reports[0]["metrics"] == pytest.approx(reports[1]["metrics"], rel=1e-4)
