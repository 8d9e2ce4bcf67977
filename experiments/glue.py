"""The paper's GLUE fine-tuning protocol as one command (run_glue.py is the script; this module is
its logic; `experiments.protocol` the grid, the resume and the choice it shares with SQuAD's).

The paper (section 4.1) fine-tunes each GLUE task with batch 32 for 3 epochs at each learning
rate of 5e-5, 4e-5, 3e-5 and 2e-5, keeps the one best on the dev set, and for BERT-Large restarts
several times (new data order and classifier initialisation, from the same checkpoint) keeping
the best dev model; the chosen models' test predictions are what the GLUE server scores. Here:

* every input a run will read (each task's train, dev and test files; MNLI's mismatched sets and
  diagnostic/ for AX) is checked before the first step, and so is every setting folder that
  exists: its run.json must record the run this command would make there
  (`protocol.check_comparable`: the seed, the checkpoint's content, --max_seq_length, ...);
* every setting of the grid (task x learning rate x epochs x batch size x restart) is one
  run_classifier run through the driver, in `<output_dir>/<task>/<setting>/`, trained and
  evaluated on the dev set; a setting whose `eval_report.json` exists is finished and not run
  again, so a killed command continues where it stopped (a half-trained setting resumes from its
  checkpoint, as run_classifier does);
* per task, the setting with the best dev value of the metric the paper reports for it
  (`SELECTION_METRIC`: Matthews correlation for CoLA, Spearman for STS-B, F1 for MRPC and QQP,
  accuracy otherwise) is chosen; ties go to the earlier setting of the grid; a setting whose dev
  value is not finite diverged and is never chosen. A task whose every finished setting diverged
  gets no submission file, and the command ends refused naming it (`protocol.check_not_diverged`);
* the chosen model (the checkpoint its report scored: `protocol.chosen_checkpoint`) predicts the
  test set, and its GLUE server file (`<TASK>.tsv`: `index` and `prediction`, the label names or
  STS-B's score clipped to [0, 5]) is copied to `<output_dir>/submission/`. The MNLI model also
  scores MNLI-mm's dev set and predicts MNLI-mm's test set and AX (the diagnostic set). WNLI is
  predicted as the paper submitted it: its training set's majority class for every test pair (the
  paper excludes WNLI from training: its dev set is adversarial to models that fit train);
* `glue_results.tsv` and the printed table hold a row for every task whose files are in
  `submission/` (`CHOSEN` keeps each task's rows, so a command on some tasks keeps the others'):
  the chosen setting and its seed, its dev value and the spread over its restarts and over every
  finished setting (0-100), the diverged settings, the task's other dev metric, the dev set's
  baseline, the paper's BERT-Base and BERT-Large test scores (Table 1) and the submission file.

`commands` gives each setting as an ordinary run_classifier.py command, for a cluster's job array
or any scheduler; the command run again with `select_only` then chooses among the finished runs.
"""
import dataclasses
import functools
import json
import os

import tensorflow as tf
from absl import logging

from modeling.checkpoint.files import write_text_atomic
from bert_runner import results
from bert_runner.runs import record as run_records
from bert_tasks.classifier import processors
from experiments import protocol

# The GLUE tasks in the paper's Table 1 order, WNLI last; `TRAINED` are the ones fine-tuned.
GLUE = ("mnli", "qqp", "qnli", "sst-2", "cola", "sts-b", "mrpc", "rte", "wnli")
TRAINED = tuple(task for task in GLUE if task != "wnli")
# The folder of each task under the GLUE download (download_glue_data.py's names).
FOLDERS = {"mnli": "MNLI", "mnli-mm": "MNLI", "qqp": "QQP", "qnli": "QNLI", "sst-2": "SST-2",
           "cola": "CoLA", "sts-b": "STS-B", "mrpc": "MRPC", "rte": "RTE", "wnli": "WNLI"}
AX_FOLDERS = ("diagnostic", "AX")
# The dev metric the paper reports for each task; accuracy for the others.
SELECTION_METRIC = {"cola": "eval_matthews_corrcoef", "sts-b": "eval_spearman",
                    "mrpc": "eval_f1", "qqp": "eval_f1"}
