"""The paper's fine-tuning protocol, whatever the task: a grid of settings (learning rate, epochs,
batch size, restart) each fine-tuned once into its own folder, the best on the dev set chosen.
`experiments.glue` (run_glue.py) and `experiments.squad_grid` (run_squad_grid.py) say what a
setting runs, which dev value decides, and what the chosen model predicts.

A setting is finished when its report (the dev scores its run wrote) exists: the command run again
skips it, and a setting killed halfway resumes from its newest checkpoint (the driver's resume).
A report is used only when it scored what this command scores (`EVALUATED`: the dev data's
content and the flags that score it); otherwise its finished model is evaluated again.
A setting folder is reused only when its run.json records the run this command would make there
(`check_comparable`), a dev value that is not finite never wins (`choose`), and the chosen model
predicts only from the checkpoint its report scored (`chosen_checkpoint`).
"""
import dataclasses
import json
import math
import os
import re
import shlex
from typing import Optional

import numpy as np
import tensorflow as tf
from absl import logging

from modeling.checkpoint.files import write_text_atomic
from bert_runner import results, run_identity
from bert_runner.runs import hashes, record as run_records


# In a setting's folder: what its report scored, as this grid ran it (`reports`).
EVALUATED = "evaluated.json"


@dataclasses.dataclass(frozen=True)
class Setting:
    """One fine-tuning of the grid."""

    task: str
    learning_rate: float
    num_train_epochs: float
    train_batch_size: int
    restart: int

    @property
    def name(self):
        """The setting's folder under its task's: e.g. `lr2e-05_ep3_bs32_r1`."""
        return (f"lr{_exact(self.learning_rate)}_ep{_exact(self.num_train_epochs)}"
                f"_bs{self.train_batch_size}_r{self.restart}")

    def seed(self, base_seed):
        """Restart k: another data order and classifier initialisation, from the same checkpoint."""
        return base_seed + self.restart - 1

    def output_dir(self, grid_dir):
        """The setting's folder under the grid's output_dir `grid_dir`."""
        return os.path.join(grid_dir, self.task, self.name)

    def run(self, base):
        """`base` (a `RunConfig`) with this setting's hyper-parameters and seed."""
        return dataclasses.replace(
            base, learning_rate=self.learning_rate, num_train_epochs=self.num_train_epochs,
            train_batch_size=self.train_batch_size, random_seed=self.seed(base.random_seed))


def _exact(number):
    """`number` as `:g` writes it (2e-05, 3) where that reads back as the same number, else in
    full: two values of a grid never share a folder or a command line."""
    short = f"{number:g}"
    return short if float(short) == number else repr(float(number))


def grid(tasks, learning_rates, epochs, batch_sizes, restarts):
    """Every `Setting` of `tasks`, in order: task, learning rate, epochs, batch size, restart.
    Raises ValueError for a value given twice in one list (1 and 1.0 too): it would be one
    setting counted twice."""
    for flag, values in (("--learning_rates", learning_rates), ("--epochs", epochs),
                         ("--train_batch_sizes", batch_sizes)):
        twice = sorted({_exact(v) for v in values if list(values).count(v) > 1})
        if twice:
            raise ValueError(f"{flag} gives {', '.join(twice)} more than once")
    return [Setting(task, lr, ep, bs, restart)
            for task in tasks for lr in learning_rates for ep in epochs for bs in batch_sizes
            for restart in range(1, restarts + 1)]


def command(script, setting, run, args, not_passed=()):
    """`setting` as a command line of `script` (str): `args` ({flag: value}, the task's and the
    setting's), then every field of `run` (a `RunConfig`) that differs from its default (model
    files, precision, distribution, ...) and is not in `not_passed`."""
    args = {**args, "train_batch_size": setting.train_batch_size,
            "learning_rate": _exact(setting.learning_rate),
            "num_train_epochs": _exact(setting.num_train_epochs),
            "random_seed": setting.seed(run.random_seed),
            "output_dir": setting.output_dir(run.output_dir)}
    for field in dataclasses.fields(run):
        value = getattr(run, field.name)
        if field.name not in args and field.name not in not_passed and value != field.default:
            args[field.name] = str(value).lower() if isinstance(value, bool) else value
    return f"python {script} " + " ".join(
        shlex.quote(f"--{name}={value}") for name, value in args.items() if value is not None)


