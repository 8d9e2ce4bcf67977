"""The paper's fine-tuning protocol on SQuAD (run_squad_grid.py is the script; this module its
logic; `experiments.protocol` the grid, the resume and the choice it shares with GLUE's).

Every setting of the grid (learning rate x epochs x batch size x restart) is one run_squad run
through the driver, in `<output_dir>/squad/<setting>/`: trained on `--train_file`, predicting and
scoring `--predict_file` (the dev set) with the official evaluation the project has
(`bert_tasks.squad.evaluate`) into its `eval_results.json`, which marks it finished. The setting
with the best dev F1 is chosen: v1.1's F1, or for v2.0 the F1 at the best no-answer threshold
(`best_f1`), the threshold the paper tuned on dev. As for GLUE, a setting folder is reused only
when it holds a run of this command's settings, the version included
(`protocol.check_comparable`), a diverged setting is never chosen, and v2.0's chosen model
predicts again only from the checkpoint its report scored. The chosen model's predictions go to
`<output_dir>/predictions/` (predictions.json, nbest_predictions.json; v2.0: predicted again at
that threshold, with null_odds.json), and `squad_results.tsv` and the printed table hold the
choice and its seed, the spread of the dev value over its restarts and over every finished
setting, the dev value of the best constant answer (`dev baseline`) and the paper's dev scores.
"""
import dataclasses
import functools
import os

from absl import logging

from modeling.checkpoint.files import write_text_atomic
from bert_runner.runs import record as run_records
from experiments import protocol

TASK = "squad"
REPORT = "eval_results.json"
RESULTS = "squad_results.tsv"
PREDICTIONS = "predictions"
# The paper's single-model dev scores, (EM, F1): Table 2 (v1.1), Table 3 (v2.0; Large only).
PAPER_DEV = {False: {"BERT-Base": (80.8, 88.5), "BERT-Large": (84.1, 90.9)},
             True: {"BERT-Large": (78.7, 81.9)}}


@dataclasses.dataclass(frozen=True)
class SquadFiles:
    """What every setting reads: the data, the version, and run_squad's window and answer flags
    (`bert_tasks.squad.task.PostprocessOptions` and the windows)."""

    train_file: str
    predict_file: str
    version_2_with_negative: bool = False
    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30

    def task(self, do_lower_case, null_score_diff_threshold=0.0, train=True):
        from bert_tasks.squad.task import PostprocessOptions, SquadTask

        options = PostprocessOptions(
            n_best_size=self.n_best_size, max_answer_length=self.max_answer_length,
            do_lower_case=do_lower_case, version_2_with_negative=self.version_2_with_negative,
            null_score_diff_threshold=null_score_diff_threshold)
        return SquadTask(self.max_seq_length, options, self.train_file if train else None,
                         self.predict_file, self.doc_stride, self.max_query_length, do_eval=True)


def metric(files):
    return "best_f1" if files.version_2_with_negative else "f1"


def command(setting, run, files):
    """`setting` as a run_squad.py command line (str)."""
    args = {"do_train": "true", "do_predict": "true", "do_eval": "true",
            "train_file": files.train_file, "predict_file": files.predict_file,
            "version_2_with_negative": str(files.version_2_with_negative).lower(),
            **{name: getattr(files, name) for name in (
                "max_seq_length", "doc_stride", "max_query_length", "n_best_size",
                "max_answer_length")}}
    return protocol.command("run_squad.py", setting, run, args)


def read_report(directory):
    """The official scores of a finished setting (its eval_results.json), or None."""
    return run_records.read_run_file(os.path.join(directory, REPORT))


def setting_run(setting, run):
    """The `RunConfig` of `setting`'s run_squad run: trained, predicting the dev set."""
    return dataclasses.replace(setting.run(run), output_dir=setting.output_dir(run.output_dir),
                               do_train=True, do_predict=True)


def identity(setting, run, files):
    """What `setting`'s run is (`run_identity.of`, its training data included), as its folder's
    run.json records it."""
    from bert_runner import run_identity

    task = files.task(run.do_lower_case)
    return run_identity.of(task, setting_run(setting, run),
                           train_examples=_train_examples(files, run.do_lower_case))


@functools.lru_cache(maxsize=None)
def _train_examples(files, do_lower_case):
    """The training questions, read once for all the settings."""
    return files.task(do_lower_case).read_examples("train")


def evaluated(files):
    """What a setting's eval_results.json scores (`protocol.reports`): the dev file's content
    and the flags that make its answers."""
    from bert_runner.runs.hashes import fingerprint

    return {"predict_file_sha256": fingerprint(files.predict_file),
            "n_best_size": files.n_best_size, "max_answer_length": files.max_answer_length}


