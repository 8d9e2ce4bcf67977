"""bert_runner.serving.onnx (export_model.py --format=onnx): the tiny classifier and a pooled
encoder exported with tf2onnx, run by onnxruntime behind our tokenizer, give the SavedModel's
outputs; every task's run (classifier, embedding, SQuAD, NER, SWAG) is answered by predict.py from
its ONNX export as from its SavedModel. The conversions are skipped when the optional packages
(requirements-onnx.txt) are not installed.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURES, ROOT
from modeling_helpers import (
    EXPORT_LABELS as LABELS, EXPORT_PAIRS as PAIRS, TINY, export_classifier, tiny_config)
from optional_packages import require
from refusals import assert_refused, message

VOCAB = str(TINY / "vocab.txt")
MAX_SEQ_LENGTH = 16
SINGLES = ["The dog runs fast.", "Thé BIG cät SINGS?", "猫 and a dog", "", "dog\x00cat",
           "a big red car and a small blue car and a new house on the hill with a green tree",
           "she can swim", "snow", "I see the city from the hill.", "happy birds sing"]


def _require_onnx():
    """Skips without the packages of export_model.py --format=onnx and its predict.py."""
    require("tf2onnx", "onnx", "onnxruntime")


@pytest.fixture(scope="module")
def classifier():
    return export_classifier()


@pytest.mark.large
def test_classifier_gives_the_saved_models_probabilities(classifier, tmp_path, monkeypatch):
    """The tiny classifier converted as a model of COLLECTED_ABOVE_BYTES would be (a collection
    before each tf2onnx pass; every other conversion of the suite has none) answers as its
    SavedModel module."""
    _require_onnx()
    import gc

    import tensorflow as tf

    from bert_runner.serving import onnx
    from bert_tasks.classifier import raw_text
    from vocab.fast_tokenizer import FastBertTokenizer

    collections = []
    collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *args: collections.append(args) or collect(*args))
    monkeypatch.setattr(onnx, "COLLECTED_ABOVE_BYTES", 0)
    onnx.write_onnx(raw_text.convertible(classifier, LABELS), VOCAB, True,
                    MAX_SEQ_LENGTH, tmp_path / "onnx")
    monkeypatch.undo()
    assert len(collections) > 5  # one per optimizer pass and the freezing's release
    metadata = json.loads((tmp_path / "onnx" / "export.json").read_text())
    assert metadata["labels"] == LABELS and metadata["format"] == "onnx/classifier"
    model = onnx.OnnxTextModel(str(tmp_path / "onnx"), num_threads=1)

    saved = raw_text.ClassifierExport(classifier, FastBertTokenizer(VOCAB),
                                                MAX_SEQ_LENGTH, LABELS)
    expected = saved.serve(tf.constant(SINGLES))["probabilities"].numpy()
    np.testing.assert_allclose(model(SINGLES)["probabilities"], expected, atol=1e-5, rtol=0)
    assert np.ptp(expected, axis=0).max() > 0.05  # the inputs do give different outputs
    a, b = [list(texts) for texts in zip(*PAIRS)]
    expected = saved.serve_pairs(tf.constant(a), tf.constant(b))["probabilities"].numpy()
    np.testing.assert_allclose(model(a, b)["probabilities"], expected, atol=1e-5, rtol=0)
    features = model.features(["the dog", "a big red car"])
    assert features["input_ids"].shape == (2, 6)  # padded to the batch's longest row only
    kinds = [node.op_type for node in require("onnx").load(
        str(tmp_path / "onnx" / "model.onnx")).graph.node]
    # Every LayerNorm one node (`onnx_layer_norm`): none left as square roots.
    assert kinds.count("LayerNormalization") >= 5 and "Sqrt" not in kinds


def _batch_norm_form_layer_norm(epsilon=1e-12, hidden=6, negate_mean=True):
    """An ONNX graph of one LayerNorm as tf2onnx writes Keras' (moments, then x * inv +
    (beta - mean * inv) with the mean negated), on float32 x [2, 3, hidden]."""
    onnx, helper, numpy_helper = require("onnx", "onnx.helper", "onnx.numpy_helper")
    TensorProto = onnx.TensorProto
    rng = np.random.default_rng(0)
    constants = [numpy_helper.from_array(value.astype(np.float32), name) for name, value in (
        ("gamma", rng.normal(size=(1, 1, hidden))), ("beta", rng.normal(size=(1, 1, hidden))),
        ("epsilon", np.array(epsilon)))]
    node = helper.make_node
    nodes = [
        node("ReduceMean", ["x"], ["mean"], axes=[2], keepdims=1),
        node("Sub", ["x", "mean"], ["d"]), node("Mul", ["d", "d"], ["d2"]),
        node("ReduceMean", ["d2"], ["var"], axes=[2], keepdims=1),
        node("Add", ["var", "epsilon"], ["ve"]), node("Sqrt", ["ve"], ["s"]),
        node("Reciprocal", ["s"], ["r"]), node("Mul", ["r", "gamma"], ["inv"]),
        node("Mul", ["x", "inv"], ["xi"]),
        node("Neg" if negate_mean else "Identity", ["mean"], ["nm"]),
        node("Mul", ["nm", "inv"], ["mi"]), node("Add", ["mi", "beta"], ["shift"]),
        node("Add", ["xi", "shift"], ["y"])]
    graph = helper.make_graph(
        nodes, "layer_norm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, hidden])], constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.large  # onnx, onnxruntime: the large tier's packages (optional_packages)
def test_a_layer_norm_in_tf2onnx_form_becomes_one_node_with_its_outputs():
    """`fuse_layer_norms`: the batch-normalisation form as one LayerNormalization node, the same
    outputs (float32 rounding); a graph where the pattern breaks (the mean not negated: another
    function) is left as it is."""
    _, onnxruntime = require("onnx", "onnxruntime")

    from bert_runner.serving.onnx_layer_norm import fuse_layer_norms

    x = np.random.default_rng(1).normal(3.0, 2.0, size=(2, 3, 6)).astype(np.float32)

    def run(model):
        session = onnxruntime.InferenceSession(model.SerializeToString(),
                                               providers=["CPUExecutionProvider"])
        return session.run(None, {"x": x})[0]

    model = _batch_norm_form_layer_norm()
    expected = run(model)
    assert fuse_layer_norms(model) == 1
    assert [n.op_type for n in model.graph.node] == ["LayerNormalization"]
    assert sorted(i.name for i in model.graph.initializer) == [
        "beta/layer_norm_flat", "gamma/layer_norm_flat"]
    np.testing.assert_allclose(run(model), expected, atol=1e-5, rtol=0)
    other = _batch_norm_form_layer_norm(negate_mean=False)
    assert fuse_layer_norms(other) == 0 and len(other.graph.node) == 13


@pytest.mark.large
def test_embedding_gives_the_saved_models_vectors(tmp_path):
    _require_onnx()
    import tensorflow as tf

    from bert_runner.serving import embedding, onnx
    from modeling import BertModel
    from modeling import checkpoint as checkpoints
    from vocab.fast_tokenizer import FastBertTokenizer

    encoder = BertModel(tiny_config())
    checkpoints.load_checkpoint(encoder, TINY / "bert_model.ckpt", strict=False)
    onnx.write_onnx(embedding.convertible(encoder, "mean", True), VOCAB, True, MAX_SEQ_LENGTH,
                    tmp_path / "onnx")
    got = onnx.OnnxTextModel(str(tmp_path / "onnx"))(SINGLES)["embedding"]
    saved = embedding.EmbeddingExport(encoder, FastBertTokenizer(VOCAB), MAX_SEQ_LENGTH, "mean",
                                      True)
    np.testing.assert_allclose(got, saved.serve(tf.constant(SINGLES))["embedding"].numpy(),
                               atol=1e-5, rtol=0)


def test_the_converters_import_leaves_the_environment_as_it_was(monkeypatch):
    """Importing tf2onnx.convert sets TF_CPP_MIN_LOG_LEVEL=3 in os.environ; through onnx.require
    the processes started after an ONNX export get the environment they had before (the
    suite's scripts fork only where it is the session's)."""
    require("tf2onnx")
    from bert_runner.serving import onnx

    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "1")
    monkeypatch.delitem(sys.modules, "tf2onnx.convert", raising=False)  # imported afresh
    before = dict(os.environ)
    (converter,) = onnx.require("tf2onnx.convert")
    assert converter.__name__ == "tf2onnx.convert" and dict(os.environ) == before


def test_missing_package_names_the_requirements_file(monkeypatch, tmp_path):
    from bert_runner.serving import onnx, predictor
    from bert_tasks.serving import register_all

    monkeypatch.setitem(sys.modules, "tf2onnx", None)  # import fails as if not installed
    with pytest.raises(ValueError, match=re.escape(message("onnx-missing-package"))) as error:
        onnx.require("tf2onnx")
    assert str(error.value).startswith("ONNX export and inference need tf2onnx")
    # predict.py on an ONNX export without onnxruntime: the same line.
    register_all()
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    (tmp_path / "model.onnx").write_bytes(b"")
    (tmp_path / "export.json").write_text(json.dumps(
        {"format": "onnx/classifier", "do_lower_case": True, "max_seq_length": 16,
         "labels": LABELS}))
    with pytest.raises(ValueError, match=re.escape(message("onnx-missing-package"))):
        predictor.Predictor(str(tmp_path))


# Every task's run (test_export's tiny runs with random heads): export_model.py's SavedModel and
# ONNX exports, predict.py on each. (run.json task, model kind, outputs, labels, export flags,
# predict.py's inputs)
SQUAD_FLAGS = dict(max_query_length=6, doc_stride=4, n_best_size=5, max_answer_length=6)
SQUAD_INPUTS = ["Who walked to the river?\tThe old dog walked to the river with a big cat and "
                "the cat sleeps by the hill.",
                "what is red?\tA big red car and a small blue car and a new house.",
                "Where?\tThé BIG cät SINGS? 猫 and a dog\tnear the city"]
TASK_RUNS = {
    "classifier": ("classifier/mnli", "classifier", 3, None, {"task_name": "MNLI"},
                   SINGLES[:3] + ["The dog runs fast.\ta big cat", "the cat sleeps\tsnow"]),
    "regression": ("classifier/sts-b", "classifier", 1, None, {"task_name": "STS-B"},
                   ["The dog runs fast.\ta big cat", "the cat sleeps\tsnow"]),
    "embedding": ("classifier/mnli", "classifier", 3, None,
                  {"pooling": "mean", "normalize": True}, [text for text in SINGLES if text]),
    "squad": ("squad", "span", None, None, SQUAD_FLAGS, SQUAD_INPUTS[:2]),
    "squad-v2": ("squad", "span", None, None, {**SQUAD_FLAGS, "version_2_with_negative": True},
                 SQUAD_INPUTS[:2]),
    # ELECTRA's own head: its beams (static windows) and answerable logit.
    "squad-v2-electra": ("squad", "span", None, None,
                         {**SQUAD_FLAGS, "version_2_with_negative": True}, SQUAD_INPUTS[:2]),
    "ner": ("ner", "token", 3, ["B-PER", "I-PER", "O"], {},
            ["Steve Smith's dog ran to New York, and " * 2, "Thé BIG cät SINGS?", "snow"]),
    "swag": ("swag", "multiple_choice", 4, None, {},
             ["The dog runs fast.\tto the river\tthe cat sleeps\ta big red car",
              "Thé BIG cät SINGS?\tshe can swim\twe eat\t猫 and a dog"]),
}


ELECTRA_TINY = FIXTURES / "electra" / "tiny"


def _export(run, fmt, export_dir, vocab=VOCAB, **flags):
    """export_model.py --format=`fmt` of the run directory `run` (`test_export.export_run`)."""
    from test_export import export_run

    return export_run(run, fmt, export_dir, vocab, **flags)


def _assert_same_outputs(saved, converted):
    """The SavedModel's and the ONNX export's signature outputs: float ones within 1e-4 (or 2
    float32 steps: ELECTRA's masked log-probabilities near -1000), the others (word-pieces,
    windows, tags, labels) identical."""
    assert sorted(saved) == sorted(converted)
    for name, value in saved.items():
        if np.issubdtype(value.dtype, np.floating):
            np.testing.assert_allclose(converted[name], value, atol=1e-4, rtol=2.5e-7,
                                       err_msg=name)
        else:
            np.testing.assert_array_equal(converted[name], value, err_msg=name)


def _assert_same_results(saved, converted):
    """predict.py's results (JSON-able): floats within 1e-4, everything else identical."""
    if isinstance(saved, float):
        assert converted == pytest.approx(saved, abs=1e-4)
    elif isinstance(saved, (list, dict)):
        assert type(converted) is type(saved) and len(converted) == len(saved)
        for key in (saved if isinstance(saved, dict) else range(len(saved))):
            _assert_same_results(saved[key], converted[key])
    else:
        assert converted == saved