def check_comparable(settings, output_dir, identity_of, read_report, implied=None):
    """Refuses (ValueError) a grid whose settings' folders hold runs of other settings than
    this command would give them, before anything is trained or chosen: their scores would be
    compared with, or kept instead of, runs they are not comparable with. Each folder's run.json
    is compared with `identity_of(setting)` (`run_identity.differences`: the names both hold);
    `implied(report)` ({name: value}) gives what a report itself shows of a run whose run.json
    does not record those names. A folder holding a report or checkpoints without run.json is
    refused too: nothing says what its run was."""
    refused = []
    for setting in settings:
        directory = setting.output_dir(output_dir)
        record = run_records.output_dir_record(directory)
        report = read_report(directory)
        if record is None:
            if report is not None or run_identity.holds_checkpoints(directory):
                refused.append(f"{directory} holds a run without its {run_records.RUN_RECORD}, so "
                               "what it was trained with is unknown")
            continue
        if report is not None and implied is not None:
            record = {**implied(report), **record}
        changed = run_identity.differences(record, identity_of(setting))
        if changed:
            refused.append(f"{directory} holds a run of other settings than this command gives "
                           f"it: {', '.join(changed)}")
    if refused:
        more = f" (and {len(refused) - 1} more setting folders)" if len(refused) > 1 else ""
        raise ValueError(f"{refused[0]}{more}: its score is not comparable with this grid's. "
                         "Use another --output_dir; nothing was trained or chosen")


def reports(settings, select_only, read_report, fine_tune, output_dir, evaluated_of):
    """{setting: its report (`read_report(setting's folder)`, None: not finished)}. Without
    `select_only` each setting not finished is fine-tuned first (`fine_tune(setting, folder)`);
    a finished one is not trained again.

    What a report scored (`evaluated_of(setting)`: the dev data's content, the scoring flags) is
    kept beside it in `EVALUATED`, written when this grid first reads the report (one of a
    --print_commands line is taken as the grid's). A report that scored otherwise than this
    command would is not used: its setting is run again, which evaluates its finished model
    anew (the driver trains no finished run again), or under `select_only` left out."""
    found = {}
    for number, setting in enumerate(settings, 1):
        directory = setting.output_dir(output_dir)
        report = read_report(directory)
        expected = evaluated_of(setting)
        recorded = run_records.read_run_file(os.path.join(directory, EVALUATED))
        if report is not None and recorded is not None and recorded != expected:
            logging.warning("%s/%s: its report scored otherwise than this command (%s): %s",
                            setting.task, setting.name,
                            ", ".join(run_identity.differences(recorded, expected))
                            or f"its {EVALUATED} records otherwise",
                            "left out (run without --select_only to score it again)"
                            if select_only else "its model is evaluated again")
            report = None
            if not select_only:  # the starting model's scores too were of the other data
                start = os.path.join(directory, results.START_REPORT)
                if tf.io.gfile.exists(start):
                    tf.io.gfile.remove(start)
        elif report is not None:
            if not select_only:
                logging.info("%s/%s: finished before (%s)", setting.task, setting.name,
                             directory)
        elif not select_only:
            logging.info("Setting %d of %d: %s/%s, fine-tuning into %s", number, len(settings),
                         setting.task, setting.name, directory)
        if report is None and not select_only:
            fine_tune(setting, directory)
            report = read_report(directory)
        if report is not None and recorded != expected:
            write_text_atomic(os.path.join(directory, EVALUATED),
                              json.dumps(expected, sort_keys=True) + "\n")
        found[setting] = report
    return found


