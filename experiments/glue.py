"""The paper's GLUE fine-tuning protocol as one command (run_glue.py is the script; this module is
its logic).

The paper (section 4.1) fine-tunes each GLUE task with batch 32 for 3 epochs at each learning
rate of 5e-5, 4e-5, 3e-5 and 2e-5, keeps the one best on the dev set, and for BERT-Large restarts
several times (new data order and classifier initialisation, from the same checkpoint) keeping
the best dev model; the chosen models' test predictions are what the GLUE server scores. Here:

* every setting of the grid (task x learning rate x epochs x batch size x restart) is one
  run_classifier run through the driver, in `<output_dir>/<task>/<setting>/`, trained and
  evaluated on the dev set; a setting whose `eval_report.json` exists is finished and not run
  again, so a killed command continues where it stopped (a half-trained setting resumes from its
  checkpoint, as run_classifier does);
* per task, the setting with the best dev value of the metric the paper reports for it
  (`SELECTION_METRIC`: Matthews correlation for CoLA, Spearman for STS-B, F1 for MRPC and QQP,
  accuracy otherwise) is chosen; ties go to the earlier setting of the grid;
* the chosen model predicts the test set, and its GLUE server file (`<TASK>.tsv`: `index` and
  `prediction`, the label names or STS-B's score) is copied to `<output_dir>/submission/`. The MNLI
  model also predicts MNLI-mm and AX (the diagnostic set). WNLI is predicted as the paper
  submitted it: its training set's majority class for every test pair (the paper excludes WNLI
  from training: its dev set is adversarial to models that fit train);
* `glue_results.tsv` and the printed table hold each task's chosen setting and dev value beside
  the dev set's majority baseline and the paper's BERT-Base and BERT-Large test scores (Table 1).

`commands` gives each setting as an ordinary run_classifier.py command, for a cluster's job array
or any scheduler; the command run again with `select_only` then chooses among the finished runs.
"""
import dataclasses
import json
import os
import shlex
from typing import Optional

import tensorflow as tf
from absl import logging

from bert_runner import results

# The GLUE tasks in the paper's Table 1 order, WNLI last; `TASKS` are the ones fine-tuned.
GLUE = ("mnli", "qqp", "qnli", "sst-2", "cola", "sts-b", "mrpc", "rte", "wnli")
TRAINED = tuple(task for task in GLUE if task != "wnli")
# The folder of each task under the GLUE download (download_glue_data.py's names).
FOLDERS = {"mnli": "MNLI", "qqp": "QQP", "qnli": "QNLI", "sst-2": "SST-2", "cola": "CoLA",
           "sts-b": "STS-B", "mrpc": "MRPC", "rte": "RTE", "wnli": "WNLI"}
AX_FOLDERS = ("diagnostic", "AX")
# The dev metric the paper reports for each task; accuracy for the others.
SELECTION_METRIC = {"cola": "eval_matthews_corrcoef", "sts-b": "eval_spearman",
                    "mrpc": "eval_f1", "qqp": "eval_f1"}
# The paper's GLUE test scores (Table 1): (what, BERT-Base, BERT-Large).
PAPER_TEST = {
    "mnli": ("MNLI-m accuracy", 84.6, 86.7), "mnli-mm": ("MNLI-mm accuracy", 83.4, 85.9),
    "qqp": ("F1", 71.2, 72.1), "qnli": ("accuracy", 90.5, 92.7),
    "sst-2": ("accuracy", 93.5, 94.9), "cola": ("Matthews corr.", 52.1, 60.5),
    "sts-b": ("Spearman corr.", 85.8, 86.5), "mrpc": ("F1", 88.9, 89.3),
    "rte": ("accuracy", 66.4, 70.1)}
SUBMISSION = "submission"
RESULTS = "glue_results.tsv"


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


def grid(tasks, learning_rates, epochs, batch_sizes, restarts):
    """Every `Setting` of the trained `tasks`, in order: task, learning rate, epochs, batch size,
    restart."""
    return [Setting(task, lr, ep, bs, restart)
            for task in tasks if task in TRAINED
            for lr in learning_rates for ep in epochs for bs in batch_sizes
            for restart in range(1, restarts + 1)]


def data_dir(glue_dir, task):
    """The task's folder in the GLUE download; AX's is `diagnostic/` (or `AX/`), None if absent."""
    if task == "ax":
        found = [os.path.join(glue_dir, f) for f in AX_FOLDERS
                 if tf.io.gfile.isdir(os.path.join(glue_dir, f))]
        return found[0] if found else None
    return os.path.join(glue_dir, FOLDERS[task])


