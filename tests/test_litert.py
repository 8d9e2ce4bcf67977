"""bert_runner.serving.litert (export_model.py --format=litert): the raw-text .tflite of the tiny
classifier gives the SavedModel's probabilities in float32 and runs quantised; refusals.

The SavedModel's graph (`bert_tasks.classifier.raw_text.ClassifierExport`) is the reference, run in
process.
Conversions are the cost here (a few seconds each): one per precision, in module fixtures.
"""
import json
import re
import types

import numpy as np
import pytest

from modeling_helpers import (
    EXPORT_LABELS as LABELS, EXPORT_PAIRS as PAIRS, TINY, export_classifier)
from refusals import message
from test_onnx import case_params

VOCAB = str(TINY / "vocab.txt")
MAX_SEQ_LENGTH = 16
# Texts the LiteRT tokenizer splits as the original (printable ASCII, accents, CJK, empty; see
# test_tokenizer_differences for where it does not), more rows than one model call, mixed
# lengths, and one cut to max_seq_length.
SINGLES = ["The dog runs fast.", "Thé BIG cät SINGS?", "猫 and a dog", "", "she can swim",
           "a big red car and a small blue car and a new house on the hill with a green tree",
           "the moon and the stars", "snow", "I see the city from the hill.", "happy birds sing"]


@pytest.fixture(scope="module")
def classifier():
    return export_classifier()


@pytest.fixture(scope="module")
def saved_model_outputs(classifier):
    return _saved_model_outputs(classifier)


def _saved_model_outputs(classifier):
    """The SavedModel graph's outputs on SINGLES and PAIRS."""
    import tensorflow as tf

    from bert_tasks.classifier import raw_text
    from vocab.fast_tokenizer import FastBertTokenizer

    module = raw_text.ClassifierExport(classifier, FastBertTokenizer(VOCAB),
                                                 MAX_SEQ_LENGTH, LABELS)
    singles = module.serve(tf.constant(SINGLES))
    pairs = module.serve_pairs(tf.constant([a for a, _ in PAIRS]),
                               tf.constant([b for _, b in PAIRS]))
    return {name: {k: v.numpy() for k, v in out.items()}
            for name, out in (("singles", singles), ("pairs", pairs))}


@pytest.fixture(scope="module")
def module(classifier):
    from bert_runner.serving import litert
    from bert_tasks.classifier import raw_text

    return litert.text_module(raw_text.convertible(classifier, LABELS), VOCAB, True,
                              MAX_SEQ_LENGTH)


# Full int8's error grows with the logits' scale (the random encoder's integer rounding passes
# through the head): with the head above it is 27% with TensorFlow's interpreter, over
# INT8_MAX_ERROR, and about 8% with a head a quarter as large, whichever interpreter runs it.
INT8_HEAD_SCALE = 0.25


@pytest.fixture(scope="module")
def int8_case():
    """(module, SavedModel outputs) of the classifier with an INT8_HEAD_SCALE head."""
    from bert_runner.serving import litert
    from bert_tasks.classifier import raw_text

    classifier = export_classifier(INT8_HEAD_SCALE)
    return (litert.text_module(raw_text.convertible(classifier, LABELS), VOCAB, True,
                               MAX_SEQ_LENGTH),
            _saved_model_outputs(classifier))


@pytest.fixture(scope="module")
def float32_export(module, tmp_path_factory):
    """export_dir written by `write_litert` in float32."""
    from bert_runner.serving import litert

    export_dir = tmp_path_factory.mktemp("litert") / "float32"
    litert.write_litert(module, "float32", export_dir)
    return export_dir


def _run(model, singles=SINGLES, pairs=PAIRS, per_text=False):
    """{"singles": outputs, "pairs": outputs}, in one call each (per_text: a call per text)."""
    def call(key, **texts):
        runner = model.get_signature_runner(key)
        if not per_text:
            return runner(**{name: np.array(rows) for name, rows in texts.items()})
        calls = [runner(**{name: np.array([rows[i]]) for name, rows in texts.items()})
                 for i in range(len(next(iter(texts.values()))))]
        return {name: np.concatenate([c[name] for c in calls]) for name in calls[0]}

    out = {"singles": call("serving_default", text_a=singles)}
    if pairs:
        out["pairs"] = call("pairs", text_a=[a for a, _ in pairs], text_b=[b for _, b in pairs])
    return out


