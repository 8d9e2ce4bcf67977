"""The JAX step engine (`bert_runner.engines.jax_step`): it imports no TensorFlow, and its steps
are the TensorFlow trainer's (`bert_runner.trainer`) to float rounding. Large tier: JAX is there
(tests/requirements-large.txt), and each check compiles a step in a child process."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from optional_packages import needs

pytestmark = [pytest.mark.large, needs("jax")]

# Makes `import tensorflow` fail in the child, as on a machine without it.
BLOCK_TENSORFLOW = """
import sys
class _NoTensorFlow:
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError("No module named " + repr(name) + " (blocked)")
sys.meta_path.insert(0, _NoTensorFlow())
"""

# What both backends' steps share: the batch (the fixture's, its first row again: 4 rows, which
# split into 2 micro-batches), the losses, the optimizer, the cases.
COMMON = """
import sys
import numpy as np
sys.path[:0] = [{root!r}, {tests!r}]
import keras
from modeling import classification_loss, masked_lm_loss
from modeling.optimization import create_optimizer
from modeling_helpers import tiny_expected
e = tiny_expected()
NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
         "masked_lm_weights", "next_sentence_labels")
FEATURES = {{n: np.concatenate([e[n], e[n][:1]]) for n in NAMES}}

def loss_fn(model, features, training, next_sentence=True):
    outputs = model(features, training=training)
    mlm = masked_lm_loss(outputs["masked_lm_logits"], features["masked_lm_ids"],
                         features["masked_lm_weights"])[0]
    if not next_sentence:
        return mlm, {{"masked_lm_loss": mlm}}
    nsp = classification_loss(outputs["next_sentence_logits"], features["next_sentence_labels"])[0]
    return mlm + nsp, {{"masked_lm_loss": mlm}}

def mlm_only(model, features, training):
    return loss_fn(model, features, training, next_sentence=False)

# (name, loss, gradient accumulation steps); 2 steps each, the first at the warm-up's rate 0.
CASES = [("both heads, 2 micro-batches", loss_fn, 2), ("masked LM alone", mlm_only, 1)]
STEPS = 2

def optimizer():
    return create_optimizer("adamw", 1e-3, 10, 1)
"""

# TensorFlow: the trainer's step from the fixture checkpoint; writes the start and each case's
# losses and trained variables.
TF_SCRIPT = COMMON + """
import tensorflow as tf
from bert_runner.trainer import Trainer
from modeling_helpers import tiny_pretrainer
model = tiny_pretrainer()
start = [v.numpy() for v in model.variables]
out = {{"paths": np.array([v.path for v in model.variables]),
        **{{f"start_{{i}}": value for i, value in enumerate(start)}}}}
for case, (name, loss, accumulation) in enumerate(CASES):
    for variable, value in zip(model.variables, start):
        variable.assign(value)
    trainer = Trainer(tf.distribute.get_strategy(), model, optimizer(), loss, {out_dir!r},
                      global_batch_size=4, gradient_accumulation_steps=accumulation)
    batch = {{n: tf.constant(v) for n, v in FEATURES.items()}}
    out[f"losses_{{case}}"] = np.array([float(trainer._step(batch)["loss"]) for _ in range(STEPS)])
    for i, variable in enumerate(model.trainable_variables):
        out[f"trained_{{case}}_{{i}}"] = variable.numpy()
np.savez({npz!r}, **out)
"""

# JAX, TensorFlow blocked: the engine's steps from the same values; prints the largest
# differences from TensorFlow's losses and trained variables.
JAX_SCRIPT = BLOCK_TENSORFLOW + COMMON + """
assert keras.backend.backend() == "jax"
from bert_runner.engines.jax_step import JaxStep
from modeling import BertPretrainer
from modeling_helpers import tiny_config
tf_run = np.load({npz!r})
model = BertPretrainer(tiny_config())
assert [v.path for v in model.variables] == list(tf_run["paths"])
for case, (name, loss, accumulation) in enumerate(CASES):
    for i, variable in enumerate(model.variables):
        variable.assign(tf_run[f"start_{{i}}"])
    engine = JaxStep(model, optimizer(), loss, accumulation=accumulation)
    state, losses = engine.initial_state(), []
    for _ in range(STEPS):
        state, metrics = engine(state, engine.place(FEATURES))
        losses.append(float(metrics["loss"]))
    engine.write_back(state)
    loss_gap = float(np.max(np.abs(np.array(losses) - tf_run[f"losses_{{case}}"])))
    weight_gap = max(float(np.max(np.abs(v.numpy() - tf_run[f"trained_{{case}}_{{i}}"])))
                     for i, v in enumerate(model.trainable_variables))
    moved = max(float(np.max(np.abs(v.numpy() - tf_run[f"start_{{i}}"])))
                for i, v in enumerate(model.variables) if v.trainable)
    print(name, loss_gap, weight_gap, moved)
