"""The trainer under Keras' JAX backend: `bert_runner.trainer.Trainer`'s loop, checkpoints, logs
and history, with `JaxStep` as its step engine.

The input stays `tf.data` on the host (its iterator is checkpointed as on TensorFlow); its
batches, as numpy arrays, are placed on the devices ahead of the step by a `DeviceFeed`, which
never reads past the next checkpoint's step. The step's metrics are read back once per loop
call (a logged line). Checkpoints are TensorFlow's, with the keys the
TensorFlow trainer writes (`model/by_path/...`, `optimizer/_iterations`, `_variables/<i>`,
`_trainable_variables/<i>`, `iterator`): the values are copied into TensorFlow variables of
the dtypes TensorFlow's Keras gives them before a save and back after a restore, so a run
written under one backend is read, resumed and exported under the other.
"""
import contextlib
import dataclasses
import functools
import os
import sys

import jax
import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_runner.engines import jax_processes
from bert_runner.engines.device_feed import DeviceFeed
from bert_runner.engines.jax_step import JaxStep, shard_batch
from bert_runner.trainer import Trainer, without_autotuning_thread
from modeling.checkpoint import ModelVariables


def check_supported(run):
    """Refuses, in one line naming the flag, what a run under JAX cannot do yet. `--jit_compile`
    is accepted: the JAX step is always compiled, on the static shapes it asks for."""
    refused = [
        (run.use_tpu, "--use_tpu", "tf.distribute's TPU strategy is TensorFlow's; JAX runs on "
                                   "TPUs with its own wheel, over every device of every host"),
        (run.distribution_strategy != "default",
         f"--distribution_strategy={run.distribution_strategy}", "a tf.distribute strategy"),
        (run.mixed_precision == "fp16", "--mixed_precision=fp16", "loss scaling; bf16 runs"),
    ]
    for wanted, flag, why in refused:
        if wanted:
            raise ValueError(f"{flag} is not supported under KERAS_BACKEND=jax ({why}): leave "
                             "it out, or run under TensorFlow")


# RunConfig fields that are each process's own: they may differ between the processes of a run.
PROCESS_OWN = ("compilation_cache_dir",)
# XLA's flag for deterministic GPU ops (scatters, reductions and cuDNN's algorithms chosen to be
# reproducible); XLA's CPU and TPU programs are deterministic without one.
DETERMINISTIC_GPU_OPS = "--xla_gpu_deterministic_ops=true"


def start(run):
    """What a run under JAX sets before JAX computes anything: `--deterministic`'s XLA flag, the
    compilation cache, then this process joined to the launch's others (`jax_processes`)."""
    if run.deterministic:
        use_deterministic_ops()
    use_compilation_cache(run.compilation_cache_dir)
    jax_processes.start()


def check_agreed(run, identity, task, seeds):
    """Every process of the run was told the same run, or each stops in one line
    (`jax_processes.check_agreed`): `run`'s settings but `PROCESS_OWN`, its `identity`, the
    `task`'s own settings (its plain attributes: max_eval_steps and the like, which decide how
    many steps each process runs) and the `seeds` of a sweep."""
    settings = {name: value for name, value in dataclasses.asdict(run).items()
                if name not in PROCESS_OWN}
    own = {name: value for name, value in vars(task).items()
           if isinstance(value, (bool, int, float, str, type(None)))}
    jax_processes.check_agreed("run", {"flags": settings, "identity": identity, "task": own,
                                       "seeds": list(seeds or ())})


def use_deterministic_ops():
    """XLA's deterministic GPU ops (`DETERMINISTIC_GPU_OPS` in XLA_FLAGS), read when JAX starts
    its backends; ValueError naming --deterministic where a GPU backend started without it."""
    flags = os.environ.get("XLA_FLAGS", "")
    if DETERMINISTIC_GPU_OPS in flags.split():
        return
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized() and jax.default_backend() == "gpu":
        raise ValueError(f"--deterministic: JAX's GPU backend started before the flag could set "
                         f"XLA_FLAGS={DETERMINISTIC_GPU_OPS}; set it in the environment")
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [flags, DETERMINISTIC_GPU_OPS]))


def use_compilation_cache(path):
    """JAX's persistent compilation cache in `path` (None or empty: none), for the programs this
    process compiles from now on."""
    if path and jax.config.jax_compilation_cache_dir != path:
        jax.config.update("jax_compilation_cache_dir", path)


