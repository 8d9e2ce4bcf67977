"""The original optimizer through the real training loop, against the original's 5-step trajectory."""
import collections
import dataclasses
import json
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertConfig, BertPretrainer, LoraSettings, families, with_lora
from modeling.checkpoint import original as original_layout
from modeling import checkpoint as checkpoints
from modeling.optimization import (
    AdamWeightDecay, Lamb, WarmupPolynomialDecay, clip_scale, create_optimizer, layerwise_rates)
from conftest import ROOT
from modeling_helpers import TINY_TRAIN, tiny_config, tiny_expected
from bert_tasks.pretraining.task import pretraining_loss
from bert_runner.trainer import Trainer


def fixed_batch_dataset(features, copies=1):
    batch = {k: np.concatenate([v] * copies) for k, v in features.items()}
    return lambda context: tf.data.Dataset.from_tensors(batch).repeat()


def graph_nodes(concrete_function):
    """({name: FunctionDef} of the function's library, every node of its graph and library)."""
    graph = concrete_function.graph.as_graph_def()
    functions = {f.signature.name: f for f in graph.library.function}
    return functions, [*graph.node, *(n for f in functions.values() for n in f.node_def)]


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
    # The training loop calls the step once (its loop's body): TensorFlow inlines each call,
    # and a second one would be a second copy of the model's graph to optimize.
    loop = trainer._train_loop.get_concrete_function(
        trainer._input_iterator(fixed_batch_dataset(features)), tf.TensorSpec([], tf.int32))
    _, nodes = graph_nodes(loop)
    assert len([n for n in nodes if "_replica_step" in n.attr["f"].func.name]) == 1
    assert trainer._step.experimental_get_tracing_count() == 1
    assert trainer._train_loop.experimental_get_tracing_count() == 1

    accumulated, _ = tiny_train_setup(tmp_path / "micro_batches", accumulation=2)
    accumulated.train(fixed_batch_dataset(features, copies=2), num_train_steps=5)
    for a, b in zip(trainer.model.get_weights(), accumulated.model.get_weights()):
        np.testing.assert_allclose(a, b, atol=2e-5)
    # The micro-batches are one call of the loss and gradients in a loop that runs one iteration
    # at a time: the step's graph does not grow with their number, nor its memory.
    step = accumulated._step.get_concrete_function(
        {k: tf.TensorSpec((6, *v.shape[1:]), v.dtype) for k, v in features.items()})
    functions, nodes = graph_nodes(step)
    calls = [n for n in nodes if "_loss_and_grads" in n.attr["f"].func.name]
    assert len(calls) == 1 and accumulated._grads.experimental_get_tracing_count() == 1
    loops = [n for n in nodes if n.op in ("While", "StatelessWhile")
             and calls[0] in functions[n.attr["body"].func.name].node_def]
    assert [n.attr["parallel_iterations"].i for n in loops] == [1]


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


# ---- ELECTRA's schedule and layer-wise learning rates -----------------------------------------


def electra_learning_rate(init_lr, step, num_train_steps, warmup_steps, power):
    """ELECTRA's model/optimization.py, restated in float64: tf.train.polynomial_decay to 0
    (cycle=False) times min(1, step / warmup_steps)."""
    decayed = init_lr * (1.0 - min(step, num_train_steps) / num_train_steps) ** power
    return decayed * min(1.0, step / warmup_steps)


