"""The one driver every script runs a `bert_runner.task.Task` with: what the original's Estimator
and the scripts' main() did, the same way for every task.

    run_command(task, RunConfig.from_flags())       # a script's whole main()

`run_command` refuses a run with nothing to do, resolves the starting point once
(`bert_runner.plan.resolve_start`: the config and vocabulary from the flags, or from a Hugging
Face directory or a run's output_dir given as `--init_checkpoint`, and that checkpoint opened),
loads the tokenizer, reads every split the do_* flags ask for (all before any is converted) and
makes the run's `bert_runner.plan.RunPlan`; then, holding output_dir's lock
(`bert_runner.output_lock`: one run at a time), checks output_dir (`prepare`), builds the run's
one model (`new_model`) and checks the starting checkpoint against it (`check_start`), writes
each split's TFRecords (`bert_runner.splits.write_split`: atomically, TPU padding for evaluation
and prediction), counts the training steps into the plan, then `run_task` (once per seed with
`seeds`, each further seed building its own model) and the task's `finish`.

`run_task` puts the plan's model and the original optimizer under the `tf.distribute` strategy in
a `Trainer`, trains (resuming from the newest checkpoint in output_dir, else loading the opened
starting checkpoint), writes the original-layout checkpoint with `--save_tf1_checkpoint`, or
without training restores the newest checkpoint; then evaluates (eval_results.txt, with the
task's baselines in the log) and predicts (the task's prediction files).

A run refused (or failing, or interrupted) in an output_dir it created, before it wrote anything
but its run.json, bert_config.json, label_list.txt and records there, removes them and the
directory: a directory that existed is never removed, nor a file another run wrote.

An output_dir belongs to one task and one model: `prepare` refuses a directory whose
`output_dir/run.json` names another task, `--bilstm_on_top` or pretraining objective, before
anything in it is overwritten; the task, its hyper-parameters and the objective are recorded
there once every check has passed.
"""
import atexit
import contextlib
import dataclasses
import itertools
import os
import shutil
import tempfile
from typing import Optional

import keras
import tensorflow as tf
from absl import logging

from modeling import (
    LoraSettings, checkpoint as checkpoints, families, trainable_count, with_lora)
from modeling.bert.config import OBJECTIVE_KEY
from modeling.bert.modes import EncoderModes
from modeling.checkpoint.files import write_text_atomic
from modeling.layers.attention import fused_attention_pays
from modeling.optimization import create_optimizer, layerwise_rates
from bert_runner import (
    distribution, output_lock, plan as plan_of, results, run_identity, seeds as seed_sweeps,
    startup)
from bert_runner.runs import (
    checkpoints as run_checkpoints, hashes, labels as run_labels, record as run_records)
from bert_runner.splits import existing_split, wanted_splits, write_split
from bert_runner.task import collect
from bert_runner.trainer import Trainer

@dataclasses.dataclass
class RunResult:
    """What `run_task` did: the trainer (its `.model` holds the weights), the run's settings
    (`RunConfig`, model files resolved), the eval_results values, and what the task's
    `write_predictions` returned."""

    trainer: Trainer
    run: object = None
    eval_results: Optional[dict] = None
    predictions: object = None


# The LoRA flags that shape a run's checkpoints, with their values in a run without LoRA.
_LORA_DEFAULTS = (("lora_rank", 0), ("lora_alpha", None), ("lora_targets", "query_value"))


class OutputDirError(ValueError):
    """An output_dir that holds another task's run."""


def prepare(task, plan):
    """Checks of output_dir before any work, made holding output_dir's lock: refuses a directory
    whose run.json names another task, or another model than the `plan`'s (`--bilstm_on_top`,
    the config's pretraining objective), or, for a command that trains, checkpoints of a run
    whose identity (`bert_runner.run_identity`) differs from the plan's (OutputDirError). The
    starting checkpoint is checked once the run's model is built (`check_start`)."""
    run, config, seeds = plan.run, plan.config, plan.seeds
    path, recorded = run_records.run_record(run.output_dir)
    path = path or os.path.join(run.output_dir, run_records.RUN_RECORD)
    if recorded is not None and recorded.get("task") != task.name:
        raise OutputDirError(
            f"--output_dir={run.output_dir} holds a run of task {recorded.get('task')!r} "
            f"({path}); this is task {task.name!r}. Use another --output_dir: nothing in it was "
            "changed.")
    if recorded is not None:
        _check_recorded_model(recorded, run, config)
    for record_path, record, expected in _recorded_runs(run.output_dir, plan.identity, seeds):
        _check_recorded_identity(record, run, expected, record_path)


