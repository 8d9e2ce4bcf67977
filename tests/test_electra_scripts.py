"""An ELECTRA discriminator from the original's released layout (tests/fixtures/electra/tiny)
through the scripts a user runs most: run_classifier.py fine-tunes, evaluates and predicts,
export_model.py writes the raw-text SavedModel from the run's output_dir, and predict.py answers
the test pairs as the script predicted them; and ELECTRA's layer-wise learning-rate decay is the
fine-tuning default. Every other script on ELECTRA: the same model families' contract
(`modeling.families`), tested per script on BERT."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURES, ROOT
from test_run_classifier import read_eval_results, write_keyword_mrpc

ELECTRA = FIXTURES / "electra" / "tiny"
MODEL_FLAGS = [f"--vocab_file={ELECTRA / 'vocab.txt'}", "--max_seq_length=24"]


def _run(script, *args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, str(ROOT / script), *MODEL_FLAGS, *args],
                            capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.large
def test_fine_tune_export_and_predict_from_the_released_layout(tmp_path):
    write_keyword_mrpc(tmp_path / "data", num_train=16, num_dev=8, num_test=6)
    out = tmp_path / "out"
    result = _run(
        "run_classifier.py", "--task_name=MRPC", "--do_train", "--do_eval", "--do_predict",
        f"--data_dir={tmp_path / 'data'}", f"--init_checkpoint={ELECTRA}",
        f"--bert_config_file={ELECTRA / 'hparams.json'}", "--train_batch_size=8",
        "--learning_rate=1e-3", "--num_train_epochs=1", f"--output_dir={out}")
    # The discriminator from the folder (no pooler: the head reads the first token), the
    # original's fine-tuning default of 0.8 per layer: embeddings at 0.8^(2 layers + 2).
    assert "electra/embeddings_project/kernel, shape = [16, 32], *INIT_FROM_CKPT*" in result.stderr
    assert "Initialised 39 of 41 variables" in result.stderr
    assert "Layer-wise learning-rate decay 0.8: the learning rate times 0.4096" in result.stderr
    assert read_eval_results(out / "eval_results.txt")["global_step"] == "2"
    record = json.loads((out / "run.json").read_text())
    assert (record["family"], record["layerwise_lr_decay"]) == ("electra", 0.8)

    # The run's own bert_config.json (ELECTRA's keys added) describes its checkpoints.
    export_dir = tmp_path / "serving" / "1"
    _run("export_model.py", "--task_name=MRPC", f"--bert_config_file={out / 'bert_config.json'}",
         "--do_lower_case=true", f"--checkpoint={out}", f"--export_dir={export_dir}")
    rows = [line.split("\t") for line in
            (tmp_path / "data" / "test.tsv").read_text().splitlines()[1:]]
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("".join(f"{row[3]}\t{row[4]}\n" for row in rows), encoding="utf-8")
    answers = subprocess.run(
        [sys.executable, str(ROOT / "predict.py"), f"--model={export_dir}",
         f"--input_file={inputs}", "--output_format=json"], capture_output=True, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, cwd=ROOT, timeout=300)
    assert answers.returncode == 0, answers.stderr[-3000:]
    answers = [json.loads(line) for line in answers.stdout.splitlines()]

    expected = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    got = np.array([[a["probabilities"][label] for label in ("0", "1")] for a in answers])
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    assert np.ptp(expected[:, 0]) > 1e-3  # the pairs do get different answers
    submitted = [line.split("\t")[1] for line in (out / "MRPC.tsv").read_text().splitlines()[1:]]
    assert [a["label"] for a in answers] == submitted


def test_layerwise_decay_defaults_to_electras():
    """--layerwise_lr_decay left out (None) is the family's fine-tuning default: the original
    ELECTRA's 0.8 (0.9 for its Large); BERT trains every layer at one rate; a value given wins."""
    from bert_runner.run_config import RunConfig
    from modeling.checkpoint import load_config
    from modeling_helpers import TINY

    electra = load_config(str(ELECTRA / "hparams.json"))
    unset = RunConfig("out", layerwise_lr_decay=None)
    assert unset.layerwise_decay(electra) == 0.8
    electra.hidden_size = 1024
    assert unset.layerwise_decay(electra) == 0.9
    assert unset.layerwise_decay(load_config(str(TINY / "bert_config.json"))) == 1.0
    assert RunConfig("out", layerwise_lr_decay=1.0).layerwise_decay(electra) == 1.0
