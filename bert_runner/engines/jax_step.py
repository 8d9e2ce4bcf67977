"""One training step under Keras 3's JAX backend, compiled with `jax.jit`: the step
`bert_runner.trainer` takes on TensorFlow, written over Keras' stateless API.

    engine = JaxStep(model, optimizer, loss_fn)
    state = engine.initial_state()
    for features in batches:                      # {name: np.ndarray}, one global batch each
        state, metrics = engine(state, engine.place(features))  # the loss_fn's, "loss", "grad_norm"
    engine.write_back(state)                      # the model's and optimizer's variables

The step, as the TensorFlow trainer's:
  1. loss and gradients of the batch (`loss_fn(model, features, training=True)` run inside a
     `keras.StatelessScope`, as `model.stateless_call` runs `call`), optionally as
     `accumulation` equal micro-batches (a `jax.lax.scan`) whose losses, metrics and gradients
     are summed and divided by their count: `place` lays the batch out as [k, batch / k, ...]
     on the host, split over the devices along its second axis, so that micro-batch i holds
     the rows a single device's would and every device computes a part of each;
  2. variables the loss does not reach (the pooler under a span head) are left out, as the
     TensorFlow trainer leaves out those whose gradient is None: no update, no weight decay;
  3. the gradients clipped by their global norm (`clip_norm`), as `tf.clip_by_global_norm`
     computes it, after aggregation (under `keras.distribution.DataParallel` the batch is sharded
     over the devices and the gradient is already the global batch's);
  4. applied by the project's optimizer (`modeling.optimization`) at the schedule's rate for
     the step, the clipping's scale inside each variable's update (`apply_at`).

The state (the trainable and non-trainable variables' values, the dropout generators' seeds
among them, and the optimizer's) is the engine's own between steps: a step's input buffers are
donated to its outputs, and the model's Keras variables keep their values from before the first
step until `write_back`.
"""
import functools
from typing import NamedTuple

import jax
import jax.extend.core
import keras
import numpy as np
from keras import ops

from modeling.optimization import DecoupledDecayOptimizer, clip_scale


class State(NamedTuple):
    """The values a step reads and writes: `trainable`, `non_trainable` (the model's, in the order
    of its `trainable_variables`, `non_trainable_variables`) and `optimizer` (its `variables`)."""

    trainable: list
    non_trainable: list
    optimizer: list


class JaxStep:
    """A compiled training step of `model` with `optimizer` (a `DecoupledDecayOptimizer`:
    `modeling.optimization.create_optimizer`'s), built on its first call.

    Args:
        model: a built Keras model, made under the distribution the step runs in
            (`data_parallel()`, or none).
        optimizer: `modeling.optimization.DecoupledDecayOptimizer`; built here for the model's
            trainable variables if it is not yet, as the TensorFlow trainer does.
        loss_fn: `(model, features, training) -> (loss, {name: scalar metric})` in `keras.ops`:
            the TensorFlow trainer's, for the global batch.
        clip_norm: the global gradient norm clipped to (the original's 1.0).
        accumulation: micro-batches per step (the batch's first axis divides by it).
    """

    def __init__(self, model, optimizer, loss_fn, clip_norm=1.0, accumulation=1):
        if keras.backend.backend() != "jax":
            raise ValueError("JaxStep needs Keras' JAX backend (KERAS_BACKEND=jax), not "
                             f"{keras.backend.backend()}")
        if not isinstance(optimizer, DecoupledDecayOptimizer):
            raise ValueError(f"JaxStep applies a DecoupledDecayOptimizer (the project's AdamW or "
                             f"LAMB), not {type(optimizer).__name__}")
        self.model = model
        self.optimizer = optimizer
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
        self.loss_fn = loss_fn
        self.clip_norm = clip_norm
        self.accumulation = accumulation
        # Keras keeps the distribution per thread: `place` runs on the input's thread too.
        self.distribution = keras.distribution.distribution()
        self._reached = None  # which trainable variables the loss reaches, found on the first call
        self._step = jax.jit(self._step_fn, donate_argnums=0)

    def initial_state(self):
        """Copies of the variables' current values (the step donates its state's buffers)."""
        return State(*([_copy(v.value) for v in variables] for variables in self._variables()))

    def write_back(self, state):
        """Assigns copies of `state`'s values to the model's and the optimizer's variables (for
        a checkpoint; `state` stays the engine's, to be donated by the next step)."""
        for variables, values in zip(self._variables(), state):
            for variable, value in zip(variables, values):
                variable.assign(_copy(value))

    def _variables(self):
        """The Keras variables of `State`'s fields, in its order."""
        return (self.model.trainable_variables, self.model.non_trainable_variables,
                self.optimizer.variables)

    def place(self, features):
        """`features` (`{name: np.ndarray}`, the global batch, the same on every process) as the
        step takes them: as [accumulation, batch / accumulation, ...], on the devices
        (`shard_batch`; split along the batch axis)."""
        k = self.accumulation
        if k == 1:
            return shard_batch(features, self.distribution)
        return shard_batch({name: value.reshape(k, -1, *value.shape[1:])
                            for name, value in features.items()}, self.distribution, batch_axis=1)

    def __call__(self, state, features):
        """One step: `(state after it, {metric: scalar}` with `"loss"` and `"grad_norm"`)`.
        `features`: the global batch as `place` gives it."""
        if self._reached is None:
            # Traced on a micro-batch's shapes: what the loss sees.
            first = 1 if self.accumulation > 1 else 0
            self._reached = reached_variables(self._loss, state, {
                name: jax.ShapeDtypeStruct(value.shape[first:], value.dtype)
                for name, value in features.items()})
        return self._step(state, features)

    # ---- the step --------------------------------------------------------------------------

    def _loss(self, trainable, non_trainable, features):
        """`(loss, (metrics, non_trainable after the call))` of `loss_fn` on the given values."""
        model = self.model
        mapping = list(zip(model.trainable_variables, trainable)) + list(
            zip(model.non_trainable_variables, non_trainable))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            loss, metrics = self.loss_fn(model, features, training=True)
        return loss, (metrics, [scope.get_current_value(v) for v in
                                model.non_trainable_variables])

    def _loss_and_grads(self, trainable, non_trainable, features):
        grad_fn = jax.value_and_grad(self._loss, has_aux=True)
        k = self.accumulation
        if k == 1:
            (loss, (metrics, non_trainable)), grads = grad_fn(trainable, non_trainable, features)
            return loss, metrics, non_trainable, grads

        def micro_step(carry, micro):
            non_trainable, loss, metrics, grads = carry
            (l, (m, non_trainable)), g = grad_fn(trainable, non_trainable, micro)
            return (non_trainable, loss + l, jax.tree.map(ops.add, metrics, m),
                    jax.tree.map(ops.add, grads, g)), None

        micro_batches = features  # [k, batch / k, ...] (`place`)
        first = {name: v[0] for name, v in micro_batches.items()}
        shapes = jax.eval_shape(grad_fn, trainable, non_trainable, first)
        (_, (metric_shapes, _)), grad_shapes = shapes
        zeros = functools.partial(jax.tree.map, lambda s: ops.zeros(s.shape, s.dtype))
        carry = (non_trainable, ops.zeros((), "float32"), zeros(metric_shapes), zeros(grad_shapes))
        (non_trainable, loss, metrics, grads), _ = jax.lax.scan(micro_step, carry, micro_batches)
        return (loss / k, jax.tree.map(lambda m: m / k, metrics), non_trainable,
                jax.tree.map(lambda g: g / k, grads))

    def _step_fn(self, state, features):
        loss, metrics, non_trainable, grads = self._loss_and_grads(
            state.trainable, state.non_trainable, features)
        model, optimizer = self.model, self.optimizer
        reached = [i for i, r in enumerate(self._reached) if r]
        gradients = [grads[i] for i in reached]
        norm = global_norm(gradients)
        mapping = list(zip(model.trainable_variables, state.trainable)) + list(
            zip(optimizer.variables, state.optimizer))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            # The schedule at this step's `iterations`, as the TensorFlow trainer reads it.
            learning_rate = ops.cast(optimizer.learning_rate, "float32")
            optimizer.apply_at(gradients, [model.trainable_variables[i] for i in reached],
                               learning_rate, gradient_scale=clip_scale(norm, self.clip_norm))
        new_state = State([scope.get_current_value(v) for v in model.trainable_variables],
                          non_trainable,
                          [scope.get_current_value(v) for v in optimizer.variables])
        return new_state, {**metrics, "loss": loss, "grad_norm": norm}


