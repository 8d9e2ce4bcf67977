"""The paper's Figure 2 (Appendix C.1) as a command: fine-tune every chosen checkpoint of one or
more pre-training runs on a task, and tabulate (CSV) and draw (PNG) the task's metric against the
pre-training steps, one line per run (labelled with its objective). run_checkpoint_sweep.py is
the script; this module is its logic.

A pre-training run is an output_dir of run_pretraining.py: its `ckpt-<step>` checkpoints and the
`bert_config.json` it writes (`"pretraining_objective": "ltr"` for the left-to-right model,
absent for the masked LM), from which each fine-tuning builds the model the checkpoint was
trained as. Each fine-tuning is a `bert_runner.driver.run_command` in this process, as run_classifier.py
would run it with `--init_checkpoint=<dir>/ckpt-<step>`, in `<output_dir>/<run name>/step_<step>`
(a finished one is evaluated again, not trained again). Step 0 means no checkpoint: the same
model fine-tuned from random weights, the figure's starting point.

Accuracy is tabulated, drawn and logged beside the task's majority baseline (always predicting
the dev set's most frequent label): a line near it learnt nothing from its checkpoint.
"""
import csv
import dataclasses
import io
import json
import os
import re
from typing import Optional

import tensorflow as tf
from absl import logging

from modeling.checkpoint.files import atomic_output, write_text_atomic
from bert_runner import run_identity
from bert_runner.runs import record as run_records

PLOT_REQUIREMENTS = "requirements-plot.txt"
_CHECKPOINT = re.compile(r"^ckpt-(\d+)\.index$")
CSV_COLUMNS = ("run", "objective", "pretraining_dir", "pretraining_step", "metric", "value",
               "baseline", "eval_loss")


@dataclasses.dataclass(frozen=True)
class PretrainingRun:
    """One pre-training output_dir: its name (the figure's line), objective and checkpoints."""

    directory: str
    name: str
    objective: str
    config_file: str
    checkpoints: dict  # {step: checkpoint prefix}

    @property
    def label(self):
        return f"{self.name} ({self.objective.upper()})"


def read_run(directory):
    """The `PretrainingRun` of a run_pretraining output_dir; ValueError naming the directory when
    it has no bert_config.json or no checkpoint."""
    from modeling.checkpoint import load_config

    config_file = os.path.join(directory, "bert_config.json")
    if not tf.io.gfile.exists(config_file):
        raise ValueError(f"--pretraining_dirs: {directory} has no bert_config.json (not an "
                         "output_dir of run_pretraining.py, or of a version before it wrote one)")
    checkpoints = {int(m.group(1)): os.path.join(directory, f"ckpt-{m.group(1)}")
                   for m in map(_CHECKPOINT.match, tf.io.gfile.listdir(directory)) if m}
    if not checkpoints:
        raise ValueError(f"--pretraining_dirs: {directory} holds no ckpt-<step> checkpoint")
    name = os.path.basename(os.path.normpath(directory))
    objective = load_config(config_file).pretraining_objective
    return PretrainingRun(directory, name, objective, config_file, checkpoints)


def choose_steps(run, every=None, steps=None):
    """The steps of `run` to fine-tune: `steps` (ints; each must be a checkpoint of the run, or
    0), else every checkpoint whose step is a multiple of `every`, else every checkpoint."""
    if steps:
        missing = [s for s in steps if s and s not in run.checkpoints]
        if missing:
            raise ValueError(
                f"--checkpoint_steps: {run.directory} has no checkpoint at step(s) "
                f"{', '.join(map(str, missing))}; it has {', '.join(map(str, sorted(run.checkpoints)))}")
        return sorted(set(steps))
    chosen = [s for s in sorted(run.checkpoints) if not every or s % every == 0]
    if not chosen:
        raise ValueError(f"--checkpoint_every={every}: no checkpoint of {run.directory} is at a "
                         f"multiple of it ({', '.join(map(str, sorted(run.checkpoints)))})")
    return chosen


@dataclasses.dataclass(frozen=True)
class Baseline:
    """What a metric is compared with: `name` (the figure's legend) and its `value`."""

    name: str
    value: float


