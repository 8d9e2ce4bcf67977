"""run_pretraining.py without next sentence prediction (the paper's "No NSP"), and the input checks
that run before training."""

import numpy as np
import pytest
import tensorflow as tf

from modeling import BertClassifier
from modeling_helpers import TINY_TRAIN, tiny_config
from pretraining_helpers import run_in_process, write_records
from modeling.checkpoint import check_init_checkpoint, initialize_from_checkpoint
from test_run_pretraining import read_eval_results

UNTRAINED = ["bert/pooler/dense/kernel", "bert/pooler/dense/bias",
             "cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias"]


@pytest.mark.large
def test_records_without_labels_train_the_masked_lm_alone(tmp_path, caplog):
    """Auto-detected from the records: no next-sentence loss or metrics; the pooler and the
    next-sentence head get no gradient and keep their --init_checkpoint values; the checkpoint,
    in both layouts, initialises a classifier. (The driver in this process; its log in caplog.)"""
    data = write_records(tmp_path / "no_nsp.tfrecord", 64, next_sentence=False)
    out = tmp_path / "out"
    init = TINY_TRAIN / "bert_model.ckpt"
    caplog.set_level("INFO")
    run_in_process(
        data, out, do_train=True, do_eval=True, train_batch_size=8, eval_batch_size=8,
        num_train_steps=4, num_warmup_steps=1, learning_rate=1e-3, iterations_per_loop=4,
        save_checkpoints_steps=4, max_eval_steps=2, save_tf1_checkpoint=True,
        init_checkpoint=str(init))
    log = "\n".join(caplog.messages)
    assert "Next sentence prediction: off (masked LM only)" in log
    results = read_eval_results(out)
    assert sorted(results) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss"]
    assert results["loss"] == pytest.approx(results["masked_lm_loss"], rel=1e-3)
    assert "masked_lm_accuracy = " in log and "baseline: most frequent" in log
    assert "next_sentence" not in log.split("Running evaluation")[1]

    before = tf.train.load_checkpoint(str(init))
    after = tf.train.load_checkpoint(str(out / "bert_model.ckpt"))
    for name in UNTRAINED:
        np.testing.assert_array_equal(after.get_tensor(name), before.get_tensor(name), name)
    trained = "bert/encoder/layer_0/attention/self/query/kernel"
    assert not np.array_equal(after.get_tensor(trained), before.get_tensor(trained))

    for source in (out / "ckpt-4", out / "bert_model.ckpt"):
        classifier = BertClassifier(tiny_config(), num_labels=2)
        check_init_checkpoint(classifier, str(source))
        report = initialize_from_checkpoint(classifier, str(source))
        assert len(report.missing) == 2 and all("output_" in n for n in report.missing), source
        pooler = [v for v in classifier.weights if "pooler" in v.path and "kernel" in v.path]
        np.testing.assert_array_equal(np.asarray(pooler[0]), before.get_tensor(UNTRAINED[0]))


def test_an_input_without_records_is_refused_before_training(tmp_path):
    """It used to train forever at full CPU (the repeating input waits for a record). Other
    mismatches (lengths, vocab) are refused the same way (test_pretraining_data_validation.py)."""
    data = tmp_path / "empty.tfrecord"
    tf.io.TFRecordWriter(str(data)).close()
    with pytest.raises(ValueError, match=r"input file .*empty\.tfrecord holds no records"):
        run_in_process(data, tmp_path / "out", do_train=True)
    assert not (tmp_path / "out").exists()  # refused before output_dir is made