def _copy(array):
    return jax.numpy.array(array, copy=True)


def global_norm(tensors):
    """`tf.linalg.global_norm`'s arithmetic: `sqrt(2 Σ_t Σ t² / 2)`, float32."""
    halves = [ops.sum(ops.square(ops.cast(t, "float32"))) / 2.0 for t in tensors]
    return ops.sqrt(ops.sum(ops.stack(halves)) * 2.0)


def reached_variables(loss, state, features):
    """Whether each trainable variable's value reaches `loss(trainable, non_trainable, features)`'s
    first output: a backward walk over the function's jaxpr (traced on shapes alone). An equation
    whose output is used counts every input as used: conservative inside nested functions."""
    closed = jax.make_jaxpr(lambda t, n, f: loss(t, n, f)[0])(
        state.trainable, state.non_trainable, features)
    jaxpr = closed.jaxpr
    used = {v for v in jaxpr.outvars if isinstance(v, jax.extend.core.Var)}
    for eqn in reversed(jaxpr.eqns):
        if any(v in used for v in eqn.outvars) or eqn.effects:
            used.update(v for v in eqn.invars if isinstance(v, jax.extend.core.Var))
    trainable_vars = jaxpr.invars[:len(state.trainable)]
    return [v in used for v in trainable_vars]


def data_parallel():
    """`keras.distribution.DataParallel` over every device of every process
    (`jax_processes.start` first) where there are several (set it with
    `keras.distribution.set_distribution` before building the model), else None."""
    devices = jax.devices()
    if len(devices) < 2:
        return None
    return keras.distribution.DataParallel(devices=devices)


def shard_batch(features, distribution, batch_axis=0):
    """`features` (`{name: np.ndarray}`, the same on every process) placed for the step: under
    `distribution` (a `keras.distribution.DataParallel`; Keras' own is the calling thread's),
    split along `batch_axis` over its devices, or whole on each where that axis does not divide
    by their number (a last partial batch), each process placing the rows of its own devices
    alone; without one (None), on the default device."""
    if distribution is None:
        return jax.device_put(features)
    mesh = distribution.device_mesh
    split = jax.sharding.PartitionSpec(*[None] * batch_axis, distribution.batch_dim_name)
    placed = {}
    for name, value in features.items():
        value = np.asarray(value)
        spec = (jax.sharding.PartitionSpec() if value.shape[batch_axis] % mesh.devices.size
                else split)
        placed[name] = jax.make_array_from_callback(
            value.shape, jax.sharding.NamedSharding(mesh.backend_mesh, spec),
            lambda index, value=value: value[index])
    return placed
