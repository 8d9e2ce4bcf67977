"""export_model.py and each format's serving module: the raw-text SavedModel gives the Python
pipeline's results.

The tiny fixture encoder with a fixed random head is written as an original-layout classifier
checkpoint, exported by the CLI, then loaded in a fresh process that imports only tensorflow and
tensorflow_text. Reference: FullTokenizer -> glue features -> BertClassifier -> softmax.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from modeling_helpers import TINY, tiny_config
from refusals import message

TASK = "mnli"  # three labels: contradiction, entailment, neutral
MAX_SEQ_LENGTH = 16
VOCAB = str(TINY / "vocab.txt")

SINGLES = [
    "The dog runs fast.",
    "the old dog walked to the river",
    "Thé BIG cät SINGS?",  # accents, capitals: the tokenizer's exact (non-ASCII) route
    "猫 and a dog",  # a CJK character (its own word, [UNK] here)
    "",
    # 20 word-pieces: cut to max_seq_length - 2
    "a big red car and a small blue car and a new house on the hill with a green tree",
    # More rows than one model call takes (raw_text.text_module.ROWS_PER_CALL), of mixed lengths.
    "she can swim", "we eat and drink", "it was a bad day", "you read", "happy birds sing",
    "the moon and the stars", "snow", "I see the city from the hill.",
]
PAIRS = [
    ("The dog runs fast.", "a big cat"),
    ("the cat sleeps", ""),  # an empty text_b: the single-sentence encoding
    # 11 + 9 pieces > 16 - 3: both are cut, the longer first
    ("the old dog walked to the river in the rain", "they see a big bird on the hill"),
    # only text_a is long
    ("a big red car and a small blue car and a new house on the hill", "the sun"),
]

# Runs in a fresh interpreter, outside the repository: only TensorFlow and tensorflow-text.
LOADER = """
import json, sys
import tensorflow as tf, tensorflow_text  # noqa: F401 (registers the tokenizer ops)
model = tf.saved_model.load(sys.argv[1])
cases = json.load(sys.stdin)
single = model.signatures["serving_default"](text_a=tf.constant(cases["singles"]))
pairs = model.signatures["pairs"](text_a=tf.constant([a for a, _ in cases["pairs"]]),
                                  text_b=tf.constant([b for _, b in cases["pairs"]]))
empty = model.signatures["serving_default"](text_a=tf.constant([], tf.string))
result = {name: {k: v.numpy().tolist() for k, v in out.items()}
          for name, out in (("singles", single), ("pairs", pairs), ("empty", empty))}
# As TF Serving loads it: the TF1 loader restores the variables by name into a session.
with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    meta_graph = tf.compat.v1.saved_model.load(session, ["serve"], sys.argv[1])
    signature = meta_graph.signature_def["pairs"]
    feed = {signature.inputs["text_a"].name: [a for a, _ in cases["pairs"]],
            signature.inputs["text_b"].name: [b for _, b in cases["pairs"]]}
    result["session_pairs"] = session.run(signature.outputs["probabilities"].name, feed).tolist()
print(json.dumps(result, default=lambda b: b.decode("utf-8")))
"""


def _run(args, cwd, stdin=None):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def classifier():
    """The tiny encoder (original checkpoint) with a fixed random 3-label head."""
    from bert_tasks.classifier import processors
    from modeling import BertClassifier
    from modeling import checkpoint as checkpoints

    model = BertClassifier(tiny_config(), processors.get_processor(TASK).num_labels)
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    rng = np.random.default_rng(7)
    # Large head weights make the probabilities sensitive to every input token.
    model.classifier.output_weights.assign(rng.normal(0.0, 1.0, (3, 32)).astype(np.float32))
    model.classifier.output_bias.assign(rng.normal(0.0, 0.1, (3,)).astype(np.float32))
    return model


def _python_logits(model, singles, pairs, labels):
    """Logits [N, L] of the original prediction path (features padded to MAX_SEQ_LENGTH)."""
    from bert_tasks.classifier import features
    from vocab import tokenization

    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    examples = [features.InputExample("test-%d" % i, a, b, label=labels[0] if labels else "0.0")
                for i, (a, b) in enumerate([(s, None) for s in singles] + pairs)]
    feats = features.convert_examples_to_features(examples, labels, MAX_SEQ_LENGTH, tokenizer)
    batch = {name: np.array([getattr(f, name) for f in feats], np.int32)
             for name in ("input_ids", "input_mask", "segment_ids")}
    return model(batch, training=False)["logits"].numpy()


def test_cli_export_loads_without_the_project_and_matches_python(classifier, tmp_path):
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    from bert_tasks.classifier import processors
    from modeling.checkpoint import original as original_layout

    checkpoint = original_layout.save_tf1_checkpoint(classifier, tmp_path / "ckpt" / "model.ckpt-5")
    export_dir = tmp_path / "serving" / "1"
    _run(["export_model.py", "--task_name=MNLI",
          "--bert_config_file=%s" % (TINY / "bert_config.json"), "--vocab_file=%s" % VOCAB,
          "--do_lower_case=True", "--max_seq_length=%d" % MAX_SEQ_LENGTH,
          "--checkpoint=%s" % checkpoint, "--export_dir=%s" % export_dir], cwd=ROOT)
    assert sorted(os.listdir(tmp_path / "serving")) == ["1"]  # no temporary left behind
    # Served, never differentiated: no kernel's custom gradient is traced into it.
    saved = saved_model_pb2.SavedModel.FromString((export_dir / "saved_model.pb").read_bytes())
    assert not saved.meta_graphs[0].graph_def.library.registered_gradients

    cases = {"singles": SINGLES, "pairs": [list(p) for p in PAIRS]}
    got = json.loads(_run(["-c", LOADER, str(export_dir)], cwd=tmp_path, stdin=json.dumps(cases)))

    labels = processors.get_processor(TASK).get_labels()
    expected = tf.nn.softmax(_python_logits(classifier, SINGLES, PAIRS, labels)).numpy()
    actual = np.array(got["singles"]["probabilities"] + got["pairs"]["probabilities"])
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["session_pairs"], got["pairs"]["probabilities"], atol=1e-6)
    assert np.ptp(expected, axis=0).max() > 0.05  # the inputs do give different outputs

    for name in ("singles", "pairs"):
        out = got[name]
        assert out["label_names"] == [labels] * len(out["probabilities"])
        assert out["label"] == [labels[i] for i in np.argmax(out["probabilities"], axis=1)]
    assert got["empty"] == {"probabilities": [], "label": [], "label_names": []}


def test_load_classifier_reads_trainer_checkpoints(classifier, tmp_path):
    from modeling import BertPretrainer
    from modeling_helpers import save_like_the_trainer
    from bert_tasks.classifier import raw_text

    save_like_the_trainer(classifier, tmp_path / "run")
    loaded = raw_text.load_classifier(tiny_config(), 3, str(tmp_path / "run"))  # output_dir/ckpt-1
    for ours, theirs in zip(loaded.trainable_weights, classifier.trainable_weights, strict=True):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=theirs.path)

    with pytest.raises(ValueError, match=re.escape(
            "has a classifier head of 3 labels (classifier/output_weights [3, 32]), "
            "--task_name=MRPC has 2")):
        raw_text.load_classifier(tiny_config(), 2, str(tmp_path / "run"), task_name="MRPC")
    save_like_the_trainer(BertPretrainer(tiny_config()), tmp_path / "pretraining")
    with pytest.raises(ValueError, match=re.escape(message("export-no-head"))):
        raw_text.load_classifier(tiny_config(), 3, str(tmp_path / "pretraining"))


def test_load_classifier_refuses_pretraining_checkpoint():
    from bert_tasks.classifier import raw_text

    with pytest.raises(ValueError, match=re.escape(message("export-no-head"))):
        raw_text.load_classifier(tiny_config(), 3, str(TINY / "bert_model.ckpt"))


def test_a_checkpoint_of_another_task_is_not_exported(classifier, tmp_path):
    """MNLI's 3-label head as MRPC's 2 labels, or an MRPC run as CoLA (both 2 labels: the run's
    run.json tells); MNLI's model serves MNLI-mm and AX."""
    from modeling.checkpoint import original as original_layout
    from bert_tasks.classifier import raw_text

    prefix = original_layout.save_tf1_checkpoint(classifier, tmp_path / "tf1" / "model.ckpt-5")
    with pytest.raises(ValueError, match="has a classifier head of 3 labels") as error:
        raw_text.load_classifier(tiny_config(), 2, prefix, task_name="MRPC")
    assert f"{prefix} (--checkpoint)" in str(error.value)
    assert "(output_weights [3, 32]), --task_name=MRPC has 2" in str(error.value)

    run = tmp_path / "mrpc_output"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"task": "classifier/mrpc"}))
    mrpc = original_layout.save_tf1_checkpoint(_binary(classifier), run / "bert_model.ckpt")
    with pytest.raises(ValueError, match=re.escape(message("export-other-task"))) as error:
        raw_text.load_classifier(tiny_config(), 2, mrpc, task_name="CoLA")
    assert "--task_name=CoLA: export it with --task_name=MRPC" in str(error.value)
    raw_text.load_classifier(tiny_config(), 2, mrpc, task_name="mrpc")
    (run / "run.json").write_text(json.dumps({"task": "classifier/mnli"}))
    with pytest.raises(ValueError, match=re.escape(message("export-label-count"))):
        raw_text.load_classifier(tiny_config(), 3, mrpc, task_name="AX")