def majority_baseline(task, metric):
    """The `Baseline` of `metric` on `task`'s dev set: for `eval_accuracy` of a single-label
    classifier, the accuracy of always predicting the most frequent dev label; None otherwise
    (regression, several labels per example, another metric), as no such constant applies."""
    from bert_tasks.classifier.task import MultiLabelTask

    if metric != "eval_accuracy" or task.is_regression or isinstance(task, MultiLabelTask):
        return None
    labels = [example.label for example in task.read_examples("eval")]
    if not labels:
        return None
    label = max(sorted(set(labels)), key=labels.count)
    return Baseline(f"majority class {label!r}", labels.count(label) / len(labels))


@dataclasses.dataclass(frozen=True)
class Row:
    """One fine-tuning of the sweep: the CSV's row."""

    run: str
    objective: str
    pretraining_dir: str
    pretraining_step: int
    metric: str
    value: float
    eval_loss: Optional[float]
    baseline: Optional[float] = None


def _optional(value):
    return "" if value is None else f"{value:.4f}"


def sweep(runs, steps, fine_tune, output_dir, metric="eval_accuracy", baseline=None):
    """Fine-tunes each run's chosen checkpoints; returns the `Row`s in run, then step order.

    Args:
      runs: `PretrainingRun`s; steps: {run directory: [step, ...]} (`choose_steps`).
      fine_tune: `(config_file, checkpoint or None, output_dir) -> eval_results dict`.
      output_dir: each fine-tuning in `<output_dir>/<run name>/step_<step>`.
      metric: the eval_results key tabulated and drawn.
      baseline: the metric's `Baseline` (`majority_baseline`), in each row; None: none applies.
    """
    rows = []
    total = sum(len(steps[run.directory]) for run in runs)
    for run in runs:
        for step in steps[run.directory]:
            logging.info("***** Sweep %d/%d: %s, step %d *****", len(rows) + 1, total,
                         run.label, step)
            metrics = fine_tune(run.config_file, run.checkpoints.get(step),
                                os.path.join(output_dir, run.name, f"step_{step}"))
            if metric not in metrics:
                raise ValueError(f"--metric={metric}: the task's eval_results have "
                                 f"{', '.join(sorted(metrics))}")
            loss = metrics.get("eval_loss")
            rows.append(Row(run.name, run.objective, run.directory, step,
                            metric, float(metrics[metric]),
                            None if loss is None else float(loss),
                            None if baseline is None else baseline.value))
            logging.info("%s at pre-training step %d: %s = %.4f (baseline: %s)", run.label, step,
                         metric, rows[-1].value,
                         "none" if baseline is None else f"{baseline.name} {baseline.value:.4f}")
    return rows


def csv_text(rows):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow([row.run, row.objective, row.pretraining_dir, row.pretraining_step,
                         row.metric, f"{row.value:.4f}", _optional(row.baseline),
                         _optional(row.eval_loss)])
    return out.getvalue()


def read_csv_rows(path):
    """The `Row`s of a sweep.csv (`csv_text`'s); [] when there is none."""
    if not tf.io.gfile.exists(path):
        return []
    with tf.io.gfile.GFile(path) as f:
        table = list(csv.DictReader(f))

    def optional(text):
        return float(text) if text else None

    return [Row(r["run"], r["objective"], r["pretraining_dir"], int(r["pretraining_step"]),
                r["metric"], float(r["value"]), optional(r["eval_loss"]),
                optional(r["baseline"])) for r in table]


def merged_rows(earlier, rows):
    """`earlier` rows with those of `rows` for the same run, step and metric replaced, then the
    rest of `rows`: a sweep over fewer checkpoints keeps the table of the others."""
    key = lambda row: (row.run, row.pretraining_step, row.metric)  # noqa: E731
    new = {key(row): row for row in rows}
    kept = [new.pop(key(row), row) for row in earlier]
    return kept + [row for row in rows if key(row) in new]