@pytest.mark.parametrize("power", [1.0, 2.0])
def test_the_electra_schedule_is_the_decay_times_the_warmup_fraction(power):
    schedule = WarmupPolynomialDecay(1e-2, num_train_steps=10, num_warmup_steps=4,
                                     warmup_rule="electra", power=power)
    steps = [0, 1, 2, 3, 4, 5, 7, 9, 10, 12]
    want = [electra_learning_rate(1e-2, k, 10, 4, power) for k in steps]
    np.testing.assert_allclose([float(schedule(k)) for k in steps], want, rtol=1e-6, atol=1e-12)
    # Below the BERT rule's value during warm-up (decay, not init_lr, is warmed up), the same
    # after it.
    bert = WarmupPolynomialDecay(1e-2, 10, 4, power=power)
    assert float(schedule(2)) < float(bert(2))
    assert float(schedule(6)) == pytest.approx(float(bert(6)), rel=1e-6)
    # A fractional warm-up (ELECTRA does not round N·warmup_proportion) is taken as it is.
    fractional = WarmupPolynomialDecay(1e-2, 10, 2.5, warmup_rule="electra", power=power)
    assert float(fractional(2)) == pytest.approx(
        electra_learning_rate(1e-2, 2, 10, 2.5, power), rel=1e-6)


def test_the_electra_schedule_without_warmup_is_the_decay_from_step_0():
    """W = 0: the original divides 0/0 at step 0 and tf.minimum(1.0, NaN) is NaN (its first
    update would make every weight NaN); here no warm-up, the decay itself from step 0, which
    is what the original gives from step 1 on (min(1, step/0) = 1)."""
    assert np.isnan(float(tf.minimum(1.0, tf.constant(0.0) / tf.constant(0.0))))
    schedule = WarmupPolynomialDecay(1e-2, 10, 0, warmup_rule="electra", power=2.0)
    got = [float(schedule(k)) for k in range(12)]
    want = [1e-2 * (1.0 - min(k, 10) / 10) ** 2.0 for k in range(12)]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
    assert got[0] == pytest.approx(1e-2)


def test_the_schedule_config_round_trips():
    schedule = WarmupPolynomialDecay(3e-4, 1000, 100, warmup_rule="electra", power=0.5)
    copy = WarmupPolynomialDecay.from_config(schedule.get_config())
    assert copy.get_config() == schedule.get_config() == {
        "init_lr": 3e-4, "num_train_steps": 1000, "num_warmup_steps": 100,
        "warmup_rule": "electra", "power": 0.5}
    assert [float(copy(k)) for k in (0, 50, 500)] == [float(schedule(k)) for k in (0, 50, 500)]
    with pytest.raises(ValueError, match="warm-up rule 'gpt'"):
        WarmupPolynomialDecay(1e-3, 10, 1, warmup_rule="gpt")


def original_layer_lrs(names, learning_rate, layer_decay, n_layers, scope):
    """ELECTRA's `_get_layer_lrs` and apply_gradients' substring match, restated over original
    names, with BERT's pooler (which ELECTRA lacks) between the top layer and the head and a
    name matching no key taken as the head's (the original's "task_specific/")."""
    key_to_depths = collections.OrderedDict({"/embeddings/": 0, "/embeddings_project/": 0,
                                             "task_specific/": n_layers + 2,
                                             f"{scope}/pooler/": n_layers + 1})
    for layer in range(n_layers):
        key_to_depths["encoder/layer_" + str(layer) + "/"] = layer + 1
    rates = {key: learning_rate * (layer_decay ** (n_layers + 2 - depth))
             for key, depth in key_to_depths.items()}
    found = {}
    for name in names:
        keys = [key for key in rates if key in name]
        assert len(keys) <= 1, (name, keys)
        found[name] = rates[keys[0]] if keys else learning_rate
    return found


