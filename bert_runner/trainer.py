"""Training, evaluation and prediction loops shared by the scripts, for any `tf.distribute` strategy.

The loop (checkpoint cadence, resume, logs, history) is written once in `Trainer`; its step
engine is the backend's: TensorFlow's below (`_init_step`, `_train_loop`, `predict`), JAX's in
`bert_runner.engines.jax_trainer` (`JaxStep`, the same arithmetic under `jax.jit`).

One training step, per replica:
  1. loss and gradients of the replica's batch (optionally as `gradient_accumulation_steps`
     micro-batches whose gradients are averaged; optionally XLA-compiled; fp16 loss-scaled);
  2. gradients summed over replicas (each replica's loss is divided by the replica count, so the
     sum is the gradient of the global-batch mean), densified;
  3. clipped by their global norm (1.0), as the original `create_optimizer` — after aggregation,
     so the clip sees the gradient that is applied (Keras alone would clip each replica's part);
  4. applied by the Keras optimizer, which sums over replicas once more: it is given the clipped
     gradient divided by the replica count (exact for power-of-two counts). This costs a second
     all-reduce; avoiding it needs a hook Keras does not expose publicly.
Up to `iterations_per_loop` steps run inside one `tf.function` call, as the original's TPU loop;
a call also ends where a progress line (`log_steps`) or a checkpoint is due.
"""
import collections
import contextlib
import glob
import os
import shutil
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from modeling.checkpoint import ModelVariables
from bert_runner.distribution import is_chief
from modeling.optimization import DecoupledDecayOptimizer, clip_scale


def without_autotuning_thread(dataset_fn):
    """`dataset_fn` (`tf.distribute.InputContext -> tf.data.Dataset`) with tf.data's autotuning
    model thread off; AUTOTUNE parallelism and prefetching keep tf.data's defaults (up to 16
    parallel calls, a prefetch buffer that grows as needed), ample for decoding records.

    Deleting an iterator waits for its model thread, which sleeps up to a minute between
    optimizations. TensorFlow wakes it on cancellation before it marks the cancellation done,
    so the thread can miss the wake-up and sleep out its period: the end of a training run, an
    evaluation or a prediction pass, on either backend, stalled, idle, for that long.
    """
    options = tf.data.Options()
    options.autotune.enabled = False

    def with_options(context):
        return dataset_fn(context).with_options(options)

    return with_options


def restore_newest_readable(manager, restore):
    """Restores the newest checkpoint of `manager` that reads, falling back to older ones.

    A checkpoint can be unreadable although the `checkpoint` file lists it: its `.data` file
    truncated (a full disk, a copy cut short) or corrupt, or its files deleted. Each such one is
    skipped with a warning, and the run resumes from the newest readable one, so only the steps
    after it are trained again. Restoring the older checkpoint assigns every variable again,
    so nothing of the failed attempt remains.

    Args:
      manager: a `tf.train.CheckpointManager`.
      restore: `path -> None`, restores one checkpoint (raises if it cannot be read).
    Returns:
      the path restored, or None when `manager` has no checkpoint.
    Raises:
      ValueError naming every checkpoint when none of them reads.
    """
    unreadable = []
    for path in reversed(manager.checkpoints):
        try:
            restore(path)
        except (IndexError, tf.errors.OpError) as e:  # truncation raises IndexError
            message = (str(e).strip().splitlines() or [""])[0]
            logging.warning("Checkpoint %s is unreadable (truncated or corrupt data file?): %s: %s",
                            path, type(e).__name__, message)
            unreadable.append(path)
            continue
        if unreadable:
            logging.warning("Resuming from %s, the newest readable checkpoint, instead of %s",
                            path, ", ".join(unreadable))
        return path
    if unreadable:
        raise ValueError(
            "No checkpoint in %s can be read (%s): move them away to start again from "
            "--init_checkpoint or from scratch" % (manager.directory, ", ".join(unreadable)))
    return None


# What TensorFlow says when a checkpoint's input position was saved by another dataset graph.
INPUT_PIPELINE_CHANGED = "Failed to restore dataset iterator"


