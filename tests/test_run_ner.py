"""run_ner.py end to end, through the command line: fine-tuning from the tiny original
checkpoint on learnable IOB1 CoNLL data the test writes, both checkpoint layouts, the CoNLL
predictions files scored as conlleval does; in process through the driver: predicting from the
written TF1 checkpoint, and bad input named before any work."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from bert_tasks.ner import conlleval
from ner_helpers import TINY, write_conll_dir

MODEL_FLAGS = ["--bert_config_file=%s" % (TINY / "bert_config.json"),
               "--vocab_file=%s" % (TINY / "vocab.txt"), "--max_seq_length=32"]


def run_ner(*args):
    """Runs the script; returns the CompletedProcess (stdout and stderr together in .stdout)."""
    command = [sys.executable, str(ROOT / "run_ner.py"), *MODEL_FLAGS, *args]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    return subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)


def read_eval_results(path):
    return dict(line.split(" = ") for line in path.read_text().splitlines())


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Fine-tunes from the tiny original checkpoint, evaluates dev and predicts test."""
    tmp = tmp_path_factory.mktemp("ner")
    data_dir = write_conll_dir(tmp / "data", train_documents=40)
    output_dir = tmp / "out"
    proc = run_ner(
        "--data_dir=%s" % data_dir, "--init_checkpoint=%s" % (TINY / "bert_model.ckpt"),
        "--do_train=True", "--do_eval=True", "--do_predict=True", "--train_batch_size=16",
        "--learning_rate=1e-3", "--num_train_epochs=20", "--save_tf1_checkpoint=True",
        "--output_dir=%s" % output_dir)
    assert proc.returncode == 0, proc.stdout[-5000:]
    return data_dir, output_dir, proc.stdout


