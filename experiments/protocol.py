"""The paper's fine-tuning protocol, whatever the task: a grid of settings (learning rate, epochs,
batch size, restart) each fine-tuned once into its own folder, the best on the dev set chosen.
`experiments.glue` (run_glue.py) and `experiments.squad_grid` (run_squad_grid.py) say what a
setting runs, which dev value decides, and what the chosen model predicts.

A setting is finished when its report (the dev scores its run wrote) exists: the command run again
skips it, and a setting killed halfway resumes from its newest checkpoint (the driver's resume).
"""
import dataclasses
import os
import shlex
from typing import Optional

import tensorflow as tf
from absl import logging


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
        return (f"lr{self.learning_rate:g}_ep{self.num_train_epochs:g}_bs{self.train_batch_size}"
                f"_r{self.restart}")

    def seed(self, base_seed):
        """Restart k: another data order and classifier initialisation, from the same checkpoint."""
        return base_seed + self.restart - 1

    def output_dir(self, output_dir):
        return os.path.join(output_dir, self.task, self.name)

    def run(self, run):
        """`run` (a `RunConfig`) with this setting's hyper-parameters and seed."""
        return dataclasses.replace(
            run, learning_rate=self.learning_rate, num_train_epochs=self.num_train_epochs,
            train_batch_size=self.train_batch_size, random_seed=self.seed(run.random_seed))


def grid(tasks, learning_rates, epochs, batch_sizes, restarts):
    """Every `Setting` of `tasks`, in order: task, learning rate, epochs, batch size, restart."""
    return [Setting(task, lr, ep, bs, restart)
            for task in tasks for lr in learning_rates for ep in epochs for bs in batch_sizes
            for restart in range(1, restarts + 1)]


def command(script, setting, run, args, not_passed=()):
    """`setting` as a command line of `script` (str): `args` ({flag: value}, the task's and the
    setting's), then every field of `run` (a `RunConfig`) that differs from its default (model
    files, precision, distribution, ...) and is not in `not_passed`."""
    args = {**args, "train_batch_size": setting.train_batch_size,
            "learning_rate": f"{setting.learning_rate:g}",
            "num_train_epochs": f"{setting.num_train_epochs:g}",
            "random_seed": setting.seed(run.random_seed),
            "output_dir": setting.output_dir(run.output_dir)}
    for field in dataclasses.fields(run):
        value = getattr(run, field.name)
        if field.name not in args and field.name not in not_passed and value != field.default:
            args[field.name] = str(value).lower() if isinstance(value, bool) else value
    return f"python {script} " + " ".join(
        shlex.quote(f"--{name}={value}") for name, value in args.items() if value is not None)


def reports(settings, select_only, read_report, fine_tune, output_dir):
    """{setting: its report (`read_report(setting's folder)`, None: not finished)}. Without
    `select_only` each setting not finished is fine-tuned first (`fine_tune(setting, folder)`);
    a finished one is not run again."""
    found = {}
    for number, setting in enumerate(settings, 1):
        directory = setting.output_dir(output_dir)
        found[setting] = read_report(directory)
        if select_only:
            continue
        if found[setting] is not None:
            logging.info("%s/%s: finished before (%s)", setting.task, setting.name, directory)
            continue
        logging.info("Setting %d of %d: %s/%s, fine-tuning into %s", number, len(settings),
                     setting.task, setting.name, directory)
        fine_tune(setting, directory)
        found[setting] = read_report(directory)
    return found


@dataclasses.dataclass
class Choice:
    """A task's chosen setting, its dev value and report (None: no finished setting)."""

    task: str
    metric: str
    setting: Optional[Setting] = None
    value: Optional[float] = None
    report: Optional[dict] = None
    finished: int = 0


def choose(settings, reports, metric_of, value_of):
    """{task: `Choice`}: per task, the finished setting (`reports[setting]` not None) with the
    highest `value_of(report, metric_of(task))`; the earlier setting of the grid on a tie."""
    choices = {}
    for setting in settings:
        choice = choices.setdefault(setting.task, Choice(setting.task, metric_of(setting.task)))
        report = reports.get(setting)
        if report is None:
            continue
        choice.finished += 1
        value = value_of(report, choice.metric)
        if choice.value is None or value > choice.value:
            choice.setting, choice.value, choice.report = setting, value, report
    return choices


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