def task_run(case, directory):
    """(the run directory of TASK_RUNS[case], made in `directory`, its vocabulary, its
    SavedModel's --format, its export flags, predict.py's inputs)."""
    from modeling.checkpoint import load_config
    from test_export import _fine_tuned_run

    task, kind, outputs, labels, flags, inputs = TASK_RUNS[case]
    run = directory / "run"
    run.mkdir()
    config, vocab = None, VOCAB
    if case.endswith("electra"):
        config = load_config(str(ELECTRA_TINY / "hparams.json"))
        vocab = str(ELECTRA_TINY / "vocab.txt")
    _fine_tuned_run(run, task, kind, outputs, labels, config)
    fmt = "embedding" if case == "embedding" else task.partition("/")[0]
    return run, vocab, fmt, flags, inputs


class TaskExports:
    """Each TASK_RUNS case's run and its exports, made once in a process and shared by the tests
    of that case (test_onnx's and test_litert's: their case's xdist group, `case_params`;
    test_predict_hugging_face's: its file's group). A test that changes an export copies it.

    Args:
      root: the folder the runs and exports are written in.
    """

    def __init__(self, root):
        self.root = root
        self._runs, self._exports, self._predictors = {}, {}, {}

    def run(self, case):
        """`task_run(case, ...)`, made once."""
        if case not in self._runs:
            (self.root / case).mkdir()
            self._runs[case] = task_run(case, self.root / case)
        return self._runs[case]

    def export(self, case, fmt, **flags):
        """export_model.py --format=`fmt` of the case's run with its export flags (`flags` over
        them): the export's directory."""
        key = case, fmt, tuple(sorted(flags.items()))
        if key not in self._exports:
            run, vocab, _, case_flags, _ = self.run(case)
            if fmt == "huggingface":  # the run's head: export_model.py takes no --task_name
                case_flags = {k: v for k, v in case_flags.items() if k != "task_name"}
            self._exports[key] = _export(run, fmt, self.root / case / str(len(self._exports)),
                                         vocab, **{**case_flags, **flags})
        return self._exports[key]

    def predictor(self, path):
        """predict.py's `Predictor` of the export at `path`, loaded once."""
        from bert_runner.serving import predictor

        if path not in self._predictors:
            self._predictors[path] = predictor.Predictor(path, warm_up=False)
        return self._predictors[path]