def test_layerwise_rates_are_electras_over_the_original_names():
    config = tiny_config()
    n = config.num_hidden_layers
    model = families.build_model("classifier", config, 2)
    rates = layerwise_rates(model, 0.5)
    names = original_layout.variable_map(model)
    assert sorted(rates) == sorted(v.path for v in model.trainable_variables)
    want = original_layer_lrs(names, 1.0, 0.5, n, "bert")
    for name, variable in names.items():
        assert rates[variable.path] == pytest.approx(want[name], rel=1e-12), name
    by_name = {name: rates[variable.path] for name, variable in names.items()}
    assert by_name["bert/embeddings/word_embeddings"] == 0.5 ** (n + 2)
    assert by_name["bert/embeddings/LayerNorm/gamma"] == 0.5 ** (n + 2)
    for i in range(n):
        assert by_name[f"bert/encoder/layer_{i}/attention/self/query/kernel"] == 0.5 ** (n + 1 - i)
        assert by_name[f"bert/encoder/layer_{i}/output/LayerNorm/beta"] == 0.5 ** (n + 1 - i)
    assert by_name["bert/pooler/dense/kernel"] == 0.5
    assert by_name["output_weights"] == by_name["output_bias"] == 1.0
    assert set(layerwise_rates(model, 1.0).values()) == {1.0}
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        layerwise_rates(model, 0.0)


def test_layerwise_rates_of_lora_adapters_and_a_bilstm_on_top():
    config = tiny_config()
    model = with_lora(families.build_model("classifier", config, 2),
                      LoraSettings(2, targets="all"))
    rates = layerwise_rates(model, 0.5)
    assert sorted(rates) == sorted(v.path for v in model.trainable_variables)
    for path, rate in rates.items():
        if "/lora_" in path:  # its kernel's depth: layer i at 0.5^(n + 1 - i)
            layer = int(re.search(r"layer_(\d+)/", path).group(1))
            assert rate == 0.5 ** (config.num_hidden_layers + 1 - layer), path
        else:
            assert rate == 1.0, path  # the head
    bilstm = families.build_model("classifier", config, 2, bilstm_on_top=True)
    rates = layerwise_rates(bilstm, 0.5)
    for name, variable in original_layout.variable_map(bilstm).items():
        if not name.startswith("bert/"):
            assert rates[variable.path] == 1.0, name


def _classifier_step_start():
    # Not called: its variables exist once built (`BertTaskModel`), and a call would compile
    # the model's kernels for nothing.
    model = families.build_model("classifier", tiny_config(), 2)
    rng = np.random.default_rng(3)
    grads = [tf.constant(rng.normal(size=v.shape) * 1e-2, tf.float32)
             for v in model.trainable_variables]
    return model, [np.asarray(v) for v in model.trainable_variables], grads


@pytest.mark.parametrize("name,compiled", [
    pytest.param("adamw", True, marks=pytest.mark.large), ("lamb", False)])
def test_a_layerwise_step_is_each_variables_step_at_its_own_rate(name, compiled):
    """Two steps with decay 0.5 (through `apply_at`, op by op and as the compiled kernels) make,
    for every variable, the update of its group optimized alone at learning rate × multiplier
    (the same path): the original's one optimizer per key of `_get_layer_lrs`."""
    model, start, grads = _classifier_step_start()
    variables = model.trainable_variables
    rates = layerwise_rates(model, 0.5)
    optimizer = create_optimizer(name, 1e-2, num_train_steps=10, num_warmup_steps=0,
                                 layer_rates=rates)
    optimizer.build(variables)

    @tf.function(autograph=False)
    def step():
        optimizer.apply_at(grads, variables, tf.constant(0.01), compiled=compiled)

    step()
    step()
    got = [np.asarray(v) for v in variables]
    assert compiled == bool(optimizer._kernels)

    for variable, value in zip(variables, start):
        variable.assign(value)
    groups = collections.defaultdict(list)
    for index, variable in enumerate(variables):
        groups[rates[variable.path]].append(index)
    assert len(groups) == tiny_config().num_hidden_layers + 3
    references = []
    for multiplier, indexes in groups.items():
        reference = create_optimizer(name, 1e-2, 10, 0)
        # Built before the step, as `optimizer`: a function that made the slots would be
        # traced twice.
        reference.build([variables[i] for i in indexes])
        references.append((reference, multiplier, indexes))

    @tf.function(autograph=False)
    def reference_step():  # each group's own optimizer on its variables alone; one trace
        for reference, multiplier, indexes in references:
            reference.apply_at([grads[i] for i in indexes], [variables[i] for i in indexes],
                               tf.constant(0.01 * multiplier), compiled=compiled)

    reference_step()
    reference_step()
    for variable, value, before in zip(variables, got, start):
        assert not np.array_equal(value, before), variable.path
        np.testing.assert_allclose(value, np.asarray(variable), rtol=0, atol=1e-7,
                                   err_msg=variable.path)