def check_tasks(tasks, glue_dir):
    """Refuses an unknown task or a missing task folder before any run, naming the flags."""
    for task in tasks:
        if task not in GLUE:
            raise ValueError(f"--tasks: {task!r} is not a GLUE task (the tasks: {', '.join(GLUE)}; "
                             "MNLI-mm and AX are predicted by the MNLI model)")
        if not tf.io.gfile.isdir(data_dir(glue_dir, task)):
            raise ValueError(f"--glue_dir={glue_dir} has no {FOLDERS[task]}/ folder for --tasks "
                             f"{task} (the layout of GLUE's download script)")


def metric_of(task):
    return SELECTION_METRIC.get(task, "eval_accuracy")


def command(setting, run, glue_dir, max_seq_length):
    """`setting` as a run_classifier.py command line (str): its task, data and hyper-parameters,
    and every other setting of `run` (a `RunConfig`) that differs from run_classifier's default
    (model files, precision, distribution, ...)."""
    args = {"task_name": setting.task, "do_train": "true", "do_eval": "true",
            "data_dir": data_dir(glue_dir, setting.task), "max_seq_length": max_seq_length,
            "train_batch_size": setting.train_batch_size,
            "learning_rate": f"{setting.learning_rate:g}",
            "num_train_epochs": f"{setting.num_train_epochs:g}",
            "random_seed": setting.seed(run.random_seed),
            "output_dir": setting.output_dir(run.output_dir)}
    for field in dataclasses.fields(run):
        value = getattr(run, field.name)
        if field.name not in args and field.name not in _NOT_PASSED and value != field.default:
            args[field.name] = str(value).lower() if isinstance(value, bool) else value
    return "python run_classifier.py " + " ".join(
        shlex.quote(f"--{name}={value}") for name, value in args.items())


# Set per setting (or by do_train / do_eval above), never from the command's flags.
_NOT_PASSED = ("do_predict",)


def read_report(directory):
    """The metrics of a finished setting's eval_report.json, or None (not finished)."""
    path = os.path.join(directory, results.EVAL_REPORT)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def fine_tune(setting, run, glue_dir, max_seq_length):
    """Trains and evaluates `setting` unless it is finished; its eval report."""
    from bert_runner import driver
    from bert_tasks.classifier.task import make_task

    directory = setting.output_dir(run.output_dir)
    report = read_report(directory)
    if report is not None:
        logging.info("%s/%s: finished before (%s)", setting.task, setting.name, directory)
        return report
    logging.info("%s/%s: fine-tuning into %s", setting.task, setting.name, directory)
    config = dataclasses.replace(_setting_run(setting, run), output_dir=directory, do_train=True,
                                 do_eval=True, do_predict=False)
    driver.run(make_task(setting.task, max_seq_length, data_dir(glue_dir, setting.task)), config)
    return read_report(directory)


def _setting_run(setting, run):
    """`run` (a `RunConfig`) with `setting`'s hyper-parameters."""
    return dataclasses.replace(
        run, learning_rate=setting.learning_rate, num_train_epochs=setting.num_train_epochs,
        train_batch_size=setting.train_batch_size, random_seed=setting.seed(run.random_seed))


@dataclasses.dataclass
class Choice:
    """A task's chosen setting and its dev value (None: no finished setting)."""

    task: str
    metric: str
    setting: Optional[Setting] = None
    value: Optional[float] = None
    baseline: Optional[str] = None
    finished: int = 0


def choose(settings, reports):
    """{task: `Choice`}: per task, the finished setting (`reports[setting]` not None) with the
    highest dev value of `metric_of(task)`; the earlier setting on a tie."""
    choices = {}
    for setting in settings:
        choice = choices.setdefault(setting.task, Choice(setting.task, metric_of(setting.task)))
        report = reports.get(setting)
        if report is None:
            continue
        choice.finished += 1
        value = report["metrics"][choice.metric]
        if choice.value is None or value > choice.value:
            choice.setting, choice.value = setting, value
            choice.baseline = report.get("baselines", {}).get(choice.metric)
    return choices


