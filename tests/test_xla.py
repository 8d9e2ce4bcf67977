"""--jit_compile=true: every script's training, evaluation and prediction steps compile with XLA
(XLA:CPU here, standing in for a TPU or GPU) and give the results of the same run without it.

Each script runs twice on the same small data from the tiny checkpoint (run_classifier trains on
packed rows), dropout on (the fixture's 0.1): once as usual, once with --jit_compile=true. Their
evaluation metrics and prediction files agree within float tolerance, though the encoder
computes the real-token rows without XLA and the grid with it: every dropout mask is drawn for a
token's grid position (`modeling.layers.kernels.keep_mask`), the same in both layouts: every step's
training loss and the final weights agree to float rounding too. run_ner accumulates two
micro-batches a step. run_pretraining.py's and run_sentence_embeddings.py's two runs are in
tests/test_run_pretraining.py and tests/test_sentence_embedding_training.py, which check their
outputs too.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from modeling_helpers import TINY
from ner_helpers import write_conll_dir
from pretraining_helpers import model_checkpoint_values
from test_run_classifier import write_keyword_mrpc
from test_run_squad import WINDOW_FLAGS, squad_data, write_json
from test_run_swag import write_keyword_swag

TOLERANCE = dict(rtol=1e-4, atol=1e-5)


# The fine-tuning scripts' flags beside their own.
FINE_TUNING = [f"--vocab_file={TINY / 'vocab.txt'}", "--num_train_epochs=1"]


def _classifier(tmp):
    # Training packs two examples a row (--max_sequences_per_row, 16 tokens each): what a TPU
    # run would do; evaluation and prediction read the unpacked records.
    write_keyword_mrpc(tmp / "data", num_train=32, num_dev=8, num_test=8)  # one batch each
    return "run_classifier.py", ["--task_name=MRPC", f"--data_dir={tmp / 'data'}",
                                 "--max_seq_length=32", "--max_sequences_per_row=4",
                                 "--do_predict=true", *FINE_TUNING], ["test_results.tsv"]


def _squad(tmp):
    train, _ = squad_data(16, seed=1)
    dev, _ = squad_data(8, seed=2)
    return "run_squad.py", [f"--train_file={write_json(tmp / 'train.json', train)}",
                            f"--predict_file={write_json(tmp / 'dev.json', dev)}",
                            "--do_predict=true", *WINDOW_FLAGS, *FINE_TUNING], [
        "nbest_predictions.json"]


def _swag(tmp):
    write_keyword_swag(tmp / "data", num_train=16, num_dev=8, num_test=8)
    return "run_swag.py", [f"--data_dir={tmp / 'data'}", "--max_seq_length=16",
                           "--do_predict=true", *FINE_TUNING], ["test_results.tsv"]


def _ner(tmp):
    write_conll_dir(tmp / "data", train_documents=4, dev_documents=2, test_documents=2)
    return "run_ner.py", [f"--data_dir={tmp / 'data'}", "--max_seq_length=32",
                          "--gradient_accumulation_steps=2", "--lora_rank=2", "--do_predict=true",
                          *FINE_TUNING], [
        "test_predictions.txt"]


SCRIPTS = {"run_classifier": _classifier, "run_squad": _squad, "run_swag": _swag,
           "run_ner": _ner}


def _run(script, args, output_dir, jit_compile):
    cmd = [sys.executable, str(ROOT / script), f"--bert_config_file={TINY / 'bert_config.json'}",
           f"--init_checkpoint={TINY / 'bert_model.ckpt'}", "--do_train=true", "--do_eval=true",
           "--train_batch_size=8", "--learning_rate=1e-3", "--iterations_per_loop=1",
           f"--jit_compile={str(jit_compile).lower()}",
           f"--output_dir={output_dir}", *args]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


def _check_packed_throughput(log):
    """A packed run's progress lines count rows and the examples the rows hold."""
    sequences, rows = map(int, re.search(r"(\d+) sequences packed into (\d+) rows", log).groups())
    lines = re.findall(r"([\d.]+) packed rows/s, ([\d.]+) examples/s", log)
    assert lines, log[-3000:]
    for rows_per_s, examples_per_s in lines:
        expected = float(rows_per_s) * sequences / rows
        assert abs(float(examples_per_s) - expected) <= 0.05 + 0.05 * sequences / rows, (
            rows_per_s, examples_per_s)


def _train_losses(output_dir):
    """{step: the training loss TensorBoard got at that step}."""
    import tensorflow as tf

    losses = {}
    for path in (output_dir / "train").glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == "loss":
                    losses[event.step] = float(tf.make_ndarray(value.tensor))
    return losses


def _final_weights(output_dir):
    import tensorflow as tf

    return model_checkpoint_values(tf.train.latest_checkpoint(str(output_dir)))


def _eval_results(output_dir):
    name = "eval_results.json" if (output_dir / "eval_results.json").exists() else "eval_results.txt"
    if name.endswith(".json"):
        return json.loads((output_dir / name).read_text())
    lines = (output_dir / name).read_text().splitlines()
    return {k: float(v) for k, v in (line.split(" = ") for line in lines)}


def _numbers(path):
    """The numbers in a prediction file (TSV rows, JSON values, or a CoNLL file's last column
    as text), in order."""
    text = path.read_text()
    if path.suffix == ".json":
        values = []

        def walk(node):
            if isinstance(node, dict):
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)
            else:
                values.append(node)
        walk(json.loads(text))
        return values
    if path.suffix == ".tsv":
        return np.loadtxt(path, delimiter="\t").ravel().tolist()
    return [line.split()[-1] if line else "" for line in text.splitlines()]


def assert_compiled_run_agrees(plain, compiled, log, prediction_files=()):
    """The run in `compiled` (--jit_compile=true; its log `log`) gave what the same run without
    XLA gave in `plain`: each step's training loss, the final weights, the evaluation metrics and
    the numbers in `prediction_files`."""
    assert "static shapes" in log  # the encoder computed on the grid, as XLA needs
    want, got = _train_losses(plain), _train_losses(compiled)
    assert sorted(got) == sorted(want) and len(want) > 1
    np.testing.assert_allclose([got[step] for step in sorted(want)],
                               [want[step] for step in sorted(want)], rtol=1e-5)
    want, got = _final_weights(plain), _final_weights(compiled)
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-4, err_msg=name)
    want, got = _eval_results(plain), _eval_results(compiled)
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, err_msg=name, **TOLERANCE)
    for name in prediction_files:
        want, got = _numbers(plain / name), _numbers(compiled / name)
        assert len(got) == len(want) > 0, name
        for a, b in zip(got, want):
            if isinstance(b, float):
                np.testing.assert_allclose(a, b, err_msg=name, **TOLERANCE)
            else:
                assert a == b, name


@pytest.mark.large
@pytest.mark.parametrize("script", [  # each on a pytest process of its own, when one is free
    pytest.param(name, marks=pytest.mark.xdist_group(f"xla_{name}")) for name in sorted(SCRIPTS)])
def test_jit_compile_trains_evaluates_and_predicts_as_without(tmp_path, script):
    path, args, prediction_files = SCRIPTS[script](tmp_path)
    plain, compiled = tmp_path / "plain", tmp_path / "xla"
    _run(path, args, plain, jit_compile=False)
    log = _run(path, args, compiled, jit_compile=True)
    if "--max_sequences_per_row=4" in args:
        _check_packed_throughput(log)
    assert_compiled_run_agrees(plain, compiled, log, prediction_files)
