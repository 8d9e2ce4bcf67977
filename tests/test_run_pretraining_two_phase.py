"""The paper's two-phase schedule (docs/run_pretraining.md): 90% of the steps at a short sequence
length, then the rest at the full length, from phase 1's checkpoint with new data, a new
--max_seq_length and a fresh optimizer. Tiny here: 32 then 64 tokens, 9 + 1 steps."""
import json

import numpy as np
import pytest

from conftest import ROOT
from pretraining_helpers import model_checkpoint_values, run_in_process
from test_run_pretraining import read_eval_results
import vocab

SMALL = {
    "vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
    "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64, "type_vocab_size": 2,
    "initializer_range": 0.02,
}
WORD_EMBEDDINGS = "model/by_path/bert.Sembeddings.Sword_embeddings/.ATTRIBUTES/VARIABLE_VALUE"


def _make_data(corpus, output, max_seq_length, max_predictions_per_seq, seed):
    from bert_tasks.pretraining.data import pipeline

    pipeline.write_records(pipeline.Options(
        input_file=str(corpus), output_file=str(output), vocab_file=vocab.bundled_vocab_file(),
        max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
        dupe_factor=1, random_seed=seed))
    return output


@pytest.mark.large
def test_two_phases_short_then_long_sequences(tmp_path, caplog):
    from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus

    text = (ROOT / "data" / "austen" / "persuasion.txt").read_text(encoding="utf-8")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(gutenberg_to_corpus(text).split("\n\n")[:4]) + "\n\n")
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(SMALL))
    short = _make_data(corpus, tmp_path / "seq32.tfrecord", 32, 5, 1)
    long = _make_data(corpus, tmp_path / "seq64.tfrecord", 64, 10, 2)
    common = dict(config=config, do_train=True, train_batch_size=8, learning_rate=1e-3)

    # Both phases run the driver in this process (run_pretraining.py's run(), its log in caplog).
    phase1 = tmp_path / "phase1"
    run_in_process(short, phase1, **common, max_seq_length=32, max_predictions_per_seq=5,
                   num_train_steps=9, num_warmup_steps=1, save_checkpoints_steps=9,
                   iterations_per_loop=9)
    phase2 = tmp_path / "phase2"
    caplog.set_level("INFO")
    run_in_process(long, phase2, **{**common, "learning_rate": 1e-4}, do_eval=True,
                   max_seq_length=64, max_predictions_per_seq=10, num_train_steps=1,
                   num_warmup_steps=0, max_eval_steps=2, init_checkpoint=str(phase1))

    assert any("*INIT_FROM_CKPT*" in m for m in caplog.messages)
    # A fresh optimizer: phase 2 counts its own steps from 0.
    assert read_eval_results(phase2)["global_step"] == 1
    assert (phase2 / "ckpt-1.index").exists()
    # Phase 2 starts from phase 1's weights: its one step moves a weight by at most 3.2 x the
    # learning rate (the first AdamWeightDecay step, without bias correction, is
    # 0.1 g / sqrt(0.001 g^2)), far less than the 0.02 spread of a fresh initialisation.
    before = model_checkpoint_values(phase1 / "ckpt-9")[WORD_EMBEDDINGS]
    after = model_checkpoint_values(phase2 / "ckpt-1")[WORD_EMBEDDINGS]
    assert before.shape == (30522, 32)
    assert 0 < np.abs(after - before).max() < 3.3e-4