def case_params(cases):
    """pytest parameters of TASK_RUNS `cases`, each in its case's xdist group: a case's tests
    share one process and so its `TaskExports` run and exports."""
    return [pytest.param(case, marks=pytest.mark.xdist_group(f"task_exports.{case}"))
            for case in cases]


def signature_inputs(model, inputs):
    """(first fields, last fields, (the signature `model`'s format answers with, its inputs)) of
    predict.py's input lines."""
    from bert_runner.serving import predictor

    rows = model.fields([predictor.Input(text, "test") for text in inputs])
    firsts, lasts = [r[0] for r in rows], [r[-1] for r in rows]
    return firsts, lasts, {
        "squad": ("serving_default", dict(question=firsts, context=lasts)),
        "ner": ("serving_default", dict(text=firsts)),
        "swag": ("serving_default", dict(context=firsts, endings=np.array([r[1:] for r in rows],
                                                                          dtype=object)))
    }.get(model.format, ("pairs", dict(text_a=firsts, text_b=lasts)))


@pytest.mark.large
@pytest.mark.parametrize("case", case_params(sorted(TASK_RUNS)))
def test_every_task_answers_from_onnx_as_from_its_saved_model(case, task_exports):
    """export_model.py --format=onnx of each task's run (the task its run.json records):
    predict.py answers from it as from the run's SavedModel (SQuAD's answers and n-best texts,
    NER's tags identical; probabilities within 1e-4) and prints the same lines."""
    import io

    from bert_runner.serving import predictor
    from bert_tasks.squad.answers import answers

    _require_onnx()
    _, _, fmt, _, inputs = task_exports.run(case)
    paths = task_exports.export(case, fmt), task_exports.export(case, "onnx")
    saved, converted = map(task_exports.predictor, paths)
    assert converted.format == saved.format == fmt
    settings = {k: v for k, v in saved.metadata.items() if k not in ("format", "signatures")}
    assert {k: converted.metadata.get(k) for k in settings} == settings  # its windows, labels

    firsts, lasts, (name, tensors) = signature_inputs(converted, inputs)
    expected, got = saved._call(name, **tensors), converted._call(name, **tensors)
    _assert_same_outputs(expected, got)
    if fmt == "ner":
        assert len(set(expected["word_tags"].ravel()) - {b""}) > 1  # the tags differ
    if fmt == "squad":
        assert expected["window_count"].min() > 1  # several windows each
        nbest = [[[entry["text"] for entry in answer.nbest]
                  for answer in answers(firsts, lasts, outputs, saved.metadata)]
                 for outputs in (expected, got)]
        assert nbest[0] == nbest[1] and len(nbest[0][0]) > 1
    _assert_same_results(saved.predict(inputs), converted.predict(inputs))
    printed = []
    for path in paths:
        out = io.StringIO()
        predictor.predict(path, inputs + [""], out=out)
        printed.append(out.getvalue())
    assert printed[0] == printed[1] and printed[0].count("\n") == len(inputs) + 1


