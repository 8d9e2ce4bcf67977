"""Packed pretraining records (bert_tasks.pretraining.data.packing): rows that hold every pair
as it was, the same losses and gradients as the unpacked batch, and create_pretraining_data.py
--max_sequences_per_row through run_pretraining.py."""
import json
import logging
import re

import numpy as np
import pytest
import tensorflow as tf

from conftest import FIXTURES
from modeling import BertConfig, BertPretrainer
from modeling import checkpoint as checkpoints
from modeling_helpers import TINY, TINY_TRAIN
from pretraining_helpers import run_in_process
from refusals import message
from bert_tasks.pretraining.data import packing, pipeline
from bert_tasks.pretraining.data.features import ExampleEncoder, name_to_features
from bert_tasks.pretraining.data.instances import TrainingInstance
from bert_tasks.pretraining.data.validation import check_records
from bert_tasks.pretraining.task import pretraining_loss

SEQ, PRED, SLOTS = 32, 8, 4


def _instances(count, seed=0):
    """Masked pairs 5 to 20 tokens long, about 15% of them masked."""
    rng = np.random.default_rng(seed)
    instances = []
    for _ in range(count):
        length = int(rng.integers(5, 21))
        num_a = int(rng.integers(1, length - 3))
        ids = [int(i) for i in rng.integers(5, 99, length)]
        ids[0], ids[num_a + 1], ids[length - 1] = 2, 3, 3
        masked = max(1, round(0.15 * length))
        positions = sorted(int(p) for p in rng.choice(np.arange(1, length - 1), masked,
                                                      replace=False))
        instances.append(TrainingInstance(ids, num_a, positions,
                                          [int(i) for i in rng.integers(5, 99, masked)],
                                          bool(rng.integers(0, 2))))
    return instances


ENCODER = ExampleEncoder(SEQ, PRED, 98)


def _pairs(count, seed=0):
    """Unpacked records (`create_pretraining_data`'s) of `_instances`."""
    return [ENCODER.encode(i) for i in _instances(count, seed)]


def _batch(records, spec):
    parsed = tf.io.parse_example(tf.constant(records), spec)
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in parsed.items()}


def _packed(count, seed=0, open_rows=packing.OPEN_ROWS):
    """(packed records of `_instances(count, seed)`, the `FirstFit` that packed them)."""
    rows, fit = packing.pack_instances(_instances(count, seed), SEQ, PRED, SLOTS, open_rows)
    return [ENCODER.encode_packed(row, SLOTS) for row in rows], fit


def _unpack(row):
    """The pairs of a parsed packed row, as {name: values} without padding."""
    pairs = []
    starts = [s for slot, s in enumerate(row["sequence_starts"]) if slot == 0 or s]
    ends = starts[1:] + [int(row["input_mask"].sum())]
    for slot, (start, end) in enumerate(zip(starts, ends)):
        inside = (row["masked_lm_weights"] > 0) & (row["masked_lm_positions"] >= start) & (
            row["masked_lm_positions"] < end)
        assert (row["sequence_ids"][start:end] == slot + 1).all()
        assert row["position_ids"][start:end].tolist() == list(range(end - start))
        pairs.append((tuple(row["input_ids"][start:end]), tuple(row["segment_ids"][start:end]),
                      tuple(row["masked_lm_positions"][inside] - start),
                      tuple(row["masked_lm_ids"][inside]), int(row["next_sentence_labels"][slot])))
    return pairs


def test_rows_hold_every_pair_as_it_was_within_their_capacity():
    records = _pairs(60)
    rows, fit = _packed(60, open_rows=4)
    spec = {**name_to_features(SEQ, PRED), **packing.packed_name_to_features(SEQ, SLOTS)}
    packed = {k: v.numpy() for k, v in tf.io.parse_example(tf.constant(rows), spec).items()}
    unpacked = {k: v.numpy() for k, v in tf.io.parse_example(
        tf.constant(records), name_to_features(SEQ, PRED)).items()}
    want = []
    for i in range(len(records)):
        length = unpacked["input_mask"][i].sum()
        real = unpacked["masked_lm_weights"][i] > 0
        want.append((tuple(unpacked["input_ids"][i][:length]),
                     tuple(unpacked["segment_ids"][i][:length]),
                     tuple(unpacked["masked_lm_positions"][i][real]),
                     tuple(unpacked["masked_lm_ids"][i][real]),
                     int(unpacked["next_sentence_labels"][i][0])))
    got = [pair for r in range(len(rows)) for pair in _unpack({k: v[r] for k, v in packed.items()})]
    assert sorted(got) == sorted(want)
    assert (packed["masked_lm_weights"].sum(axis=1) <= PRED).all()
    assert ((packed["sequence_starts"][:, 1:] > 0).sum(axis=1) < SLOTS).all()
    pairs, num_rows, unpadded, padded = fit.stats()
    assert (pairs, num_rows) == (60, len(rows)) and len(rows) < 60 / 1.8
    assert padded < unpadded / 2
    assert _packed(60, open_rows=4)[0] == rows  # deterministic


