"""ELECTRA on records without masks (the original ELECTRA's build_pretraining_dataset.py's):
`data.electra_masking` masks each batch by the original's `pretrain_helpers.mask` rule; the
ELECTRA task reads such records or create_pretraining_data's (masks as given), not a mix."""
import json
import re
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from bert_tasks.pretraining.data import electra_masking
from bert_tasks.pretraining.data.reading import InputError
from bert_tasks.pretraining.data.validation import check_records
from conftest import ROOT
from modeling_helpers import TINY_TRAIN
from pretraining_helpers import write_records
from refusals import message

CLS, SEP, MASK = 2, 3, 4  # tests/fixtures/modeling/tiny_train/vocab.txt
VOCAB = {"[PAD]": 0, "[UNK]": 1, "[CLS]": CLS, "[SEP]": SEP, "[MASK]": MASK,
         **{f"w{i}": i for i in range(5, 99)}}
# The tiny ELECTRA as the original's --hparams JSON.
HPARAMS = {"vocab_size": 99, "embedding_size": 16, "generator_hidden_size": 0.75,
           "generator_layers": 0.5,
           "model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 2,
                                      "num_attention_heads": 2, "intermediate_size": 48,
                                      "max_position_embeddings": 40}}
SEQ = 32


def original_rows(num_rows, seq=SEQ, seed=0):
    """Rows as build_pretraining_dataset.py writes them ([CLS] A [SEP] B [SEP], or [CLS] A [SEP]
    alone, 0-padded; B repeats A, so the generator can learn): `{name: int64 [num_rows, seq]}`.
    A few word-pieces are [MASK] (never masked again), some rows hold only [CLS] [SEP]."""
    rng = np.random.RandomState(seed)
    ids = np.zeros((num_rows, seq), np.int64)
    mask = np.zeros_like(ids)
    segments = np.zeros_like(ids)
    for row in range(num_rows):
        half = rng.randint(0, (seq - 3) // 2 + 1)
        a = rng.randint(5, 99, size=half)
        a[rng.rand(half) < 0.05] = MASK
        pair = half and rng.rand() < 0.7
        tokens = [CLS, *a, SEP] + ([*a, SEP] if pair else [])
        ids[row, :len(tokens)] = tokens
        mask[row, :len(tokens)] = 1
        segments[row, half + 2:len(tokens)] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def write_original_records(path, num_rows, seq=SEQ, seed=0):
    """`original_rows` as TFRecords of the original's three features (int64, `seq` each)."""
    rows = original_rows(num_rows, seq, seed)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for row in range(num_rows):
            feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=values[row]))
                       for name, values in rows.items()}
            writer.write(tf.train.Example(
                features=tf.train.Features(feature=feature)).SerializeToString())
    return str(path)


def mask_batch(rows, masker, seed=(7, 0)):
    """`masker` on `rows` as the pipeline gives them (int32): numpy outputs."""
    features = {name: tf.constant(values, tf.int32) for name, values in rows.items()}
    return {name: np.asarray(value) for name, value in masker(features, tf.constant(seed)).items()}


def expected_count(lengths, n, mask_prob):
    """max(1, min(N, round(num_tokens * mask_prob))), float32 and half to even as the original."""
    product = lengths.astype(np.float32) * np.float32(mask_prob)
    return np.maximum(1, np.minimum(n, np.round(product).astype(np.int64)))


def test_max_predictions_is_the_originals_rule():
    assert electra_masking.max_predictions(0.15, 128) == 19
    assert electra_masking.max_predictions(0.15, 512) == 79
    assert electra_masking.max_predictions(0.25, 512) == 130  # ELECTRA-Large's mask_prob
    assert electra_masking.ElectraMasking(mask_prob=0.15).slots(128) == 19
    assert electra_masking.ElectraMasking(max_predictions_per_seq=20).slots(128) == 20


