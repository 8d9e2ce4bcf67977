"""bf16 and fp16 compute: close to float32, with LayerNorm, softmax, mask and losses in float32."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertPretrainer, masked_lm_loss
from modeling.optimization import create_optimizer
from modeling_helpers import TINY, pretraining_features, tiny_config, tiny_expected
from bert_tasks.pretraining.task import pretraining_loss
from bert_runner.trainer import Trainer


def pretrainer(policy):
    from modeling import tf1_checkpoint

    model = BertPretrainer(tiny_config(), dtype=policy)
    tf1_checkpoint.load_tf1_checkpoint(model, TINY / "bert_model.ckpt")
    return model


@pytest.mark.parametrize("policy, atol", [("mixed_bfloat16", 0.25), ("mixed_float16", 0.02)])
def test_forward_under_mixed_precision(policy, atol):
    expected = tiny_expected()
    model = pretrainer(policy)
    layer = model.bert.encoder_layers[0]
    assert layer.compute_dtype == policy.split("_")[1]  # the policy reaches the encoder layers
    assert layer.intermediate_kernel.dtype == "float32"  # variables stay float32
    assert layer.attention_gamma.dtype == "float32"  # LayerNorm variables too
    outputs = model(pretraining_features(expected))
    assert outputs["masked_lm_logits"].dtype == "float32"
    loss, _, _ = masked_lm_loss(outputs["masked_lm_logits"], expected["masked_lm_ids"],
                                expected["masked_lm_weights"])
    assert float(loss) == pytest.approx(float(expected["masked_lm_loss"]), abs=atol)
    sequence = model.bert(
        {"input_ids": expected["input_ids"], "input_mask": expected["input_mask"],
         "token_type_ids": expected["segment_ids"]})["sequence_output"]
    np.testing.assert_allclose(np.asarray(sequence, "float32"), expected["sequence_output"], atol=20 * atol)


def _two_steps(tmp_path, policy):
    """(last step's metrics, trainer) of two training steps from the tiny checkpoint under
    `policy`, fp16 with dynamic loss scaling (as --mixed_precision=fp16 builds it)."""
    expected = tiny_expected()
    features = {k: expected[k] for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                                         "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}
    keras.utils.set_random_seed(0)  # the same dropout masks under every policy
    model = pretrainer(policy)
    optimizer = create_optimizer("adamw", 1e-3, 10, 0)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    trainer = Trainer(tf.distribute.get_strategy(), model, optimizer, pretraining_loss,
                      str(tmp_path / (policy or "float32")), global_batch_size=3, steps_per_loop=2,
                      save_checkpoints_steps=100)
    before = np.asarray(model.bert.pooler.kernel).copy()
    trainer.train(lambda context: tf.data.Dataset.from_tensors(features).repeat(), num_train_steps=2)
    (record,) = trainer.history
    assert np.isfinite(record.metrics["loss"]) and trainer.step == 2
    assert not np.array_equal(np.asarray(model.bert.pooler.kernel), before)
    return record.metrics, trainer


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_a_training_step_under_mixed_precision(tmp_path, policy):
    metrics, trainer = _two_steps(tmp_path, policy)
    if policy == "mixed_float16":
        # Dynamic loss scaling: the scale is a variable the optimizer adjusts, and the losses
        # and weights after two steps stay close to float32's.
        assert float(trainer.optimizer.dynamic_scale) > 1
        reference, reference_trainer = _two_steps(tmp_path, None)
        assert metrics["loss"] == pytest.approx(reference["loss"], abs=1e-3)
        start = pretrainer(None).get_weights()

        def update(model):
            return np.concatenate([(w - w0).ravel() for w, w0 in zip(model.get_weights(), start)])

        ours, theirs = update(trainer.model), update(reference_trainer.model)
        assert np.linalg.norm(ours - theirs) < 0.05 * np.linalg.norm(theirs)


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