def test_packed_and_unpacked_batches_give_the_same_losses_and_gradients():
    records = _pairs(24, seed=1)
    rows, _ = _packed(24, seed=1)
    unpacked = _batch(records, name_to_features(SEQ, PRED))
    packed = _batch(rows, {**name_to_features(SEQ, PRED), **packing.packed_name_to_features(SEQ, SLOTS)})
    assert len(rows) < len(records) / 2
    config = BertConfig.from_json_file(TINY_TRAIN / "bert_config.json").to_dict()
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertPretrainer(BertConfig.from_dict(config))
    checkpoints.load_checkpoint(model, TINY_TRAIN / "bert_model.ckpt")

    def loss_and_grads(features):
        with tf.GradientTape() as tape:
            loss, metrics = pretraining_loss(model, features, training=True)
        grads = tape.gradient(loss, model.trainable_variables)
        return loss, metrics, [tf.convert_to_tensor(g) for g in grads]

    want_loss, want_metrics, want_grads = loss_and_grads(unpacked)
    loss, metrics, grads = loss_and_grads(packed)
    assert float(loss) == pytest.approx(float(want_loss), abs=1e-6)
    for name in want_metrics:
        assert float(metrics[name]) == pytest.approx(float(want_metrics[name]), abs=1e-6), name
    for variable, want, got in zip(model.trainable_variables, want_grads, grads):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-6, rtol=0,
                                   err_msg=variable.path)


@pytest.mark.large
def test_create_pretraining_data_packs_and_run_pretraining_trains_on_the_rows(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="absl")
    opts = dict(input_file=str(FIXTURES / "pretraining_data" / "tiny_corpus.txt"),
                vocab_file=str(TINY / "vocab.txt"), max_seq_length=64, max_predictions_per_seq=10,
                dupe_factor=2, short_seq_prob=0.5)
    pipeline.write_records(pipeline.Options(output_file=str(tmp_path / "unpacked.tfrecord"),
                                            **opts))
    pipeline.write_records(pipeline.Options(output_file=str(tmp_path / "packed.tfrecord"),
                                            max_sequences_per_row=3, **opts))
    assert any("Packed" in m and "padding" in m for m in caplog.messages)
    count = sum(1 for _ in tf.data.TFRecordDataset(str(tmp_path / "packed.tfrecord")))
    assert count < sum(1 for _ in tf.data.TFRecordDataset(str(tmp_path / "unpacked.tfrecord")))
    config = tmp_path / "bert_config.json"
    config.write_text((TINY / "bert_config.json").read_text())
    result = run_in_process(tmp_path / "packed.tfrecord", tmp_path / "out", config=config,
                            max_seq_length=64, max_predictions_per_seq=10, num_train_steps=3,
                            do_train=True, do_eval=True, train_batch_size=4, eval_batch_size=4)
    assert any("Packed records: up to 3 sequences a row" in m for m in caplog.messages)
    # The records are read as a stream, so the pairs a row holds are not counted: the progress
    # lines give packed rows/s, and no examples/s that would be the rows' pace.
    progress = [m for m in caplog.messages if m.startswith("step ")]
    assert progress and all("packed rows/s" in m and "examples/s" not in m for m in progress)
    results = result.eval_results
    assert np.isfinite(results["loss"]) and 0 <= results["next_sentence_accuracy"] <= 1
    assert json.loads((tmp_path / "out" / "run.json").read_text())["task"] == "pretraining"


def test_what_cannot_be_packed_is_refused(tmp_path):
    opts = dict(input_file=str(FIXTURES / "pretraining_data" / "tiny_corpus.txt"),
                vocab_file=str(TINY / "vocab.txt"), max_seq_length=64)
    with pytest.raises(ValueError, match=re.escape(message("packed-ltr"))):
        pipeline.write_records(pipeline.Options(
            output_file=str(tmp_path / "ltr.tfrecord"), pretraining_objective="ltr",
            max_sequences_per_row=2, **opts))
    assert not list(tmp_path.iterdir())
    records = _pairs(6)
    rows, _ = _packed(6)
    for name, data in (("unpacked", records), ("packed", rows)):
        with tf.io.TFRecordWriter(str(tmp_path / f"{name}.tfrecord")) as writer:
            for record in data:
                writer.write(record)
    with pytest.raises(ValueError, match=re.escape(message("packed-mixed"))):
        check_records([str(tmp_path / "unpacked.tfrecord"), str(tmp_path / "packed.tfrecord")],
                      SEQ, PRED, 99)
    assert check_records([str(tmp_path / "packed.tfrecord")], SEQ, PRED, 99).sequences_per_row == SLOTS