def _binary(classifier):
    from modeling import BertClassifier

    model = BertClassifier(tiny_config(), 2)
    for ours, theirs in zip(model.encoder.weights, classifier.encoder.weights, strict=True):
        ours.assign(theirs)
    return model


def test_an_unwritable_export_dir_leaves_nothing(classifier, tmp_path, monkeypatch):
    """Read-only (as root nothing is: the failure is made where SavedModel writes), or below a
    file: one refusal naming --export_dir, and no temporary directory left."""
    import tensorflow as tf

    from bert_tasks.classifier import raw_text

    def save_then_fail(module, directory, signatures=None, options=None):
        tf.io.gfile.makedirs(directory + "/variables")
        (pathlib.Path(directory) / "saved_model.pb").write_bytes(b"half")
        raise tf.errors.PermissionDeniedError(None, None,
                                              directory + "/variables; Permission denied")

    monkeypatch.setattr(tf.saved_model, "save", save_then_fail)
    target = tmp_path / "serving" / "1"
    with pytest.raises(ValueError, match=re.escape(message("export-dir-not-writable"))) as error:
        raw_text.export_classifier(classifier, VOCAB, True, MAX_SEQ_LENGTH, ["a", "b", "c"], target)
    assert str(error.value).startswith(f"Cannot write --export_dir={target} (Permission denied)")
    assert os.listdir(tmp_path / "serving") == []
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=re.escape(message("export-dir-not-writable"))):
        raw_text.export_classifier(classifier, VOCAB, True, MAX_SEQ_LENGTH, ["a", "b", "c"],
                                 tmp_path / "file" / "1")