@pytest.mark.large
def test_float32_model_gives_the_saved_models_outputs(float32_export, saved_model_outputs):
    from bert_runner.serving import litert

    assert sorted(p.name for p in float32_export.parent.iterdir()) == ["float32"]  # no temporary
    metadata = json.loads((float32_export / "export.json").read_text())
    assert metadata["format"] == "litert/classifier" and metadata["quantization"] == "float32"
    assert metadata["labels"] == LABELS and metadata["max_seq_length"] == MAX_SEQ_LENGTH
    model = litert.interpreter(model_path=str(float32_export / "model.tflite"))
    got = _run(model)
    for name in ("singles", "pairs"):
        expected = saved_model_outputs[name]
        np.testing.assert_allclose(got[name]["probabilities"], expected["probabilities"],
                                   atol=1e-5, rtol=0)
        assert got[name]["label"].tolist() == expected["label"].tolist()
        assert got[name]["label_names"].tolist() == expected["label_names"].tolist()
    # The inputs do give different outputs, so equality above means something.
    assert np.ptp(saved_model_outputs["singles"]["probabilities"], axis=0).max() > 0.05
    empty = model.get_signature_runner("serving_default")(text_a=np.array([], dtype=object))
    assert empty["probabilities"].shape == (0, 3) and empty["label"].shape == (0,)


@pytest.mark.large
@pytest.mark.parametrize("quantization, tolerance", [("float16", 0.01), ("int8", 0.5)])
def test_quantized_models_convert_and_run(request, float32_export, monkeypatch, quantization,
                                          tolerance):
    """Smaller than float32, and near it (full int8 of a random head on 13 calibration texts
    is only a smoke test: docs/export.md has the accuracy of real models)."""
    from bert_runner.serving import litert

    if quantization == "int8":
        module, saved_model_outputs = request.getfixturevalue("int8_case")
    else:
        module = request.getfixturevalue("module")
        saved_model_outputs = request.getfixturevalue("saved_model_outputs")

    blob = litert.convert(module, quantization,
                                 calibration_texts=SINGLES + PAIRS)
    assert len(blob) < (float32_export / "model.tflite").stat().st_size
    if quantization == "int8":
        # Full int8 was checked against the float graph before it was returned; here it passed,
        # a model whose outputs move more than INT8_MAX_ERROR is refused.
        monkeypatch.setattr(litert, "INT8_MAX_ERROR", 0.0)
        with pytest.raises(ValueError, match=re.escape(message("litert-int8-inaccurate"))):
            litert._check_int8_outputs(blob, module, SINGLES + PAIRS)
    # Full int8 answers one text per call (litert.one_text_signatures).
    got = _run(litert.interpreter(model_content=blob), per_text=quantization == "int8")
    for name in ("singles", "pairs"):
        probabilities = got[name]["probabilities"]
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=0.01)  # int8 steps: 1/256
        np.testing.assert_allclose(probabilities, saved_model_outputs[name]["probabilities"],
                                   atol=tolerance, rtol=0)


def test_tokenizer_differences_are_named():
    """tf.text's normaliser drops no control characters and folds full-width forms: the
    LiteRT tokenizer differs from the original there, and `tokenizer_differences` says so."""
    from bert_runner.serving import litert

    same = ["The dog runs fast.", "Thé BIG cät SINGS?", "猫 and a dog", ""]
    differ = ["dog\x00cat", "a ｂｉｇ dog"]  # NUL; full-width letters
    found = litert.tokenizer_differences(VOCAB, True, same + differ)
    assert [text for text, _, _ in found] == differ


def test_a_graph_with_ops_litert_lacks_is_refused():
    """The converter passes unknown ops through as custom ops; the model is run once before it
    is written, so such a graph is refused at export."""
    import tensorflow as tf

    from bert_runner.serving import litert

    class Regex(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, text_a):
            return {"out": tf.strings.regex_replace(text_a, "a", "b")}

        def signatures(self):
            return {"serving_default": self.serve}

    with pytest.raises(ValueError, match=re.escape(message("litert-conversion-failed"))):
        litert.convert(Regex(), "float32")


def _flags(**values):
    defaults = dict(format="litert", mixed_precision=None, long_documents=False, pooling=None,
                    task_name="MNLI", quantization="float32", calibration_file=None,
                    checkpoint=str(TINY / "bert_model.ckpt"))
    return types.SimpleNamespace(**{**defaults, **values})


@pytest.mark.parametrize("values", [
    dict(task_name=None), dict(pooling="mean"), dict(task_name="multilabel"),
    dict(long_documents=True)])
def test_what_does_not_convert_is_refused_in_one_line(values):
    from bert_runner.serving import conversion
    from bert_tasks.serving import register_all

    register_all()
    with pytest.raises(ValueError, match=re.escape(message("litert-onnx-model-kind"))):
        conversion.convertible_from_config(_flags(**values), files=None)


def test_mixed_precision_and_int8_without_texts_are_refused(tmp_path):
    from bert_runner.serving import conversion, litert

    with pytest.raises(ValueError, match=re.escape(message("litert-mixed-precision"))):
        conversion.convertible_from_config(_flags(mixed_precision="bf16"), files=None)
    with pytest.raises(ValueError, match=re.escape(message("litert-int8-calibration"))):
        litert.export_from_config(_flags(quantization="int8"), files=None)
    (tmp_path / "blank.txt").write_text("\n  \n")
    with pytest.raises(ValueError, match=re.escape(message("litert-calibration-empty"))):
        litert.read_calibration_file(str(tmp_path / "blank.txt"))
    (tmp_path / "texts.txt").write_text("\ufeffa dog\n\nthe cat\ta bird\n")
    assert litert.read_calibration_file(str(tmp_path / "texts.txt")) == [
        "a dog", ("the cat", "a bird")]