def test_predict_refuses_a_directory_of_no_format_it_serves_in_one_line(tmp_path):
    """predict.py --model=<a directory with a .tflite but no export.json> exits 2 in one line
    naming the path and the formats it serves (the SavedModel formats, ONNX and LiteRT)."""
    (tmp_path / "model.tflite").write_bytes(b"")
    process = subprocess.run([sys.executable, str(ROOT / "predict.py"), f"--model={tmp_path}",
                              "a text"], capture_output=True, text=True, timeout=300)
    assert_refused(process, "predict-not-a-saved-model")
    assert f"--model={tmp_path} is neither" in process.stderr
    assert "--format=classifier|embedding|fill_mask|ner|squad|swag, onnx, litert or huggingface" in \
        process.stderr


# (run.json task, model kind, outputs, labels, the task's export flags, export.json's settings)
CLI_RUNS = [
    ("squad", "span", None, None, ["--max_query_length=6", "--doc_stride=4", "--n_best_size=3",
                                   "--version_2_with_negative"],
     {"n_best_size": 3, "doc_stride": 4, "version_2_with_negative": True}),
    ("ner", "token", 3, ["O", "B-PER", "I-PER"], ["--entity_types=PER"],
     {"labels": ["O", "B-PER", "I-PER"]}),
]