def implied_identity(report):
    """What a report shows of its run: v2.0's scores hold `best_f1`, v1.1's do not."""
    return {"version_2_with_negative": "best_f1" in report}


def fine_tune(setting, run, files):
    """Trains `setting` into its folder, predicts the dev set and scores it."""
    from bert_runner import driver

    driver.run_command(files.task(run.do_lower_case), setting_run(setting, run))


def predict(choice, run, files):
    """The chosen model's predictions in `<output_dir>/predictions/`; v2.0's predicted again at
    the chosen run's best no-answer threshold. Returns the files written."""
    from bert_runner import driver

    source = choice.setting.output_dir(run.output_dir)
    names = ["predictions.json", "nbest_predictions.json"]
    if files.version_2_with_negative:
        checkpoint = protocol.chosen_checkpoint(choice, run.output_dir)
        threshold = choice.report["best_f1_thresh"]
        source = os.path.join(run.output_dir, TASK, "predict_best_threshold")
        logging.info("Predicting with the best no-answer threshold %g into %s", threshold, source)
        driver.run_command(files.task(run.do_lower_case, threshold, train=False),
                   dataclasses.replace(
                       protocol.chosen_model_files(choice.setting.run(run),
                                                   choice.setting.output_dir(run.output_dir)),
                       output_dir=source, do_predict=True, init_checkpoint=checkpoint))
        names.append("null_odds.json")
    return [protocol.copy_to(os.path.join(source, name),
                             os.path.join(run.output_dir, PREDICTIONS)) for name in names]


def dev_baseline(files):
    """The dev F1 of one answer given to every question, the best of the most frequent and (v2.0)
    no answer (`bert_tasks.squad.evaluate.constant_baselines`)."""
    from bert_tasks.squad import evaluate, io_utils

    return evaluate.constant_baselines(io_utils.read_json(files.predict_file),
                                       files.version_2_with_negative, files.predict_file)["f1"]


def table(choice, files, run):
    """(header, rows) of the results table."""
    header = ("task", "chosen setting", "dev metric", "dev", "dev EM", "restarts at chosen",
              "all settings", "finished", "diverged", "seed", "dev baseline",
              "paper dev (EM / F1)")
    paper = "; ".join(f"{model} {em} / {f1}" for model, (em, f1)
                      in PAPER_DEV[files.version_2_with_negative].items())
    version = "squad v2.0" if files.version_2_with_negative else "squad v1.1"
    counts = (protocol.spread(list(choice.values.values())), str(choice.finished),
              str(choice.diverged))
    if choice.setting is None:
        chosen = f"(all {choice.diverged} diverged)" if choice.diverged else "(none finished)"
        return header, [(version, chosen, choice.metric, "-", "-", "-", *counts, "-",
                         dev_baseline(files), paper)]
    exact = choice.report.get("best_exact" if files.version_2_with_negative else "exact_match")
    return header, [(version, choice.setting.name, choice.metric, f"{choice.value:.2f}",
                     "-" if exact is None else f"{exact:.2f}",
                     protocol.spread(choice.restart_values()), *counts,
                     str(choice.setting.seed(run.random_seed)), dev_baseline(files), paper)]


def run_squad_grid(files, run, learning_rates, epochs, batch_sizes, restarts,
                   select_only=False):
    """run_squad_grid.py's work (see the module docstring). Returns (the `protocol.Choice`, the
    table's text); a grid whose every setting diverged is left to
    `protocol.check_not_diverged`."""
    settings = protocol.grid([TASK], learning_rates, epochs, batch_sizes, restarts)
    protocol.check_comparable(settings, run.output_dir,
                              lambda setting: identity(setting, run, files), read_report,
                              implied_identity)
    reports = protocol.reports(
        settings, select_only, read_report,
        lambda setting, directory: fine_tune(setting, run, files), run.output_dir,
        lambda setting: evaluated(files))
    choice = protocol.choose(settings, reports, lambda task: metric(files),
                             lambda report, name: report[name])[TASK]
    if choice.setting is None:
        logging.warning("squad: %s: nothing to choose or predict",
                        "every finished setting diverged" if choice.diverged
                        else "no setting has finished")
    else:
        logging.info("squad: chose %s (%s %.2f of %d finished settings)", choice.setting.name,
                     choice.metric, choice.value, choice.finished)
        for path in predict(choice, run, files):
            logging.info("Wrote %s", path)
    header, rows = table(choice, files, run)
    write_text_atomic(os.path.join(run.output_dir, RESULTS), protocol.tsv(header, rows))
    return choice, protocol.format_table(header, rows)
