"""The original optimizer through the real training loop, against the original's 5-step trajectory."""
import collections
import json
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertConfig, BertPretrainer
from modeling.checkpoint import original as original_layout
from modeling import checkpoint as checkpoints
from modeling.optimization import AdamWeightDecay, Lamb, WarmupPolynomialDecay, create_optimizer
from modeling_helpers import TINY_TRAIN, tiny_expected
from bert_tasks.pretraining.task import pretraining_loss
from bert_runner.trainer import Trainer, clip_scale


def fixed_batch_dataset(features, copies=1):
    batch = {k: np.concatenate([v] * copies) for k, v in features.items()}
    return lambda context: tf.data.Dataset.from_tensors(batch).repeat()


def tiny_train_setup(tmp_path, accumulation=1, init_lr=1e-2):
    config = BertConfig.from_json_file(TINY_TRAIN / "bert_config.json")
    model = BertPretrainer(config)
    checkpoints.load_checkpoint(model, TINY_TRAIN / "bert_model.ckpt")
    optimizer = create_optimizer("adamw", init_lr, num_train_steps=10, num_warmup_steps=2)
    trainer = Trainer(tf.distribute.get_strategy(), model, optimizer, pretraining_loss, str(tmp_path),
                      global_batch_size=3 * accumulation, steps_per_loop=1, save_checkpoints_steps=1000,
                      gradient_accumulation_steps=accumulation)
    expected = tiny_expected()
    features = {k: expected[k] for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                                         "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}
    return trainer, features


def test_schedule_is_the_original_one():
    schedule = WarmupPolynomialDecay(1e-2, num_train_steps=10, num_warmup_steps=2)
    got = [float(schedule(k)) for k in range(12)]
    want = [0, 0.005, 0.008, 0.007, 0.006, 0.005, 0.004, 0.003, 0.002, 0.001, 0, 0]
    np.testing.assert_allclose(got, want, atol=1e-9)
    no_warmup = WarmupPolynomialDecay(1e-2, num_train_steps=10, num_warmup_steps=0)
    assert float(no_warmup(0)) == pytest.approx(1e-2)


def test_compiled_updates_take_the_schedules_value_as_an_input_once_per_shape(tmp_path):
    """The training loop evaluates the schedule outside its XLA-compiled updates and passes the
    value in (`apply_at`): no number of the schedule is a constant of a compiled program, so
    one compilation serves every learning rate, warm-up and step count. Each variable's update
    is one kernel, traced once for all variables of one width (kernels [5, 3] and [3, 3] here,
    two biases [3]), and the update made is the optimizer's own at that learning rate."""
    model = keras.Sequential([keras.layers.Dense(3), keras.layers.Dense(3)])
    model.build((None, 5))
    start = [np.asarray(v) for v in model.trainable_variables]
    optimizer = create_optimizer("adamw", 0.0123, num_train_steps=777, num_warmup_steps=55)
    trainer = Trainer(tf.distribute.get_strategy(), model, optimizer, None, str(tmp_path),
                      global_batch_size=1, clip_norm=100.0)
    grads = [tf.fill(v.shape, 0.25) for v in model.trainable_variables]
    tf.function(trainer._clip_and_apply, autograph=False)(grads, tf.constant(0.5))
    assert float(optimizer.learning_rate) == pytest.approx(0.0123 / 55)  # its own schedule again
    kernels = optimizer._kernels
    assert sorted(kernels) == [(False, True), (True, True)]  # biases, kernels; clipped
    traces = [kernels[key].function.experimental_get_tracing_count() for key in sorted(kernels)]
    assert traces == [1, 1]
    inputs = [tf.fill((3, 3), 0.25), *[tf.ones((3, 3))] * 3, tf.constant(0.5),
              tf.constant(0, tf.int64), tf.constant(1.0)]
    hlo = kernels[(True, True)].function.experimental_get_compiler_ir(*inputs)(stage="hlo")
    constants = {float(v) for v in re.findall(r"constant\((-?[0-9][0-9.e+-]*)\)", hlo)}
    assert constants and not constants & {0.0123, 777.0, 55.0}, sorted(constants)

    reference = keras.Sequential([keras.layers.Dense(3), keras.layers.Dense(3)])
    reference.build((None, 5))
    for variable, value in zip(reference.trainable_variables, start):
        variable.assign(value)
    AdamWeightDecay(0.5).apply(grads, reference.trainable_variables)
    for got, want in zip(model.trainable_variables, reference.trainable_variables):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_a_traced_update_holds_each_coefficient_once():
    """Every variable's update shares one constant per coefficient (beta_1, 1 - beta_1, ...,
    epsilon, the weight decay rate): not one per variable and use."""
    variables = [keras.Variable(np.ones((2, 3), np.float32), name=f"kernel_{i}")
                 for i in range(4)]
    optimizer = AdamWeightDecay(0.1, weight_decay_rate=0.25)
    optimizer.build(variables)
    grads = [tf.ones((2, 3)) for _ in variables]
    graph = tf.function(lambda: optimizer.apply(grads, variables)).get_concrete_function().graph
    values = collections.Counter(
        float(tf.make_ndarray(op.get_attr("value"))) for op in graph.get_operations()
        if op.type == "Const" and op.get_attr("dtype") == tf.float32
        and not op.get_attr("value").tensor_shape.dim)
    for value in (0.9, 1 - 0.9, 0.999, 1 - 0.999, 1e-6, 0.25):
        assert values[float(np.float32(value))] == 1, (value, values)


def test_weight_decay_exclusions_match_the_original_names():
    config = BertConfig.from_json_file(TINY_TRAIN / "bert_config.json")
    model = BertPretrainer(config)
    optimizer = create_optimizer("adamw", 1e-3, 10, 1)
    for name, variable in original_layout.variable_map(model).items():
        original = not any(re.search(p, name) for p in ("LayerNorm", "layer_norm", "bias"))
        assert optimizer.decays(variable) == original, name
    assert optimizer.decays(model.next_sentence.output_weights)  # decayed in the original too


def test_five_steps_reproduce_the_original_trajectory_whole_or_as_micro_batches(tmp_path):
    """Loss before each step within 1e-5, parameters after 5 steps within 5e-5 (`preinc`); each
    batch given as two identical micro-batches (gradient accumulation) makes exactly the
    update of the whole batch."""
    expected = json.loads((TINY_TRAIN / "expected_train.json").read_text())["preinc"]
    trainer, features = tiny_train_setup(tmp_path / "whole")
    trainer.train(fixed_batch_dataset(features), num_train_steps=2)
    # The second call resumes from the checkpoint the first one wrote, as a restarted run would.
    trainer.train(fixed_batch_dataset(features), num_train_steps=5)
    assert [record.step for record in trainer.history] == [1, 2, 3, 4, 5]
    for (_, metrics, _), want in zip(trainer.history, expected["steps"]):
        assert metrics["loss"] == pytest.approx(want["total_loss"], abs=1e-5)
        assert metrics["grad_norm"] == pytest.approx(want["grad_global_norm_before_clip"], rel=1e-5)
    reader = tf.train.load_checkpoint(str(TINY_TRAIN / "bert_model_step5_preinc.ckpt"))
    for name, variable in original_layout.variable_map(trainer.model).items():
        np.testing.assert_allclose(np.asarray(variable), reader.get_tensor(name), rtol=0, atol=5e-5,
                                   err_msg=name)
    assert trainer.step == 5

    accumulated, _ = tiny_train_setup(tmp_path / "micro_batches", accumulation=2)
    accumulated.train(fixed_batch_dataset(features, copies=2), num_train_steps=5)
    for a, b in zip(trainer.model.get_weights(), accumulated.model.get_weights()):
        np.testing.assert_allclose(a, b, atol=2e-5)


def test_lamb_matches_a_numpy_reference():
    w0 = np.array([[0.5, -1.0], [2.0, 0.25]], "float32")
    b0 = np.array([0.1, -0.2], "float32")
    kernel = keras.Variable(w0, name="kernel")
    bias = keras.Variable(b0, name="bias")
    g_w = np.array([[0.1, 0.2], [-0.3, 0.4]], "float32")
    g_b = np.array([0.5, -0.5], "float32")
    optimizer = Lamb(0.1, weight_decay_rate=0.01)
    optimizer.apply([g_w, g_b], [kernel, bias])

    def reference(w, g, decay):
        m, v = 0.1 * g, 0.001 * g * g
        update = (m / 0.1) / (np.sqrt(v / 0.001) + 1e-6)
        if not decay:
            return w - 0.1 * update
        update = update + 0.01 * w
        return w - 0.1 * (np.linalg.norm(w) / np.linalg.norm(update)) * update

    np.testing.assert_allclose(np.asarray(kernel), reference(w0, g_w, True), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(bias), reference(b0, g_b, False), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_compiled_updates_equal_the_reference_updates_with_their_gradient_scale(name):
    """`apply_at(..., compiled=True)` (each variable's update one XLA kernel, the clipping scale
    inside it) against the optimizer's op-by-op update of the scaled gradients, over three steps
    (LAMB's bias correction counts them), with decayed and undecayed variables of one shape."""
    rng = np.random.default_rng(0)
    start = {"kernel": rng.normal(size=(4, 3)), "other_kernel": rng.normal(size=(4, 3)),
             "bias": rng.normal(size=(4, 3)), "LayerNorm_gamma": rng.normal(size=(3,))}
    models = []
    for _ in range(2):
        variables = [keras.Variable(value.astype("float32"), name=key)
                     for key, value in start.items()]
        optimizer = create_optimizer(name, 0.1, num_train_steps=10, num_warmup_steps=0)
        optimizer.build(variables)
        models.append((optimizer, variables))
    assert [models[0][0].decays(v) for v in models[0][1]] == [True, True, False, False]
    scale = tf.constant(0.37)

    (compiled, compiled_variables), (reference, reference_variables) = models

    @tf.function(autograph=False)
    def step(grads):
        compiled.apply_at(grads, compiled_variables, tf.constant(0.01), gradient_scale=scale,
                          compiled=True)
        reference.apply_at([g * scale for g in grads], reference_variables, tf.constant(0.01))

    # Gradients near the optimizer's epsilon (1e-6): Adam's m / (sqrt(v) + epsilon) would hardly
    # see their scale otherwise.
    for _ in range(3):
        step([tf.constant(1e-5 * rng.normal(size=v.shape), tf.float32) for v in compiled_variables])
    for got, want in zip(compiled_variables, reference_variables):
        assert not np.allclose(np.asarray(got), start[want.name])  # it trained
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-7,
                                   err_msg=want.name)
    assert compiled._kernels and not reference._kernels


@pytest.mark.parametrize("norm_of", [0.3, 1.0, 7.0, np.inf, np.nan])
def test_clip_scale_is_what_clip_by_global_norm_multiplies_by(norm_of):
    gradients = [tf.constant([0.6, -0.8]) * norm_of, tf.constant([[0.0]])]
    clipped, _ = tf.clip_by_global_norm(gradients, 1.7)
    scale = clip_scale(tf.linalg.global_norm(gradients), 1.7)
    for want, gradient in zip(clipped, gradients):
        np.testing.assert_array_equal(np.asarray(gradient * scale), np.asarray(want))