def check_start(task, plan, model, checkpoint):
    """Checks, before any work, that the opened `checkpoint` (`--init_checkpoint`'s; None: none)
    fits `model`, the run's task model (names the file and every mismatched variable); for a
    command that only evaluates or predicts, that output_dir's own checkpoints fit it, and that
    an `--init_checkpoint` they take the place of is not used, or that one without the task's
    head leaves it untrained (warnings)."""
    run = plan.run
    restored = (not run.do_train and not plan.seeds
                and hashes.newest_checkpoint(run.output_dir))
    if restored:
        unused = [f"--{name}={value}" for name, value in (
            ("init_checkpoint", run.init_checkpoint), ("lora_adapters", run.lora_adapters))
            if value]
        if unused:
            logging.warning("%s not used: --output_dir=%s holds checkpoints, and the newest (%s) "
                            "is evaluated and predicted with", " and ".join(unused),
                            run.output_dir, os.path.basename(restored))
        run_checkpoints.check_init_checkpoint(
            model, run.output_dir, "--output_dir", config_file=run.bert_config_file,
            task=task.name, read_tensors=False)
    elif checkpoint is not None:
        new = checkpoint.check_fits(model, run.bert_config_file, task.name)
        # A pooler alone is new where a span or tag model is read for its own task, which never
        # uses it (`checkpoints.is_pooler`).
        if not run.do_train and any(not checkpoints.is_pooler(name) for name in new):
            logging.warning(
                "--init_checkpoint=%s has no %s: newly initialised at random, and this command "
                "trains nothing, so its evaluation and predictions are of an untrained head",
                run.init_checkpoint, ", ".join(new))


def _sweep_identity(identity):
    """A `--seeds` sweep's identity: every seed's but the seed."""
    return {name: value for name, value in identity.items() if name != "random_seed"}


def _recorded_runs(output_dir, identity, seeds):
    """[(run.json path, its record, the identity this command gives that run)] of the runs whose
    checkpoints output_dir holds: its own (a sweep's run.json, where seed directories hold
    them), and with `seeds` each of their seed directories that holds some."""
    path, recorded = run_records.run_record(output_dir)
    found = []
    if run_identity.holds_checkpoints(output_dir, seed_dirs=False) and not seeds:
        found.append((path, recorded or {}, identity))
    elif run_identity.holds_checkpoints(output_dir):
        found.append((path, recorded or {}, _sweep_identity(identity)))
    for seed in seeds or ():
        directory = seed_sweeps.seed_dir(output_dir, seed)
        if run_identity.holds_checkpoints(directory, seed_dirs=False):
            seed_path, seed_record = run_records.run_record(directory)
            found.append((seed_path, seed_record or {}, {**identity, "random_seed": seed}))
    return found


def _check_recorded_identity(recorded, run, identity, path):
    """Refuses a command that trains into an output_dir holding checkpoints of a run whose
    identity differs from this command's in anything (resuming would train on, or keep as
    finished, another run's model), or evaluates or predicts with them reading its input
    otherwise (`run_identity.MODEL_NAMES`: another vocabulary, casing or pooling)."""
    if run.do_train:
        changed = run_identity.differences(recorded, identity)
        if changed:
            raise OutputDirError(
                f"--output_dir={run.output_dir} holds checkpoints of another run ({path}): "
                f"{'; '.join(changed)}. Use another --output_dir, or the settings of that run: "
                f"nothing in it was changed.{_schedule_hint(recorded, identity, path)}")
    names = run_identity.MODEL_NAMES if run.vocab_file else run_identity.MODEL_NAMES_NO_TEXT
    changed = run_identity.differences(recorded, identity, names=names)
    if changed:
        raise OutputDirError(
            f"--output_dir={run.output_dir} holds checkpoints of a model that reads its input "
            f"otherwise ({path}): {'; '.join(changed)}. Evaluate and predict with that run's "
            "settings: nothing in it was changed.")