def test_decay_1_adds_nothing_to_the_optimizer():
    """No multipliers at decay 1.0: the driver passes none, so the optimizer runs as without
    the flag; a variable the multipliers leave out is refused, as the original's optimizer
    refuses a variable no rate names."""
    from bert_runner import driver

    model, _, _ = _classifier_step_start()
    assert driver._layer_rates(model, 1.0) is None
    plain = create_optimizer("adamw", 1e-2, 10, 1)
    assert plain.layer_rates is None and plain.get_config()["layer_rates"] is None
    with pytest.raises(ValueError, match="No layer-wise learning rate for variable"):
        create_optimizer("adamw", 1e-2, 10, 1, layer_rates={"other": 0.5}).build(
            model.trainable_variables)


def test_the_driver_takes_the_warmup_rule_and_decay_of_the_models_family(monkeypatch, tmp_path):
    """--layerwise_lr_decay unset: the family's default (BERT's 1.0: the optimizer as before);
    a family with ELECTRA's defaults gets its warm-up rule and its decay; the flag overrides."""
    from bert_runner import driver, run_identity
    from bert_runner.run_config import RunConfig
    from bert_tasks.classifier.task import ClassifierTask

    task = ClassifierTask("mrpc", 16)
    config = tiny_config()
    strategy = tf.distribute.get_strategy()
    run = RunConfig(str(tmp_path), layerwise_lr_decay=None)
    bert = driver.build_trainer(task, run, config, strategy, 10, 1).optimizer
    assert bert._learning_rate.warmup_rule == "bert" and bert.layer_rates is None
    assert RunConfig(str(tmp_path)).layerwise_lr_decay == 1.0  # a script without the flag

    class ElectraLike(type(families.of_config(config))):
        warmup_rule = "electra"

        def layerwise_lr_decay(self, config):
            return 0.8

    monkeypatch.setattr(families, "of_config", lambda c: ElectraLike())
    optimizer = driver.build_trainer(task, run, config, strategy, 10, 1).optimizer
    assert optimizer._learning_rate.warmup_rule == "electra"
    assert min(optimizer.layer_rates.values()) == pytest.approx(0.8 ** 4)
    assert run_identity.of(task, run, config)["layerwise_lr_decay"] == 0.8
    given = dataclasses.replace(run, layerwise_lr_decay=0.5)
    assert driver.build_trainer(task, given, config, strategy, 10, 1).optimizer.layer_rates[
        "classifier/output_weights"] == 1.0
    assert run_identity.of(task, given, config)["layerwise_lr_decay"] == 0.5
    # Without training (no steps) the optimizer only counts steps: no rates.
    assert driver.build_trainer(task, run, config, strategy, 0, 0).optimizer.layer_rates is None


def test_a_record_without_the_decay_is_a_run_without_it():
    """A run.json written before the decay was recorded (it holds the config's hash) trained
    at decay 1.0: another decay into its output_dir is refused, the same one is not. A record
    made without the config (a sweep's) is not read so."""
    from bert_runner import run_identity

    old = {"task": "classifier/mrpc", "bert_config_sha256": "aa"}
    assert run_identity.differences(old, {**old, "layerwise_lr_decay": 1.0}) == []
    assert run_identity.differences(old, {**old, "layerwise_lr_decay": 0.8}) == [
        "layerwise_lr_decay 1.0 -> 0.8"]
    assert run_identity.differences({**old, "layerwise_lr_decay": 0.8},
                                    {**old, "layerwise_lr_decay": 0.8}) == []
    sweep = {"task": "classifier/mrpc"}
    assert run_identity.differences(sweep, {**sweep, "layerwise_lr_decay": 0.8}) == []