# The dev metric shown beside the selection metric, where the paper's GLUE reports two.
OTHER_METRIC = {"sts-b": "eval_pearson", "mrpc": "eval_accuracy", "qqp": "eval_accuracy"}
# The splits each task's runs read: a fine-tuned task's three; MNLI-mm's and AX's, predicted by
# the MNLI model; WNLI's majority class of train for its test set.
SPLITS = {"mnli-mm": ("dev", "test"), "ax": ("test",), "wnli": ("train", "test")}
# The paper's GLUE test scores (Table 1): (what, BERT-Base, BERT-Large).
PAPER_TEST = {
    "mnli": ("MNLI-m accuracy", 84.6, 86.7), "mnli-mm": ("MNLI-mm accuracy", 83.4, 85.9),
    "qqp": ("F1", 71.2, 72.1), "qnli": ("accuracy", 90.5, 92.7),
    "sst-2": ("accuracy", 93.5, 94.9), "cola": ("Matthews corr.", 52.1, 60.5),
    "sts-b": ("Spearman corr.", 85.8, 86.5), "mrpc": ("F1", 88.9, 89.3),
    "rte": ("accuracy", 66.4, 70.1)}
SUBMISSION = "submission"
# In SUBMISSION: per task whose files are there, the setting they were predicted with (a command
# run again with the same choice keeps them) and the task's rows of the table.
CHOSEN = "chosen.json"
RESULTS = "glue_results.tsv"
HEADER = ("task", "chosen setting", "dev metric", "dev", "restarts at chosen", "all settings",
          "finished", "diverged", "seed", "also on dev", "dev baseline",
          "paper test (Base / Large)", "submission")


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
    """Refuses, before any run and naming the flags: no task, an unknown task, a --glue_dir
    that does not exist, a task folder missing, or a file missing that a run of the tasks would
    read (`SPLITS`; MNLI's also MNLI-mm's and AX's)."""
    if not tasks:
        raise ValueError(f"--tasks is empty: name the GLUE tasks to run ({','.join(GLUE)})")
    for task in tasks:
        if task not in GLUE:
            raise ValueError(f"--tasks: no GLUE folder for --tasks {task!r}: not a GLUE task "
                             f"(the tasks: {', '.join(GLUE)}; MNLI-mm and AX are predicted by "
                             "the MNLI model)")
    if not tf.io.gfile.isdir(glue_dir):
        raise ValueError(f"--glue_dir={glue_dir} does not exist: it is the GLUE download, one "
                         "folder per task and diagnostic/, as GLUE's download script writes it "
                         "(python download_glue_data.py --data_dir=glue_data --tasks=all)")
    for task in tasks:
        if not tf.io.gfile.isdir(data_dir(glue_dir, task)):
            raise ValueError(f"--glue_dir={glue_dir} has no {FOLDERS[task]}/ folder for --tasks "
                             f"{task} (the layout of GLUE's download script)")
        for name in predicted_tasks(task):
            _check_files(name, glue_dir, task)


def _check_files(name, glue_dir, task):
    folder = data_dir(glue_dir, name)
    if folder is None:
        raise ValueError(f"--glue_dir={glue_dir} has no diagnostic/ (or AX/) folder for --tasks "
                         f"{task}: the MNLI model predicts its AX set, a file of every GLUE "
                         "submission (GLUE's download script: --tasks=diagnostic)")
    processor = processors.get_processor(name)
    for which in SPLITS.get(name, ("train", "dev", "test")):
        paths = [os.path.join(folder, file) for file in getattr(processor, which).filenames]
        if not any(map(tf.io.gfile.exists, paths)):
            raise ValueError(f"--glue_dir={glue_dir} has no {' or '.join(paths)}: the "
                             f"{processor.name} {which} set, which --tasks {task} reads")


def metric_of(task):
    return SELECTION_METRIC.get(task, "eval_accuracy")


def command(setting, run, glue_dir, max_seq_length):
    """`setting` as a run_classifier.py command line (str)."""
    return protocol.command(
        "run_classifier.py", setting, run,
        {"task_name": setting.task, "do_train": "true", "do_eval": "true",
         "data_dir": data_dir(glue_dir, setting.task), "max_seq_length": max_seq_length},
        not_passed=("do_predict",))