def _schedule_hint(recorded, identity, path):
    """How to train a recorded run's model on where only its schedule differs (more steps,
    another learning rate): as the paper's second phase, a new run from its weights."""
    directory = os.path.dirname(path)
    if (not run_identity.only_schedule_differs(recorded, identity)
            or not hashes.newest_checkpoint(directory)):  # a seed sweep's own
        return ""
    return (" To train its model on with this schedule, start another --output_dir with "
            f"--init_checkpoint={directory} (its weights; the optimizer starts anew).")


def _check_recorded_model(recorded, run, config):
    """Refuses a command that would build another model than the one whose checkpoints
    output_dir holds (restoring them would drop the run's BiLSTM, add a random one, or change
    the encoder's attention), as run.json records it; a record without a key is not checked
    for it (--bilstm_on_top: written before the flag existed, so false)."""
    path = os.path.join(run.output_dir, run_records.RUN_RECORD)
    was = bool(recorded.get("bilstm_on_top", False))
    if was != run.bilstm_on_top:
        raise OutputDirError(
            f"--bilstm_on_top={str(run.bilstm_on_top).lower()} but --output_dir={run.output_dir} "
            f"holds a run with --bilstm_on_top={str(was).lower()} ({path}): pass "
            f"--bilstm_on_top={str(was).lower()}, or use another --output_dir")
    was_lora = [recorded.get(name, default) for name, default in _LORA_DEFAULTS]
    now_lora = [getattr(run, name) for name, _ in _LORA_DEFAULTS]
    if was_lora != now_lora and (was_lora[0] or now_lora[0]):
        given = " ".join(f"--{name}={value}" for (name, _), value in zip(_LORA_DEFAULTS, was_lora)
                         if value is not None)
        raise OutputDirError(
            f"--output_dir={run.output_dir} holds a run with {given} ({path}), whose checkpoints "
            f"hold {'adapters of that shape' if was_lora[0] else 'no adapters'}: pass the same "
            "LoRA flags, or use another --output_dir")
    objective = recorded.get(OBJECTIVE_KEY)
    if objective is not None and objective != config.pretraining_objective:
        raise OutputDirError(
            f"--output_dir={run.output_dir} holds a run of a {objective!r} model ({path}) but "
            f"--bert_config_file={run.bert_config_file} makes a {config.pretraining_objective!r} "
            "one: pass the config that run was started with, or use another --output_dir")


def _record_run(output_dir, config, identity, vocab_file=None):
    """Writes `output_dir`/run.json, once every check passed (a refused run leaves none to block
    the next): the run's `identity` (`bert_runner.run_identity`), which every later reader of
    its checkpoints compares, and the model's pretraining objective
    (`modeling.bert.config.OBJECTIVE_KEY`), which scripts loading the checkpoints check their config
    against (`bert_runner.runs.model_files`). Also bert_config.json, the config the
    checkpoints are of, in this project's terms (a Hugging Face directory's exact GELU as
    "gelu_exact", the objective recorded), so that output_dir describes its model alone. Both
    stay as long as checkpoints they describe do (a sweep's, while its seed directories hold
    some): a command that only evaluates or predicts with another config changes neither.
    `vocab_file`: the vocabulary the run read, whose path is recorded beside its hash."""
    holds_checkpoints = run_identity.holds_checkpoints(output_dir)
    if run_records.run_record(output_dir)[1] is None or not holds_checkpoints:
        # Where its vocabulary was, beside its content hash: a later command that leaves
        # --vocab_file out finds it there while the content is the same (`runs.supplied`).
        where = run_records.vocab_location(vocab_file)
        run_records.write_output_dir_record(
            output_dir, {**identity, OBJECTIVE_KEY: config.pretraining_objective,
                         **({run_records.VOCAB_PATH_KEY: where} if where else {})})
    config_path = os.path.join(output_dir, "bert_config.json")
    if not tf.io.gfile.exists(config_path) or not holds_checkpoints:
        write_text_atomic(config_path, config.to_json_string())


def _changed_settings(output_dir, identity, names=None):
    """`["name old -> new", ...]` for the settings (of `names`, when given) recorded in
    output_dir's run.json that this command's `identity` changes."""
    return run_identity.differences(run_records.run_record(output_dir)[1] or {}, identity, names)


