"""The scripts under KERAS_BACKEND=jax (JAX's CPU backend) run the TensorFlow run: the same flags,
records and seed give each step's loss and the evaluation within 2e-4 (fp32, dropout on: the
masks are hashed by position and seed), the checkpoints are the same files, and a checkpoint
written under either backend is resumed or predicted from under the other. The large tier (JAX
is not a project requirement: tests/requirements-large.txt installs it); each JAX run is a
process of its own (the forked scripts share the session's backend)."""
import os
import random
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
from refusals import assert_refused
from test_xla import SCRIPTS, _eval_results, _numbers, _train_losses

pytestmark = [pytest.mark.large, needs("jax")]

TOLERANCE = 2e-4


def _run(cmd, backend, **more_env):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **more_env}
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


@pytest.mark.parametrize("objective", [  # each on a pytest process of its own, when one is free
    pytest.param(name, marks=pytest.mark.xdist_group(f"jax_{name}")) for name in
    ("mlm", "ltr", "electra")])
def test_pretraining_under_jax_is_the_tensorflow_run_and_resumes_across_backends(
        tmp_path, objective):
    """BERT and the left-to-right model from the tiny checkpoint, ELECTRA from scratch (its
    initial values drawn on the host: `modeling.layers.initializers`): the same run under both
    backends; stopped at step 3 under one backend, resumed under the other."""
    from test_ltr_model import ltr_records

    data = (ltr_records(tmp_path / "ltr.tfrecord") if objective == "ltr"
            else write_records(tmp_path / "train.tfrecord", 64))
    start = [f"--pretraining_objective={objective}"]
    if objective != "electra":
        start.append(f"--init_checkpoint={TINY / 'bert_model.ckpt'}")

    def pretrain(output_dir, backend):
        return _run(pretraining_command(
            data, output_dir, "--do_train", "--do_eval", "--train_batch_size=8",
            "--eval_batch_size=8", "--num_train_steps=6", "--num_warmup_steps=2",
            "--save_checkpoints_steps=3", "--iterations_per_loop=1", "--max_eval_steps=2",
            "--learning_rate=1e-3", *start, config=TINY / "bert_config.json"), backend)

    runs = {backend: tmp_path / backend for backend in ("tensorflow", "jax")}
    for backend, output_dir in runs.items():
        pretrain(output_dir, backend)
    tf_run, jax_run = runs["tensorflow"], runs["jax"]
    # The same checkpoint files: every key, of the same dtype and shape (the input position's
    # state is a serialized variant: its size is no shape).
    import tensorflow as tf

    for step in (3, 6):
        want = tf.train.load_checkpoint(str(tf_run / f"ckpt-{step}"))
        got = tf.train.load_checkpoint(str(jax_run / f"ckpt-{step}"))
        assert got.get_variable_to_dtype_map() == want.get_variable_to_dtype_map()
        shapes = [{k: v for k, v in reader.get_variable_to_shape_map().items()
                   if not k.startswith("iterator/")} for reader in (got, want)]
        assert shapes[0] == shapes[1]
    _assert_same_losses(_train_losses(jax_run), _train_losses(tf_run))
    _assert_same_eval(_eval_results(jax_run), _eval_results(tf_run))
    want, got = (model_checkpoint_values(run / "ckpt-6") for run in (tf_run, jax_run))
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-5, err_msg=name)

    # Stopped at step 3 under one backend, resumed under the other: the uninterrupted run's
    # steps 4-6 (its input position restored too) and evaluation.
    for first, then in (("jax", "tensorflow"), ("tensorflow", "jax")):
        resumed = _resumable_copy(runs[first], tmp_path / f"{first}_then_{then}", 3)
        log = pretrain(resumed, then)
        assert "Resuming from" in log and "(step 3)" in log
        losses, want = _train_losses(resumed), _train_losses(runs[first])
        assert sorted(losses) == [4, 5, 6]
        np.testing.assert_allclose([losses[s] for s in (4, 5, 6)], [want[s] for s in (4, 5, 6)],
                                   rtol=0, atol=TOLERANCE)
        _assert_same_eval(_eval_results(resumed), _eval_results(runs[first]))