def _task(task, glue_dir, max_seq_length):
    from bert_tasks.classifier.task import make_task

    return make_task(task, max_seq_length, data_dir(glue_dir, task))


def setting_run(setting, run):
    """The `RunConfig` of `setting`'s run_classifier run: trained and evaluated in its folder."""
    return dataclasses.replace(setting.run(run), output_dir=setting.output_dir(run.output_dir),
                               do_train=True, do_eval=True, do_predict=False)


def identity(setting, run, glue_dir, max_seq_length):
    """What `setting`'s run is (`run_identity.of`, its training data included), as its folder's
    run.json records it."""
    from bert_runner import run_identity

    task = _task(setting.task, glue_dir, max_seq_length)
    return run_identity.of(task, setting_run(setting, run), train_examples=_train_examples(
        setting.task, glue_dir, max_seq_length))


def evaluated(setting, glue_dir, max_seq_length):
    """What `setting`'s dev report scores (`protocol.reports`): the task's dev examples."""
    return {"eval_data_sha256": _examples_sha256(setting.task, glue_dir, max_seq_length, "eval")}


@functools.lru_cache(maxsize=None)
def _examples_sha256(task_name, glue_dir, max_seq_length, split):
    from bert_runner import run_identity

    return run_identity.examples_sha256(
        _task(task_name, glue_dir, max_seq_length).read_examples(split))


@functools.lru_cache(maxsize=None)
def _train_examples(task_name, glue_dir, max_seq_length):
    """A task's training examples, read once for all its settings."""
    return _task(task_name, glue_dir, max_seq_length).read_examples("train")


def fine_tune(setting, run, glue_dir, max_seq_length):
    """Trains `setting` into its folder and evaluates it on the dev set (its eval_report.json)."""
    from bert_runner import driver

    driver.run_command(_task(setting.task, glue_dir, max_seq_length), setting_run(setting, run))


def value_of(report, metric):
    return report["metrics"][metric]


def test_data(task, glue_dir, max_seq_length):
    """{task predicted: its test examples' hash} of what the chosen model of `task` predicts:
    a submission file is kept only for the same chosen setting and the same test data."""
    return {name: _examples_sha256(name, glue_dir, max_seq_length, "predict")
            for name in predicted_tasks(task)}


def predict_dir(run, task):
    """Where the MNLI model predicts `task` (MNLI-mm, AX)."""
    return os.path.join(run.output_dir, "mnli", f"predict_{task}")


def predict(choice, checkpoint, run, glue_dir, max_seq_length):
    """The test predictions of the chosen model (`checkpoint`, the newest of its folder): its
    GLUE file in `<output_dir>/submission/` (MNLI's model also scores MNLI-mm's dev set and
    predicts MNLI-mm and AX, in `predict_dir`). Returns the files written."""
    from bert_runner import driver

    chosen = choice.setting.output_dir(run.output_dir)
    base = dataclasses.replace(choice.setting.run(run), do_train=False, do_eval=False,
                               do_predict=True)
    written = []
    for task in predicted_tasks(choice.task):
        # The chosen run predicts its own test set in its folder (restoring its newest
        # checkpoint); MNLI's model the others apart, from that checkpoint.
        config = dataclasses.replace(base, output_dir=chosen)
        if task != choice.task:
            config = dataclasses.replace(protocol.chosen_model_files(base, chosen),
                                         output_dir=predict_dir(run, task),
                                         init_checkpoint=checkpoint, do_eval=task == "mnli-mm")
        task_model = _task(task, glue_dir, max_seq_length)
        driver.run_command(task_model, config)
        name = task_model.processor.submission_name + ".tsv"
        written.append(protocol.copy_to(os.path.join(config.output_dir, name),
                                        os.path.join(run.output_dir, SUBMISSION)))
    return written


def predicted_tasks(task):
    """The test sets the chosen model of `task` predicts: its own; MNLI's also MNLI-mm's and
    AX."""
    return ["mnli", "mnli-mm", "ax"] if task == "mnli" else [task]


def submission_name(task):
    return processors.get_processor(task).submission_name + ".tsv"


def submission_names(task):
    """The GLUE files the chosen model of `task` writes."""
    return [submission_name(name) for name in predicted_tasks(task)]