@dataclasses.dataclass
class Choice:
    """A task's chosen setting, its dev value and report (None: no finished setting with a
    finite dev value); `values` holds every such setting's, `diverged` counts the finished
    settings whose value is not finite (NaN, inf: the run diverged)."""

    task: str
    metric: str
    setting: Optional[Setting] = None
    value: Optional[float] = None
    report: Optional[dict] = None
    finished: int = 0
    diverged: int = 0
    values: dict = dataclasses.field(default_factory=dict)

    def restart_values(self):
        """The dev values of the chosen setting's restarts (its other settings the same)."""
        first = dataclasses.replace(self.setting, restart=1)
        return [value for setting, value in self.values.items()
                if dataclasses.replace(setting, restart=1) == first]


def choose(settings, reports, metric_of, value_of):
    """{task: `Choice`}: per task, the finished setting (`reports[setting]` not None) with the
    highest finite `value_of(report, metric_of(task))`; the earlier setting of the grid on a tie.
    A value that is not finite never wins: NaN compares false with everything, so a diverged
    first setting would otherwise stay chosen."""
    choices = {}
    for setting in settings:
        choice = choices.setdefault(setting.task, Choice(setting.task, metric_of(setting.task)))
        report = reports.get(setting)
        if report is None:
            continue
        choice.finished += 1
        value = value_of(report, choice.metric)
        if not math.isfinite(value):
            choice.diverged += 1
            continue
        choice.values[setting] = value
        if choice.value is None or value > choice.value:
            choice.setting, choice.value, choice.report = setting, value, report
    return choices


def check_not_diverged(choices, written):
    """Refuses (ValueError) the end of a command with a task whose every finished setting
    diverged: it has no model to stand behind, so `written(task)` (its files) were not written."""
    failed = [choice for choice in choices if choice.setting is None and choice.diverged]
    if failed:
        raise ValueError("; ".join(
            f"{c.task}: every finished setting diverged ({c.diverged} with a {c.metric} that is "
            f"not finite), so {written(c.task)} was not written" for c in failed)
            + ": lower --learning_rates (the other tasks' files and the table are written)")


def chosen_checkpoint(choice, output_dir, step=None):
    """The newest checkpoint in the chosen setting's folder, refused (ValueError) unless it is
    the model its report scored (at `step`, when the report says): predicting without it would
    restore the starting checkpoint with an untrained output layer, under the chosen score."""
    directory = choice.setting.output_dir(output_dir)
    checkpoint = hashes.newest_checkpoint(directory)
    if checkpoint is None:
        raise ValueError(
            f"{directory} holds the chosen run's dev report but no checkpoint of that run: "
            "nothing can predict as the model it scored. Restore its checkpoints, or train the "
            "grid again into another --output_dir; nothing was predicted")
    found = re.search(r"-(\d+)$", checkpoint)
    if step is not None and found and int(found.group(1)) != int(step):
        raise ValueError(
            f"{directory} holds the chosen run's dev report of step {int(step)} but its newest "
            f"checkpoint is {checkpoint}, not the model it scored: restore that run's "
            "checkpoints, or train the grid again into another --output_dir; nothing was "
            "predicted")
    return checkpoint


def chosen_model_files(run, folder):
    """`run` (a `RunConfig`) for a run that starts from a checkpoint of `folder` (a setting's):
    with the grid's --bert_config_file and --vocab_file when given; otherwise (the grid started
    from a directory holding its own: a Hugging Face or a released ELECTRA folder, which the
    setting's checkpoint is not) the config the setting's run wrote beside its checkpoints and
    the vocabulary of the start."""
    if run.bert_config_file and run.vocab_file:
        return run
    from bert_runner.runs.model_files import model_files

    start = model_files(run.bert_config_file, run.vocab_file, run.init_checkpoint)
    return dataclasses.replace(
        run, bert_config_file=run.bert_config_file or os.path.join(folder, "bert_config.json"),
        vocab_file=start.vocab_file)