class LoopRecord(collections.namedtuple("LoopRecord", ["step", "metrics", "seconds"])):
    """One loop call (up to `iterations_per_loop` steps): the step reached, its last step's
    metrics, and the wall time of the call alone (no checkpoint save or restore)."""


def _scalar_metadata():
    from tensorflow.core.framework import summary_pb2

    metadata = summary_pb2.SummaryMetadata()
    metadata.plugin_data.plugin_name = "scalars"
    return metadata.SerializeToString()


def write_scalar_summary(name, value):
    """A TensorBoard scalar, written with core TF only (`tf.summary.scalar` needs the
    `tensorboard` package, which TF 2.21 no longer installs)."""
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=_scalar_metadata())


def eta_seconds(num_train_steps, step, now, since):
    """Seconds left to reach `num_train_steps` from `step` at time `now`, at the pace kept since
    `since`, a (step, time) pair: the start of training for the first loop call's line, then the
    end of that call, whose time also went into tracing and compiling the step (seconds to
    minutes that the later calls do not take again)."""
    since_step, since_time = since
    return (num_train_steps - step) * (now - since_time) / max(step - since_step, 1)


def remove_unfinished_saves(directory):
    """Removes the `ckpt-<N>_temp` folders in `directory`: TensorFlow writes a checkpoint's
    shards there and moves them to `ckpt-<N>.*` when the save completes, so one that is left
    holds a save that never finished (as large as a checkpoint). Returns the folders removed."""
    removed = []
    for path in sorted(tf.io.gfile.glob(os.path.join(glob.escape(directory), "ckpt-*_temp"))):
        if tf.io.gfile.isdir(path):
            tf.io.gfile.rmtree(path)
            removed.append(path)
    return removed


def _zeros(value):
    """Zeros of the shape and dtype of `value` (a tensor of another trace, whose values are out
    of reach)."""
    return tf.zeros(value.shape, value.dtype)