def write_outputs(rows, csv_path, png_path, title, baseline=None, keep_earlier=True):
    """Writes the CSV, then the PNG if matplotlib is installed (else one warning naming
    `PLOT_REQUIREMENTS`), with `baseline` (a `Baseline`, or None) as a dashed horizontal line.
    An earlier CSV's rows of other checkpoints are kept (`merged_rows`), and said so, unless
    `keep_earlier` is false (they scored another dev set or metric). Returns the PNG path, or
    None when it was not drawn."""
    earlier = read_csv_rows(csv_path)
    if earlier and not keep_earlier:
        logging.warning("%s: its %d earlier rows scored another dev set or metric: replaced by "
                        "this sweep's", csv_path, len(earlier))
        earlier = []
    merged = merged_rows(earlier, rows)
    if len(merged) > len(rows):
        logging.info("%s: kept %d rows of the earlier sweep (checkpoints this command did not "
                     "fine-tune)", csv_path, len(merged) - len(rows))
    rows = merged
    write_text_atomic(csv_path, csv_text(rows))
    logging.info("Wrote %s", csv_path)
    try:
        import matplotlib
    except ImportError:
        logging.warning("matplotlib is not installed: no %s (pip install -r %s); the table is "
                        "in %s", png_path, PLOT_REQUIREMENTS, csv_path)
        return None
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(6, 4), dpi=120)
    lines = {}
    for row in rows:
        lines.setdefault(f"{row.run} ({row.objective.upper()})", []).append(
            (row.pretraining_step, row.value))
    for label, points in lines.items():
        points.sort()
        axes.plot([s for s, _ in points], [v for _, v in points], marker="o", label=label)
    if baseline is not None:
        axes.axhline(baseline.value, color="gray", linestyle="--", linewidth=1,
                     label=f"{baseline.name} {baseline.value:.4f}")
    axes.set_xlabel("pre-training steps")
    axes.set_ylabel(rows[0].metric if rows else "")
    axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    with atomic_output(png_path) as tmp:
        figure.savefig(tmp, format="png")
    pyplot.close(figure)
    logging.info("Wrote %s", png_path)
    return png_path


def parse_steps(values):
    """--checkpoint_steps as ints (None for none given)."""
    if not values:
        return None
    try:
        steps = [int(v) for v in values]
    except ValueError:
        steps = [-1]
    if min(steps) < 0:
        raise ValueError(f"--checkpoint_steps expects comma-separated steps >= 0, got "
                         f"{','.join(values)}")
    return steps


SWEEP_RECORD = "sweep.json"
CSV_NAME = "sweep.csv"
# In sweep.json: what sweep.csv's rows scored (the metric, the dev data's content).
_EVALUATED = "evaluated"
# What differs between the fine-tunings of one sweep: each starts from its own checkpoint.
_PER_CHECKPOINT = ("init_checkpoint", run_identity.START_HASH, run_identity.CONFIG)


def check_sweep_identity(output_dir, runs, identity, steps, evaluated):
    """Refuses a sweep into an `output_dir` that holds fine-tunings of another sweep (another
    task, data, sequence length, schedule or seed), before any work: its step folders would be
    resumed as this sweep's and sweep.csv would put both side by side. The sweep's identity
    (`identity` without what each checkpoint changes) is compared with the sweep.json it wrote
    and with the run.json of every step folder there, then recorded in sweep.json. So is each
    line's: sweep.csv's line of a run's name must be of that pre-training dir, and a chosen
    step's folder a fine-tuning of that checkpoint's content.

    Returns whether sweep.csv's earlier rows scored what this sweep scores (`evaluated`: the
    metric and the dev data's content, recorded in sweep.json) and may be kept beside its own."""
    _check_lines(output_dir, runs, steps)
    common = {k: v for k, v in identity.items() if k not in _PER_CHECKPOINT}
    record_path = os.path.join(output_dir, SWEEP_RECORD)
    sweep_record = run_records.read_run_file(record_path) or {}
    recorded = [(record_path, sweep_record)]
    for run in runs:
        directory = os.path.join(output_dir, run.name)
        if tf.io.gfile.isdir(directory):
            recorded += [(path, run_records.read_run_file(path)) for path in sorted(
                tf.io.gfile.glob(os.path.join(directory, "step_*", run_records.RUN_RECORD)))]
    for path, record in recorded:
        changed = run_identity.differences(record or {}, common)
        if changed:
            raise ValueError(
                f"--output_dir={output_dir} holds fine-tunings of another sweep ({path}): "
                f"{'; '.join(changed)}. Use another --output_dir: nothing in it was changed.")
    write_text_atomic(record_path,
                      json.dumps({**common, _EVALUATED: evaluated}, indent=2) + "\n")
    return sweep_record.get(_EVALUATED) == evaluated