# The tasks whose runs (their run.json's task) convert to LiteRT, and how far each quantization's
# float outputs may be from the SavedModel's on test_onnx's inputs for them (tiny random runs:
# SWAG's logits moved by up to 1e-4 in float16, 0.016 in dynamic_int8; SQuAD's by 2e-3 in
# float16, ELECTRA's answerable logit by 0.078 in dynamic_int8); their choices, tags, pieces and
# windows are the SavedModel's. ELECTRA's beams: at least 90% of their positions the
# SavedModel's (99.8% in float16, 96% in dynamic_int8), their log-probabilities those of the
# positions each found.
LITERT_TASKS = ("ner", "squad", "squad-v2", "squad-v2-electra", "swag")
QUANTIZED_TOLERANCE = {"float16": 0.01, "dynamic_int8": 0.1}


@pytest.mark.large
@pytest.mark.parametrize("case", case_params(LITERT_TASKS))
def test_every_task_answers_from_litert_as_from_its_saved_model(case, task_exports):
    """export_model.py --format=litert of a task's run: predict.py --model=<its .tflite> answers
    as from the run's SavedModel in float32 (float outputs within 1e-4, the rest identical, the
    same printed lines); --model=<the directory> of float16 and dynamic_int8 within
    QUANTIZED_TOLERANCE."""
    import io

    from bert_runner.serving import predictor
    from test_onnx import _assert_same_outputs, _assert_same_results, signature_inputs

    _, _, task, _, inputs = task_exports.run(case)
    saved_dir = task_exports.export(case, task)
    saved = task_exports.predictor(saved_dir)
    _, _, (name, tensors) = signature_inputs(saved, inputs)
    expected = saved._call(name, **tensors)
    for quantization in ("float32", *QUANTIZED_TOLERANCE):
        export_dir = task_exports.export(case, "litert", quantization=quantization,
                                         calibration_file=None)
        model = export_dir + "/model.tflite" if quantization == "float32" else export_dir
        converted = task_exports.predictor(model)
        assert converted.format == task and converted.metadata["quantization"] == quantization
        got = converted._call(name, **tensors)
        if quantization == "float32":
            _assert_same_outputs(expected, got)
            _assert_same_results(saved.predict(inputs), converted.predict(inputs))
            printed = []
            for path in (saved_dir, model):
                out = io.StringIO()
                predictor.predict(path, inputs + [""], out=out)
                printed.append(out.getvalue())
            assert printed[0] == printed[1] and printed[0].count("\n") == len(inputs) + 1
            continue
        assert sorted(got) == sorted(expected)
        for key, value in expected.items():
            if "_top_" in key:  # ELECTRA's beams: near-tied candidates may swap places
                assert np.mean(got[key] == value) >= 0.9 or key.endswith("log_probs"), key
            elif np.issubdtype(value.dtype, np.floating):
                np.testing.assert_allclose(got[key], value, rtol=0, err_msg=key,
                                           atol=QUANTIZED_TOLERANCE[quantization])
            else:
                np.testing.assert_array_equal(got[key], value, err_msg=key)


def test_full_int8_of_a_task_run_is_refused_in_one_line(tmp_path):
    """--quantization=int8 of a SWAG run: its calibration is a classifier's texts. The run is
    its run.json alone: the refusal comes from the recorded task, before any model is built
    or checkpoint read."""
    from bert_runner.serving import conversion
    from bert_tasks.serving import register_all

    register_all()
    (tmp_path / "run.json").write_text(json.dumps({"task": "swag"}))
    with pytest.raises(ValueError, match=re.escape(message("litert-onnx-model-kind"))) as error:
        conversion.convertible_from_config(
            _flags(task_name=None, quantization="int8", checkpoint=str(tmp_path)), files=None)
    assert "a swag model (--checkpoint=%s) converts with --quantization=float32" % tmp_path in (
        str(error.value))


@pytest.mark.large
@pytest.mark.xdist_group("task_exports.ner")
def test_a_task_graph_answers_many_inputs_at_once(task_exports):
    """predict.py on a LiteRT NER export with many inputs: TensorFlow runs the module's groups
    side by side, the interpreter one at a time (it corrupted its memory before); the tags are
    the SavedModel's."""
    from test_onnx import _assert_same_results

    _, _, task, _, inputs = task_exports.run("ner")
    many = [" ".join(inputs[i % len(inputs)].split()[:n]) for i in range(3) for n in range(1, 15)]
    saved = task_exports.predictor(task_exports.export("ner", task))
    converted = task_exports.predictor(task_exports.export("ner", "litert", quantization="float32",
                                                           calibration_file=None))
    for _ in range(3):
        _assert_same_results(saved.predict(many), converted.predict(many))