def _check_lora_rank(rank, config, config_file):
    """Refuses --lora_rank above the model's hidden size: the adapters would hold more weights
    than the kernels they adapt."""
    if rank > config.hidden_size:
        raise ValueError(
            f"--lora_rank={rank} is above the hidden size {config.hidden_size} of the model "
            f"({config_file or '--bert_config_file'}): a low rank is the point (8 or 16 usually)")


def new_model(task, run, config, strategy):
    """The one model of a run: `task`'s for `config`, built under `strategy` in the encoder
    modes `run` asks for, in a fresh Keras state with `run`'s seeds, determinism and dtype
    policy set first, so several runs in one process (a seed sweep) are each as a run of their
    own."""
    # Keras' names and graph state only: Keras' default also runs a full garbage collection,
    # slow with TensorFlow loaded, and Python runs one when it needs to.
    keras.backend.clear_session(free_memory=False)
    distribution.set_determinism(run.random_seed, run.deterministic)
    distribution.set_precision(run.mixed_precision)
    return _build_model(task, run, config, strategy)


def _set_jax_distribution():
    """Keras' distribution under JAX: data-parallel over every device of every process where
    there are several (the variables replicated, each batch split along its first axis), else
    none."""
    from bert_runner.engines.jax_step import data_parallel

    parallel = data_parallel()
    keras.distribution.set_distribution(parallel)
    if parallel is not None:
        count = parallel.device_mesh.devices.size
        logging.info("Data-parallel over %d devices: batch sizes divisible by %d are split "
                     "over them, others run whole on each", count, count)


def _build_model(task, run, config, strategy):
    if keras.backend.backend() == "jax":
        _set_jax_distribution()
    # XLA (and so a TPU) compiles static shapes only: the grid, not the real-token rows.
    modes = EncoderModes(recompute=run.recompute_activations, static_shapes=run.static_shapes)
    if run.static_shapes:
        logging.info("XLA-compiled steps: static shapes, the encoder computes every position "
                     "of the padded grid")
    if _fuses_attention(run):
        modes = modes.replace(fused_attention=True)
        logging.info("Fused attention (--fused_attention=%s): the encoder's fused-attention "
                     "mode (docs/accelerators.md)", run.fused_attention)
    with strategy.scope():
        return task.build_model(config, run.bilstm_on_top, modes)


def _fuses_attention(run):
    """`--fused_attention`, its auto resolved for the dtype policy set
    (`modeling.layers.attention.fused_attention_pays`)."""
    if run.fused_attention != "auto":
        return run.fused_attention == "true"
    return fused_attention_pays(keras.config.dtype_policy().compute_dtype)


def build_trainer(task, run, config, strategy, num_train_steps, num_warmup_steps, model=None):
    """`model` (the run's, `new_model`; None: the task's model built here) with LoRA adapters
    where `run` asks for them, and the original optimizer under `strategy`, in a `Trainer`.

    Without training the optimizer only holds the step counter for the checkpoint layout, so a
    `num_train_steps` of 0 is accepted.
    """
    if model is None:
        model = _build_model(task, run, config, strategy)
    with strategy.scope():
        if run.lora_rank:
            model = with_lora(model, LoraSettings(run.lora_rank, run.lora_alpha, run.lora_targets))
            trained, total = trainable_count(model)
            logging.info("LoRA rank %d on %s: %d of %d weights trained (%.2f%%)", run.lora_rank,
                         run.lora_targets, trained, total, 100.0 * trained / total)
        optimizer = create_optimizer(
            run.optimizer, run.learning_rate, max(num_train_steps, 1), num_warmup_steps,
            warmup_rule=families.of_config(config).warmup_rule,
            layer_rates=_layer_rates(model, run.layerwise_decay(config)) if num_train_steps
            else None)
        if run.mixed_precision == "fp16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return _trainer_class()(
        strategy, model, optimizer, task.loss, run.output_dir,
        global_batch_size=run.train_batch_size,
        save_checkpoints_steps=run.save_checkpoints_steps,
        steps_per_loop=run.iterations_per_loop,
        keep_checkpoint_max=run.keep_checkpoint_max,
        gradient_accumulation_steps=run.gradient_accumulation_steps,
        jit_compile=run.jit_compile,
        flops_per_example=task.flops_per_example(config),
        peak_tflops=run.peak_tflops,
        log_steps=run.log_steps,
        tokens_per_example=task.tokens_per_example(),
        profile_steps=run.profile_steps)