def test_max_predictions_per_seq_is_the_rules_unless_given():
    from absl import flags

    from bert_runner.flags import given_value

    def masking_of(values):  # as run_pretraining.py makes it
        return electra_masking.ElectraMasking(values.vocab_file, values.masked_lm_prob,
                                              given_value("max_predictions_per_seq", values))
    values = flags.FlagValues()
    flags.DEFINE_string("vocab_file", None, "", flag_values=values)
    flags.DEFINE_float("masked_lm_prob", 0.15, "", flag_values=values)
    flags.DEFINE_integer("max_predictions_per_seq", 20, "", flag_values=values)
    values(["prog", "--masked_lm_prob=0.25"])
    masking = masking_of(values)
    assert (masking.mask_prob, masking.max_predictions_per_seq) == (0.25, None)
    assert masking.slots(512) == 130
    values.unparse_flags()
    values(["prog", "--max_predictions_per_seq=20"])
    assert masking_of(values).slots(512) == 20


@pytest.mark.parametrize("mask_prob,n", [(0.15, 4), (0.3, 9), (0.3, 3)])
def test_the_rule_on_a_batch(mask_prob, n):
    rows = original_rows(3000)
    masker = electra_masking.ElectraMasker(VOCAB, n, mask_prob)
    out = mask_batch(rows, masker)
    ids, real = rows["input_ids"], rows["input_mask"] > 0
    positions, labels = out["masked_lm_positions"], out["masked_lm_ids"]
    weights = out["masked_lm_weights"]
    assert positions.shape == labels.shape == weights.shape == (3000, n)
    assert positions.dtype == labels.dtype == np.int32 and weights.dtype == np.float32
    candidate = real & ~np.isin(ids, [CLS, SEP, MASK])
    has_candidate = candidate.any(axis=1)
    assert (~has_candidate).sum() > 50  # rows of [CLS] [SEP] alone
    # The first num_to_predict slots weigh 1 (none in a row without candidates).
    count = expected_count(real.sum(axis=1), n, mask_prob) * has_candidate
    np.testing.assert_array_equal(weights, np.arange(n)[None] < count[:, None])
    on = weights > 0
    # Unweighted slots point at 0 with id 0 (positions * weights, ids * weights).
    assert (positions[~on] == 0).all() and (labels[~on] == 0).all()
    rows_of = np.broadcast_to(np.arange(3000)[:, None], positions.shape)
    # Weighted slots: candidates only (never [CLS], [SEP], [MASK] or padding), their tokens.
    assert candidate[rows_of[on], positions[on]].all()
    np.testing.assert_array_equal(labels[on], ids[rows_of[on], positions[on]])
    # A position drawn twice is predicted twice, both weighted.
    sorted_positions = np.sort(np.where(on, positions, -1 - np.arange(n)[None]), axis=1)
    duplicated = (np.diff(sorted_positions, axis=1) == 0).any(axis=1)
    assert duplicated.sum() > 20
    # input_ids: [MASK] at some predicted positions, the rest unchanged.
    new = out["input_ids"]
    predicted = np.zeros_like(real)
    predicted[rows_of[on], positions[on]] = True
    np.testing.assert_array_equal(new[~predicted], ids[~predicted])
    assert np.isin(new[predicted], [MASK]).sum() + (new[predicted] == ids[predicted]).sum() == (
        predicted.sum())
    # A slot alone at its position: [MASK] with 0.85, else its own token (no random word-piece).
    slots_there = (positions[:, :, None] == positions[:, None, :]) & on[:, :, None] & on[:, None]
    alone = on & (slots_there.sum(axis=2) == 1)
    became = new[rows_of[alone], positions[alone]]
    assert ((became == MASK) | (became == labels[alone])).all()
    share = (became == MASK).mean()
    assert alone.sum() > 3000 and abs(share - 0.85) < 0.03, (share, alone.sum())