class Trainer:
    """Runs `loss_fn` on `model` with `optimizer`, checkpointing to `output_dir`.

    Args:
        strategy: the `tf.distribute` strategy the model and optimizer were built under.
        model: a Keras model (built). optimizer: a Keras optimizer, or a
            `keras.optimizers.LossScaleOptimizer` for fp16.
        loss_fn: `(model, features, training) -> (loss, {name: scalar metric})`, per replica.
        output_dir: checkpoints (`ckpt-<step>`), TensorBoard summaries (`train/`).
        global_batch_size: examples per step over all replicas (for throughput logs); rows,
            when the training records are packed (`train`'s `examples_per_row`).
        flops_per_example: training model FLOPs per example, for the utilisation estimate.
        peak_tflops: peak TFLOP/s of one device; with it, model-FLOPs utilisation is logged.
        log_steps: a progress line (loss, steps/s, examples/s, tokens/s, MFU) every this many
            steps, besides the end of each `steps_per_loop` call; None: at those ends alone.
        tokens_per_example: positions of the padded grid an example fills
            (`Task.tokens_per_example`), for tokens/s.
        profile_steps: after the first loop call (which compiles the step), up to this many
            steps (to the next log or save) under the backend's profiler, written to
            `output_dir/train` (TensorBoard's profile tab); 0: none.
    """

    def __init__(
        self,
        strategy,
        model,
        optimizer,
        loss_fn,
        output_dir,
        global_batch_size,
        save_checkpoints_steps=1000,
        steps_per_loop=1000,
        keep_checkpoint_max=5,
        gradient_accumulation_steps=1,
        jit_compile=False,
        clip_norm=1.0,
        flops_per_example=None,
        peak_tflops=None,
        log_steps=None,
        tokens_per_example=None,
        profile_steps=0,
    ):
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.output_dir = output_dir
        self.global_batch_size = global_batch_size
        if save_checkpoints_steps < 1:
            # Each loop call runs up to the next save: it would run no step.
            raise ValueError(
                f"save_checkpoints_steps must be at least 1, not {save_checkpoints_steps}")
        self.save_checkpoints_steps = save_checkpoints_steps
        self.steps_per_loop = max(1, steps_per_loop)
        self.keep_checkpoint_max = keep_checkpoint_max
        self.accumulation = gradient_accumulation_steps
        self.clip_norm = clip_norm
        self.flops_per_example = flops_per_example
        self.peak_tflops = peak_tflops
        self.log_steps = log_steps
        self.tokens_per_example = tokens_per_example
        self.profile_steps = profile_steps
        self.jit_compile = jit_compile
        replicas = self.devices()
        if global_batch_size % (replicas * gradient_accumulation_steps):
            raise ValueError(
                f"--train_batch_size: the global batch of {global_batch_size} must divide evenly "
                f"into {replicas} devices x {gradient_accumulation_steps} accumulation steps")
        self.chief = is_chief(strategy)
        # A `LoopRecord` per `iterations_per_loop` call: the last step's metrics and the call's time.
        self.history = []
        self._init_step()

    def devices(self):
        """The devices (replicas) a step's global batch is split over."""
        return self.strategy.num_replicas_in_sync

    def _init_step(self):
        """The step engine: `tf.function`s under `self.strategy` (`engines.jax_trainer` has
        JAX's)."""
        strategy, optimizer = self.strategy, self.optimizer
        self._loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        # Separate functions without autograph (they hold no tensor-dependent Python control
        # flow). When a caller first runs, TensorFlow inlines its calls of functions that XLA
        # does not compile, then optimizes its graph (grappler); so each of these has one call
        # site (`_train_loop`'s loop body; the accumulation loop's), and the loop's graph holds
        # one copy of the model's.
        self._grads = self._compiled(self._loss_and_grads)
        self._step = tf.function(self._replica_step, autograph=False)
        # Clipping and the optimizer update are ~10 elementwise passes over every variable and
        # its two slots: XLA fuses each variable's into one, whatever `jit_compile` says for the
        # model (5 to 10% of a CPU fine-tuning step), compiled per variable shape
        # (`DecoupledDecayOptimizer.apply_at`). Not with several replicas (the optimizer's
        # cross-replica merge) nor with loss scaling (its wrapper's own `apply`).
        self._compiled_update = (strategy.num_replicas_in_sync == 1 and not self._loss_scaled
                                 and isinstance(optimizer, DecoupledDecayOptimizer))
        self._predict_functions = {}  # {predict_step: its tf.function}, see `predict`
        with strategy.scope():
            optimizer.build(self.model.trainable_variables)

    # ---- one step -------------------------------------------------------------------------

    def _compiled(self, replica_fn):
        """`replica_fn` (one replica's work on its batch) as a `tf.function`, XLA-compiled with
        `jit_compile`: the step is compiled per replica, where a TPU or GPU runs it; the loops
        and the cross-replica sums around it stay in TensorFlow. Without autograph: the model
        and the tasks' steps have no tensor-dependent Python control flow, so converting their
        code would only add start-up time."""
        return tf.function(replica_fn, jit_compile=self.jit_compile, autograph=False)

    def _loss_and_grads(self, features):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            loss, metrics = self.loss_fn(self.model, features, training=True)
            scaled = loss / self.strategy.num_replicas_in_sync
            if self._loss_scaled:
                scaled = self.optimizer.scale_loss(scaled)
        grads = [None if g is None else tf.convert_to_tensor(g)
                 for g in tape.gradient(scaled, variables)]
        return loss, metrics, grads

    def _accumulated_loss_and_grads(self, features):
        """Mean loss and gradient over `accumulation` equal micro-batches of `features`, summed
        from zero in their order (as `engines.jax_step`'s scan).

        The micro-batches run one after another in a `tf.while_loop` whose body holds the one
        call of `_grads`: the step's graph (which TensorFlow optimizes, function bodies inlined,
        at the step's first call) does not grow with k, and no micro-batch's activations are
        made before the previous one's are freed, which is what accumulation is for."""
        k = self.accumulation
        if k == 1:
            return self._grads(features)
        # [k, batch / k, ...]: micro-batch i is row i, a slice of static shape wherever the
        # batch's is (XLA, TPUs).
        stacked = {n: tf.reshape(v, tf.concat([[k, -1], tf.shape(v)[1:]], 0))
                   for n, v in features.items()}

        def micro_batch(i):
            return {n: tf.gather(v, i) for n, v in stacked.items()}

        # Which variables the loss reaches (the others' gradients are None), and the outputs'
        # shapes: from `_grads`' trace at a micro-batch's spec, which the loop's body calls.
        loss, metrics, grads = self._grads.get_concrete_function(
            {n: tf.TensorSpec(v.shape[1:], v.dtype) for n, v in stacked.items()}
        ).structured_outputs
        reached = [i for i, g in enumerate(grads) if g is not None]

        def step(i, total, metric_totals, grad_totals):
            l, m, g = self._grads(micro_batch(i))
            return (i + 1, total + l, {n: metric_totals[n] + m[n] for n in metric_totals},
                    [a + g[j] for a, j in zip(grad_totals, reached)])

        _, loss, metrics, summed = tf.while_loop(
            lambda i, *_: i < k, step,
            (tf.constant(0), _zeros(loss), {n: _zeros(m) for n, m in metrics.items()},
             [_zeros(grads[j]) for j in reached]),
            parallel_iterations=1)
        summed = iter(summed)
        return loss / k, {n: v / k for n, v in metrics.items()}, [
            None if g is None else next(summed) / k for g in grads]

    def _replica_step(self, features):
        loss, metrics, grads = self._accumulated_loss_and_grads(features)
        if self.strategy.num_replicas_in_sync > 1:
            reached = [g for g in grads if g is not None]
            summed = iter(tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, reached))
            grads = [None if g is None else next(summed) for g in grads]
        # The schedule is evaluated here, outside the compiled update (see `apply_at`).
        learning_rate = tf.convert_to_tensor(self.optimizer.learning_rate, tf.float32)
        return {**metrics, "loss": loss, "grad_norm": self._clip_and_apply(grads, learning_rate)}

    def _clip_and_apply(self, grads, learning_rate):
        """Clips the summed gradients (one per trainable variable, or None) by their global norm
        and applies them at `learning_rate` (the schedule's value at this step); returns the
        norm."""
        # Variables the loss does not reach (a head's part another head's loss uses) are
        # skipped, as the original optimizer skips them: no update, no weight decay, no slots.
        pairs = [(g, v) for g, v in zip(grads, self.model.trainable_variables) if g is not None]
        # With loss scaling the gradients are scaled too; so is the clipping threshold.
        scale = self.optimizer.dynamic_scale if self._loss_scaled else 1.0
        gradients = [g for g, _ in pairs]
        variables = [v for _, v in pairs]
        norm = tf.linalg.global_norm(gradients)
        if self._compiled_update:
            # The clipping's scale goes into each variable's compiled update (one pass less).
            self.optimizer.apply_at(gradients, variables, learning_rate,
                                    gradient_scale=clip_scale(norm, self.clip_norm * scale),
                                    compiled=True)
            return norm / scale
        clipped, _ = tf.clip_by_global_norm(gradients, self.clip_norm * scale, use_norm=norm)
        replicas = self.strategy.num_replicas_in_sync
        if replicas > 1:
            clipped = [g / replicas for g in clipped]
        if isinstance(self.optimizer, DecoupledDecayOptimizer):
            self.optimizer.apply_at(clipped, variables, learning_rate)
        else:  # any other Keras optimizer (loss scaling's wrapper) evaluates its schedule itself
            self.optimizer.apply(clipped, variables)
        return norm / scale

    def _run_loop(self, iterator, steps, next_save):
        """`steps` training steps on `iterator`'s batches (one loop call); the last step's
        metrics as floats. The steps up to `next_save` (the step of the next checkpoint, or the
        last step) will all read `iterator`: what the input may read ahead to."""
        del next_save  # tf.data's own prefetching is in the iterator's checkpointed state
        return {k: float(v) for k, v in self._train_loop(iterator, tf.constant(steps)).items()}

    @contextlib.contextmanager
    def _profiler(self, logdir):
        """TensorFlow's profiler over the block, its trace written under `logdir`."""
        tf.profiler.experimental.start(logdir)
        try:
            yield
        finally:
            tf.profiler.experimental.stop()

    @tf.function
    def _train_loop(self, iterator, steps):
        """`steps` (>= 1) training steps on batches of `iterator`; the last step's metrics,
        averaged over replicas."""
        metrics = self._no_metrics(iterator.element_spec)
        for _ in tf.range(steps):
            metrics = self.strategy.run(self._step, args=(next(iterator),))
        return {
            name: self.strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None)
            for name, value in metrics.items()
        }

    def _no_metrics(self, batch_spec):
        """Zeros shaped as a step's metrics on each replica, for `batch_spec` (the spec of what
        the iterator gives: one batch per replica): the training loop's initial values, so that
        the step has one call site (a first step before the loop would be a second copy of the
        model's graph, which TensorFlow would optimize too). Shapes and dtypes come from the
        step's trace at that spec, which the loop's call reuses (a TPU's replicated context
        traces each call anew)."""
        step = tf.function(lambda batch: self.strategy.run(self._step, args=(batch,)),
                           autograph=False)
        outputs = step.get_concrete_function(batch_spec).structured_outputs
        # The first replica's output (each replica's are alike; one replica: the output itself).
        first = {name: self.strategy.experimental_local_results(value)[0]
                 for name, value in outputs.items()}
        # Made by `strategy.run`, as the step's outputs are, so that both have one type: per
        # replica values with several replicas, plain tensors with one.
        return self.strategy.run(lambda: {name: _zeros(value) for name, value in first.items()})

    # ---- checkpoints ----------------------------------------------------------------------

    def _checkpoint_dir(self):
        if self.chief:
            return self.output_dir
        # Every worker must take part in saving; only the chief's files are kept.
        return os.path.join(self.output_dir, f".worker_tmp_{self.strategy.cluster_resolver.task_id}")

    def _saving_dir(self):
        """The folder this process's saves write, or None where it saves none."""
        return self._checkpoint_dir()

    def _restored(self, path):
        """Called once `path` (None: nothing) is restored, before any step."""

    def checkpoint_manager(self, iterator=None):
        """Manager of `ckpt-<step>` files holding model, optimizer (slots, step) and input position."""
        objects = self._checkpoint_objects()
        if iterator is not None and not isinstance(iterator, tf.__internal__.tracking.Trackable):
            # A mirrored strategy's `DistributedIterator` cannot be saved (tensorflow#56372).
            logging.warning("%s's input iterator cannot be checkpointed: a resumed run starts "
                            "its input from the beginning", type(self.strategy).__name__)
        elif iterator is not None:
            objects["iterator"] = iterator
        return tf.train.CheckpointManager(
            tf.train.Checkpoint(**objects),
            directory=self._checkpoint_dir(),
            max_to_keep=self.keep_checkpoint_max,
            step_counter=objects["optimizer"].iterations,
        )

    def _checkpoint_objects(self):
        """`{"model": ..., "optimizer": ...}`, the trackables a checkpoint saves."""
        # "model" first: a variable reachable twice is saved under the first path found.
        return {"model": ModelVariables.of_model(self.model), "optimizer": self.optimizer}

    def _restore(self, manager, path, partial):
        """Restores checkpoint `path` into `manager`'s objects; `partial`: the input position and
        optimizer may be absent (evaluation, prediction)."""
        try:
            status = manager.checkpoint.restore(path)
        except tf.errors.NotFoundError as error:
            if INPUT_PIPELINE_CHANGED not in str(error):
                raise
            # Saved by another input pipeline (an earlier version's): all but the position.
            logging.warning("%s holds the input position of another input pipeline (an earlier "
                            "version's): the model, optimizer and step are restored, the input "
                            "starts again from the beginning of its data", path)
            status = tf.train.Checkpoint(**self._checkpoint_objects()).restore(path)
            partial, self._input_restarts = True, True
        if partial:
            status.expect_partial()
        else:
            status.assert_existing_objects_matched()

    def _save(self, manager):
        return manager.save(checkpoint_number=self.step)

    def _input_iterator(self, dataset_fn):
        return iter(self.strategy.distribute_datasets_from_function(
            without_autotuning_thread(dataset_fn)))

    def restore(self, init_fn=None):
        """For evaluation or prediction without training: the latest checkpoint in `output_dir`,
        else `init_fn()` (loads `--init_checkpoint`, as the original's Estimator), else nothing
        (with a warning)."""
        manager = self.checkpoint_manager()
        restored = restore_newest_readable(
            manager, lambda path: self._restore(manager, path, partial=True))
        self._restored(restored)
        if restored:
            logging.info("Restored %s (step %d)", restored, self.step)
        elif init_fn is not None:
            init_fn()
        else:
            logging.warning("No checkpoint in %s and no --init_checkpoint: the model is untrained",
                            self.output_dir)

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    # ---- public loops ---------------------------------------------------------------------

    def train(self, dataset_fn, num_train_steps, init_fn=None, checkpoint_iterator=True,
              examples_per_row=1.0):
        """Trains to `num_train_steps`, resuming from the latest checkpoint in `output_dir`.

        dataset_fn: `tf.distribute.InputContext -> tf.data.Dataset` of per-replica batches.
        init_fn: called when there is no checkpoint to resume from (e.g. `--init_checkpoint`).
        checkpoint_iterator: save the input position too, so a resumed run sees exactly the
            batches an uninterrupted one would (not supported by every multi-worker setup).
        examples_per_row: the examples a row of the batches holds on average, for packed rows
            (`bert_runner.packing`): the log then counts rows/s and the examples/s they hold. A
            callable is asked once the dataset is made (rows packed by the input pipeline);
            None: packed rows of an unknown mean (pre-training's packed records), rows/s alone.
        """
        iterator = self._input_iterator(dataset_fn)
        if callable(examples_per_row):
            examples_per_row = examples_per_row()
        manager = self.checkpoint_manager(iterator if checkpoint_iterator else None)
        self._input_restarts = False
        restored = restore_newest_readable(
            manager, lambda path: self._restore(manager, path, partial=False))
        if self._input_restarts:  # the failed restore left the iterator unusable: a new one
            iterator = self._input_iterator(dataset_fn)
            manager = self.checkpoint_manager(iterator if checkpoint_iterator else None)
        self._restored(restored)
        if restored:
            logging.info("Resuming from %s (step %d)", restored, self.step)
        elif init_fn is not None:
            init_fn()
        writer_dir = os.path.join(self.output_dir, "train")
        writer = tf.summary.create_file_writer(writer_dir) if self.chief else None
        start_step, start_time = self.step, time.time()
        pace_since = (start_step, start_time)
        first_record = len(self.history)
        metrics = {}
        # Every process splits its loop calls alike (their steps reduce across processes); the
        # chief alone traces.
        profile_due = self.profile_steps > 0
        try:
            while self.step < num_train_steps:
                every = self.save_checkpoints_steps
                next_save = min(num_train_steps, (self.step // every + 1) * every)
                steps = min(self.steps_per_loop, next_save - self.step)
                if self.log_steps:
                    steps = min(steps, self.log_steps - self.step % self.log_steps)
                # Not the first call: it traces and compiles the step.
                profiling = profile_due and len(self.history) > first_record
                if profiling:
                    steps = min(steps, self.profile_steps)
                loop_start = time.time()
                traced = profiling and self.chief
                with self._profiler(writer_dir) if traced else contextlib.nullcontext():
                    metrics = self._run_loop(iterator, steps, next_save)
                loop_end = time.time()
                if profiling:
                    profile_due = False
                if traced:
                    logging.info("Profiled steps %d-%d: %s (TensorBoard's profile tab)",
                                 self.step - steps + 1, self.step,
                                 os.path.join(writer_dir, "plugins", "profile"))
                self._log(metrics, steps, loop_end - loop_start, pace_since, num_train_steps,
                          writer, examples_per_row)
                if len(self.history) == first_record + 1:
                    pace_since = (self.step, loop_end)
                if self.step % self.save_checkpoints_steps == 0 or self.step >= num_train_steps:
                    path = self._save(manager)
                    if self.chief:
                        logging.info("Saved checkpoint %s", path)
        except BaseException:
            # Ctrl-C or SIGTERM (`bert_runner.cli`) during a save leaves its shards behind. What
            # cannot be removed is left for the next save: the interruption is what to report.
            saving = self._saving_dir()
            try:
                for path in remove_unfinished_saves(saving) if saving else ():
                    logging.info("Removed %s, an unfinished checkpoint save", path)
            except (OSError, tf.errors.OpError) as error:
                logging.warning("Could not remove an unfinished checkpoint save: %s", error)
            raise
        finally:
            if not self.chief and self._saving_dir():
                shutil.rmtree(self._saving_dir(), ignore_errors=True)
        if profile_due and self.chief and len(self.history) > first_record:
            logging.warning("--profile_steps: no profile, the run ended with its first loop call "
                            "(which compiles the step and is not traced)")
        if len(self.history) > first_record:
            # The first loop call also traces (and compiles) the step. bench/finetuning.py reads this.
            logging.info("Trained steps %d-%d in %.2f s, checkpoints included (first loop call "
                         "%.2f s)", start_step, self.step, time.time() - start_time,
                         self.history[first_record].seconds)
        return metrics

    def _log(self, metrics, steps, seconds, pace_since, num_train_steps, writer,
             examples_per_row):
        """Logs one loop call's progress line; `pace_since` as `eta_seconds` takes it."""
        step = self.step
        self.history.append(LoopRecord(step, metrics, seconds))
        steps_per_s = steps / max(seconds, 1e-9)
        rows_per_s = steps_per_s * self.global_batch_size
        eta = eta_seconds(num_train_steps, step, time.time(), pace_since)
        lr = float(self.optimizer.learning_rate)
        rates = {}
        if examples_per_row != 1:
            rates["packed rows/s"] = rows_per_s
        if examples_per_row is not None:
            rates["examples/s"] = rows_per_s * examples_per_row
        if self.tokens_per_example:
            rates["tokens/s"] = rows_per_s * self.tokens_per_example
        pace = ", ".join(f"{value:.1f} {name}" for name, value in rates.items())
        line = (f"step {step}/{num_train_steps} loss {metrics['loss']:.4f} lr {lr:.3g} "
                f"{steps_per_s:.2f} steps/s {pace} ETA {eta:.0f} s")
        if self.flops_per_example:
            # A packed row computes what one example's row of the grid does.
            tflops = rows_per_s * self.flops_per_example / 1e12
            line += f" {tflops:.3f} model TFLOP/s"
            if self.peak_tflops:
                mfu = tflops / (self.peak_tflops * self.devices())
                line += f" MFU {100 * mfu:.1f}%"
        logging.info(line)
        if writer is not None:
            with writer.as_default(step=step):
                summaries = {**metrics, "learning_rate": lr}
                summaries.update({name.replace("/s", "_per_second").replace(" ", "_"): value
                                  for name, value in rates.items()})
                for name, value in summaries.items():
                    write_scalar_summary(name, value)
            writer.flush()

    def predict(self, dataset_fn, predict_step):
        """Yields `{name: np.ndarray}` per global batch from `predict_step(model, features)`."""
        dataset = self.strategy.distribute_datasets_from_function(
            without_autotuning_thread(dataset_fn))
        run = self._predict_functions.get(predict_step)
        if run is None:
            step = self._compiled(lambda features: predict_step(self.model, features))
            # One function per `predict_step`, for evaluation and prediction alike.
            run = tf.function(lambda batch: self.strategy.run(step, args=(batch,)),
                              reduce_retracing=True, autograph=False)
            self._predict_functions[predict_step] = run
        # Traced for the dataset's own spec, whose batch size is open unless batches are all
        # full (drop_remainder): the last, smaller batch then needs no second trace of the model,
        # and later splits of the same spec none at all (XLA still compiles each shape it meets).
        run.get_concrete_function(dataset.element_spec)
        for batch in dataset:
            outputs = run(batch)
            yield {
                name: np.concatenate(
                    [np.asarray(t) for t in self.strategy.experimental_local_results(value)])
                for name, value in outputs.items()
            }