@pytest.mark.large
@pytest.mark.parametrize("task,kind,outputs,labels,flags,settings", CLI_RUNS,
                         ids=[case[0] for case in CLI_RUNS])
def test_the_cli_exports_a_run_as_onnx_and_litert_and_predicts_the_same(
        tmp_path, task, kind, outputs, labels, flags, settings):
    """export_model.py --format=onnx and --format=litert of a run_squad or run_ner output_dir
    (its run.json's task) with the task's flags given as for its SavedModel format; predict.py
    prints the same answers from the three exports."""
    from test_export import _fine_tuned_run, _run

    _require_onnx()
    run = tmp_path / "run"
    run.mkdir()
    _fine_tuned_run(run, task, kind, outputs, labels)
    inputs = SQUAD_INPUTS[:2] if task == "squad" else TASK_RUNS["ner"][-1]
    printed = []
    for fmt in (task, "onnx", "litert"):
        _run(["export_model.py", f"--format={fmt}", f"--checkpoint={run}", f"--vocab_file={VOCAB}",
              *flags, f"--export_dir={tmp_path / fmt}"], ROOT)
        printed.append(_run(["predict.py", f"--model={tmp_path / fmt}", *inputs], ROOT))
    for fmt in ("onnx", "litert"):
        metadata = json.loads((tmp_path / fmt / "export.json").read_text())
        assert metadata["format"] == f"{fmt}/{task}"
        assert {name: metadata[name] for name in settings} == settings
    assert printed[0] == printed[1] == printed[2] and printed[0].count("\n") == len(inputs)


