"""eval_results.txt, test_results.tsv and GLUE submission files, byte for byte."""
import json

import numpy as np
import pytest

from bert_tasks.classifier import outputs, processors
from bert_runner import results
from bert_tasks.classifier.features import InputExample
from modeling.checkpoint import files


def test_eval_results_format(tmp_path):
    path = tmp_path / "eval_results.txt"
    results.write_eval_results(str(path), {
        "loss": np.float32(0.6931472), "global_step": np.int64(344),
        "eval_loss": np.float32(0.5), "eval_accuracy": np.float32(0.75), "eval_f1": 0.8})
    assert path.read_text() == ("eval_accuracy = 0.75\neval_f1 = 0.8\neval_loss = 0.5\n"
                                "global_step = 344\nloss = 0.6931472\n")


def test_test_results_match_original_format(fixtures_dir, tmp_path):
    inputs = json.loads((fixtures_dir / "classifier" / "test_results_example_inputs.json")
                        .read_text())
    logits = np.asarray(inputs["logits_float32"], dtype=np.float32)
    # The fixture's probabilities were made as exp(l) / sum(exp(l)) in float32.
    probabilities = np.exp(logits) / np.sum(np.exp(logits), axis=-1, keepdims=True)
    path = tmp_path / "test_results.tsv"
    outputs.write_test_results(str(path), probabilities, inputs["num_actual_predict_examples"])
    original = fixtures_dir / "classifier" / "test_results_example.tsv"
    assert path.read_bytes() == original.read_bytes()
    with pytest.raises(ValueError, match="expected at least 5 rows"):
        outputs.write_test_results(str(path), probabilities, 5)


def test_glue_submission_files(tmp_path):
    test = [InputExample("test-0", "a", None, "0", index="0"),
            InputExample("test-1", "b", None, "0", index="1")]
    # A third row of TPU padding, which the file leaves out.
    probabilities = np.array([[0.9, 0.1, 0.0], [0.2, 0.3, 0.5], [1.0, 0.0, 0.0]], np.float32)
    ax = processors.get_processor("ax")
    path = outputs.write_glue_submission(
        str(tmp_path), ax, test, outputs.predicted_values(probabilities, ax.is_regression))
    assert path == str(tmp_path / "AX.tsv")
    assert (tmp_path / "AX.tsv").read_text() == "index\tprediction\n0\tcontradiction\n1\tneutral\n"

    stsb = processors.get_processor("sts-b")
    scores = outputs.predicted_values(np.array([[4.25], [0.1]], np.float32), stsb.is_regression)
    outputs.write_glue_submission(str(tmp_path), stsb, test[:2], scores)
    assert (tmp_path / "STS-B.tsv").read_text() == "index\tprediction\n0\t4.25\n1\t0.1\n"
    # STS-B's scores are on [0, 5]; the regression head is not (a diverged run: 9.4e12).
    test_3 = test + [InputExample("test-2", "c", None, "0", index="2")]
    scores = outputs.predicted_values(np.array([[9.4e12], [-0.3], [2.5]], np.float32), True)
    outputs.write_glue_submission(str(tmp_path), stsb, test_3, scores)
    assert (tmp_path / "STS-B.tsv").read_text() == (
        "index\tprediction\n0\t5.0\n1\t0.0\n2\t2.5\n")

    mnli_mm = processors.get_processor("mnli-mm")
    outputs.write_glue_submission(str(tmp_path), mnli_mm, test[:1], [1])
    assert (tmp_path / "MNLI-mm.tsv").read_text() == "index\tprediction\n0\tentailment\n"

    with pytest.raises(ValueError, match="XNLI has no GLUE submission file"):
        outputs.write_glue_submission(str(tmp_path), processors.get_processor("xnli"), test, [0])
    with pytest.raises(ValueError, match="2 test examples but only 1 predictions"):
        outputs.write_glue_submission(str(tmp_path), ax, test, [0])


def test_outputs_are_never_half_written(tmp_path):
    path = tmp_path / "out" / "eval_results.txt"
    files.write_text_atomic(str(path), "old\n")
    with pytest.raises(RuntimeError):
        with files.atomic_output(str(path)) as tmp_name:
            with open(tmp_name, "w") as f:
                f.write("partial")
            raise RuntimeError("killed")
    assert path.read_text() == "old\n"
    assert [p.name for p in path.parent.iterdir()] == ["eval_results.txt"]