def test_cli_refuses_a_checkpoint_whose_data_file_was_deleted(classifier, tmp_path):
    """One line, exit 2, no traceback (TensorFlow's read error is a page of C++ context)."""
    from modeling.checkpoint import original as original_layout
    from refusals import assert_refused

    prefix = original_layout.save_tf1_checkpoint(classifier, tmp_path / "ckpt" / "model.ckpt-5")
    os.remove(prefix + ".data-00000-of-00001")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.run(
        [sys.executable, "export_model.py", "--task_name=MNLI",
         "--bert_config_file=%s" % (TINY / "bert_config.json"), "--vocab_file=%s" % VOCAB,
         "--max_seq_length=%d" % MAX_SEQ_LENGTH, "--checkpoint=%s" % prefix,
         "--export_dir=%s" % (tmp_path / "serving" / "1")],
        cwd=ROOT, env={**env, "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True, text=True,
        timeout=300)
    assert_refused(process, "checkpoint-data-missing")
    assert not (tmp_path / "serving").exists()


def test_export_refuses_existing_dir_and_bad_labels(classifier, tmp_path):
    from bert_tasks.classifier import raw_text
    from vocab.fast_tokenizer import FastBertTokenizer

    with pytest.raises(FileExistsError, match=re.escape(message("export-dir-exists"))) as error:
        raw_text.export_classifier(classifier, VOCAB, True, MAX_SEQ_LENGTH, ["a", "b", "c"],
                                  tmp_path)
    assert str(tmp_path) in str(error.value)
    with pytest.raises(ValueError, match="2 label names"):
        raw_text.ClassifierExport(classifier, FastBertTokenizer(VOCAB), MAX_SEQ_LENGTH, ["a", "b"])


@pytest.mark.parametrize("export_format", ["huggingface", "classifier"])
def test_cli_refuses_an_existing_export_dir_before_reading_the_checkpoint(tmp_path,
                                                                         export_format):
    """The refusal comes first: no model is built or loaded for a directory that is refused."""
    from refusals import assert_refused

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.run(
        [sys.executable, "export_model.py", f"--format={export_format}",
         "--bert_config_file=%s" % (TINY / "bert_config.json"), "--vocab_file=%s" % VOCAB,
         "--checkpoint=%s" % (TINY / "bert_model.ckpt"), "--export_dir=%s" % tmp_path]
        + (["--task_name=MNLI"] if export_format == "classifier" else []),
        cwd=ROOT, env={**env, "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True, text=True,
        timeout=300)
    assert_refused(process, "export-dir-exists")
    assert str(tmp_path) in process.stderr and "Initialised" not in process.stderr


@pytest.mark.large
def test_bfloat16_export_serves_within_its_rounding(classifier):
    """`export_model.py --mixed_precision=bf16` exports this copy."""
    import tensorflow as tf

    from bert_tasks.classifier import processors
    from modeling.inference import with_bfloat16_weights
    from bert_tasks.classifier import raw_text
    from vocab.fast_tokenizer import FastBertTokenizer

    labels = processors.get_processor(TASK).get_labels()
    module = raw_text.ClassifierExport(with_bfloat16_weights(classifier), FastBertTokenizer(VOCAB),
                                     MAX_SEQ_LENGTH, labels)
    got = module.serve_pairs(tf.constant([a for a, _ in PAIRS]), tf.constant([b for _, b in PAIRS]))
    expected = tf.nn.softmax(_python_logits(classifier, [], PAIRS, labels)).numpy()
    assert got["probabilities"].dtype == tf.float32
    assert not np.array_equal(got["probabilities"].numpy(), expected)
    np.testing.assert_allclose(got["probabilities"].numpy(), expected, atol=0.03, rtol=0)


@pytest.mark.large
def test_regression_signature_returns_scores():
    """num_labels=1 (STS-B): `predictions` [N] is the raw output, as the original writes it."""
    import tensorflow as tf

    from modeling import BertClassifier
    from modeling import checkpoint as checkpoints
    from bert_tasks.classifier import raw_text
    from vocab.fast_tokenizer import FastBertTokenizer

    model = BertClassifier(tiny_config(), 1)
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    model.classifier.output_weights.assign(np.random.default_rng(3).normal(size=(1, 32)))
    module = raw_text.ClassifierExport(model, FastBertTokenizer(VOCAB), MAX_SEQ_LENGTH)
    got = module.serve_pairs(tf.constant([a for a, _ in PAIRS]),
                             tf.constant([b for _, b in PAIRS]))
    assert list(got) == ["predictions"]
    expected = _python_logits(model, [], PAIRS, None)[:, 0]
    np.testing.assert_allclose(got["predictions"].numpy(), expected, atol=1e-5, rtol=0)


# ---------------------------------------------------------------- every task's raw-text export

def _fixture_texts(*categories, per_category=2):
    """Texts of tests/fixtures/tokenization, the first few of each category."""
    from conftest import FIXTURES

    chosen = {}
    path = FIXTURES / "tokenization" / "tokenization_cases.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        if case["category"] in categories and len(chosen.get(case["category"], [])) < per_category:
            chosen.setdefault(case["category"], []).append(case["text"])
    return [text for category in categories for text in chosen[category]]


def _tiny(model_class, *args, head=None, seed=11):
    """`model_class(tiny_config(), *args)` with the fixture encoder and a large random head (so
    that every input token moves the outputs)."""
    from modeling import checkpoint as checkpoints

    model = model_class(tiny_config(), *args)
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    rng = np.random.default_rng(seed)
    for _, variable in model.tf1_head_variables():
        variable.assign(rng.normal(0.0, 1.0, variable.shape).astype(np.float32))
    return model


def _saved(module, directory):
    """`module` written by write_saved_model and loaded back, with its export.json."""
    import tensorflow as tf

    from bert_runner.serving import saved_model

    saved_model.write_saved_model(module, directory, "test model")
    metadata = json.loads((directory / saved_model.METADATA_FILE).read_text())
    return tf.saved_model.load(str(directory)), metadata


SQUAD = dict(max_seq_length=40, doc_stride=12, max_query_length=10)


@pytest.fixture(scope="module")
def squad_export(tmp_path_factory):
    from bert_tasks.squad.raw_text import SquadExport
    from bert_tasks.squad.task import PostprocessOptions
    from modeling import BertSpanLabeler
    from vocab.fast_tokenizer import FastBertTokenizer

    model = _tiny(BertSpanLabeler)
    module = SquadExport(model, FastBertTokenizer(VOCAB, True), **SQUAD,
                         options=PostprocessOptions(n_best_size=5, max_answer_length=6))
    loaded, metadata = _saved(module, tmp_path_factory.mktemp("squad") / "1")
    return model, loaded, metadata


def _squad_cases():
    """(questions, contexts): the SQuAD fixture's paragraphs (several windows each) and fixture
    texts with accents, CJK, control characters and SQuAD's own whitespace (U+202F, newlines)."""
    from conftest import FIXTURES

    data = json.loads((FIXTURES / "squad" / "squad_v1.1_tiny.json").read_text())
    paragraphs = [p for article in data["data"] for p in article["paragraphs"]]
    questions = [p["qas"][0]["question"] for p in paragraphs]
    contexts = [p["context"] for p in paragraphs]
    others = _fixture_texts("accents", "cjk", "control", "whitespace", "hyphens", "mixed_case")
    questions += ["Who is Smith's dog?", "what"]
    contexts += [" ".join(others), "Steve\u202fSmith's  dog,\n(1895-1943), ran."]
    return questions, contexts


def _run_squad_predictions(model, questions, contexts, version_2):
    """run_squad's path: FullTokenizer features, the model on them, `compute_predictions`."""
    from bert_tasks.squad import examples as sq_examples, features as sq_features, postprocess
    from vocab import tokenization

    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    examples = [sq_examples.SquadExample(str(i), q, sq_examples.split_context(c)[0])
                for i, (q, c) in enumerate(zip(questions, contexts))]
    windows = list(sq_features.iter_windows(examples, tokenizer, SQUAD["max_seq_length"],
                                            SQUAD["doc_stride"], SQUAD["max_query_length"], False))
    features = [f for w in windows for f in sq_features.window_features(
        w, examples[w.example_index], tokenizer, SQUAD["max_seq_length"], False)]
    batch = {name: np.array([getattr(f, name) for f in features], np.int32)
             for name in ("input_ids", "input_mask", "segment_ids")}
    logits = model(batch, training=False)
    results = [postprocess.RawResult(f.unique_id, logits["start_logits"][i].numpy(),
                                     logits["end_logits"][i].numpy())
               for i, f in enumerate(features)]
    return windows, postprocess.compute_predictions(examples, windows, results, 5, 6, True,
                                                    version_2)


@pytest.mark.large
@pytest.mark.parametrize("version_2", [False, True])
def test_squad_export_answers_as_run_squad(squad_export, version_2):
    """The SavedModel's tokenization is FullTokenizer's, and its answers (text, n-best) are
    run_squad's predictions for the same model and input; the offsets point at the answer."""
    import tensorflow as tf

    from bert_tasks.squad import answers
    from bert_tasks.squad import examples as sq_examples

    model, loaded, metadata = squad_export
    questions, contexts = _squad_cases()
    out = {k: v.numpy() for k, v in loaded.signatures["serving_default"](
        question=tf.constant(questions), context=tf.constant(contexts)).items()}
    windows, expected = _run_squad_predictions(model, questions, contexts, version_2)
    for i, w in enumerate(windows):
        assert [p.decode() for p in out["context_pieces"][i][:len(w.doc_pieces)]] == w.doc_pieces
        assert [p.decode() for p in out["question_pieces"][i] if p] == w.query_tokens
    assert max(out["window_count"]) > 3

    got = answers.answers(questions, contexts, out, {**metadata,
                                                   "version_2_with_negative": version_2})
    assert [a.text for a in got] == [expected.predictions[str(i)] for i in range(len(got))]
    for i, answer in enumerate(got):
        nbest = expected.nbest[str(i)]
        assert [e["text"] for e in answer.nbest] == [e["text"] for e in nbest]
        np.testing.assert_allclose([e["probability"] for e in answer.nbest],
                                   [e["probability"] for e in nbest], atol=1e-5)
        if answer.text:
            words = sq_examples.split_context(contexts[i][answer.start:answer.end])[0]
            assert " ".join(words) == answer.text, (answer, contexts[i])
    assert len({a.text for a in got}) > 2  # the inputs do give different answers


NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
NER_SEQ = 10  # long texts take several windows, with context on both sides


@pytest.fixture(scope="module")
def ner_export(tmp_path_factory):
    from bert_tasks.ner.raw_text import NerExport
    from modeling import BertTokenClassifier
    from vocab.fast_tokenizer import FastBertTokenizer

    model = _tiny(BertTokenClassifier, len(NER_LABELS))
    module = NerExport(model, FastBertTokenizer(VOCAB, True), NER_SEQ, NER_LABELS)
    loaded, _ = _saved(module, tmp_path_factory.mktemp("ner") / "1")
    return model, loaded


def _run_ner_tags(model, word_lists):
    """run_ner's path: each text one sentence of its own document, FullTokenizer windows, the
    model, the argmax at each word's first piece."""
    from bert_tasks.ner import conll, features as ner_features, predictions
    from vocab import tokenization

    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    sentences = [conll.Sentence(words, ["O"] * len(words), [[w] for w in words], 1)
                 for words in word_lists]
    documents = [conll.Document([sentence]) for sentence in sentences]
    windows = list(ner_features.make_windows(documents, tokenizer, NER_SEQ))
    label_map = {label: i for i, label in enumerate(NER_LABELS)}
    features = [ner_features.window_features(w, sentences[w.sentence_index], label_map, tokenizer,
                                             NER_SEQ) for w in windows]
    batch = {name: np.array([getattr(f, name) for f in features], np.int32)
             for name in ("input_ids", "input_mask", "segment_ids")}
    ids = np.argmax(model(batch, training=False)["logits"].numpy(), axis=-1)
    return predictions.sentence_tags(windows, ids, sentences, NER_LABELS)


def _chunks(tags):
    """conlleval's chunks of IOB2 tags: [(type, first word, last word)]."""
    chunks = []
    previous = ""
    for i, tag in enumerate(tags):
        prefix, _, kind = tag.partition("-")
        if prefix == "B" or (prefix == "I" and kind != previous):
            chunks.append([kind, i, i])
        elif prefix == "I":
            chunks[-1][2] = i
        previous = kind
    return [tuple(chunk) for chunk in chunks]


@pytest.mark.large
def test_ner_export_tags_as_run_ner(ner_export):
    """Words are BasicTokenizer's (cased) split with their character offsets, the tags run_ner's
    for the same model, the entities their chunks."""
    import tensorflow as tf

    from vocab import tokenization

    model, loaded = ner_export
    texts = (_fixture_texts("english", "accents", "cjk", "control", "other_scripts", "symbols")
             + ["", "Steve Smith's dog ran to New York, and " * 3])
    out = {k: v.numpy() for k, v in loaded.signatures["serving_default"](
        text=tf.constant(texts)).items()}
    basic = tokenization.BasicTokenizer(do_lower_case=False)
    word_lists, all_tags = [], []
    for i, text in enumerate(texts):
        count = int(np.sum(out["word_start"][i] >= 0))
        words = [w.decode() for w in out["words"][i][:count]]
        starts, ends = out["word_start"][i][:count], out["word_end"][i][:count]
        assert [text[s:e] for s, e in zip(starts, ends)] == words
        assert [p for w in words for p in basic.tokenize(w)] == basic.tokenize(text), text
        word_lists.append(basic.tokenize(text))
        all_tags.append([t.decode() for t in out["word_tags"][i][:count]])
    expected = iter(_run_ner_tags(model, [words for words in word_lists if words]))
    assert all_tags == [next(expected) if words else [] for words in word_lists]
    assert len({tag for tags in all_tags for tag in tags}) > 2

    for i, (text, tags) in enumerate(zip(texts, all_tags)):
        expected = [(kind, int(out["word_start"][i][first]), int(out["word_end"][i][last]))
                    for kind, first, last in _chunks(tags)]
        count = out["entity_count"][i]
        got = [(out["entity_label"][i][k].decode(), out["entity_start"][i][k],
                out["entity_end"][i][k]) for k in range(count)]
        assert got == expected
        assert [t.decode() for t in out["entity_text"][i][:count]] == [
            text[s:e] for _, s, e in expected]


def test_swag_export_scores_as_run_swag():
    """context + endings -> the probabilities of run_swag's features through the model."""
    import tensorflow as tf

    from bert_tasks.swag.raw_text import SwagExport
    from bert_tasks.swag import examples as swag_examples, features as swag_features
    from modeling import BertMultipleChoice
    from vocab import tokenization
    from vocab.fast_tokenizer import FastBertTokenizer

    model = _tiny(BertMultipleChoice)
    contexts = ["The dog runs fast.", "Thé BIG cät SINGS?"]
    endings = [["to the river", "the cat sleeps", "", "a big red car and a small blue car and a "
                "new house on the hill"], ["she can swim", "we eat", "snow", "猫 and a dog"]]
    module = SwagExport(model, FastBertTokenizer(VOCAB, True), MAX_SEQ_LENGTH)
    got = module.serve_swag(tf.constant(contexts), tf.constant(endings))
    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    features = [swag_features.convert_example(
        i, swag_examples.SwagExample("t-%d" % i, c, "", tuple(e), None, 1), MAX_SEQ_LENGTH,
        tokenizer) for i, (c, e) in enumerate(zip(contexts, endings))]
    batch = {name: np.array([getattr(f, name) for f in features], np.int32)
             for name in ("input_ids", "input_mask", "segment_ids")}
    expected = tf.nn.softmax(model(batch, training=False)["logits"]).numpy()
    np.testing.assert_allclose(got["probabilities"].numpy(), expected, atol=1e-5)
    assert list(got["choice"].numpy()) == list(np.argmax(expected, axis=1))
    assert np.ptp(expected) > 0.05


@pytest.mark.large
def test_multi_label_long_document_export_as_run_classifier():
    """--task_name=multilabel with --long_documents: run_classifier's windows, their logits
    aggregated per text, a sigmoid per label and the threshold."""
    import tensorflow as tf

    from bert_tasks.classifier import raw_text
    from bert_tasks.classifier import features, windows
    from modeling import BertMultiLabelClassifier
    from vocab import tokenization
    from vocab.fast_tokenizer import FastBertTokenizer

    model = _tiny(BertMultiLabelClassifier, 3)
    names = ["austen", "bronte", "dickens"]
    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    # Single texts aggregated by the mean, pairs by the max: each path traced once.
    for how, singles, pairs in (("mean", SINGLES, []), ("max", [], PAIRS)):
        module = raw_text.ClassifierExport(model, FastBertTokenizer(VOCAB, True), MAX_SEQ_LENGTH,
                                         names, multi_label_threshold=0.5, doc_stride=5,
                                         window_aggregation=how)
        examples = [features.InputExample("t-%d" % i, a, b, label="x")
                    for i, (a, b) in enumerate([(s, None) for s in singles] + pairs)]
        rows = [features.convert_example_windows(i, e, ["x"], MAX_SEQ_LENGTH, tokenizer, 5)
                for i, e in enumerate(examples)]
        batch = {name: np.array([getattr(f, name) for row in rows for f in row], np.int32)
                 for name in ("input_ids", "input_mask", "segment_ids")}
        logits = windows.aggregate(model(batch, training=False)["logits"].numpy(),
                                   [len(row) for row in rows], how)
        expected = 1.0 / (1.0 + np.exp(-logits))
        if singles:
            got = module.serve(tf.constant(singles))
        else:
            got = module.serve_pairs(tf.constant([a for a, _ in pairs]),
                                     tf.constant([b for _, b in pairs]))
        np.testing.assert_allclose(got["probabilities"].numpy(), expected, atol=1e-5)
        assert (got["predicted"].numpy() == (expected >= 0.5)).all()
        assert [x.decode() for x in got["labels"].numpy()] == [
            ",".join(n for n, p in zip(names, row) if p >= 0.5) for row in expected]
        assert max(len(row) for row in rows) > 1  # long texts did take several windows


def test_a_checkpoint_of_another_script_is_refused(tmp_path):
    """An NER output_dir exported as SQuAD (its run.json tells), a classifier's TF1 checkpoint as
    SWAG (no head): one line naming the checkpoint and the --format to use."""
    from bert_runner.serving import provenance
    from bert_tasks.serving import register_all
    from modeling import BertMultipleChoice, BertSpanLabeler, BertTokenClassifier
    from modeling.checkpoint import original as original_layout

    register_all()

    run = tmp_path / "ner_output"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"task": "ner"}))
    prefix = original_layout.save_tf1_checkpoint(_tiny(BertTokenClassifier, 5),
                                                run / "model.ckpt-1")
    with pytest.raises(ValueError, match=re.escape(message("export-other-format"))) as error:
        provenance.load_fine_tuned(BertSpanLabeler(tiny_config()), prefix, "squad")
    assert str(error.value).endswith("not by run_squad.py: export it with --format=ner")
    (run / "run.json").unlink()
    with pytest.raises(ValueError, match=re.escape(message("export-no-head"))):
        provenance.load_fine_tuned(BertMultipleChoice(tiny_config()), prefix, "swag")