def test_the_positions_are_uniform_over_the_candidates():
    rows = original_rows(1, seed=3)
    rows = {name: np.repeat(values, 4000, axis=0) for name, values in rows.items()}
    candidate = (rows["input_mask"][0] > 0) & ~np.isin(rows["input_ids"][0], [CLS, SEP, MASK])
    out = mask_batch(rows, electra_masking.ElectraMasker(VOCAB, 4))
    on = out["masked_lm_weights"] > 0
    counts = np.bincount(out["masked_lm_positions"][on], minlength=SEQ)
    expected = on.sum() / candidate.sum()
    assert (counts[~candidate] == 0).all()
    # About 8 standard deviations of a binomial count: cannot flake with this fixed seed.
    assert np.abs(counts[candidate] - expected).max() < 8 * np.sqrt(expected), counts


def test_the_masks_are_the_seeds():
    rows = original_rows(64)
    masker = electra_masking.ElectraMasker(VOCAB, 4)
    a, again = mask_batch(rows, masker, (1, 0)), mask_batch(rows, masker, (1, 0))
    b = mask_batch(rows, masker, (1, 1))
    for name in a:
        np.testing.assert_array_equal(a[name], again[name])
    assert not np.array_equal(a["masked_lm_positions"], b["masked_lm_positions"])


def test_position_zero_is_never_written():
    # A record whose first token is a word-piece (not the original's): predicted, never [MASK].
    rows = {"input_ids": np.array([[7, 8, SEP]] * 500), "input_mask": np.ones((500, 3), int)}
    out = mask_batch(rows, electra_masking.ElectraMasker(VOCAB, 2, 0.5))
    assert (out["masked_lm_positions"] == 0).any()
    assert (out["input_ids"][:, 0] == 7).all() and (out["input_ids"][:, 1] == MASK).any()


