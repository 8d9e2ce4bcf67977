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


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_a_training_step_under_mixed_precision(tmp_path, policy):
    expected = tiny_expected()
    features = {k: expected[k] for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                                         "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}
    model = pretrainer(policy)
    optimizer = create_optimizer("adamw", 1e-3, 10, 0)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    trainer = Trainer(tf.distribute.get_strategy(), model, optimizer, pretraining_loss, str(tmp_path),
                      global_batch_size=3, steps_per_loop=2, save_checkpoints_steps=100)
    before = np.asarray(model.bert.pooler.kernel).copy()
    trainer.train(lambda context: tf.data.Dataset.from_tensors(features).repeat(), num_train_steps=2)
    (record,) = trainer.history
    metrics = record.metrics
    assert np.isfinite(metrics["loss"]) and trainer.step == 2
    assert not np.array_equal(np.asarray(model.bert.pooler.kernel), before)