def _tf_dtype(variable):
    """The dtype TensorFlow's Keras keeps `variable` in: its own for floats, int64 for the
    integers (the step counter, the dropout generators' states), which JAX keeps in 32 bits."""
    dtype = tf.as_dtype(keras.backend.standardize_dtype(variable.dtype))
    return dtype if dtype.is_floating else tf.int64


def _mirror(variable):
    return tf.Variable(np.asarray(variable.value), dtype=_tf_dtype(variable), trainable=False)


class _OptimizerVariables(tf.__internal__.tracking.AutoTrackable):
    """The TensorFlow-side copy of a Keras optimizer's variables, in its object graph: the step
    counter, every slot (`_variables`, the counter first) and the trained variables' values
    (`_trainable_variables`, as Keras' TensorFlow optimizer tracks them)."""

    def __init__(self, optimizer):
        variables = [_mirror(v) for v in optimizer.variables]
        self._iterations = variables[0]
        self._variables = variables
        self._trainable_variables = [_mirror(v) for v in optimizer._trainable_variables]

    @property
    def iterations(self):
        return self._iterations


class JaxTrainer(Trainer):
    """`Trainer` with `JaxStep`, data-parallel over every device of every process (the
    distribution `driver.new_model` sets; `check_supported` refuses tf.distribute's). `strategy`
    is TensorFlow's default one, for the input pipeline's context.

    Several processes (`jax_processes`) read the same global batches (the same masks and order
    as one process) and place the rows of their own devices; every process restores from
    output_dir, process 0 (the chief) alone writes checkpoints and summaries."""

    def devices(self):
        """The devices of the data-parallel `keras.distribution` (1 without one)."""
        distribution = keras.distribution.distribution()
        return 1 if distribution is None else distribution.device_mesh.devices.size

    def _init_step(self):
        if self.strategy.num_replicas_in_sync != 1:
            raise ValueError("Under KERAS_BACKEND=jax the run takes TensorFlow's default strategy "
                             "(leave --distribution_strategy out)")
        self.engine = JaxStep(self.model, self.optimizer, self.loss_fn, clip_norm=self.clip_norm,
                              accumulation=self.accumulation)
        self._predict_functions = {}  # {predict_step: its jitted function}, see `predict`
        self._checkpointed = None
        self._feed = None  # the training input's `DeviceFeed`, while `train` runs
        self._fed_from = None  # the step it started at
        self._stepped = False  # whether the step has run (compiled) yet

    # ---- steps -----------------------------------------------------------------------------

    def _input_iterator(self, dataset_fn):
        return iter(without_autotuning_thread(dataset_fn)(tf.distribute.InputContext()))

    def train(self, dataset_fn, num_train_steps, *args, **kwargs):
        try:
            return super().train(dataset_fn, num_train_steps, *args, **kwargs)
        finally:
            if self._feed is not None:
                self._feed.close()
                self._feed = None

    def _run_loop(self, iterator, steps, next_save):
        """`steps` steps of the engine on the iterator's next batches, placed ahead by the feed
        (which may read up to `next_save`); the model's and the optimizer's Keras variables
        hold the values after them (for the logs, a save, an evaluation). Returns the last
        step's metrics as floats."""
        if self._feed is None:
            self._feed = DeviceFeed(lambda: _arrays(next(iterator)), self.engine.place)
            self._fed_from = self.step
        self._feed.allow_through(next_save - self._fed_from)
        compiling, self._stepped = not self._stepped, True
        with _compilation_cache_events() as events:
            state = self.engine.initial_state()
            for _ in range(steps):
                state, metrics = self.engine(state, self._feed.next())
            metrics = {name: float(value) for name, value in metrics.items()}
        self.engine.write_back(state)
        if compiling and events["hits"] and not events["misses"]:
            logging.info("The step came from the compilation cache")
        elif compiling:
            logging.info("The step was compiled%s",
                         " (not in the compilation cache)" if events["misses"] else "")
        return metrics

    @contextlib.contextmanager
    def _profiler(self, logdir):
        """JAX's profiler over the block: its trace under `logdir` (TensorBoard's profile tab)
        and a Perfetto trace beside it."""
        with jax.profiler.trace(logdir, create_perfetto_trace=True):
            yield

    # ---- checkpoints -----------------------------------------------------------------------

    def _checkpoint_dir(self):
        return self.output_dir

    def _restored(self, path):
        # Each process restored on its own: from one shared output_dir, the same checkpoint.
        jax_processes.check_agreed(
            "start", {"checkpoint": os.path.basename(path or ""), "step": self.step},
            differs="restored another checkpoint",
            remedy=f"--output_dir={self.output_dir} must be one folder every process reads "
                   "(NFS, gs://)")

    def _saving_dir(self):
        return self.output_dir if self.chief else None

    def _checkpoint_objects(self):
        if self._checkpointed is None:
            model = self.model
            self._checkpointed = {
                "model": ModelVariables({v.path: _mirror(v) for v in model.variables}),
                "optimizer": _OptimizerVariables(self.optimizer)}
        return self._checkpointed

    def _pairs(self):
        """(Keras variable, its TensorFlow copy) of everything a checkpoint restores."""
        objects = self._checkpoint_objects()
        by_path = objects["model"].by_path
        return ([(v, by_path[v.path]) for v in self.model.variables]
                + list(zip(self.optimizer.variables, objects["optimizer"]._variables)))

    def _restore(self, manager, path, partial):
        super()._restore(manager, path, partial)
        for variable, copy in self._pairs():
            variable.assign(np.asarray(copy.numpy()).astype(variable.dtype))

    def _save(self, manager):
        if not self.chief:
            return None
        for variable, copy in self._pairs():
            copy.assign(np.asarray(variable.value).astype(copy.dtype.as_numpy_dtype))
        trained = self._checkpoint_objects()["optimizer"]._trainable_variables
        for variable, copy in zip(self.optimizer._trainable_variables, trained):
            copy.assign(np.asarray(variable.value))
        return super()._save(manager)

    # ---- prediction ------------------------------------------------------------------------

    def predict(self, dataset_fn, predict_step):
        """Yields `{name: np.ndarray}` per batch from `predict_step(model, features)`, jitted.
        The non-trainable variables' updates (the random generators' states: ELECTRA's
        sampling) are kept after each batch, as TensorFlow's variables keep them."""
        model = self.model
        run = self._predict_functions.get(predict_step)
        if run is None:

            def stateless(values, features):
                with keras.StatelessScope(
                        state_mapping=list(zip(model.variables, values))) as scope:
                    outputs = predict_step(model, features)
                return outputs, [scope.get_current_value(v) for v in
                                 model.non_trainable_variables]

            run = self._predict_functions[predict_step] = jax.jit(stateless)
        batches = self._input_iterator(dataset_fn)
        place = functools.partial(shard_batch, distribution=self.engine.distribution)
        with DeviceFeed(lambda: _arrays(next(batches)), place) as feed:
            feed.allow_through(sys.maxsize)
            while True:
                try:
                    features = feed.next()
                except StopIteration:
                    return
                outputs, updated = run([v.value for v in model.variables], features)
                for variable, value in zip(model.non_trainable_variables, updated):
                    variable.assign(value)
                yield {name: _on_host(value) for name, value in outputs.items()}


_CACHE_EVENTS = {"/jax/compilation_cache/cache_hits": "hits",
                 "/jax/compilation_cache/cache_misses": "misses"}
_event_counts = None  # {"hits": n, "misses": n} since the listener was registered


@contextlib.contextmanager
def _compilation_cache_events():
    """`{"hits": n, "misses": n}`: the persistent compilation cache's lookups in the block."""
    global _event_counts
    if _event_counts is None:
        _event_counts = {"hits": 0, "misses": 0}

        def count(event, **_):
            if event in _CACHE_EVENTS:
                _event_counts[_CACHE_EVENTS[event]] += 1

        jax.monitoring.register_event_listener(count)
    before = dict(_event_counts)
    seen = {}
    yield seen
    seen.update({name: _event_counts[name] - before[name] for name in before})


def _on_host(value):
    """A step's output as one numpy array on every process: rows that other processes' devices
    hold are gathered from them."""
    if value.is_fully_addressable:
        return np.asarray(value)
    if value.is_fully_replicated:
        return np.asarray(value.addressable_data(0))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(value, tiled=True))


def _arrays(batch):
    """A `tf.data` batch (`{name: tf.Tensor}`) as numpy arrays, for the JAX step."""
    return {name: value.numpy() for name, value in batch.items()}