def test_the_formats_are_declared_without_tensorflow(monkeypatch):
    """export_model.py lists every format (its --format) from declarations that load no
    TensorFlow, so that a bad flag is refused before TensorFlow is imported."""
    monkeypatch.setenv("BERT_TESTS_FORK", "0")  # a fresh interpreter, not a fork of one that has it
    code = "import sys, export_model; print(export_model.FORMATS, 'tensorflow' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("] ") == [
        "['classifier', 'embedding', 'fill_mask', 'huggingface', 'litert', 'ner', 'onnx', "
        "'squad', 'swag', 'tfhub'",
        "False\n"]


def export_flags(checkpoint, *argv):
    """The `ExportConfig` of `checkpoint` with export_model.py's flags that follow a run's record
    (`provenance.follow_run_record`), with their defaults, parsed from `argv`."""
    from absl import flags

    from bert_runner.flags import config_from_flags, given_names
    from bert_runner.serving.export_config import ExportConfig

    values = flags.FlagValues()
    flags.DEFINE_string("format", "classifier", "", flag_values=values)
    flags.DEFINE_string("task_name", None, "", flag_values=values)
    flags.DEFINE_bool("do_lower_case", True, "", flag_values=values)
    flags.DEFINE_enum("pooling", None, ["cls", "mean", "max"], "", flag_values=values)
    flags.DEFINE_bool("normalize", False, "", flag_values=values)
    flags.DEFINE_bool("long_documents", False, "", flag_values=values)
    for name, default in (("max_seq_length", 128), ("doc_stride", None),
                          ("max_query_length", 64)):
        flags.DEFINE_integer(name, default, "", flag_values=values)
    flags.DEFINE_bool("version_2_with_negative", False, "", flag_values=values)
    values(["export_model.py", *argv])
    return config_from_flags(ExportConfig, values, checkpoint=str(checkpoint),
                             export_dir=os.path.join(checkpoint, "serving"),
                             given=given_names(values))