# How far ONNX Runtime's dynamic int8 (its quantize_dynamic) moves the float outputs of test's tiny
# random runs from the SavedModel's; their labels, tags, choices, pieces and windows stay its.
ONNX_INT8_TOLERANCE = 0.1


@pytest.mark.large
@pytest.mark.parametrize("case", case_params(["classifier", "ner", "squad", "swag"]))
def test_dynamic_int8_onnx_answers_near_the_saved_model(case, task_exports):
    """export_model.py --format=onnx --quantization=dynamic_int8: export.json says so, its matrix
    products hold int8 weights (a smaller file) but for the head's (float), and its outputs are
    within ONNX_INT8_TOLERANCE of the SavedModel's, the rest identical."""
    from bert_runner.serving import onnx

    _require_onnx()
    onnx_package = require("onnx")
    _, _, fmt, _, inputs = task_exports.run(case)
    saved = task_exports.predictor(task_exports.export(case, fmt))
    int8_dir = task_exports.export(case, "onnx", quantization="dynamic_int8")
    int8 = task_exports.predictor(int8_dir)
    assert int8.metadata["quantization"] == "dynamic_int8" and int8.format == fmt
    graph = onnx_package.load(int8_dir + "/model.onnx").graph
    assert any(node.op_type in ("DynamicQuantizeMatMul", "MatMulInteger") for node in graph.node)
    head = onnx.final_products(onnx_package.load(task_exports.export(case, "onnx")
                                                 + "/model.onnx").graph)
    assert head and {node.name: node.op_type for node in graph.node
                     if node.name in head} == dict.fromkeys(head, "MatMul")
    _, _, (name, tensors) = signature_inputs(int8, inputs)
    expected, got = saved._call(name, **tensors), int8._call(name, **tensors)
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        if np.issubdtype(value.dtype, np.floating):
            np.testing.assert_allclose(got[key], value, rtol=0, atol=ONNX_INT8_TOLERANCE,
                                       err_msg=key)
        else:
            np.testing.assert_array_equal(got[key], value, err_msg=key)