def test_the_dataset_has_static_shapes_and_new_masks_every_batch(tmp_path):
    path = write_original_records(tmp_path / "original.tfrecord", 16)
    spec = {name: tf.io.FixedLenFeature([SEQ], tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids")}
    masker = electra_masking.ElectraMasker(VOCAB, 4)
    dataset = electra_masking.masked_records([path], spec, masker, 8, seed=5)
    assert {name: s.shape.as_list() for name, s in dataset.element_spec.items()} == {
        "input_ids": [8, SEQ], "input_mask": [8, SEQ], "segment_ids": [8, SEQ],
        "masked_lm_positions": [8, 4], "masked_lm_ids": [8, 4], "masked_lm_weights": [8, 4]}
    # In file order, repeated: batches 0 and 2 hold the same 8 records, masked anew.
    ordered = electra_masking.masked_records([path], spec, masker, 8, is_training=False,
                                             seed=5, repeat=True)
    first, _, again = [{k: v.numpy() for k, v in b.items()} for b in ordered.take(3)]
    np.testing.assert_array_equal(first["segment_ids"], again["segment_ids"])
    assert not np.array_equal(first["masked_lm_positions"], again["masked_lm_positions"])


def test_check_records_tells_records_with_masks_from_the_originals(tmp_path):
    original = write_original_records(tmp_path / "original.tfrecord", 4)
    masked = str(write_records(tmp_path / "masked.tfrecord", 4, seq=SEQ))
    check = dict(max_seq_length=SEQ, max_predictions_per_seq=4, vocab_size=99)
    assert not check_records([original], masked_lm=None, **check).masks
    assert check_records([masked], masked_lm=None, **check).masks
    with pytest.raises(InputError, match=re.escape(message("electra-mixed-masks"))) as refused:
        check_records([masked, original], masked_lm=None, **check)
    assert masked in str(refused.value) and original in str(refused.value)
    # The masked LM needs masks: the message names ELECTRA for the original's records.
    with pytest.raises(InputError, match=re.escape(message("ltr-records-for-masked-lm"))) as why:
        check_records([original], **check)
    assert "--pretraining_objective=electra" in str(why.value)
    # The records' length against --max_seq_length, naming the file.
    with pytest.raises(InputError, match=re.escape(
            f"input file {original}: first record: input_ids has {SEQ} values but "
            "--max_seq_length=16")):
        check_records([original], masked_lm=None, **{**check, "max_seq_length": 16})


def _task(path, steps=0, eval_steps=None, **masking):
    from bert_tasks.pretraining.electra_task import ElectraPretrainingTask
    return ElectraPretrainingTask(
        SEQ, 20, path, steps, 0, eval_steps, masking=electra_masking.ElectraMasking(
            **{"vocab_file": str(TINY_TRAIN / "vocab.txt"), **masking}))


def test_the_task_masks_only_records_without_masks(tmp_path):
    config = types.SimpleNamespace(vocab_size=99, type_vocab_size=2)
    original = write_original_records(tmp_path / "original.tfrecord", 4)
    masked = str(write_records(tmp_path / "masked.tfrecord", 4, seq=SEQ, pred=20))
    task = _task(original).settle({}, None, config)
    assert task.masker is not None and task.max_predictions_per_seq == 4  # int(0.155 * 32)
    assert "masked_lm_ids" not in task.feature_spec(True)
    assert task.recorded_settings()["mask_prob"] == 0.15
    task = _task(original, max_predictions_per_seq=6).settle({}, None, config)
    assert task.max_predictions_per_seq == 6
    # As given: --max_predictions_per_seq, the records' masks.
    task = _task(masked).settle({}, None, config)
    assert task.masker is None and task.max_predictions_per_seq == 20
    assert "masked_lm_ids" in task.feature_spec(True)
    with pytest.raises(InputError, match=re.escape(message("electra-mask-prob-with-masks"))):
        _task(masked, mask_prob=0.25).settle({}, None, config)
    with pytest.raises(ValueError, match=re.escape(message("electra-masking-vocab"))):
        _task(original, vocab_file=None).settle({}, None, config)
    (tmp_path / "vocab.txt").write_text("[PAD]\n[CLS]\n[SEP]\n")
    with pytest.raises(ValueError, match=re.escape(message("electra-masking-vocab"))) as refused:
        _task(original, vocab_file=str(tmp_path / "vocab.txt")).settle({}, None, config)
    assert "has no [MASK]" in str(refused.value)


def test_masked_lm_prob_is_electras_mask_prob_on_records():
    def parse(*args):
        return subprocess.run(
            [sys.executable, str(ROOT / "run_pretraining.py"), "--input_file=/in.tfrecord",
             "--bert_config_file=/config.json", "--output_dir=/out", "--only_check_args", *args],
            cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert parse("--pretraining_objective=electra", "--masked_lm_prob=0.25").returncode == 0
    refused = parse("--pretraining_objective=electra", "--masked_lm_prob=0.25",
                    "--mask_token_prob=0.9")
    assert refused.returncode == 2 and message("flag-masking-with-records") in refused.stderr


@pytest.mark.large
def test_run_pretraining_trains_electra_on_the_originals_records(tmp_path):
    """One run, as run_pretraining.py --pretraining_objective=electra --do_train makes it, on
    the original's records, masked per batch (evaluation's metrics and the step under XLA are
    tests/test_electra_fixtures.py's)."""
    from bert_runner import driver
    from bert_runner.run_config import RunConfig

    train = write_original_records(tmp_path / "train.tfrecord", 32)
    config = tmp_path / "hparams.json"
    config.write_text(json.dumps(HPARAMS))
    task = _task(train, steps=3, eval_steps=2)
    out = tmp_path / "out"
    result = driver.run_command(task, RunConfig(
        str(out), bert_config_file=str(config), vocab_file=str(TINY_TRAIN / "vocab.txt"),
        do_train=True, train_batch_size=4, learning_rate=5e-4,
        save_checkpoints_steps=3, iterations_per_loop=3))
    assert '"max_predictions_per_seq": 4' in (out / "run.json").read_text()
    assert result.trainer.step == 3
    (record,) = result.trainer.history
    assert np.isfinite(record.metrics["loss"]) and record.metrics["masked_lm_loss"] > 0
    assert '"mask_prob": 0.15' in (out / "run.json").read_text()