def test_an_export_serves_the_model_as_its_run_trained_it(tmp_path, caplog):
    """The flags an export leaves out take the values its run.json records (a sentence encoder
    trained at 16 tokens with mean pooling is exported so, not at the default 128 with no
    pooling); a given flag that changes how the model is used is refused, another sequence length
    is served with a warning."""
    import logging

    from bert_runner.serving import provenance

    run = tmp_path / "embeddings"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({
        "task": "embeddings", "max_seq_length": 16, "pooling": "mean", "normalize": True}))
    given = provenance.follow_run_record(export_flags(run))
    assert (given.max_seq_length, given.pooling, given.normalize) == (16, "mean", True)
    with pytest.raises(ValueError, match=re.escape(message("export-not-as-trained"))) as error:
        provenance.follow_run_record(export_flags(run, "--pooling=cls"))
    assert str(error.value).endswith(f"was trained with --pooling=mean ({run / 'run.json'}): "
                                     "pass that, or leave --pooling out")
    with pytest.raises(ValueError, match="--normalize=false, but .* --normalize=true"):
        provenance.follow_run_record(export_flags(run, "--nonormalize"))
    caplog.set_level(logging.WARNING)
    longer = provenance.follow_run_record(export_flags(run, "--max_seq_length=48"))
    assert longer.max_seq_length == 48 and "was trained with --max_seq_length=16" in caplog.text
    # A checkpoint no run of this project wrote keeps the flags as given.
    (run / "run.json").unlink()
    untouched = provenance.follow_run_record(export_flags(run))
    assert (untouched.max_seq_length, untouched.pooling) == (128, None)