def _check_lines(output_dir, runs, steps):
    """Refuses (ValueError) a pre-training run whose name sweep.csv's line holds for another dir,
    or a chosen step whose folder fine-tuned another checkpoint's content (the dir written
    again, or another dir of that name)."""
    from bert_runner.runs.hashes import fingerprint

    earlier = read_csv_rows(os.path.join(output_dir, CSV_NAME))
    for run in runs:
        others = sorted({row.pretraining_dir for row in earlier if row.run == run.name
                         and os.path.realpath(row.pretraining_dir)
                         != os.path.realpath(run.directory)})
        if others:
            raise ValueError(
                f"--output_dir={output_dir}: the line {run.name!r} of its {CSV_NAME} is of "
                f"{others[0]}, not {run.directory}: two pre-training runs would share it. Use "
                "another --output_dir: nothing in it was changed.")
        for step in steps[run.directory]:
            path = os.path.join(output_dir, run.name, f"step_{step}", run_records.RUN_RECORD)
            record = run_records.read_run_file(path) if step else None
            content = fingerprint(run.checkpoints.get(step)) if step else None
            if record and record.get(run_identity.START_HASH) not in (None, content):
                raise ValueError(
                    f"--output_dir={output_dir} holds a fine-tuning of another checkpoint than "
                    f"{run.checkpoints[step]} ({path}): the starting checkpoint's content "
                    "differs. Use another --output_dir: nothing in it was changed.")


def run_sweep(pretraining_dirs, task_name, data_dir, max_seq_length, run_template, every=None,
              steps=None, metric="eval_accuracy"):
    """run_checkpoint_sweep.py's work: fine-tunes the chosen checkpoints of each dir on the
    run_classifier task (`make_task(task_name, max_seq_length, data_dir)`) with `run_template`
    (a `RunConfig`: its output_dir holds the sweep, its schedule is each fine-tuning's), writes
    `sweep.csv` and `sweep.png` there, the metric beside its `majority_baseline`. Returns (rows,
    the PNG path or None)."""
    from bert_runner import driver
    from bert_tasks.classifier.task import make_task

    task = make_task(task_name, max_seq_length, data_dir)
    baseline = majority_baseline(task, metric)
    if baseline is None:
        logging.info("--metric=%s of --task_name=%s: no majority baseline to draw", metric,
                     task_name)
    runs = [read_run(d) for d in pretraining_dirs]
    if len({run.name for run in runs}) < len(runs):
        raise ValueError("--pretraining_dirs: two dirs have the same name (each names its line "
                         "and its fine-tuning folder)")
    chosen = {run.directory: choose_steps(run, every, steps) for run in runs}
    for run in runs:
        logging.info("%s: %s, steps %s", run.label, run.directory,
                     ", ".join(map(str, chosen[run.directory])))
    template = dataclasses.replace(run_template, do_train=True, do_eval=True, do_predict=False)
    evaluated = {"metric": metric,
                 "eval_data_sha256": run_identity.examples_sha256(task.read_examples("eval"))}
    keep_earlier = check_sweep_identity(run_template.output_dir, runs, run_identity.of(
        task, template, train_examples=task.read_examples("train")), chosen, evaluated)

    def fine_tune(config_file, checkpoint, output_dir):
        run = dataclasses.replace(template, output_dir=output_dir, bert_config_file=config_file,
                                  init_checkpoint=checkpoint)
        return driver.run_command(make_task(task_name, max_seq_length, data_dir), run).eval_results

    output_dir = run_template.output_dir
    rows = sweep(runs, chosen, fine_tune, output_dir, metric, baseline)
    png = write_outputs(rows, os.path.join(output_dir, CSV_NAME),
                        os.path.join(output_dir, "sweep.png"),
                        f"{task_name} {metric} after fine-tuning each pre-training checkpoint",
                        baseline, keep_earlier)
    return rows, png
