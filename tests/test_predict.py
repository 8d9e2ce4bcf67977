"""predict.py, bert_runner.serving.predictor: an export_model.py SavedModel answers raw text after
one
load; bad input (a directory that is not an export, a missing signature, empty or non-UTF-8
text) is refused in one line.

One tiny classifier export serves every test; the SQuAD, NER and SWAG outputs are checked
against their scripts in tests/test_export.py.
"""
import io
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from modeling_helpers import TINY, tiny_config
from refusals import assert_refused, message

VOCAB = str(TINY / "vocab.txt")
LABELS = ["contradiction", "entailment", "neutral"]


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    from bert_tasks.classifier import raw_text
    from modeling import BertClassifier
    from modeling import checkpoint as checkpoints

    model = BertClassifier(tiny_config(), 3)
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    model.classifier.output_weights.assign(
        np.random.default_rng(5).normal(0.0, 1.0, (3, 32)).astype(np.float32))
    directory = tmp_path_factory.mktemp("serving") / "1"
    raw_text.export_classifier(model, VOCAB, True, 16, LABELS, directory)
    return directory


def recording_calls(patch):
    """The Predictor's signature calls from here on (patched by `patch`), as (name, {input:
    rows})."""
    from bert_runner.serving import predictor

    calls, call = [], predictor.Predictor._call

    def recording(self, name, **tensors):
        calls.append((name, {key: len(value) for key, value in tensors.items()}))
        return call(self, name, **tensors)

    patch.setattr(predictor.Predictor, "_call", recording)
    return calls


@pytest.fixture(scope="module")
def loaded(export_dir):
    """The Predictor, with the signature calls its load made in `warm_up_calls`."""
    from bert_runner.serving import predictor

    with pytest.MonkeyPatch.context() as patch:
        calls = recording_calls(patch)
        model = predictor.Predictor(str(export_dir))
    model.warm_up_calls = calls
    return model


def test_the_load_calls_every_signature_predict_uses_once(loaded):
    """A classifier answers single texts through serving_default and pairs through `pairs`: both
    are built at load with one one-row input, so neither first answer pays for it."""
    assert loaded.warm_up_calls == [("serving_default", {"text_a": 1}),
                                    ("pairs", {"text_a": 1, "text_b": 1})]


def test_predict_py_calls_only_the_signature_its_inputs_use(export_dir, monkeypatch):
    """predict.py has read every input before the load: two single texts are one call of
    serving_default, with no warm-up call before it and no `pairs` built for nothing."""
    from bert_runner.serving import predictor

    calls = recording_calls(monkeypatch)
    out = io.StringIO()
    predictor.predict(str(export_dir), ["The dog runs fast.", "the cat sleeps"], out=out)
    assert calls == [("serving_default", {"text_a": 2})]
    assert len(out.getvalue().splitlines()) == 2


def test_predictor_answers_texts_and_pairs_as_the_signatures(export_dir, loaded):
    import tensorflow as tf

    from bert_runner.serving import predictor

    model = loaded
    assert model.format == "classifier"
    texts = ["The dog runs fast.", "the cat sleeps\tthe old dog walked to the river"]
    results = model.predict(texts)
    pairs = model.model.signatures["pairs"](text_a=tf.constant(["The dog runs fast.",
                                                                "the cat sleeps"]),
                                            text_b=tf.constant(["", "the old dog walked to "
                                                                "the river"]))
    for result, probabilities, label in zip(results, pairs["probabilities"].numpy(),
                                            pairs["label"].numpy()):
        assert list(result["probabilities"]) == LABELS
        np.testing.assert_allclose(list(result["probabilities"].values()), probabilities,
                                   atol=1e-6)
        assert result["label"] == label.decode()
    out = io.StringIO()
    predictor.predict(str(export_dir), texts, output_format="json", out=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["input"] for line in lines] == texts
    assert [line["label"] for line in lines] == [r["label"] for r in results]
    assert model.describe(results[0]).startswith(results[0]["label"] + "  contradiction=")