def test_an_export_takes_every_setting_its_run_recorded(tmp_path):
    """A run_squad run trained with --max_seq_length=60 --doc_stride=23 --max_query_length=20 is
    exported with all three (not the default 64-piece questions, which would not fit 60), its
    casing and SQuAD version; a classifier run's --task_name and casing likewise; a given flag
    wins (another casing is refused: the model would read other word-pieces)."""
    from bert_runner.serving import provenance

    squad = tmp_path / "squad"
    squad.mkdir()
    (squad / "run.json").write_text(json.dumps({
        "task": "squad", "max_seq_length": 60, "doc_stride": 23, "max_query_length": 20,
        "version_2_with_negative": True, "do_lower_case": False}))
    given = provenance.follow_run_record(export_flags(squad, "--format=squad"))
    assert (given.max_seq_length, given.doc_stride, given.max_query_length,
            given.version_2_with_negative, given.do_lower_case, given.task_name) == (
        60, 23, 20, True, False, None)
    asked = provenance.follow_run_record(
        export_flags(squad, "--format=squad", "--max_query_length=12"))
    assert (asked.max_query_length, asked.doc_stride) == (12, 23)
    with pytest.raises(ValueError, match=re.escape(message("export-not-as-trained"))) as error:
        provenance.follow_run_record(export_flags(squad, "--format=squad", "--do_lower_case"))
    assert "--do_lower_case=true, but" in str(error.value)

    classifier = tmp_path / "classifier"
    classifier.mkdir()
    (classifier / "run.json").write_text(json.dumps({
        "task": "classifier/mrpc", "max_seq_length": 32, "doc_stride": None,
        "do_lower_case": True}))
    for serving_format in ("classifier", "litert", "onnx"):
        given = provenance.follow_run_record(
            export_flags(classifier, f"--format={serving_format}"))
        assert (given.task_name, given.max_seq_length, given.doc_stride) == ("mrpc", 32, None)
    # The encoder of a classifier run, pooled into a vector: no task.
    pooled = provenance.follow_run_record(
        export_flags(classifier, "--format=onnx", "--pooling=mean"))
    assert pooled.task_name is None
    named = provenance.follow_run_record(export_flags(classifier, "--task_name=MRPC"))
    assert named.task_name == "MRPC"


@pytest.mark.parametrize("task,refused", [("multilabel", False), ("sst-2", True)])
def test_a_runs_task_decides_the_multi_label_flags_of_its_export(tmp_path, task, refused):
    """--multi_label_threshold and --labels with --task_name left out: the task is the run's
    (its run.json), so a multi-label run's export takes them, and another task's refuses them
    as it refuses them with that --task_name given. The run here holds no checkpoint: an export
    that got past its flags stops there."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"task": f"classifier/{task}"}))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    process = subprocess.run(
        [sys.executable, "export_model.py", f"--bert_config_file={TINY / 'bert_config.json'}",
         f"--vocab_file={VOCAB}", f"--checkpoint={run}", f"--max_seq_length={MAX_SEQ_LENGTH}",
         "--multi_label_threshold=0.3", "--labels=a,b",
         f"--export_dir={tmp_path / 'serving' / '1'}"],
        cwd=ROOT, env={**env, "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True, text=True,
        timeout=300)
    assert process.returncode == 2 and "Traceback" not in process.stderr, process.stderr[-3000:]
    said = "--multi_label_threshold only with --task_name=multilabel"
    assert (said in process.stderr) == refused, process.stderr[-3000:]
    assert (f"{run}/bert_model.ckpt for bert_model.ckpt.index" in process.stderr) != refused, \
        process.stderr[-3000:]
    assert not (tmp_path / "serving").exists()


# export_model.py --format=huggingface of a fine-tuned run: (run.json task, model kind, outputs,
# labels written beside the checkpoint or None, the class written).
HF_RUNS = [
    ("ner", "token", 3, ["B-PER", "I-PER", "O"], "BertForTokenClassification"),
    ("classifier/multilabel", "multi_label", 3, ["animal", "sport", "weather"],
     "BertForSequenceClassification"),
    ("classifier/sts-b", "classifier", 1, None, "BertForSequenceClassification"),
    ("classifier/mnli", "classifier", 3, None, "BertForSequenceClassification"),
    ("squad", "span", None, None, "BertForQuestionAnswering"),
    ("swag", "multiple_choice", 4, None, "BertForMultipleChoice"),
]


def _fine_tuned_run(directory, task, kind, outputs, labels, config=None):
    """A fine-tuning script's output_dir: the tiny model of `kind` with a random head saved as
    the trainer saves it, its run.json (`task`), bert_config.json and label_list.txt."""
    from modeling import families
    from modeling_helpers import save_like_the_trainer

    config = config or tiny_config()
    model = families.build_model(kind, config, *(() if outputs is None else (outputs,)))
    rng = np.random.default_rng(5)
    for var in model.variables:
        if "seed_generator" not in var.path:
            value = rng.normal(0.0, 0.2, var.shape) + (1.0 if "gamma" in var.path else 0.0)
            var.assign(value.astype(np.float32))
    save_like_the_trainer(model, directory)
    (directory / "run.json").write_text(json.dumps(
        {"task": task, "max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": True,
         "family": families.of_config(config).name,
         "pretraining_objective": config.pretraining_objective}))
    (directory / "bert_config.json").write_text(config.to_json_string())
    if labels:
        (directory / "label_list.txt").write_text("\n".join(labels) + "\n")
    return model


@pytest.fixture(scope="module")
def fine_tuned_runs(tmp_path_factory):
    """`made(task, kind, outputs, labels)`: (the `_fine_tuned_run` directory, its model), made
    once for the module (the tests export it elsewhere): the SQuAD run serves both the Hugging
    Face export test and the trimmed windows' test."""
    runs = {}

    def made(task, kind, outputs, labels):
        key = (task, kind, outputs, tuple(labels or ()))
        if key not in runs:
            run = tmp_path_factory.mktemp("run")
            runs[key] = run, _fine_tuned_run(run, task, kind, outputs, labels)
        return runs[key]

    return made


