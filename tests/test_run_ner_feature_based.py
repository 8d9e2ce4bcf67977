"""run_ner_feature_based.py (paper Table 7) end to end: a frozen 4-layer tiny BERT (so that "last
four" exists), activations computed once and cached, BiLSTM taggers that learn well above the
all-O baseline, and the table beside the paper's figures."""
import json
import os
import subprocess
import sys

import keras

from conftest import ROOT
from modeling import BertConfig, BertModel, tf1_checkpoint
from ner_helpers import TINY, write_conll_dir


def four_layer_checkpoint(directory):
    """A randomly initialised 4-layer tiny BERT in the original layout; returns its config path."""
    config = json.loads((TINY / "bert_config.json").read_text())
    config["num_hidden_layers"] = 4
    directory.mkdir()
    (directory / "bert_config.json").write_text(json.dumps(config))
    keras.utils.set_random_seed(0)
    tf1_checkpoint.save_tf1_checkpoint(BertModel(BertConfig.from_dict(config)),
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
            "--output_dir=%s" % (tmp_path / "out"), "--lstm_units=16", "--num_train_epochs=8",
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