def _trainer_class():
    """The trainer of Keras' backend: TensorFlow's `tf.function` steps, or JAX's `jax.jit` one."""
    if keras.backend.backend() == "jax":
        from bert_runner.engines.jax_trainer import JaxTrainer

        return JaxTrainer
    return Trainer


def _layer_rates(model, decay):
    """`model`'s layer-wise learning-rate multipliers at `decay`, logged; None at 1.0 (none)."""
    if decay == 1.0:
        return None
    rates = layerwise_rates(model, decay)
    logging.info("Layer-wise learning-rate decay %g: the learning rate times %.4g (the lowest "
                 "trained variables) to %.4g (the highest: the head's, where the model has one)",
                 decay, min(rates.values()), max(rates.values()))
    return rates


def get_strategy(run):
    """The `tf.distribute` strategy of `--distribution_strategy` / `--use_tpu`."""
    return distribution.get_strategy(
        run.distribution_strategy, run.use_tpu, run.tpu_name, run.tpu_zone, run.gcp_project)


def _dataset_fn(task, split, run, is_training):
    packed = {"sequences_per_row": split.sequences_per_row} if split.sequences_per_row > 1 else {}

    def dataset_fn(context):
        # Evaluation and prediction read every record on every worker, unsharded, so the chief's
        # local results cover the whole set, in file order. A worker's step then takes the whole
        # batch over its own replicas: --max_eval_steps covers as many records as in one process.
        batch_size = split.batch_size * (1 if is_training else context.num_input_pipelines)
        return task.input_dataset(
            list(split.files), context.get_per_replica_batch_size(batch_size),
            is_training=is_training, input_context=context if is_training else None,
            seed=run.random_seed, drop_remainder=is_training or run.on_tpu,
            repeat=is_training or split.repeat, **packed)

    return dataset_fn


def _log_split(title, split):
    logging.info("***** Running %s *****", title)
    if split.num_examples is not None:
        logging.info("  Num examples = %d (%d actual, %d padding)",
                     split.num_examples + split.num_padding, split.num_examples, split.num_padding)
    if split.num_rows is not None:
        logging.info("  Num packed rows = %d (up to %d examples a row)", split.num_rows,
                     split.sequences_per_row)
    logging.info("  Batch size = %d", split.batch_size)
    if split.max_batches:
        logging.info("  Num steps = %d", split.max_batches)


def _batches(trainer, task, split, run):
    batches = trainer.predict(_dataset_fn(task, split, run, False), task.predict_step)
    return itertools.islice(batches, split.max_batches) if split.max_batches else batches


def _init_from_checkpoint(trainer, checkpoint, task, config_file):
    """What starts a run with nothing to resume: loading the opened `checkpoint`
    (`--init_checkpoint`'s: the whole encoder and the heads it has; `config_file` named in its
    messages), else the task's own initialiser (a student from its teacher), or None."""
    if checkpoint is None:
        return task.initializer(trainer.model)
    return lambda: checkpoint.load_into(trainer.model, False, config_file)


def _examples_per_row(task, split, run):
    """The examples a training row holds on average, for the progress lines: a split the driver
    packed counts them; otherwise the task's own input says (`Task.examples_per_row`), asked
    once the trainer made the dataset (pre-training from text then reads the count of the pairs
    its pipeline packed, rather than pack them again)."""
    if split.num_rows:
        return split.num_examples / split.num_rows
    return lambda: task.examples_per_row(run)