# export_model.py's flags as parsed with their defaults (the tests' sequence length).
EXPORT_FLAGS = {
    "pooling": None, "normalize": False, "do_lower_case": True, "max_seq_length": MAX_SEQ_LENGTH,
    "task_name": None, "labels": None, "multi_label_threshold": 0.5, "entity_types": None,
    "long_documents": False, "window_aggregation": "mean", "mixed_precision": None,
    "doc_stride": None, "max_query_length": 64, "n_best_size": 20, "max_answer_length": 30,
    "version_2_with_negative": False, "null_score_diff_threshold": None, "full_width_windows": False,
    "quantization": "float32", "encoder_only": False}


def export_run(run, fmt, export_dir, vocab=VOCAB, **flags):
    """export_model.py --format=`fmt` of the run directory `run` (its flags as parsed: `flags`
    over `EXPORT_FLAGS`)."""
    from bert_runner.serving import registry
    from bert_runner.serving.export_config import ExportConfig
    from bert_tasks.serving import register_all
    from bert_runner.runs.model_files import model_files

    register_all()
    config = ExportConfig(**{**EXPORT_FLAGS, "format": fmt, "checkpoint": str(run),
                             "export_dir": str(export_dir), **flags})
    registry.get(fmt).export(config, model_files(None, vocab, str(run)))
    return str(export_dir)


def _export_huggingface(run, export_dir, **flags):
    """export_model.py --format=huggingface's export of `run`."""
    return export_run(run, "huggingface", export_dir, **flags)


@pytest.mark.parametrize("task,kind,outputs,labels,architecture", HF_RUNS,
                         ids=[case[0] for case in HF_RUNS])
def test_a_fine_tuned_run_exports_as_the_transformers_class_of_its_head(
        fine_tuned_runs, tmp_path, task, kind, outputs, labels, architecture):
    """A run's output_dir goes out as the class of its head (not its encoder alone), its labels
    the run's (label_list.txt, or its task's), and loads back (our reader, as --init_checkpoint
    loads it) with the same logits."""
    from bert_tasks.classifier import processors
    from modeling import checkpoint as checkpoints, families

    run, model = fine_tuned_runs(task, kind, outputs, labels)
    _export_huggingface(run, tmp_path / "hf")
    hf = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf["architectures"] == [architecture]
    if task.startswith("classifier/") and not labels:
        labels = processors.get_processor(task.partition("/")[2]).get_labels()
    if labels:
        assert [hf["id2label"][str(i)] for i in range(len(labels))] == labels
        assert (tmp_path / "hf" / "label_list.txt").read_text().split() == labels
    assert hf.get("problem_type") == {"classifier/multilabel": "multi_label_classification",
                                      "classifier/sts-b": "regression",
                                      "classifier/mnli": "single_label_classification"}.get(task)
    back = families.build_model(kind, tiny_config(), *(() if outputs is None else (outputs,)))
    checkpoints.initialize_from_checkpoint(back, str(tmp_path / "hf"))
    # Eight rows, as test_swag_export_scores_as_run_swag's batch (2 contexts of 4 endings):
    # XLA compiles the encoder's kernels at one shape for all of them.
    ids = np.random.default_rng(1).integers(5, 99, (8, MAX_SEQ_LENGTH)).astype(np.int32)
    features = {"input_ids": ids, "input_mask": np.ones_like(ids),
                "segment_ids": np.zeros_like(ids)}
    if kind == "multiple_choice":
        features = {k: v.reshape(-1, outputs, MAX_SEQ_LENGTH) for k, v in features.items()}
    for key, value in model(features).items():
        np.testing.assert_array_equal(np.asarray(back(features)[key]), np.asarray(value))


def test_a_head_transformers_has_no_class_for_is_refused_naming_what_exports(tmp_path):
    """An ELECTRA classifier run (its original head is not ElectraForSequenceClassification's):
    one line saying so and what can be exported instead, nothing written; --encoder_only
    writes its encoder (ElectraModel)."""
    from modeling.electra.config import ElectraConfig

    config = ElectraConfig(vocab_size=99, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=48,
                           max_position_embeddings=40).validate()
    run = tmp_path / "run"
    _fine_tuned_run(run, "classifier/mrpc", "classifier", 2, None, config)
    with pytest.raises(ValueError, match=re.escape(message("export-hf-no-class"))) as error:
        _export_huggingface(run, tmp_path / "hf")
    assert str(error.value) == (
        f"--checkpoint={run} (classifier/mrpc): transformers has no class for the ELECTRA "
        "classifier model: the original ELECTRA's classifier (dropout and one dense layer on the "
        "first token) is not ElectraForSequenceClassification's head (classifier.dense, GELU, "
        "classifier.out_proj), which cannot compute it exactly. Export it with "
        "--format=classifier (a SavedModel), or its encoder alone with --format=huggingface "
        "--encoder_only")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    _export_huggingface(run, tmp_path / "encoder", encoder_only=True)
    hf = json.loads((tmp_path / "encoder" / "config.json").read_text())
    assert hf["architectures"] == ["ElectraModel"]


@pytest.mark.large
def test_run_classifier_predicts_the_same_from_the_runs_hugging_face_export(tmp_path):
    """A run_classifier run exported with --format=huggingface, then given as --init_checkpoint
    to a predicting run_classifier (its config, vocabulary and labels the directory's): the
    test_results.tsv of the run itself."""
    from test_run_classifier import run_in_process, write_keyword_mrpc

    write_keyword_mrpc(tmp_path / "data", num_train=16, num_dev=8, num_test=8)
    run_in_process(tmp_path / "data", tmp_path / "run", do_train=True, do_predict=True,
                   train_batch_size=8, num_train_epochs=1.0,
                   init_checkpoint=str(TINY / "bert_model.ckpt"))
    _export_huggingface(tmp_path / "run", tmp_path / "hf", max_seq_length=24)
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["id2label"] == {
        "0": "0", "1": "1"}
    run_in_process(tmp_path / "data", tmp_path / "again", do_predict=True,
                   init_checkpoint=str(tmp_path / "hf"), bert_config_file=None,
                   vocab_file=str(tmp_path / "hf" / "vocab.txt"))
    ours = np.loadtxt(tmp_path / "run" / "test_results.tsv")
    np.testing.assert_allclose(np.loadtxt(tmp_path / "again" / "test_results.tsv"), ours,
                               atol=1e-6)