def predict_wnli_majority(run, glue_dir):
    """WNLI.tsv as the paper submitted it: the training set's majority class for every test
    pair. Returns (the file, the class)."""
    from bert_tasks.classifier import outputs

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


def _score(value):
    """A dev value on the paper's 0-100 scale."""
    return f"{100 * value:.2f}"


def dev_baseline(task, glue_dir):
    """The dev value of `task`'s selection metric without reading the text (0-100): the
    majority class's accuracy; for F1 the positive class everywhere; for Matthews and Spearman
    correlations a constant prediction, 0."""
    metric = "eval_accuracy" if task == "mnli-mm" else metric_of(task)
    if metric in ("eval_matthews_corrcoef", "eval_spearman"):
        return "constant 0.00"
    labels = [example.label for example in
              processors.get_processor(task).get_dev_examples(data_dir(glue_dir, task))]
    if metric == "eval_f1":
        positive = labels.count("1") / len(labels)
        return f"all '1' {_score(2 * positive / (1 + positive))}"
    majority = max(sorted(set(labels)), key=labels.count)
    return f"majority {majority!r} {_score(labels.count(majority) / len(labels))}"


def task_rows(choice, run, glue_dir, earlier=None):
    """The table's rows of a fine-tuned task (dicts keyed by `HEADER`): its choice; MNLI's also
    MNLI-mm's (the MNLI model's mismatched dev score) and AX's. `earlier`: the task's entry of
    `CHOSEN`, whose files submission/ keeps when this command chose nothing."""
    what, base, large = PAPER_TEST[choice.task]
    row = {"task": choice.task, "dev metric": choice.metric, "finished": str(choice.finished),
           "diverged": str(choice.diverged),
           "all settings": protocol.spread(list(choice.values.values()), 100),
           "dev baseline": dev_baseline(choice.task, glue_dir),
           "paper test (Base / Large)": f"{base} / {large} ({what})"}
    if choice.setting is None:
        row["chosen setting"] = (f"(all {choice.diverged} diverged)" if choice.diverged
                                 else "(none finished)")
        row["submission"] = "none"
        if earlier:
            row["submission"] = (f"none (submission/ keeps {submission_name(choice.task)} of "
                                 f"{earlier['setting']}, an earlier command's choice)")
        return [row]
    other = OTHER_METRIC.get(choice.task)
    seed = str(choice.setting.seed(run.random_seed))
    row.update({"chosen setting": choice.setting.name, "dev": _score(choice.value),
                "restarts at chosen": protocol.spread(choice.restart_values(), 100),
                "seed": seed, "submission": submission_name(choice.task),
                "also on dev": f"{other} {_score(choice.report['metrics'][other])}"
                if other else "-"})
    if choice.task != "mnli":
        return [row]
    mismatched = results.read_eval_report(predict_dir(run, "mnli-mm"))
    what, base, large = PAPER_TEST["mnli-mm"]
    return [row,
            {"task": "mnli-mm", "chosen setting": "the MNLI model", "dev metric": "eval_accuracy",
             "dev": _score(mismatched["metrics"]["eval_accuracy"]) if mismatched else "-",
             "seed": seed, "dev baseline": dev_baseline("mnli-mm", glue_dir),
             "paper test (Base / Large)": f"{base} / {large} ({what})",
             "submission": submission_name("mnli-mm")},
            {"task": "ax", "chosen setting": "the MNLI model",
             "dev metric": "(no dev set: the server's Matthews corr.)", "seed": seed,
             "paper test (Base / Large)": "(not in Table 1)", "submission": submission_name("ax")}]


def wnli_rows(wnli_class):
    return [{"task": "wnli", "chosen setting": f"majority class {wnli_class!r}",
             "paper test (Base / Large)": "excluded (65.1 / 65.1 on the leaderboard)",
             "submission": submission_name("wnli")}]


def table(rows_by_task):
    """The results table: (header, rows of str), the rows of each task of `rows_by_task`
    ({task: [row dicts]}) in Table 1's order; a cell a row lacks is '-'."""
    return HEADER, [tuple(row.get(column, "-") for column in HEADER)
                    for task in GLUE for row in rows_by_task.get(task, ())]