def test_inputs_from_a_file_and_their_refusals(loaded, export_dir, tmp_path):
    from bert_runner.serving import predictor

    path = tmp_path / "inputs.txt"
    path.write_bytes("\ufeffThe dog runs fast.\n\nthe cat\tsleeps\n".encode("utf-8"))
    inputs = predictor.read_inputs(input_file=str(path))
    assert [(i.text, i.source) for i in inputs] == [
        ("The dog runs fast.", f"line 1 of --input_file={path}"),
        ("", f"line 2 of --input_file={path}"),
        ("the cat\tsleeps", f"line 3 of --input_file={path}")]
    # One output line per input line, a blank one for a blank line.
    for output_format in ("text", "json"):
        out = io.StringIO()
        predictor.predict(str(export_dir), input_file=str(path), output_format=output_format,
                          out=out)
        lines = out.getvalue().split("\n")[:-1]
        assert len(lines) == 3 and lines[0] and lines[2], lines
        assert lines[1] == ("" if output_format == "text" else '{"input": ""}')
    path.write_bytes(b"fine\n\xff\xfe bad\n")
    with pytest.raises(ValueError, match=re.escape(message("predict-not-utf8"))) as error:
        predictor.read_inputs(input_file=str(path))
    assert str(error.value).startswith(f"line 2 of --input_file={path} is not UTF-8 (byte 0xff")
    with pytest.raises(ValueError, match=re.escape(message("predict-not-utf8"))):
        predictor.read_inputs(["ok", "caf\udce9"])  # how sys.argv holds a Latin-1 byte

    with pytest.raises(ValueError, match=re.escape(message("predict-empty-text"))) as error:
        loaded.predict(["fine", ""])
    assert str(error.value).startswith("input 2 has an empty text")
    with pytest.raises(ValueError, match="input 1 has 3 tab-separated field"):
        loaded.predict(["a\tb\tc"])


def test_a_directory_that_is_not_an_export_is_refused(export_dir, tmp_path):
    import tensorflow as tf

    from bert_runner.serving import predictor

    from bert_runner.serving import saved_model
    from bert_tasks.serving import register_all

    register_all()  # the formats the message names
    with pytest.raises(ValueError, match=re.escape(message("predict-not-a-saved-model"))):
        predictor.Predictor(str(tmp_path))
    # A model.tflite or model.onnx without its export.json: the formats predict.py takes.
    for name in ("model.tflite", "model.onnx"):
        other = tmp_path / name.replace(".", "_")
        other.mkdir()
        (other / name).write_bytes(b"")
        with pytest.raises(ValueError, match=re.escape(
                f"--model={other} is neither a SavedModel directory (saved_model.pb) nor an ONNX "
                "or LiteRT export (model.onnx or model.tflite, export.json) nor a Hugging Face "
                "directory (config.json, model.safetensors): give an --export_dir of "
                "export_model.py --format=classifier|embedding|fill_mask|ner|squad|swag, onnx, "
                "litert or huggingface")):
            predictor.Predictor(str(other))
    # A SavedModel with the classifier's export.json but without its `pairs` signature (a
    # module of one function: the check reads the signatures' names before anything else).
    partial = tmp_path / "partial"
    module = tf.Module()
    module.serve = tf.function(lambda text_a: {"probabilities": tf.strings.length(text_a)},
                               input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(partial), signatures={"serving_default": module.serve})
    tf.io.gfile.makedirs(str(partial / "assets.extra"))
    metadata = saved_model.METADATA_FILE
    (partial / metadata).write_text((export_dir / metadata).read_text())
    with pytest.raises(ValueError, match=re.escape(message("predict-missing-signature"))) as e:
        predictor.Predictor(str(partial))
    assert "has no signature 'pairs' (it has: serving_default)" in str(e.value)


def test_cli_refuses_text_that_is_not_utf8(export_dir):
    """The one script launch: stdin with a Latin-1 line, one line and exit code 2."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.run(
        [sys.executable, "predict.py", f"--model={export_dir}"], cwd=ROOT,
        input="The dog runs fast.\ncaf\xe9\n".encode("latin-1"), capture_output=True,
        env={**env, "TF_CPP_MIN_LOG_LEVEL": "2"}, timeout=300)
    process.stderr = process.stderr.decode("utf-8", "replace")
    assert_refused(process, "predict-not-utf8")
    assert "line 2 of stdin is not UTF-8 (byte 0xe9 at column 4)" in process.stderr
    assert process.stdout == b""
