"""Packed fine-tuning rows (bert_runner.packing, run_classifier.py --max_sequences_per_row): rows
that hold every example as it was, and the same losses and gradients as the unpacked batch for
single-label, regression and multi-label classifiers."""
import random

import numpy as np
import pytest
import tensorflow as tf

from modeling import BertConfig
from modeling import checkpoint as checkpoints
from modeling_helpers import TINY
from bert_runner import inputs, packing
from bert_tasks.classifier.features import InputExample, tf_examples
from bert_tasks.classifier.task import ClassifierTask, MultiLabelTask
from vocab.tokenization import FullTokenizer

SEQ, SLOTS = 32, 4
WORDS = "the dog cat bird fish tree house car road river city hill sun moon star rain".split()
MULTI_LABELS = ["a", "b", "c"]


def _examples(count, kind, seed=0):
    """Sentence pairs of 1 to 9 words each, with labels of `kind` ("mrpc", "sts-b", "multilabel")."""
    rng = random.Random(seed)
    examples = []
    for i in range(count):
        text_a = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9)))
        text_b = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9)))
        label = {"mrpc": lambda: str(rng.randrange(2)),
                 "sts-b": lambda: "%.2f" % rng.uniform(0, 5),
                 "multilabel": lambda: tuple(l for l in MULTI_LABELS if rng.random() < 0.5)}[kind]()
        examples.append(InputExample("train-%d" % i, text_a, text_b, label))
    return examples


def _task(kind):
    if kind == "multilabel":
        return MultiLabelTask(SEQ, labels=MULTI_LABELS)
    return ClassifierTask(kind, SEQ)


def _records(task, examples):
    tokenizer = FullTokenizer(str(TINY / "vocab.txt"), do_lower_case=True)
    return list(tf_examples(examples, task.processor.get_labels(), SEQ, tokenizer))


def _batch(records, spec):
    return {name: tf.stack([inputs.decode_record(r.SerializeToString(), spec)[name]
                            for r in records]) for name in spec}


def _numpy(batch):
    return {name: value.numpy() for name, value in batch.items()}


@pytest.mark.parametrize("kind", ["mrpc", "multilabel"])
def test_rows_hold_every_example_as_it_was(kind):
    task = _task(kind)
    spec = task.feature_spec(True)
    records = _records(task, _examples(50, kind))
    packer = packing.RecordPacker(spec, SEQ, SLOTS, open_rows=4)
    rows = list(packer.pack(records))
    unpacked = _numpy(_batch(records, spec))
    packed = _numpy(_batch(rows, packing.packed_feature_spec(spec, SEQ, SLOTS)))
    want = []
    for i in range(len(records)):
        n = unpacked["input_mask"][i].sum()
        want.append((tuple(unpacked["input_ids"][i][:n]), tuple(unpacked["segment_ids"][i][:n]),
                     tuple(np.ravel(unpacked["label_ids"][i])), unpacked["is_real_example"][i]))
    got = []
    for r in range(len(rows)):
        starts = [s for slot, s in enumerate(packed["sequence_starts"][r]) if slot == 0 or s]
        ends = starts[1:] + [packed["input_mask"][r].sum()]
        for slot, (start, end) in enumerate(zip(starts, ends)):
            assert (packed["sequence_ids"][r][start:end] == slot + 1).all()
            assert packed["position_ids"][r][start:end].tolist() == list(range(end - start))
            got.append((tuple(packed["input_ids"][r][start:end]),
                        tuple(packed["segment_ids"][r][start:end]),
                        tuple(np.ravel(packed["label_ids"][r][slot])),
                        packed["is_real_example"][r][slot]))
        assert not packed["is_real_example"][r][len(starts):].any()  # the empty slots
    assert sorted(got) == sorted(want)
    sequences, num_rows, unpadded, padded = packer.fit.stats()
    assert (sequences, num_rows) == (50, len(rows)) and len(rows) < 50 / 2
    assert padded < unpadded / 2
    assert list(packing.RecordPacker(spec, SEQ, SLOTS, open_rows=4).pack(records)) == rows


@pytest.mark.parametrize("kind", ["mrpc", "sts-b", "multilabel"])
def test_packed_and_unpacked_batches_give_the_same_loss_and_gradients(kind):
    task = _task(kind)
    spec = task.feature_spec(True)
    records = _records(task, _examples(12, kind, seed=1))
    rows = list(packing.RecordPacker(spec, SEQ, SLOTS).pack(records))
    assert len(rows) <= len(records) / 2
    unpacked = _batch(records, spec)
    packed = _batch(rows, packing.packed_feature_spec(spec, SEQ, SLOTS))
    config = BertConfig.from_json_file(TINY / "bert_config.json").to_dict()
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = task.build_model(BertConfig.from_dict(config))
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)

    def loss_and_grads(features):
        # training=False: the classifier layer's dropout (the original's fixed 0.1) would draw
        # other masks on the packed rows.
        with tf.GradientTape() as tape:
            loss, _ = task.loss(model, features, training=False)
        return loss, [tf.convert_to_tensor(g) for g in
                      tape.gradient(loss, model.trainable_variables)]

    want_loss, want_grads = loss_and_grads(unpacked)
    loss, grads = loss_and_grads(packed)
    # Within 1e-6, relative where values are large: the regression loss is ~10 and its
    # gradients reach ~5, where float32's own rounding between two summation orders is ~1e-6.
    assert float(loss) == pytest.approx(float(want_loss), rel=1e-6, abs=1e-6)
    for variable, want, got in zip(model.trainable_variables, want_grads, grads):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-6, rtol=1e-6,
                                   err_msg=variable.path)