assert not any(m == "tensorflow" or m.startswith("tensorflow.") for m in sys.modules)
"""

# Two steps of a fresh model with TensorFlow blocked (`{{distribution}}`: over several devices,
# or not; `{{accumulation}}` micro-batches): the loss is finite and changes. Prints the losses,
# how many all-gathers the compiled step holds, and the shape of a device's part of a batch the
# DeviceFeed placed from its own thread.
NO_TENSORFLOW_SCRIPT = BLOCK_TENSORFLOW + """
import sys
import numpy as np
sys.path.insert(0, {root!r})
import keras
from bert_runner.engines.jax_step import JaxStep, data_parallel
from modeling import BertPretrainer, classification_loss, masked_lm_loss
from modeling.optimization import create_optimizer

def loss_fn(model, features, training):
    outputs = model(features, training=training)
    mlm = masked_lm_loss(outputs["masked_lm_logits"], features["masked_lm_ids"],
                         features["masked_lm_weights"])[0]
    nsp = classification_loss(outputs["next_sentence_logits"], features["next_sentence_labels"])[0]
    return mlm + nsp, {{}}

rng = np.random.default_rng(0)
batch = dict(input_ids=rng.integers(0, 50, (4, 8)), input_mask=np.ones((4, 8), "int32"),
             segment_ids=np.zeros((4, 8), "int32"),
             masked_lm_positions=np.array([[1, 2], [3, 4], [5, 6], [2, 7]]),
             masked_lm_ids=rng.integers(0, 50, (4, 2)),
             masked_lm_weights=np.ones((4, 2), "float32"),
             next_sentence_labels=np.array([0, 1, 1, 0]))
if {distribution}:
    keras.distribution.set_distribution(data_parallel())
keras.utils.set_random_seed(0)
model = BertPretrainer(dict(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=32,
                            max_position_embeddings=16))
engine = JaxStep(model, create_optimizer("adamw", 1e-2, 10, 0), loss_fn,
                 accumulation={accumulation})
state, losses = engine.initial_state(), []
for _ in range(2):
    state, metrics = engine(state, engine.place(batch))
    losses.append(float(metrics["loss"]))
assert np.all(np.isfinite(losses)) and losses[0] != losses[1], losses
assert not any(m == "tensorflow" or m.startswith("tensorflow.") for m in sys.modules)
compiled = engine._step.lower(state, engine.place(batch)).compile().as_text()
from bert_runner.engines.device_feed import DeviceFeed
with DeviceFeed(lambda: batch, engine.place) as feed:
    feed.allow_through(1)
    fed = feed.next()["input_ids"]
print(*losses, compiled.count("all-gather"),
      "x".join(map(str, fed.addressable_shards[0].data.shape)))
"""


def _run(script, backend, **variables):
    """Runs `script` (python -c) under `backend`; under JAX in a fresh process (BERT_TESTS_FORK=0:
    the scripts the tests fork have imported TensorFlow, which these block)."""
    env = {**os.environ, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu",
           "TF_CPP_MIN_LOG_LEVEL": "2", **variables}
    if backend == "jax":
        env["BERT_TESTS_FORK"] = "0"
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.parametrize("accumulation", [1, 2])
def test_the_step_runs_without_tensorflow_on_one_device_or_several(accumulation):
    """Two steps with TensorFlow blocked; the batch split over two devices gives the same
    losses, with micro-batches too, and the compiled step gathers no batch: each micro-batch is
    split over both devices, as the batch is, by the DeviceFeed's thread too (4 rows, 8
    positions)."""
    one, two = (_run(NO_TENSORFLOW_SCRIPT.format(
        root=str(ROOT), distribution=devices > 1, accumulation=accumulation), "jax",
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}").split()
        for devices in (1, 2))
    assert [float(x) for x in two[:2]] == pytest.approx([float(x) for x in one[:2]], abs=1e-5)
    assert two[2] == "0"
    assert (one[3], two[3]) == (("4x8", "2x8") if accumulation == 1 else ("2x2x8", "2x1x8"))


def test_the_step_is_the_tensorflow_trainers(tmp_path):
    values = dict(root=str(ROOT), tests=str(ROOT / "tests"), npz=str(tmp_path / "tf.npz"),
                  out_dir=str(tmp_path / "tf_run"))
    _run(TF_SCRIPT.format(**values), "tensorflow")
    lines = _run(JAX_SCRIPT.format(**values), "jax").strip().splitlines()
    assert len(lines) == 2, lines
    for line in lines:
        *name, loss_gap, weight_gap, moved = line.split()
        assert float(loss_gap) < 1e-5 and float(weight_gap) < 1e-5, line
        assert float(moved) > 1e-4, line  # the steps trained