def test_a_mirrored_strategy_trains_and_checkpoints_without_its_input_position(tmp_path, caplog):
    """A mirrored strategy's input iterator cannot be saved (tensorflow#56372): the run trains
    and writes its checkpoints without it, and says a resumed run starts its input again."""
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1)])
        model.build((None, 2))
        optimizer = create_optimizer("adamw", 1e-2, num_train_steps=2, num_warmup_steps=0)

    def loss(model, features, training):
        value = tf.reduce_mean(tf.square(model(features["x"]) - features["y"]))
        return value, {}

    batch = {"x": np.ones((4, 2), "float32"), "y": np.zeros((4, 1), "float32")}
    trainer = Trainer(strategy, model, optimizer, loss, str(tmp_path), global_batch_size=4,
                      steps_per_loop=1)
    trainer.train(lambda context: tf.data.Dataset.from_tensors(batch).repeat(), num_train_steps=2)
    assert trainer.step == 2 and (tmp_path / "ckpt-2.index").exists()
    assert "input iterator cannot be checkpointed" in caplog.text


def test_a_trainer_that_would_run_no_step_is_refused(tmp_path):
    """Each loop call runs up to the next save: with saves every 0 steps it would run none (and
    `train` would never end)."""
    model = keras.Sequential([keras.layers.Dense(1)])
    model.build((None, 2))
    optimizer = create_optimizer("adamw", 1e-2, num_train_steps=2, num_warmup_steps=0)
    with pytest.raises(ValueError, match="save_checkpoints_steps must be at least 1, not 0"):
        Trainer(tf.distribute.get_strategy(), model, optimizer, None, str(tmp_path),
                global_batch_size=4, save_checkpoints_steps=0)


@pytest.mark.large
def test_two_replicas_train_as_one_device_does():
    """A MirroredStrategy of two CPU devices, each given half of every global batch, makes the
    one-device run's steps: one loop call of three steps, whose metrics start as zeros on each
    replica."""
    code = f"""
import sys, tempfile
sys.path.insert(0, {str(ROOT)!r})
import keras, numpy as np, tensorflow as tf
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
from bert_runner.trainer import Trainer
from modeling.optimization import create_optimizer
rng = np.random.default_rng(0)
rows = {{"x": rng.normal(size=(12, 3)).astype("float32"),
        "y": rng.normal(size=(12, 1)).astype("float32")}}
start = [rng.normal(size=(3, 1)).astype("float32"), np.zeros(1, "float32")]
def loss(model, features, training):
    value = tf.reduce_mean(tf.square(model(features["x"]) - features["y"]))
    return value, {{"twice": 2 * value}}
def run(strategy):
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1)])
        model.build((None, 3))
        model.set_weights(start)
        optimizer = create_optimizer("adamw", 0.1, num_train_steps=3, num_warmup_steps=0)
    trainer = Trainer(strategy, model, optimizer, loss, tempfile.mkdtemp(), global_batch_size=4,
                      steps_per_loop=3)
    per_replica = 4 // strategy.num_replicas_in_sync
    metrics = trainer.train(
        lambda context: tf.data.Dataset.from_tensor_slices(rows).batch(per_replica).repeat(), 3)
    assert trainer.step == 3 and len(trainer.history) == 1, trainer.history
    return metrics, model.get_weights()
one, one_weights = run(tf.distribute.get_strategy())
two, two_weights = run(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
assert sorted(one) == sorted(two) == ["grad_norm", "loss", "twice"], (one, two)
for name in one:
    np.testing.assert_allclose(two[name], one[name], rtol=1e-5, err_msg=name)
for a, b in zip(one_weights, two_weights):
    np.testing.assert_allclose(b, a, atol=1e-6)
print("ok")
"""
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert process.returncode == 0 and process.stdout.strip() == "ok", process.stderr[-3000:]
