"""The paper's GLUE fine-tuning protocol as one command (run_glue.py is the script; this module is
its logic; `experiments.protocol` the grid, the resume and the choice it shares with SQuAD's).

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

import tensorflow as tf
from absl import logging

from bert_runner import results, run_files
from experiments import protocol

# The GLUE tasks in the paper's Table 1 order, WNLI last; `TRAINED` are the ones fine-tuned.
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
# In SUBMISSION: the setting each task's files were predicted with, so that a command run again
# with the same choice keeps them.
CHOSEN = "chosen.json"
RESULTS = "glue_results.tsv"


def grid(tasks, learning_rates, epochs, batch_sizes, restarts):
    """Every `protocol.Setting` of the fine-tuned `tasks` (WNLI is not)."""
    return protocol.grid([task for task in tasks if task in TRAINED], learning_rates, epochs,
                         batch_sizes, restarts)


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
            raise ValueError(f"--tasks: no GLUE folder for --tasks {task!r}: not a GLUE task "
                             f"(the tasks: {', '.join(GLUE)}; MNLI-mm and AX are predicted by "
                             "the MNLI model)")
        if not tf.io.gfile.isdir(data_dir(glue_dir, task)):
            raise ValueError(f"--glue_dir={glue_dir} has no {FOLDERS[task]}/ folder for --tasks "
                             f"{task} (the layout of GLUE's download script)")


def metric_of(task):
    return SELECTION_METRIC.get(task, "eval_accuracy")


def command(setting, run, glue_dir, max_seq_length):
    """`setting` as a run_classifier.py command line (str)."""
    return protocol.command(
        "run_classifier.py", setting, run,
        {"task_name": setting.task, "do_train": "true", "do_eval": "true",
         "data_dir": data_dir(glue_dir, setting.task), "max_seq_length": max_seq_length},
        not_passed=("do_predict",))


def fine_tune(setting, directory, run, glue_dir, max_seq_length):
    """Trains `setting` into `directory` and evaluates it on the dev set (its eval_report.json)."""
    from bert_runner import driver
    from bert_tasks.classifier.task import make_task

    config = dataclasses.replace(setting.run(run), output_dir=directory, do_train=True,
                                 do_eval=True, do_predict=False)
    driver.run(make_task(setting.task, max_seq_length, data_dir(glue_dir, setting.task)), config)


def value_of(report, metric):
    return report["metrics"][metric]


def predict(choice, run, glue_dir, max_seq_length):
    """The chosen model's test predictions: its GLUE file in `<output_dir>/submission/` (MNLI's
    model also predicts MNLI-mm and AX into `<output_dir>/mnli/predict_<task>/`). Returns the
    files written."""
    from bert_runner import driver
    from bert_tasks.classifier.task import make_task

    chosen = choice.setting.output_dir(run.output_dir)
    checkpoint = tf.train.latest_checkpoint(chosen)
    base = dataclasses.replace(choice.setting.run(run), do_train=False, do_eval=False,
                               do_predict=True)
    written = []
    for task in predicted_tasks(choice.task, glue_dir):
        # The chosen run predicts its own test set in its folder; MNLI's model the others apart.
        directory, init = chosen, run.init_checkpoint
        if task != choice.task:
            directory = os.path.join(run.output_dir, choice.task, f"predict_{task}")
            init = checkpoint
        task_model = make_task(task, max_seq_length,
                               data_dir(glue_dir, "mnli" if task == "mnli-mm" else task))
        driver.run(task_model, dataclasses.replace(base, output_dir=directory,
                                                   init_checkpoint=init))
        name = task_model.processor.submission_name + ".tsv"
        written.append(protocol.copy_to(os.path.join(directory, name),
                                        os.path.join(run.output_dir, SUBMISSION)))
    return written


def predicted_tasks(task, glue_dir):
    """The test sets the chosen model of `task` predicts: its own; MNLI's also MNLI-mm's and AX
    (when --glue_dir has its folder)."""
    if task != "mnli":
        return [task]
    if data_dir(glue_dir, "ax") is None:
        logging.warning("--glue_dir=%s has no diagnostic/ (or AX/) folder: AX.tsv is not written",
                        glue_dir)
        return ["mnli", "mnli-mm"]
    return ["mnli", "mnli-mm", "ax"]


def submission_names(task, glue_dir):
    """The GLUE files the chosen model of `task` writes."""
    from bert_tasks.classifier import processors

    return [processors.get_processor(name).submission_name + ".tsv"
            for name in predicted_tasks(task, glue_dir)]


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
                     _baseline(choice), str(choice.finished), f"{base} / {large} ({what})"))
        if task == "mnli":
            what, base, large = PAPER_TEST["mnli-mm"]
            rows.append(("mnli-mm", "the MNLI model", "-", "-", "-", "-",
                         f"{base} / {large} ({what})"))
    return header, rows


def _baseline(choice):
    if choice.report is None:
        return "-"
    return choice.report.get("baselines", {}).get(choice.metric, "-")


def run_glue(tasks, glue_dir, max_seq_length, run, learning_rates, epochs, batch_sizes, restarts,
             select_only=False):
    """run_glue.py's work (see the module docstring): the grid, the choice, the predictions, the
    files and the table. Returns (choices, the table's text)."""
    check_tasks(tasks, glue_dir)
    settings = grid(tasks, learning_rates, epochs, batch_sizes, restarts)
    reports = protocol.reports(
        settings, select_only, run_files.read_eval_report,
        lambda setting, directory: fine_tune(setting, directory, run, glue_dir, max_seq_length),
        run.output_dir)
    choices = protocol.choose(settings, reports, metric_of, value_of)
    submission = os.path.join(run.output_dir, SUBMISSION)
    chosen = run_files.read_json_object(os.path.join(submission, CHOSEN)) or {}
    for choice in choices.values():
        if choice.setting is None:
            logging.warning("%s: no setting has finished: nothing to choose or predict",
                            choice.task)
            continue
        logging.info("%s: chose %s (%s %.4f of %d finished settings)", choice.task,
                     choice.setting.name, choice.metric, choice.value, choice.finished)
        files = [os.path.join(submission, name)
                 for name in submission_names(choice.task, glue_dir)]
        if chosen.get(choice.task) == choice.setting.name and all(map(tf.io.gfile.exists, files)):
            logging.info("%s: the same choice as before: its predictions are kept", choice.task)
            continue
        for path in predict(choice, run, glue_dir, max_seq_length):
            logging.info("Wrote %s", path)
        chosen[choice.task] = choice.setting.name
        results.write_text_atomic(os.path.join(submission, CHOSEN), json.dumps(chosen) + "\n")
    wnli_class = None
    if "wnli" in tasks:
        path, wnli_class = predict_wnli_majority(run, glue_dir)
        logging.info("Wrote %s (WNLI: the training set's majority class %r)", path, wnli_class)
    header, rows = table(choices, wnli_class)
    results.write_text_atomic(os.path.join(run.output_dir, RESULTS), protocol.tsv(header, rows))
    return choices, protocol.format_table(header, rows)