def test_pretraining_over_two_devices_is_the_one_device_run(tmp_path):
    """Two JAX devices (XLA:CPU split in two): the variables replicated, the training batch of 8
    split over them, the evaluation's batches of 5 run whole on each; the same losses and
    evaluation as on one device."""
    data = write_records(tmp_path / "train.tfrecord", 32)
    runs = {}
    for devices in (1, 2):
        runs[devices] = tmp_path / f"devices_{devices}"
        log = _run(pretraining_command(
            data, runs[devices], "--do_train", "--do_eval", "--train_batch_size=8",
            "--eval_batch_size=5", "--num_train_steps=4", "--num_warmup_steps=1",
            "--iterations_per_loop=2", "--max_eval_steps=2", "--learning_rate=1e-3",
            f"--init_checkpoint={TINY / 'bert_model.ckpt'}", config=TINY / "bert_config.json"),
            "jax", XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
        assert ("Data-parallel over 2 devices" in log) == (devices == 2)
    _assert_same_losses(_train_losses(runs[2]), _train_losses(runs[1]))
    _assert_same_eval(_eval_results(runs[2]), _eval_results(runs[1]))
    # A training batch the devices cannot share is refused, not run whole on each.
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(pretraining_command(
        data, tmp_path / "odd", "--do_train", "--train_batch_size=5", "--num_train_steps=2",
        "--num_warmup_steps=0", f"--init_checkpoint={TINY / 'bert_model.ckpt'}",
        config=TINY / "bert_config.json"), capture_output=True, text=True, env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].endswith(
        "--train_batch_size: the global batch of 5 must divide evenly into 2 devices x 1 "
        "accumulation steps")
    assert not (tmp_path / "odd").exists()


def test_a_jax_run_logs_on_its_cadence_profiles_and_reuses_its_compiled_step(tmp_path):
    """TensorFlow in a script's process under JAX sees the CPU alone; --log_steps lines with
    tokens/s; --profile_steps' trace for TensorBoard and Perfetto; a second run of the same shapes
    takes its step from --compilation_cache_dir instead of compiling it."""
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import bert_runner.cli\n"
             "from tensorflow.python.eager import context\n"
             "print('visible:', [d.device_type for d in context.context()._visible_device_list],"
             " file=sys.stderr)")
    log = _run([sys.executable, "-c", probe, str(ROOT)], "jax")
    assert log.strip().splitlines()[-1] == "visible: ['CPU']", log[-3000:]

    data = write_records(tmp_path / "train.tfrecord", 32)
    logs = {}
    for run in ("first", "second"):
        logs[run] = _run(pretraining_command(
            data, tmp_path / run, "--do_train", "--train_batch_size=8", "--num_train_steps=6",
            "--num_warmup_steps=1", "--log_steps=2", "--profile_steps=2",
            f"--compilation_cache_dir={tmp_path / 'cache'}",
            f"--init_checkpoint={TINY / 'bert_model.ckpt'}", config=TINY / "bert_config.json"),
            "jax")
    assert "The step was compiled (not in the compilation cache)" in logs["first"]
    assert "The step came from the compilation cache" in logs["second"]
    lines = [line for line in logs["first"].splitlines() if "] step " in line]
    assert [line.split("] step ")[1].split()[0] for line in lines] == ["2/6", "4/6", "6/6"]
    assert all(" tokens/s " in line for line in lines)
    assert "Profiled steps 3-4: " in logs["first"]
    traces = tmp_path / "first" / "train" / "plugins" / "profile"
    assert list(traces.glob("*/*.xplane.pb")) and list(traces.glob("*/perfetto_trace.json.gz"))


def _fine_tune(script, args, output_dir, backend, *more):
    return _run([sys.executable, str(ROOT / script), f"--bert_config_file={TINY / 'bert_config.json'}",
                 f"--init_checkpoint={TINY / 'bert_model.ckpt'}", "--train_batch_size=8",
                 "--learning_rate=1e-3", f"--output_dir={output_dir}", *args, *more], backend)