def spread(values, scale=1.0):
    """'mean ± std (n)' of `values` times `scale` (the sample standard deviation, as --seeds'
    summary); '-' for none."""
    if not values:
        return "-"
    numbers = np.asarray(values, dtype=np.float64) * scale
    std = np.std(numbers, ddof=1) if len(numbers) > 1 else 0.0
    return f"{np.mean(numbers):.2f} ± {std:.2f} ({len(numbers)})"


def copy_to(path, directory):
    """Copies the file `path` into `directory` (made if need be); returns the copy's path."""
    tf.io.gfile.makedirs(directory)
    target = os.path.join(directory, os.path.basename(path))
    tf.io.gfile.copy(path, target, overwrite=True)
    return target


def format_table(header, rows):
    """The rows (tuples of str) as aligned text."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in [header, *rows])


def tsv(header, rows):
    return "".join("\t".join(row) + "\n" for row in [header, *rows])


def define_protocol_flags(learning_rates, epochs, batch_sizes):
    """The flags of a protocol command after its task's: the grid's (comma-separated lists, their
    defaults lists of str, and --restarts), the warm-up, the prediction batch, the checkpoint,
    TPU and run flags of the scripts, and the spread flags (--print_commands, --select_only)."""
    from absl import flags

    from bert_runner import flags as run_flags
    from bert_runner.flag_ranges import CrossRule, above, at_least, cross, each, ranged, within

    ranged(flags.DEFINE_float(
        "warmup_proportion", 0.1,
        "Proportion of training to perform linear learning rate warmup for."), within(0, 1))
    ranged(flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict."),
           at_least(1))
    run_flags.define_checkpoint_flags()
    run_flags.define_tpu_flags()
    run_flags.define_run_flags(batch_size_rule=False)
    run_flags.define_layerwise_lr_decay_flag()

    ranged(flags.DEFINE_list("learning_rates", learning_rates,
                             "The learning rates of the grid."), each(above(0), float))
    ranged(flags.DEFINE_list("epochs", epochs, "The numbers of training epochs of the grid."),
           each(above(0), float))
    ranged(flags.DEFINE_list("train_batch_sizes", batch_sizes,
                             "The training batch sizes of the grid."), each(at_least(1), int))
    ranged(flags.DEFINE_integer(
        "restarts", 1,
        "Fine-tunings of each setting from the same checkpoint, each with another --random_seed "
        "(data order, output layer initialisation, dropout): the paper restarted BERT-Large "
        "several times and kept the best dev model."), at_least(1))
    cross(CrossRule(
        ("gradient_accumulation_steps", "train_batch_sizes"),
        lambda steps, sizes: steps < 1 or all(int(size) % steps == 0 for size in sizes),
        lambda steps, sizes: (f"each of train_batch_sizes must be a multiple of "
                              f"gradient_accumulation_steps ({steps}): each batch is split into "
                              "that many equal micro-batches"),
        "must divide each of train_batch_sizes"))
    flags.DEFINE_bool(
        "print_commands", False,
        "Print each setting of the grid as a command of its script, one per line, and stop: run "
        "them with any scheduler, then this command with --select_only.")
    flags.DEFINE_bool(
        "select_only", False,
        "Train nothing: choose among the settings that have finished, predict with the chosen "
        "models and write the files and the table.")


def grid_of_flags(flag_values):
    """{learning_rates, epochs, batch_sizes, restarts} of the parsed grid flags."""
    return dict(learning_rates=[float(v) for v in flag_values.learning_rates],
                epochs=[float(v) for v in flag_values.epochs],
                batch_sizes=[int(v) for v in flag_values.train_batch_sizes],
                restarts=flag_values.restarts)