def read_chosen(submission):
    """`CHOSEN` as {task: {"setting": name or None, "rows": [row dicts]}}; a task recorded by
    name alone (written before the rows were kept) gets a row saying how to make its own."""
    chosen = run_records.read_run_file(os.path.join(submission, CHOSEN)) or {}
    for task, entry in chosen.items():
        if isinstance(entry, str):
            chosen[task] = {"setting": entry, "rows": [{
                "task": task, "chosen setting": entry,
                "submission": f"{submission_name(task)} (its scores: run again with "
                              f"--tasks={task} --select_only)"}]}
    return chosen


def run_glue(tasks, glue_dir, max_seq_length, run, learning_rates, epochs, batch_sizes, restarts,
             select_only=False):
    """run_glue.py's work (see the module docstring): the checks, the grid, the choice, the
    predictions, the files and the table. Returns (choices, the table's text); a task whose
    every setting diverged is left to `protocol.check_not_diverged`."""
    check_tasks(tasks, glue_dir)
    settings = grid(tasks, learning_rates, epochs, batch_sizes, restarts)
    protocol.check_comparable(
        settings, run.output_dir,
        lambda setting: identity(setting, run, glue_dir, max_seq_length),
        results.read_eval_report)
    reports = protocol.reports(
        settings, select_only, results.read_eval_report,
        lambda setting, directory: fine_tune(setting, run, glue_dir, max_seq_length),
        run.output_dir, lambda setting: evaluated(setting, glue_dir, max_seq_length))
    choices = protocol.choose(settings, reports, metric_of, value_of)
    submission = os.path.join(run.output_dir, SUBMISSION)
    chosen = read_chosen(submission)
    predicted = []
    for choice in choices.values():
        if choice.setting is None:
            logging.warning("%s: %s: nothing to choose or predict", choice.task,
                            "every finished setting diverged" if choice.diverged
                            else "no setting has finished")
            continue
        logging.info("%s: chose %s (%s %.4f of %d finished settings, %d diverged)", choice.task,
                     choice.setting.name, choice.metric, choice.value, choice.finished,
                     choice.diverged)
        files = [os.path.join(submission, name) for name in submission_names(choice.task)]
        earlier = chosen.get(choice.task, {})
        if (earlier.get("setting") == choice.setting.name
                and earlier.get("test_data") == test_data(choice.task, glue_dir, max_seq_length)
                and all(map(tf.io.gfile.exists, files))):
            logging.info("%s: the same choice as before: its predictions are kept", choice.task)
            continue
        predicted.append(choice)
    # Every chosen model is checked before the first prediction.
    checkpoints = [protocol.chosen_checkpoint(choice, run.output_dir,
                                              choice.report["metrics"].get("global_step"))
                   for choice in predicted]
    current = {}
    for choice, checkpoint in zip(predicted, checkpoints):
        for path in predict(choice, checkpoint, run, glue_dir, max_seq_length):
            logging.info("Wrote %s", path)
        current[choice.task] = task_rows(choice, run, glue_dir)
        chosen[choice.task] = {"setting": choice.setting.name, "rows": current[choice.task],
                               "test_data": test_data(choice.task, glue_dir, max_seq_length)}
        write_text_atomic(os.path.join(submission, CHOSEN), json.dumps(chosen) + "\n")
    for choice in choices.values():
        if choice.task in current:
            continue
        earlier = chosen.get(choice.task) if choice.setting is None else None
        current[choice.task] = task_rows(choice, run, glue_dir, earlier)
        if choice.setting is not None:
            chosen[choice.task] = {**chosen.get(choice.task, {}), "setting": choice.setting.name,
                                   "rows": current[choice.task]}
    if "wnli" in tasks:
        path, wnli_class = predict_wnli_majority(run, glue_dir)
        logging.info("Wrote %s (WNLI: the training set's majority class %r)", path, wnli_class)
        current["wnli"] = wnli_rows(wnli_class)
        chosen["wnli"] = {"setting": None, "rows": current["wnli"]}
    write_text_atomic(os.path.join(submission, CHOSEN), json.dumps(chosen) + "\n")
    # Every task whose files submission/ holds, this command's as it found them.
    header, rows = table({**{task: entry["rows"] for task, entry in chosen.items()}, **current})
    write_text_atomic(os.path.join(run.output_dir, RESULTS), protocol.tsv(header, rows))
    return choices, protocol.format_table(header, rows)
