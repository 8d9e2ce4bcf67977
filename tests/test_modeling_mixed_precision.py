"""bf16 and fp16 compute: close to float32, with LayerNorm, softmax, mask and losses in float32."""
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertConfig, BertPretrainer, masked_lm_loss
from modeling.checkpoint import original as original_layout
from modeling import checkpoint as checkpoints
from modeling.optimization import create_optimizer
from modeling_helpers import TINY, TINY_TRAIN, pretraining_features, tiny_config, tiny_expected
from bert_tasks.pretraining.task import pretraining_loss
from bert_runner.trainer import Trainer


def pretrainer(policy):
    from modeling import checkpoint as checkpoints

    model = BertPretrainer(tiny_config(), dtype=policy)
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt")
    return model


@pytest.mark.parametrize("policy, atol", [("mixed_bfloat16", 0.25), ("mixed_float16", 0.02)])
def test_forward_under_mixed_precision(policy, atol):
    expected = tiny_expected()
    model = pretrainer(policy)
    layer = model.encoder.encoder_layers[0]
    assert layer.compute_dtype == policy.split("_")[1]  # the policy reaches the encoder layers
    assert layer.intermediate_kernel.dtype == "float32"  # variables stay float32
    assert layer.attention_gamma.dtype == "float32"  # LayerNorm variables too
    outputs = model(pretraining_features(expected))
    assert outputs["masked_lm_logits"].dtype == "float32"
    loss, _, _ = masked_lm_loss(outputs["masked_lm_logits"], expected["masked_lm_ids"],
                                expected["masked_lm_weights"])
    assert float(loss) == pytest.approx(float(expected["masked_lm_loss"]), abs=atol)
    sequence = model.encoder(
        {"input_ids": expected["input_ids"], "input_mask": expected["input_mask"],
         "token_type_ids": expected["segment_ids"]})["sequence_output"]
    np.testing.assert_allclose(np.asarray(sequence, "float32"), expected["sequence_output"], atol=20 * atol)


@pytest.mark.large
def test_a_training_step_under_bfloat16(tmp_path):
    """(fp16: `test_fp16_training_follows_the_original_float32_trajectory`.)"""
    expected = tiny_expected()
    features = {k: expected[k] for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                                         "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}
    model = pretrainer("mixed_bfloat16")
    optimizer = create_optimizer("adamw", 1e-3, 10, 0)
    trainer = Trainer(tf.distribute.get_strategy(), model, optimizer, pretraining_loss, str(tmp_path),
                      global_batch_size=3, steps_per_loop=2, save_checkpoints_steps=100)
    before = np.asarray(model.encoder.pooler.kernel).copy()
    trainer.train(lambda context: tf.data.Dataset.from_tensors(features).repeat(), num_train_steps=2)
    (record,) = trainer.history
    metrics = record.metrics
    assert np.isfinite(metrics["loss"]) and trainer.step == 2
    assert not np.array_equal(np.asarray(model.encoder.pooler.kernel), before)


def test_fp16_training_follows_the_original_float32_trajectory(tmp_path):
    """--mixed_precision=fp16 as the driver builds it (dynamic loss scaling): five steps of the
    original's float32 trajectory (tests/test_optimization.py), each loss within fp16's
    rounding and the weights' update within 5% of the original's."""
    trajectory = json.loads((TINY_TRAIN / "expected_train.json").read_text())["preinc"]
    config = BertConfig.from_json_file(TINY_TRAIN / "bert_config.json")
    model = BertPretrainer(config, dtype="mixed_float16")
    checkpoints.load_checkpoint(model, TINY_TRAIN / "bert_model.ckpt")
    start = {name: np.asarray(v) for name, v in original_layout.variable_map(model).items()}
    optimizer = keras.optimizers.LossScaleOptimizer(create_optimizer("adamw", 1e-2, 10, 2))
    trainer = Trainer(tf.distribute.get_strategy(), model, optimizer, pretraining_loss,
                      str(tmp_path), global_batch_size=3, steps_per_loop=1,
                      save_checkpoints_steps=1000)
    expected = tiny_expected()
    features = {k: expected[k] for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                                         "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}
    trainer.train(lambda context: tf.data.Dataset.from_tensors(features).repeat(), num_train_steps=5)
    assert float(optimizer.dynamic_scale) > 1  # a loss scale, adjusted as training goes
    for record, want in zip(trainer.history, trajectory["steps"]):
        assert record.metrics["loss"] == pytest.approx(want["total_loss"], abs=0.01)
    reader = tf.train.load_checkpoint(str(TINY_TRAIN / "bert_model_step5_preinc.ckpt"))
    ours = np.concatenate([(np.asarray(v) - start[n]).ravel()
                           for n, v in original_layout.variable_map(model).items()])
    original = np.concatenate([(reader.get_tensor(n) - start[n]).ravel()
                               for n in original_layout.variable_map(model)])
    assert np.linalg.norm(ours - original) < 0.05 * np.linalg.norm(original)


def test_bf16_on_a_cpu_without_bfloat16_units_warns(tmp_path, caplog):
    """--mixed_precision=bf16 where oneDNN would emulate bfloat16 (an AVX2-only CPU, a Zen 3):
    one warning saying what it costs and what to use; none on a CPU with the units."""
    import logging

    from bert_runner import distribution

    caplog.set_level(logging.WARNING)
    for flags, warned in (("fpu avx2 fma", True), ("avx2 avx512f avx512_bf16", False),
                          ("avx2 amx_bf16 amx_tile", False)):
        cpuinfo = tmp_path / "cpuinfo"
        cpuinfo.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: {flags}\n\n"
                           "processor\t: 1\nmodel name\t: Test CPU\nflags\t\t: {flags}\n")
        caplog.clear()
        assert distribution.warn_if_bfloat16_is_emulated(str(cpuinfo)) is warned
        messages = [r.getMessage() for r in caplog.records if "bfloat16 units" in r.getMessage()]
        assert len(messages) == warned
        assert all("Test CPU" in m and "Leave --mixed_precision out" in m for m in messages)
    assert distribution.cpu_features(str(tmp_path / "missing")) == (None, None)
