"""run_squad.py end to end, through the command line: fine-tuning a small model on a learnable
SQuAD-format set to F1 >= 0.9, bad input named in one line; in process through the driver: v2.0
prediction with scores, the original's flag checks."""
import json
import os
import random
import re
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT

TINY = FIXTURES / "modeling" / "tiny"

# Word classes of the tiny fixture vocabulary. An answer is "<adjective> <animal>" right after the
# marker "star"; neither class occurs elsewhere, so the span is learnable in a few hundred steps.
ADJECTIVES = "big small old new".split()
ANIMALS = "dog cat bird fish".split()
FILLER = ("tree house car road river city hill sun rain snow wind red blue green good bad fast "
          "slow happy sad run walk jump swim read write sing play eat drink sleep see").split()
QUESTION = "what is by the star ?"

# 40 context words; at max_seq_length 32 the question takes 6 pieces, leaving 23 per window:
# windows start at 0, 8, 16, 24, so every context needs 4 windows.
WINDOW_FLAGS = ["--max_seq_length=32", "--doc_stride=8", "--max_query_length=8"]


def squad_data(num_questions, seed, impossible_every=0, context_words=40):
    """A SQuAD v1.1 document (v2.0 with `impossible_every`: every n-th question has no star and is
    unanswerable). Returns (data dict, {qas_id: answer text or ""})."""
    rng = random.Random(seed)
    paragraphs, answers = [], {}
    for i in range(num_questions):
        words = [rng.choice(FILLER) for _ in range(context_words)]
        qa = {"id": "q%d" % i, "question": QUESTION}
        if impossible_every and i % impossible_every == 0:
            qa.update(is_impossible=True, answers=[])
            answers[qa["id"]] = ""
        else:
            position = rng.randrange(context_words - 2)
            answer = [rng.choice(ADJECTIVES), rng.choice(ANIMALS)]
            words[position:position + 3] = ["star"] + answer
            text = " ".join(answer)
            start = len(" ".join(words[:position + 1])) + 1
            qa["answers"] = [{"text": text, "answer_start": start}]
            if impossible_every:
                qa["is_impossible"] = False
            answers[qa["id"]] = text
        paragraphs.append({"context": " ".join(words), "qas": [qa]})
    return {"version": "2.0" if impossible_every else "1.1",
            "data": [{"title": "synthetic", "paragraphs": paragraphs}]}, answers


def run_squad(*args):
    """Runs the script; returns the CompletedProcess (stdout and stderr together in .stdout)."""
    command = [sys.executable, str(ROOT / "run_squad.py"), "--vocab_file=%s" % (TINY / "vocab.txt"),
               *args]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    return subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)