def predict(choice, run, glue_dir, max_seq_length):
    """The chosen model's test predictions: its GLUE file in `<output_dir>/submission/` (MNLI's
    model also predicts MNLI-mm and AX into `<output_dir>/mnli/predict_<task>/`). Returns the
    files written."""
    from bert_runner import driver
    from bert_tasks.classifier.task import make_task

    chosen = choice.setting.output_dir(run.output_dir)
    checkpoint = tf.train.latest_checkpoint(chosen)
    base = dataclasses.replace(_setting_run(choice.setting, run), do_train=False,
                               do_eval=False, do_predict=True)
    jobs = [(choice.task, chosen, None)]
    if choice.task == "mnli":
        jobs.append(("mnli-mm", os.path.join(run.output_dir, "mnli", "predict_mnli-mm"),
                     checkpoint))
        if data_dir(glue_dir, "ax") is None:
            logging.warning("--glue_dir=%s has no diagnostic/ (or AX/) folder: AX.tsv is not "
                            "written", glue_dir)
        else:
            jobs.append(("ax", os.path.join(run.output_dir, "mnli", "predict_ax"), checkpoint))
    written = []
    for task, directory, init in jobs:
        folder = data_dir(glue_dir, "mnli" if task == "mnli-mm" else task)
        task_model = make_task(task, max_seq_length, folder)
        driver.run(task_model, dataclasses.replace(base, output_dir=directory,
                                                   init_checkpoint=init or run.init_checkpoint))
        name = task_model.processor.submission_name + ".tsv"
        written.append(_copy_submission(os.path.join(directory, name), run.output_dir))
    return written


def predict_wnli_majority(run, glue_dir):
    """WNLI.tsv as the paper submitted it: the training set's majority class for every test
    pair. Returns (the file, the class)."""
    from bert_tasks.classifier import outputs, processors

    processor = processors.get_processor("wnli")
    folder = data_dir(glue_dir, "wnli")
    labels = [example.label for example in processor.get_train_examples(folder)]
    majority = max(sorted(set(labels)), key=labels.count)
    test = processor.get_test_examples(folder)
    directory = os.path.join(run.output_dir, SUBMISSION)
    tf.io.gfile.makedirs(directory)
    path = outputs.write_glue_submission(directory, processor, test,
                                         [processor.get_labels().index(majority)] * len(test))
    return path, majority


def _copy_submission(path, output_dir):
    directory = os.path.join(output_dir, SUBMISSION)
    tf.io.gfile.makedirs(directory)
    target = os.path.join(directory, os.path.basename(path))
    tf.io.gfile.copy(path, target, overwrite=True)
    return target


def table(choices, wnli_class=None):
    """The results table: (header, rows) of str, one row per task in Table 1's order."""
    header = ("task", "chosen setting", "dev metric", "dev", "dev baseline", "finished",
              "paper test (Base / Large)")
    rows = []
    for task in GLUE:
        if task == "wnli" and wnli_class is not None:
            rows.append(("wnli", f"majority class {wnli_class!r}", "-", "-", "-", "-",
                         "excluded (65.1 / 65.1 on the leaderboard)"))
            continue
        choice = choices.get(task)
        if choice is None:
            continue
        what, base, large = PAPER_TEST[task]
        rows.append((task, choice.setting.name if choice.setting else "(none finished)",
                     choice.metric, "-" if choice.value is None else f"{choice.value:.4f}",
                     choice.baseline or "-", str(choice.finished), f"{base} / {large} ({what})"))
        if task == "mnli":
            what, base, large = PAPER_TEST["mnli-mm"]
            rows.append(("mnli-mm", "the MNLI model", "-", "-", "-", "-",
                         f"{base} / {large} ({what})"))
    return header, rows


def write_table(header, rows, path):
    results.write_text_atomic(path, "".join("\t".join(row) + "\n" for row in [header, *rows]))


def format_table(header, rows):
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in [header, *rows])


def run_glue(tasks, glue_dir, max_seq_length, run, learning_rates, epochs, batch_sizes, restarts,
             select_only=False):
    """run_glue.py's work (see the module docstring): the grid, the choice, the predictions, the
    files and the table. Returns (choices, the table's text)."""
    check_tasks(tasks, glue_dir)
    settings = grid(tasks, learning_rates, epochs, batch_sizes, restarts)
    reports = {}
    for number, setting in enumerate(settings, 1):
        if select_only:
            reports[setting] = read_report(setting.output_dir(run.output_dir))
        else:
            logging.info("Setting %d of %d", number, len(settings))
            reports[setting] = fine_tune(setting, run, glue_dir, max_seq_length)
    choices = choose(settings, reports)
    for choice in choices.values():
        if choice.setting is None:
            logging.warning("%s: no setting has finished: nothing to choose or predict",
                            choice.task)
            continue
        logging.info("%s: chose %s (%s %.4f of %d finished settings)", choice.task,
                     choice.setting.name, choice.metric, choice.value, choice.finished)
        for path in predict(choice, run, glue_dir, max_seq_length):
            logging.info("Wrote %s", path)
    wnli_class = None
    if "wnli" in tasks:
        path, wnli_class = predict_wnli_majority(run, glue_dir)
        logging.info("Wrote %s (WNLI: the training set's majority class %r)", path, wnli_class)
    header, rows = table(choices, wnli_class)
    write_table(header, rows, os.path.join(run.output_dir, RESULTS))
    return choices, format_table(header, rows)
