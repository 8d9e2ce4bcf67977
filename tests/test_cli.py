"""bert_runner.cli: how every script fails. A refusal (a ValueError, a file-system error) is one
line naming the flag or file, exit code 2, no traceback unless asked for; anything else keeps its
traceback (exit 1); `--helpfull` lists the exit codes and exits 0."""
import errno
import json
import os
import signal
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_runner import cli, distribution
import forked_scripts
from conftest import ROOT
from modeling_helpers import TINY
from ner_helpers import write_conll_dir
from refusals import assert_refused, message

SCRIPTS = ("run_classifier", "run_squad", "run_swag", "run_ner", "run_ner_feature_based",
           "run_pretraining", "create_pretraining_data", "build_vocab", "extract_features",
           "export_model", "add_vocab_words", "demo", "run_sentence_embeddings")


def run_script(script, *args, **env):
    return subprocess.run([sys.executable, str(ROOT / f"{script}.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env})


def test_refusals_are_the_users_and_the_rest_are_bugs():
    assert cli.refusal(ValueError("--x=1: bad")) == "--x=1: bad"
    assert cli.refusal(PermissionError(errno.EACCES, "Permission denied", "/data/out")) == (
        "Permission denied: /data/out")
    assert cli.refusal(IsADirectoryError(errno.EISDIR, "Is a directory", "/data/train.csv")) == (
        "Is a directory: /data/train.csv")
    assert cli.refusal(tf.errors.NotFoundError(None, None, "/ckpt/model.index; No such file")) == (
        "/ckpt/model.index; No such file")
    for bug in (KeyError("x"), TypeError("x"), AssertionError("x"), RuntimeError("x"),
                tf.errors.InvalidArgumentError(None, None, "shapes differ")):
        assert cli.refusal(bug) is None


def test_tensorflow_is_left_the_cpu_alone_under_jax():
    """Under KERAS_BACKEND=jax TensorFlow reads records and writes checkpoints: shown a GPU and a
    TPU, it is made to see the CPU alone (a run's process: tests/test_jax_training.py)."""
    class Config:
        devices = {"CPU": ["cpu:0"], "GPU": ["gpu:0", "gpu:1"], "TPU": ["tpu:0"]}
        visible = None

        def list_physical_devices(self, device_type=None):
            return self.devices[device_type]

        def set_visible_devices(self, devices, device_type=None):
            assert device_type is None  # every kind's visibility, not the CPU's alone
            self.visible = devices

    config = Config()
    cli.keep_tensorflow_on_the_host(config)
    assert config.visible == ["cpu:0"]


def test_refused_interrupted_and_failed_mains_exit_as_documented(capsys):
    def main_raising(error):
        def main(_):
            raise error
        return cli._guarded(main)

    for error, code in ((ValueError("--x=0: must be > 0"), 2), (KeyboardInterrupt(), 130),
                        (cli.Terminated(), 143)):
        with pytest.raises(SystemExit) as exit_:
            main_raising(error)([])
        assert exit_.value.code == code
    stderr = capsys.readouterr().err
    assert "error: --x=0: must be > 0\n" in stderr
    assert stderr.count("interrupted; incomplete outputs") == 2  # Ctrl-C and SIGTERM alike
    with pytest.raises(KeyError):  # A bug keeps its traceback: absl exits 1 with it.
        main_raising(KeyError("x"))([])


def test_sigterm_unwinds_as_ctrl_c_does(tmp_path):
    """A script sent SIGTERM (here by itself, so the signal arrives at a known point) runs its
    `finally` blocks, says it was interrupted and exits 143."""
    program = (
        "import os, signal, sys\n"
        "from bert_runner import cli\n"
        "def main(_):\n"
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        signal.pause()\n"
        "    finally:\n"
        "        # Signals during the clean-up (Ctrl-C again, a parent passing one on) wait.\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        f"        open({str(tmp_path / 'cleaned')!r}, 'w').close()\n"
        "cli.run_script(main)\n")
    process = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
    assert process.returncode == 143, process.stderr
    assert "interrupted; incomplete outputs were removed" in process.stderr
    assert "Traceback" not in process.stderr
    assert (tmp_path / "cleaned").exists()


def test_demo_passes_an_interruption_on_to_its_stage_and_waits_for_it(tmp_path):
    """demo.py's stage gets the signal demo.py got (alone, as from `kill`), and demo.py goes on
    unwinding only once the stage has cleaned up."""
    stage = (
        "import pathlib, signal, sys, time\n"
        "def stop(signum, frame):\n"
        "    time.sleep(0.5)\n"
        f"    pathlib.Path({str(tmp_path / 'stage')!r}).write_text(str(signum))\n"
        "    sys.exit(128 + signum)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('ready', flush=True)\n"
        "signal.pause()\n")
    program = (
        "import subprocess, sys\n"
        "from experiments import demo_pipeline\n"
        "from bert_runner import cli\n"
        f"process = subprocess.Popen([sys.executable, '-c', {stage!r}], stdout=subprocess.PIPE)\n"
        "try:\n"
        "    with process, demo_pipeline._stopped_with(process):\n"
        "        process.stdout.readline()\n"
        "        raise cli.Terminated()\n"
        "except cli.Terminated:\n"
        "    print(process.returncode)\n")
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.stdout.split() == [str(128 + signal.SIGTERM)], result.stderr[-3000:]
    assert (tmp_path / "stage").read_text() == str(int(signal.SIGTERM))


@pytest.mark.parametrize("script", SCRIPTS)
def test_helpfull_lists_the_exit_codes_and_succeeds(script):
    # Only the exit codes are read: the flags TensorFlow's import adds to the list do not matter.
    result = run_script(script, "--helpfull", **{forked_scripts.FORK_HELP_VARIABLE: "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert cli.EXIT_CODES.strip() in result.stdout


def test_a_missing_flag_is_refused_in_one_line():
    result = run_script("run_swag")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("run_swag.py: error: flag --data_dir=None")


def test_an_output_dir_that_cannot_be_written_is_refused_before_any_work(tmp_path):
    data = write_conll_dir(tmp_path / "data")
    if os.geteuid() == 0:
        out = "/sys/bert-tests-output"  # Not writable, even for root.
    else:
        out = tmp_path / "read-only"
        out.mkdir(mode=0o555)
    result = run_script("run_ner", "--do_train=true", "--max_seq_length=32", f"--data_dir={data}",
                        f"--vocab_file={TINY / 'vocab.txt'}",
                        f"--bert_config_file={TINY / 'bert_config.json'}", f"--output_dir={out}")
    assert_refused(result, "output-dir-not-writable")
    assert f"--output_dir={out}" in result.stderr


def test_the_traceback_of_a_refusal_is_shown_when_asked_for(monkeypatch, caplog, capsys):
    def main(_):
        raise ValueError("--input_file: 'x' matches no file")

    for variable, shown in (("", False), ("1", True)):
        monkeypatch.setenv(cli.TRACEBACK_VARIABLE, variable)
        caplog.clear()
        with pytest.raises(SystemExit) as exit_:
            cli._guarded(main)([])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.endswith("error: --input_file: 'x' matches no file\n")
        tracebacks = [r for r in caplog.records if r.exc_info]
        assert bool(tracebacks) is shown
        if shown:
            assert "in main" in caplog.text and "Traceback" in caplog.text


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="oneDNN's default is x86's")
def test_scripts_run_onednn_on_every_x86_cpu_unless_told_not_to(monkeypatch):
    # TensorFlow turns oneDNN on by itself only on CPUs with VNNI, bf16 or AMX units (not an
    # AVX2-only Zen 3); importing bert_runner.cli, as every script does first, turns it on: in a
    # fresh interpreter it sets TF_ENABLE_ONEDNN_OPTS before anything has imported TensorFlow,
    # which reads it at its import (this session's TensorFlow, imported after conftest.py set it
    # as the scripts do, shows the variable decides).
    from tensorflow.python.util import _pywrap_util_port as port

    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    code = ("import os, sys, bert_runner.cli; "
            "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'), 'tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["1", "False"]
    assert port.IsMklEnabled() == (os.environ["TF_ENABLE_ONEDNN_OPTS"] != "0")
    # A user's choice stands.
    import importlib

    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    importlib.reload(cli)
    assert os.environ["TF_ENABLE_ONEDNN_OPTS"] == "0"


def test_a_cluster_or_tpu_that_is_not_described_is_refused_naming_what_describes_it(tmp_path):
    data = write_conll_dir(tmp_path / "data")
    args = ["--do_train=true", "--max_seq_length=32", f"--data_dir={data}",
            f"--vocab_file={TINY / 'vocab.txt'}", f"--bert_config_file={TINY / 'bert_config.json'}",
            f"--output_dir={tmp_path / 'out'}"]
    result = run_script("run_ner", *args, "--distribution_strategy=multi_worker_mirrored",
                        TF_CONFIG='{"cluster": ')
    assert_refused(result, "tf-config-not-json")
    assert not (tmp_path / "out").exists()
    cluster = {"worker": ["localhost:1", "localhost:2"]}
    for task in ({"type": "worker", "index": 2}, {"type": "chief", "index": 0}, {}):
        with pytest.raises(ValueError, match=message("tf-config-task-not-in-cluster")):
            distribution.check_tf_config(json.dumps({"cluster": cluster, "task": task}))
    with pytest.raises(ValueError, match='needs a "cluster"'):
        distribution.check_tf_config(json.dumps({"task": {"type": "worker", "index": 0}}))
    distribution.check_tf_config(json.dumps({"cluster": cluster,
                                             "task": {"type": "worker", "index": 1}}))
    result = run_script("run_ner", *args, "--distribution_strategy=tpu")
    assert_refused(result, "tpu-not-named")
    assert "--tpu_name" in result.stderr


def test_jax_backend_without_jax_is_refused_naming_its_requirements(tmp_path):
    (tmp_path / "jax.py").write_text('raise ImportError("JAX is not installed here")\n')
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(tmp_path)}
    result = subprocess.run([sys.executable, str(ROOT / "run_pretraining.py")], env=env,
                            capture_output=True, text=True)
    assert_refused(result, "jax-not-installed")
    assert result.stderr.splitlines() == [
        "run_pretraining.py: error: KERAS_BACKEND=jax needs JAX, which is not installed: "
        "pip install -r requirements-jax.txt"]