def train(trainer, task, run, config, split, num_train_steps, init):
    """Trains to `num_train_steps` (resuming, else `init()`: from `--init_checkpoint`,
    `_init_from_checkpoint`); then the original-layout checkpoint with `--save_tf1_checkpoint`.

    Resuming a run whose hyper-parameters differ from this command's is reported; so is a run
    that had already finished (it is restored, not trained again).
    """
    _log_split("training", split)
    logging.info("  Num steps = %d", num_train_steps)
    trainer.train(_dataset_fn(task, split, run, True), num_train_steps,
                  init_fn=init,
                  checkpoint_iterator=run.checkpoint_iterator,
                  examples_per_row=_examples_per_row(task, split, run))
    if not trainer.history and trainer.step >= num_train_steps > 0:
        logging.warning(
            "%s already holds a finished run (checkpoint at step %d of %d): it was resumed and NOT "
            "trained again. Use a new --output_dir to train again.", run.output_dir, trainer.step,
            num_train_steps)
    if run.lora_rank and trainer.chief:
        path = checkpoints.write_adapters(trainer.model, run.output_dir, {
            "task": task.name, "rank": run.lora_rank, "alpha": run.lora_alpha,
            "targets": run.lora_targets, "base": run.init_checkpoint,
            "labels": run_labels.recorded_labels(run.output_dir)})
        logging.info("Wrote the LoRA adapters and the head (%.1f KB) to %s",
                     os.path.getsize(path) / 1024, path)
    if run.save_tf1_checkpoint and trainer.chief:
        prefix = checkpoints.write_original(  # the adapters merged in (a no-op without LoRA)
            trainer.model, os.path.join(run.output_dir, "bert_model.ckpt"),
            extra_tensors={"global_step": tf.constant(trainer.step, tf.int64)})
        config.to_json_file(os.path.join(run.output_dir, "bert_config.json"))
        logging.info("Wrote original-layout checkpoint %s", prefix)


def evaluate_start(trainer, task, run, split, init):
    """The starting model's metrics on `split`, before the first training step (`--init_checkpoint`
    loaded), kept in output_dir/eval_start.json so that a resumed run prints them too; None for a
    run resumed from checkpoints written without them."""
    path = os.path.join(run.output_dir, results.START_REPORT)
    report = run_records.read_run_file(path)
    if report is not None:
        return report["metrics"]
    if hashes.newest_checkpoint(run.output_dir):
        return None
    _log_split("evaluation of the starting model", split)
    trainer.restore(init)
    outputs = collect(_batches(trainer, task, split, run))
    metrics = {name: float(value)
               for name, value in task.evaluate(outputs, 0, split,
                                                written_dir(run.output_dir, trainer.chief)).items()}
    if trainer.chief:
        results.write_eval_report(run.output_dir, metrics, task.baselines(outputs, split),
                                  name=results.START_REPORT)
    return metrics


def evaluate(trainer, task, run, split, start=None):
    """eval_results.txt of `split`, and eval_report.json (the metrics as numbers beside the
    task's baselines, and beside the starting model's `start` metrics where given); logs each
    metric beside its baseline."""
    _log_split("evaluation", split)
    outputs = collect(_batches(trainer, task, split, run))
    metrics = task.evaluate(outputs, trainer.step, split,
                            written_dir(run.output_dir, trainer.chief))
    baselines = task.baselines(outputs, split)
    if start:
        baselines = {name: "starting model %.4f; %s" % (start[name], text) if name in start
                     else text for name, text in baselines.items()}
    for name, text in baselines.items():
        logging.info("  %s = %s (baseline: %s)", name, metrics.get(name), text)
    if trainer.chief:
        results.write_eval_results(os.path.join(run.output_dir, "eval_results.txt"), metrics)
        results.write_eval_report(run.output_dir, metrics, baselines)
    return metrics


def run_task(task, plan, strategy, model, checkpoint):
    """Trains, evaluates and predicts what the `plan`'s splits ask for with `model` (the run's,
    `new_model`), starting from the opened `checkpoint` (None: none) where there is nothing to
    resume; see the module docstring."""
    run = plan.run
    trainer = build_trainer(task, run, plan.config, strategy, plan.num_train_steps,
                            plan.num_warmup_steps, model)
    init = _init_from_checkpoint(trainer, checkpoint, task, run.bert_config_file)
    train_split, eval_split, predict_split = (plan.splits.get(name)
                                              for name in ("train", "eval", "predict"))
    start = None
    if train_split is not None and eval_split is not None and task.compare_with_start:
        start = evaluate_start(trainer, task, run, eval_split, init)
    if train_split is not None:
        train(trainer, task, run, plan.config, train_split, plan.num_train_steps, init)
    else:
        trainer.restore(init)
    result = RunResult(trainer, run)
    if eval_split is not None:
        result.eval_results = evaluate(trainer, task, run, eval_split, start)
    if predict_split is not None:
        _log_split("prediction", predict_split)
        result.predictions = task.write_predictions(
            _batches(trainer, task, predict_split, run), predict_split,
            written_dir(run.output_dir, trainer.chief))
    return result