def write_json(path, obj):
    path.write_text(json.dumps(obj))
    return str(path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Fine-tunes from the tiny fixture checkpoint and predicts the v1.1 dev set in one run."""
    tmp = tmp_path_factory.mktemp("squad")
    train_file = write_json(tmp / "train.json", squad_data(192, seed=1)[0])
    dev, answers = squad_data(40, seed=2)
    output_dir = tmp / "out"
    proc = run_squad(
        "--bert_config_file=%s" % (TINY / "bert_config.json"),
        "--init_checkpoint=%s" % (TINY / "bert_model.ckpt"),
        "--do_train=True", "--train_file=%s" % train_file,
        "--do_predict=True", "--predict_file=%s" % write_json(tmp / "dev.json", dev),
        "--train_batch_size=16", "--learning_rate=1e-3", "--num_train_epochs=16",
        "--iterations_per_loop=64", "--output_dir=%s" % output_dir, *WINDOW_FLAGS)
    assert proc.returncode == 0, proc.stdout[-5000:]
    return output_dir, answers, proc.stdout


def test_fine_tunes_predicts_and_scores(trained):
    output_dir, answers, log = trained
    # The original's step count: int(192 questions / 16 * 16 epochs), whatever the windows.
    assert "Num orig examples = 192" in log and "Num split examples = 768" in log
    assert "Num steps = 192" in log and "ckpt-192" in log
    assert "*INIT_FROM_CKPT*" in log and "examples/s" in log
    predictions = json.loads((output_dir / "predictions.json").read_text())
    assert list(predictions) == list(answers)
    scores = json.loads((output_dir / "eval_results.json").read_text())
    assert sorted(scores) == ["exact_match", "f1"]
    assert scores["f1"] >= 90.0, scores
    # Beside each score, the best constant answer's (bert_tasks.squad.evaluate.constant_baselines).
    for key in ("exact_match", "f1"):
        shown = r"%s = %s \(always \".+\" \d+\.\d\d\)" % (key, re.escape(str(scores[key])))
        assert re.search(shown, log), key
    nbest = json.loads((output_dir / "nbest_predictions.json").read_text())
    assert all(1 <= len(entries) <= 20 for entries in nbest.values())
    assert not (output_dir / "null_odds.json").exists()
    assert sorted(p.name for p in output_dir.glob("*.tf_record")) == ["eval.tf_record",
                                                                     "train.tf_record"]


def squad_task(**kwargs):
    """run_squad.py's task with WINDOW_FLAGS."""
    from bert_tasks.squad.task import PostprocessOptions, SquadTask

    options = PostprocessOptions(
        version_2_with_negative=kwargs.pop("version_2_with_negative", False))
    return SquadTask(32, options, doc_stride=8, max_query_length=8, **kwargs)


def run_in_process(task, output_dir, **flags):
    """run_squad.py's driver call with these flags, in this process."""
    from bert_runner import driver
    from bert_runner.run_config import RunConfig

    return driver.run_command(task, RunConfig(str(output_dir), bert_config_file=str(
        TINY / "bert_config.json"), vocab_file=str(TINY / "vocab.txt"), **flags))


def test_v2_predict_only_restores_and_scores(trained, tmp_path, caplog):
    """--do_predict alone predicts with output_dir's checkpoint; v2.0 adds null odds and the
    HasAns/NoAns and best-threshold scores (as evaluate-v2.0.py with --na-prob-file)."""
    import logging

    output_dir, _, _ = trained
    dev, answers = squad_data(12, seed=3, impossible_every=3)
    caplog.set_level(logging.INFO)
    task = squad_task(predict_file=write_json(tmp_path / "dev-v2.json", dev),
                      version_2_with_negative=True)
    run_in_process(task, output_dir, do_predict=True)
    assert "Restored %s (step 192)" % (output_dir / "ckpt-192") in caplog.text
    null_odds = json.loads((output_dir / "null_odds.json").read_text())
    assert list(null_odds) == list(answers)
    scores = json.loads((output_dir / "eval_results.json").read_text())
    assert scores["total"] == 12 and scores["HasAns_total"] == 8 and scores["NoAns_total"] == 4
    assert {"best_f1", "best_f1_thresh", "best_exact", "best_exact_thresh"} <= set(scores)
    assert scores["HasAns_f1"] >= 90.0, scores  # Learnt; no-answer was never trained.
    # Beside it, the better of no answer (a third of the questions) and the most frequent text.
    from bert_tasks.squad import evaluate

    name, shown = re.search(r"  f1 = %s \(always (no answer|\".+\") ([\d.]+)\)"
                            % scores["f1"], caplog.text).groups()
    text = "" if name == "no answer" else json.loads(name)
    f1 = evaluate.evaluate(dev, {qid: text for qid in answers}, version="2.0")["f1"]
    assert shown == "%.2f" % f1 and f1 >= 100 / 3


def test_malformed_json_names_file_and_path(tmp_path):
    dev, _ = squad_data(2, seed=4)
    del dev["data"][0]["paragraphs"][1]["qas"][0]["question"]
    predict_file = write_json(tmp_path / "dev.json", dev)
    proc = run_squad("--bert_config_file=%s" % (TINY / "bert_config.json"), "--do_predict=True",
                     "--predict_file=%s" % predict_file, "--output_dir=%s" % (tmp_path / "out"),
                     *WINDOW_FLAGS)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout
    assert proc.stdout.rstrip().endswith(
        "run_squad.py: error: %s: data[0].paragraphs[1].qas[0].question: missing" % predict_file)
    assert not (tmp_path / "out").exists()  # Checked before any work is done.


def test_original_flag_checks(tmp_path):
    from bert_runner.splits import NothingToDoError
    from bert_tasks.squad.task import SquadTask

    with pytest.raises(NothingToDoError, match="At least one of `do_train` or `do_predict` must "
                                               "be True."):
        run_in_process(squad_task(), tmp_path, do_eval=True)
    for split in ("train", "predict"):
        with pytest.raises(ValueError, match=f"If `do_{split}` is True, then `{split}_file` must "
                                             "be specified."):
            run_in_process(squad_task(), tmp_path, **{"do_" + split: True})
    with pytest.raises(ValueError, match=r"max_seq_length \(32\) must be greater than "
                                         r"max_query_length \(30\) \+ 3"):
        SquadTask(32, max_query_length=30)