@pytest.mark.large
def test_the_cli_refuses_a_head_transformers_has_no_class_for_in_one_line(tmp_path):
    """export_model.py --format=huggingface of a run_ner --bilstm_on_top run: exit 2, one line,
    no traceback, nothing written."""
    run = tmp_path / "run"
    _fine_tuned_run(run, "ner", "token", 3, ["B-PER", "I-PER", "O"])
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "bilstm_on_top": True}))
    from modeling import families
    from modeling_helpers import save_like_the_trainer

    for path in run.glob("ckpt-*"):
        path.unlink()
    (run / "checkpoint").unlink()
    save_like_the_trainer(families.build_model("token", tiny_config(), 3, bilstm_on_top=True), run)
    process = subprocess.run(
        [sys.executable, str(ROOT / "export_model.py"), "--format=huggingface",
         f"--checkpoint={run}", f"--vocab_file={VOCAB}", f"--export_dir={tmp_path / 'hf'}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    from refusals import assert_refused

    assert_refused(process, "export-hf-no-class")
    assert "a BiLSTM on top of the encoder (--bilstm_on_top)" in process.stderr
    assert "Export it with --format=ner (a SavedModel)" in process.stderr
    assert not (tmp_path / "hf").exists()


def test_trimmed_squad_windows_give_the_padded_windows_logits(fine_tuned_runs, tmp_path):
    """export_model.py --format=squad (windows at their own length by default): each window's
    logits at its word-pieces are the --full_width_windows export's (run_squad's windows), its
    padding's are PADDED_LOGIT."""
    from bert_runner.serving import predictor
    from bert_tasks.squad.raw_text import PADDED_LOGIT
    from test_onnx import SQUAD_FLAGS, SQUAD_INPUTS

    run, _ = fine_tuned_runs("squad", "span", None, None)
    flags = {**SQUAD_FLAGS, "max_seq_length": 32}
    # Not warmed up: the test calls the signature itself, and each warm-up would add window
    # shapes of its own for XLA to compile the encoder's kernels at.
    padded = predictor.Predictor(export_run(run, "squad", tmp_path / "padded",
                                            full_width_windows=True, **flags), warm_up=False)
    trimmed = predictor.Predictor(export_run(run, "squad", tmp_path / "trimmed", **flags),
                                  warm_up=False)
    assert trimmed.metadata["trim_windows"] and not padded.metadata["trim_windows"]
    questions, contexts = zip(*(text.split("\t") for text in SQUAD_INPUTS[:2]))
    tensors = dict(question=list(questions), context=list(contexts))
    expected = padded._call("serving_default", **tensors)
    got = trimmed._call("serving_default", **tensors)
    for name in ("start_logits", "end_logits"):
        real = got[name] != PADDED_LOGIT
        assert 0 < real.mean() < 1  # short windows: padding trimmed
        np.testing.assert_allclose(got[name][real], expected[name][real], atol=1e-4)


@pytest.mark.large
def test_electras_beams_are_the_same_in_windows_at_their_own_length(tmp_path):
    """ELECTRA's beam head: the default windows' beams (of the context's positions) and answers
    are --full_width_windows'."""
    from bert_runner.serving import predictor
    from modeling.checkpoint import load_config
    from test_onnx import ELECTRA_TINY, SQUAD_FLAGS, SQUAD_INPUTS

    flags = {**SQUAD_FLAGS, "max_seq_length": 32}
    questions, contexts = zip(*(text.split("\t") for text in SQUAD_INPUTS[:2]))
    tensors = dict(question=list(questions), context=list(contexts))
    electra = tmp_path / "electra"
    electra.mkdir()
    _fine_tuned_run(electra, "squad", "span", None, None,
                    load_config(str(ELECTRA_TINY / "hparams.json")))
    exports = [predictor.Predictor(export_run(
        electra, "squad", tmp_path / f"electra_{full}", str(ELECTRA_TINY / "vocab.txt"),
        full_width_windows=full, **flags)) for full in (True, False)]
    beams = [export._call("serving_default", **tensors) for export in exports]
    np.testing.assert_array_equal(beams[1]["window_count"], beams[0]["window_count"])
    np.testing.assert_allclose(beams[1]["answerable_logit"], beams[0]["answerable_logit"],
                               atol=1e-4)
    # The beams' positions an answer may take (log-probabilities of the context; the rest are
    # 1000 below, in an order float32 rounding decides, and never answers).
    starts = beams[0]["start_top_log_probs"] > -500
    ends = (beams[0]["end_top_log_probs"] > -500) & starts[..., None]  # of a real start
    for kind, real in (("start", starts), ("end", ends)):
        for name in (f"{kind}_top_index", f"{kind}_top_log_probs"):
            np.testing.assert_allclose(beams[1][name][real], beams[0][name][real], atol=1e-4)
    answers = [export.predict(list(SQUAD_INPUTS[:2])) for export in exports]
    assert_same_answers(answers[1], answers[0])


def assert_same_answers(got, expected, atol=1e-5):
    """`got` equals `expected` (answers: dicts, lists, strings, numbers), floats within `atol`."""
    if isinstance(expected, dict):
        assert sorted(got) == sorted(expected)
        for key in expected:
            assert_same_answers(got[key], expected[key], atol)
    elif isinstance(expected, list):
        assert len(got) == len(expected)
        for a, b in zip(got, expected):
            assert_same_answers(a, b, atol)
    elif isinstance(expected, float):
        assert got == pytest.approx(expected, abs=atol)
    else:
        assert got == expected


def test_onnx_refuses_a_quantization_of_litert_in_one_line(tmp_path):
    """--format=onnx --quantization=float16 (LiteRT's): refused before the model is read (its
    weights are not needed for the refusal)."""
    run = tmp_path / "run"
    run.mkdir()
    _fine_tuned_run(run, "ner", "token", 3, ["O", "B-PER", "I-PER"])
    for name in os.listdir(run):
        if name.startswith("ckpt-") and name.endswith(".data-00000-of-00001"):
            os.remove(run / name)
    with pytest.raises(ValueError, match=re.escape(message("export-onnx-quantization"))) as error:
        export_run(run, "onnx", tmp_path / "onnx", quantization="float16")
    assert str(error.value) == ("--format=onnx --quantization=float16: ONNX exports are float32 "
                                "or dynamic_int8 (float16 and full int8 are LiteRT's, "
                                "--format=litert)")