def test_fine_tunes_and_scores_well_above_chance(trained):
    _, output_dir, log = trained
    # 40 documents x 4 sentences, each in one window: int(160 / 16 * 20) steps (at 120 steps the
    # F1 below was reached for some seeds only).
    assert "Num steps = 200" in log and "*INIT_FROM_CKPT*" in log
    assert "newly initialised: output_weights, output_bias" in log
    assert "Labels: O B-LOC I-LOC B-PER I-PER" in log
    results = read_eval_results(output_dir / "eval_results.txt")
    assert float(results["eval_f1"]) >= 80.0, results
    assert "eval_f1 = %s (baseline: every word O 0.00)" % results["eval_f1"] in log
    assert "test F1 " in log and "(the paper's BERT-Base on CoNLL-2003: 92.4)" in log
    assert {"eval_precision", "eval_recall", "eval_accuracy", "eval_loss", "global_step",
            "eval_f1_LOC", "eval_f1_PER", "eval_recall_PER", "eval_precision_LOC"} < set(results)
    assert results["global_step"] == "200"
    assert (output_dir / "ckpt-200.index").exists()
    assert (output_dir / "bert_model.ckpt.index").exists()
    assert (output_dir / "label_list.txt").read_text().split() == [
        "O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


@pytest.mark.parametrize("prefix", ["eval", "test"])
def test_predictions_files_are_conll_with_a_predicted_column(trained, prefix):
    data_dir, output_dir, _ = trained
    source = "dev.txt" if prefix == "eval" else "test.txt"
    inputs = (ROOT / data_dir / source).read_text().splitlines()
    lines = (output_dir / (prefix + "_predictions.txt")).read_text().splitlines()
    assert len(lines) == len(inputs)
    for given, written in zip(inputs, lines):
        assert written.rsplit(" ", 1)[0] == given if given else written == ""
    # The input is IOB1, and so are the predictions: a chunk's first word is I- (not B-).
    predicted = [line.split()[-1] for line in lines if line]
    assert any(t.startswith("I-") for t in predicted)
    counts = conlleval.count_lines(lines)
    assert (output_dir / (prefix + "_conlleval.txt")).read_text() == conlleval.report(counts)
    if prefix == "eval":
        results = read_eval_results(output_dir / "eval_results.txt")
        assert float(results["eval_f1"]) == pytest.approx(
            conlleval.metrics(counts)["overall"]["f1"], abs=1e-4)


def run_in_process(data_dir, output_dir, seeds=None, **flags):
    """`run_ner.py` with these flags, through the driver in this process."""
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.ner.task import NerTask

    run = RunConfig(str(output_dir), bert_config_file=str(TINY / "bert_config.json"),
                    vocab_file=str(TINY / "vocab.txt"), **flags)
    return driver.run_command(NerTask(str(data_dir), 32), run, seeds=seeds)


def test_predicts_from_the_written_tf1_checkpoint(trained, tmp_path):
    data_dir, output_dir, _ = trained
    run_in_process(data_dir, tmp_path / "out", do_predict=True,
                   init_checkpoint=str(output_dir / "bert_model.ckpt"))
    assert ((tmp_path / "out" / "test_predictions.txt").read_text()
            == (output_dir / "test_predictions.txt").read_text())


def test_seeds_write_each_seeds_files_in_its_directory(trained, tmp_path):
    """--seeds (here evaluating the trained model, so every seed scores alike): each seed's
    eval_results and predictions files in its seed_<n> directory, their spread beside them."""
    data_dir, output_dir, _ = trained
    out = tmp_path / "out"
    run_in_process(data_dir, out, seeds=[1, 2], do_eval=True,
                   init_checkpoint=str(output_dir / "bert_model.ckpt"))
    for seed in (1, 2):
        assert ((out / f"seed_{seed}" / "eval_predictions.txt").read_text()
                == (out / "seed_1" / "eval_predictions.txt").read_text())
        assert (out / f"seed_{seed}" / "eval_results.txt").exists()
    assert not (out / "eval_predictions.txt").exists()
    assert "(seeds 1, 2: " in (out / "eval_results_seeds.txt").read_text()


def test_the_labels_recorded_with_the_starting_model_govern(trained, tmp_path):
    """Into a new output_dir from another run's checkpoint: its label_list.txt gives the labels
    where no training file does, and other --entity_types are refused (the head's outputs would
    carry the wrong tags)."""
    from bert_tasks.ner.sets import NerSet
    from bert_runner.run_config import RunConfig
    from bert_tasks.ner.task import NerTask
    from refusals import message

    data_dir, output_dir, _ = trained
    test = {"predict": NerSet.read(os.path.join(data_dir, "test.txt"))}
    empty = tmp_path / "data"
    empty.mkdir()  # no train.txt
    run = RunConfig(str(tmp_path / "out"), bert_config_file=str(TINY / "bert_config.json"),
                    init_checkpoint=str(output_dir / "bert_model.ckpt"))
    task = NerTask(str(empty), 32)
    assert task.settle(test, run, labels=_governing(run)).label_list == [
        "O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    task = NerTask(str(empty), 32, entity_types=["PER", "LOC"])
    with pytest.raises(ValueError, match=message("ner-labels-differ")):
        task.settle(test, run, labels=_governing(run))
    # LoRA adapters carry their head, and the labels in its order, in their own record.
    from modeling import BertClassifier, checkpoint as checkpoints
    from modeling_helpers import tiny_config

    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    adapters = checkpoints.write_adapters(BertClassifier(tiny_config(), 5), str(tmp_path), {
        "task": "ner", "labels": labels})
    for entity_types, governed in ((None, labels), (["LOC", "PER"], None)):
        task = NerTask(str(empty), 32, entity_types=entity_types)
        run = RunConfig(str(tmp_path / "out"), bert_config_file=str(TINY / "bert_config.json"),
                        init_checkpoint=str(TINY / "bert_model.ckpt"), lora_adapters=adapters)
        if governed is None:
            with pytest.raises(ValueError, match=re.escape(message("ner-labels-differ"))
                               + f".*{re.escape(adapters)}"):
                task.settle(test, run, labels=_governing(run))
        else:
            assert task.settle(test, run, labels=_governing(run)).label_list == governed


def _governing(run):
    """The labels recorded with the model `run` starts from: the driver's plan's."""
    from bert_runner import plan

    return plan.resolve_start(run, 32)[0].labels


def test_bad_input_is_named_before_any_work(tmp_path):
    data_dir = write_conll_dir(tmp_path / "data", 2, 1, 1)
    dev = tmp_path / "data" / "dev.txt"
    lines = dev.read_text().splitlines()
    lines[3] += " extra"
    dev.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="%s:4: 5 columns, but line 1 has 4" % dev):
        run_in_process(data_dir, tmp_path / "out", do_train=True, do_eval=True,
                       init_checkpoint=str(TINY / "bert_model.ckpt"))
    assert not (tmp_path / "out").exists()


@pytest.mark.large
def test_predicts_from_its_hugging_face_export_as_from_the_run(trained, tmp_path):
    """export_model.py --format=huggingface of the run (BertForTokenClassification, its tag set
    as id2label and label_list.txt), then --init_checkpoint=<that directory>: the run's own
    test predictions, its labels taken from the directory."""
    import json

    from test_export import _export_huggingface

    data_dir, output_dir, _ = trained
    _export_huggingface(output_dir, tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForTokenClassification"]
    assert list(config["id2label"].values()) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    run_in_process(data_dir, tmp_path / "out", do_predict=True,
                   init_checkpoint=str(tmp_path / "hf"))
    assert ((tmp_path / "out" / "test_predictions.txt").read_text()
            == (output_dir / "test_predictions.txt").read_text())