def run_command(task, run, seeds=None, start=None):
    """Does everything `task`'s script is asked for by `run` (a `RunConfig`); see the module
    docstring. With `seeds` (ints), `run_task` runs once per seed in `output_dir/seed_<seed>`
    on the same records, and eval_results_seeds.txt summarises them. `start`: what
    `plan.resolve_start(run, task.max_seq_length)` returned, where the script needed it first
    (a distillation's student config); None: resolved here.

    Returns:
      the `RunResult`, or with `seeds` `{seed: RunResult}`.
    """
    if keras.backend.backend() == "jax":
        from bert_runner.engines import jax_trainer

        jax_trainer.check_supported(run)
        jax_trainer.start(run)
    wanted = wanted_splits(task, run)
    # The starting point, read once: a Hugging Face directory as --init_checkpoint gives the
    # config and vocabulary; the messages below name the file the config was read from.
    start, checkpoint = start or plan_of.resolve_start(run, task.max_seq_length)
    run = dataclasses.replace(run, bert_config_file=start.files.config_file,
                              vocab_file=start.files.vocab_file)
    config = task.model_config(start.files.config)
    _check_lora_rank(run.lora_rank, config, run.bert_config_file)
    if run.lora_adapters:
        run_checkpoints.check_adapters_task(run.lora_adapters, task.name, run.init_checkpoint)
    tokenizer = None
    if run.vocab_file:
        tokenizer = startup.load_tokenizer(run.vocab_file, run.do_lower_case, start.path,
                                           config, run.bert_config_file)
    existing = {split: task.existing_records(split) for split in wanted}
    examples = {split: task.read_examples(split, run, start.labels) for split in wanted
                if existing[split] is None}
    task = task.settle(examples, run, config, labels=start.labels)
    # A multi-worker strategy must exist before any TensorFlow op runs.
    strategy = get_strategy(run)
    identity = run_identity.of(
        task, run, config, train_examples=examples.get("train") if run.do_train else None,
        train_records=existing.get("train") if run.do_train else None, start=start)
    # A multi-worker run's other workers share the chief's output_dir: the chief's to remove.
    made = results.missing_dirs(run.output_dir) if distribution.is_chief(strategy) else []
    if keras.backend.backend() == "jax":  # before any process writes
        jax_trainer.check_agreed(run, identity, task, seeds)
    with results.dirs_removed_if_failed(made):
        results.check_writable_dir(run.output_dir, "output_dir")
        plan = plan_of.RunPlan(run, start, config, identity, tuple(seeds or ()), existing,
                               tuple(made))
        return _run_in_output_dir(task, plan, tokenizer, examples, strategy, checkpoint)