@pytest.mark.parametrize("script", [  # each on a pytest process of its own, when one is free
    pytest.param(name, marks=pytest.mark.xdist_group(f"jax_{name}")) for name in sorted(SCRIPTS)])
def test_fine_tuned_predictions_agree_across_backends_from_either_backends_checkpoint(
        tmp_path, script):
    """Trained under one backend (fresh heads draw their initial values differently under each:
    Keras' random ops are the backend's), predicted from its checkpoint under the other."""
    path, args, prediction_files = SCRIPTS[script](tmp_path)
    for backend, other in (("tensorflow", "jax"), ("jax", "tensorflow")):
        trained = tmp_path / backend
        _fine_tune(path, args, trained, backend, "--do_train=true", "--do_eval=true")
        copy = tmp_path / f"{backend}_predicted_under_{other}"
        shutil.copytree(trained, copy, ignore=shutil.ignore_patterns(*prediction_files))
        predicting = [a for a in args if not a.startswith("--max_sequences_per_row")]
        _fine_tune(path, predicting, copy, other, "--do_train=false", "--do_eval=false")
        for name in prediction_files:
            want, got = _numbers(trained / name), _numbers(copy / name)
            assert len(got) == len(want) > 0, name
            for a, b in zip(got, want):
                if isinstance(b, float):
                    np.testing.assert_allclose(a, b, rtol=0, atol=1e-3, err_msg=name)
                else:
                    assert a == b, name


def test_sentence_embeddings_under_jax_are_the_tensorflow_run(tmp_path):
    from test_sentence_embedding_training import topic_pairs, write_jsonl

    pairs = topic_pairs(random.Random(0), 40, negatives=1)
    train = write_jsonl(tmp_path / "train.jsonl", pairs[:32])
    dev = tmp_path / "dev.tsv"
    dev.write_text("".join(f"{p['query']}\t{p['positive']}\n" for p in pairs[32:]))
    runs = {backend: tmp_path / backend for backend in ("tensorflow", "jax")}
    for backend, output_dir in runs.items():
        _run([sys.executable, str(ROOT / "run_sentence_embeddings.py"),
              f"--vocab_file={TINY / 'vocab.txt'}", f"--bert_config_file={TINY / 'bert_config.json'}",
              f"--init_checkpoint={TINY / 'bert_model.ckpt'}", f"--train_file={train}",
              f"--eval_file={dev}", "--do_train", "--do_eval", f"--output_dir={output_dir}",
              "--max_seq_length=16", "--train_batch_size=8", "--num_train_epochs=1",
              "--learning_rate=1e-3", "--iterations_per_loop=1"], backend)
    _assert_same_losses(_train_losses(runs["jax"]), _train_losses(runs["tensorflow"]))
    _assert_same_eval(_eval_results(runs["jax"]), _eval_results(runs["tensorflow"]))


@pytest.mark.parametrize("flag, why", [
    ("--mixed_precision=fp16", "loss scaling"),
    ("--distribution_strategy=mirrored", "a tf.distribute strategy")])
def test_what_jax_cannot_do_yet_is_refused_naming_the_flag(tmp_path, flag, why):
    data = write_records(tmp_path / "train.tfrecord", 8)
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(pretraining_command(data, tmp_path / "out", "--do_train", flag),
                            capture_output=True, text=True, env=env)
    assert_refused(result, "jax-flag-unsupported")
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"run_pretraining.py: error: {flag} is not supported under "
                           f"KERAS_BACKEND=jax ({why}")
    assert "Traceback" not in result.stderr


def test_the_feature_based_ner_script_is_refused_under_jax(tmp_path):
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([
        sys.executable, str(ROOT / "run_ner_feature_based.py"), f"--data_dir={tmp_path}",
        f"--bert_config_file={TINY / 'bert_config.json'}", f"--vocab_file={TINY / 'vocab.txt'}",
        f"--init_checkpoint={TINY / 'bert_model.ckpt'}", f"--output_dir={tmp_path / 'out'}"],
        capture_output=True, text=True, env=env)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        "run_ner_feature_based.py: error: run_ner_feature_based.py runs under TensorFlow only, "
        "not under KERAS_BACKEND=jax: unset KERAS_BACKEND")