def _run_in_output_dir(task, plan, tokenizer, examples, strategy, checkpoint):
    """`run_command`'s work once output_dir exists, by `plan` (its `made`: the folders this run
    created): `examples` read for the splits it writes, `checkpoint` the opened starting
    point."""
    run, seeds, identity = plan.run, plan.seeds, plan.identity
    with output_lock.hold(run.output_dir, enabled=distribution.is_chief(strategy)), \
            _run_files_removed_if_failed(run.output_dir, plan.made, _run_file_names(task)):
        prepare(task, plan)
        # The model of the (first) run, built once: checked against the checkpoints here,
        # then trained or evaluated.
        first = plan.for_seed(seeds[0]) if seeds else plan
        model = new_model(task, first.run, plan.config, strategy)
        check_start(task, plan, model, checkpoint)
        # A training command of other settings was refused above: these only evaluate or predict.
        used = [name for name in identity if name not in run_identity.TRAINING_ONLY
                and name not in task.training_only_settings]
        changed = _changed_settings(run.output_dir, identity, used)
        if changed and hashes.newest_checkpoint(run.output_dir):
            logging.warning(
                "%s holds a model trained with other settings than this command's: %s. Its "
                "checkpoints are evaluated and predicted with as they are", run.output_dir,
                ", ".join(changed))
        chief = distribution.is_chief(strategy)
        if chief:
            task.write_run_files(run)
        # Every process writes the records it reads (the same); the chief's are the run's.
        records_run = dataclasses.replace(run, output_dir=written_dir(run.output_dir, chief))
        splits = {split: write_split(task, examples[split], split, tokenizer, records_run)
                  if files is None else existing_split(task, split, files, run)
                  for split, files in plan.existing.items()}
        steps = (0, 0)
        if "train" in splits and splits["train"].num_rows is not None:
            # A batch is of rows: an epoch is one pass over the packed rows.
            steps = run.training_steps(splits["train"].num_rows, unit="packed rows")
        elif "train" in splits:
            steps = task.training_steps(run, examples.get("train"), splits["train"].num_examples)
        plan = dataclasses.replace(plan, splits=splits, num_train_steps=steps[0],
                                   num_warmup_steps=steps[1])
        if chief:
            _record_run(run.output_dir, plan.config,
                        _sweep_identity(identity) if seeds else identity, run.vocab_file)

        def run_once(seed_plan, built):
            if seeds and distribution.is_chief(strategy):
                tf.io.gfile.makedirs(seed_plan.run.output_dir)
                _record_run(seed_plan.run.output_dir, plan.config, seed_plan.identity,
                            run.vocab_file)
            if built is None:
                built = new_model(task, seed_plan.run, plan.config, strategy)
            result = run_task(task, seed_plan, strategy, built, checkpoint)
            task.finish(result, written_dir(seed_plan.run.output_dir, chief))
            return result

        if not seeds:
            return run_once(plan, model)
        by_seed = {}
        for seed in seeds:
            logging.info("***** Seed %d *****", seed)
            # The first seed's model is the one built above; each other seed builds its own.
            by_seed[seed] = run_once(plan.for_seed(seed), model if seed == seeds[0] else None)
        if "eval" in splits and distribution.is_chief(strategy):
            summary = seed_sweeps.summarize_seeds({s: r.eval_results for s, r in by_seed.items()})
            logging.info("***** Eval results over seeds %s *****\n%s", ",".join(map(str, seeds)),
                         summary)
            write_text_atomic(os.path.join(run.output_dir, "eval_results_seeds.txt"), summary)
        return by_seed


def written_dir(output_dir, chief):
    """Where this process writes what a run writes in `output_dir`: there for the process that
    writes (`distribution.is_chief`); for the other processes of a run of several JAX processes,
    a folder of their own (removed at exit) in its place: each writes the records it reads and
    the results it computes (the same as the chief's), never where the chief writes."""
    if chief:
        return output_dir
    if output_dir not in _PROCESS_DIRS:
        _PROCESS_DIRS[output_dir] = tempfile.mkdtemp(prefix="bert-process-output-")
        atexit.register(shutil.rmtree, _PROCESS_DIRS[output_dir], ignore_errors=True)
    return _PROCESS_DIRS[output_dir]


_PROCESS_DIRS = {}  # {output_dir: this (non-chief) process's own folder in its place}


def _run_file_names(task):
    """What a run writes in output_dir before anything a user keeps (checkpoints, results,
    predictions): its records, config and labels, its splits' TFRecords, which every run writes
    anew; and the lock, which `output_lock` removes."""
    return {run_records.RUN_RECORD, "bert_config.json", run_labels.LABEL_LIST_FILE,
            output_lock.LOCK_FILE, *(name + ".tf_record" for name in task.splits.values())}


def _holds_only(directory, names):
    """Whether `directory` holds nothing but files named in `names` and folders of such (a seed
    sweep's seed_<n>)."""
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            if not _holds_only(entry.path, names):
                return False
        elif entry.name not in names:
            return False
    return True


def _remove_run_files(directory, names):
    """Removes `directory`'s files named in `names` (but the lock) and its folders of such; a
    file of another name that appeared since `_holds_only` looked (another command's write
    check) keeps its folder."""
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            _remove_run_files(entry.path, names)
            with contextlib.suppress(OSError):
                os.rmdir(entry.path)
        elif entry.name in names and entry.name != output_lock.LOCK_FILE:
            os.remove(entry.path)


@contextlib.contextmanager
def _run_files_removed_if_failed(output_dir, made, names):
    """When the block fails (a refusal, a bug, an interruption) in an output_dir this run `made`
    that holds only the run's own files (`_run_file_names`), removes them, so that nothing is
    left but the lock; anything else in it keeps every file. Inside the lock: no other run can
    have written there meanwhile."""
    try:
        yield
    except BaseException:
        # Left as they are where they cannot be removed: the block's error is the one to tell.
        with contextlib.suppress(OSError):
            if made and _holds_only(output_dir, names):
                _remove_run_files(output_dir, names)
        raise


