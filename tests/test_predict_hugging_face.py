"""predict.py --model=<a Hugging Face directory with a task head>: every task's run exported with
export_model.py --format=huggingface (its head's transformers class, its export.json settings)
answers as the run's SavedModel does; a directory made elsewhere is served by its class, labels
and casing; one without a head a task serves is refused in one line. With transformers
installed, its pipelines on the same directories give our predict.py's labels, entities and
spans (the large tier).
"""
import io
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from optional_packages import require
from refusals import assert_refused
from test_onnx import TASK_RUNS, _assert_same_results

# The tasks transformers has a class for (ELECTRA's own SQuAD head and a sentence encoder have
# none); NER in the default tier, the others in the large one.
CASES = [pytest.param(case, marks=() if case == "ner" else pytest.mark.large)
         for case in ("classifier", "regression", "squad", "squad-v2", "ner", "swag")]


def _exports(task_exports, case, **overrides):
    """(the case's SavedModel, its Hugging Face directory, predict.py's inputs), made once in the
    process (`task_exports`: a test that changes a directory changes its own copy); `overrides`:
    export flags."""
    _, _, fmt, _, inputs = task_exports.run(case)
    return (task_exports.export(case, fmt, **overrides),
            task_exports.export(case, "huggingface", **overrides), inputs)


@pytest.mark.parametrize("case", CASES)
def test_a_runs_hugging_face_directory_answers_as_its_saved_model(case, task_exports):
    """predict.py on the directory: the SavedModel's answers (probabilities within 1e-4; labels,
    entities, spans identical) and its settings (windows, labels, casing) from export.json."""
    saved, hf, inputs = _exports(task_exports, case)
    expected, got = task_exports.predictor(saved), task_exports.predictor(hf)
    assert got.format == expected.format
    settings = {k: v for k, v in expected.metadata.items() if k not in ("format", "signatures")}
    assert {k: got.metadata.get(k) for k in settings} == settings
    _assert_same_results(expected.predict(inputs), got.predict(inputs))


@pytest.mark.large
def test_predict_prints_the_same_lines_from_the_directory(task_exports):
    """The CLI: predict.py --model=<directory> prints the SavedModel's lines, blank lines kept."""
    saved, hf, inputs = _exports(task_exports, "squad-v2")
    printed = []
    for model in (saved, hf):
        process = subprocess.run([sys.executable, str(ROOT / "predict.py"), f"--model={model}",
                                  "--input_file=-"], input="\n".join(inputs[:1] + [""] + inputs[1:]),
                                 capture_output=True, text=True, timeout=300)
        assert process.returncode == 0, process.stderr
        printed.append(process.stdout)
    assert printed[0] == printed[1] and printed[0].count("\n") == len(inputs) + 1


def test_a_directory_made_elsewhere_is_served_by_its_head(task_exports, tmp_path):
    """A directory without export.json (as transformers' save_pretrained writes it): its labels
    from id2label, its casing from tokenizer_config.json, its task script's defaults; the tags
    as the run's SavedModel gives them."""
    from bert_runner.serving import predictor

    saved, made, inputs = _exports(task_exports, "ner")
    hf = shutil.copytree(made, tmp_path / "hf")
    (hf / "export.json").unlink()
    (hf / "label_list.txt").unlink()
    got = predictor.Predictor(str(hf), warm_up=False)
    assert got.format == "ner" and got.metadata["max_seq_length"] == 128
    assert got.metadata["labels"] == TASK_RUNS["ner"][3]
    expected = task_exports.predictor(saved).predict(inputs[1:])  # short: 16 pieces or 128 alike
    _assert_same_results(expected, got.predict(inputs[1:]))


def test_a_directory_without_a_task_head_is_refused_in_one_line(tmp_path):
    """A bare encoder's directory (BertModel): exit 2, one line naming it and what is served."""
    from modeling_helpers import TINY

    from modeling import BertModel
    from modeling import checkpoint as checkpoints
    from modeling_helpers import tiny_config

    encoder = BertModel(tiny_config())
    checkpoints.load_checkpoint(encoder, TINY / "bert_model.ckpt", strict=False)
    directory = checkpoints.write_hugging_face(encoder, tmp_path / "hf", TINY / "vocab.txt", True)
    process = subprocess.run([sys.executable, str(ROOT / "predict.py"), f"--model={directory}",
                              "a text"], capture_output=True, text=True, timeout=300)
    assert_refused(process, "predict-hf-no-head")
    assert (f"--model={directory} is a Hugging Face directory of BertModel, not of a task head "
            "predict.py serves (BertForMultipleChoice, BertForQuestionAnswering, "
            "BertForSequenceClassification, BertForTokenClassification)") in process.stderr


# transformers on the same directories (needs torch and transformers: the large tier).
PEER_CASES = ["classifier", "ner", "squad", "swag"]


@pytest.mark.large
@pytest.mark.parametrize("case", PEER_CASES)
def test_transformers_answers_as_our_predict_on_the_directory(case, task_exports):
    """transformers' AutoModelFor* loads the directory with no missing or unexpected key; its
    pipeline ("text-classification", "token-classification" with the first word-piece's tag) or,
    for question answering (whose pipeline transformers 5 removed), its model's best span
    (bench/hf_question_answering.py), and for multiple choice its logits: our predict.py's
    labels, entities and spans identical, probabilities within 1e-4."""
    transformers, torch = require("transformers", "torch")

    # SQuAD: an n-best of every position of a window of real tokens is the best span the peer
    # picks (run_squad's draws its n-best from the padding too, and may find no span in it).
    saved, hf, inputs = _exports(task_exports, case, **(
        {"n_best_size": 16} if case == "squad" else {}))
    ours = task_exports.predictor(saved).predict(inputs)
    auto = {"classifier": transformers.AutoModelForSequenceClassification,
            "ner": transformers.AutoModelForTokenClassification,
            "squad": transformers.AutoModelForQuestionAnswering,
            "swag": transformers.AutoModelForMultipleChoice}[case]
    _, info = auto.from_pretrained(hf, output_loading_info=True)
    assert not any(info.get(key) for key in ("missing_keys", "unexpected_keys",
                                             "mismatched_keys", "error_msgs")), info
    if case == "classifier":
        pipe = transformers.pipeline("text-classification", model=hf, top_k=None)
        for text, answer in zip(inputs, ours):
            fields = text.split("\t")
            found = pipe([fields[0] if len(fields) == 1 else
                          {"text": fields[0], "text_pair": fields[1]}], truncation=True,
                         max_length=16)[0]
            theirs = {r["label"]: r["score"] for r in found}
            assert max(theirs, key=theirs.get) == answer["label"]
            np.testing.assert_allclose([theirs[k] for k in answer["probabilities"]],
                                       list(answer["probabilities"].values()), atol=1e-4)
    elif case == "ner":
        pipe = transformers.pipeline("token-classification", model=hf,
                                     aggregation_strategy="first")
        short = [text for text in inputs if len(text) < 40]  # within the run's 16 word-pieces
        for text, answer in zip(short, task_exports.predictor(saved).predict(short)):
            assert [(e["entity_group"], e["start"], e["end"]) for e in pipe(text)] == [
                (e["label"], e["start"], e["end"]) for e in answer["entities"]]
        assert any(answer["entities"] for answer in ours)
    elif case == "squad":
        from bench.hf_question_answering import HfQuestionAnswering

        # One window each (the run's 16 word-pieces hold no more): the best span of the
        # window's logits, which both choose.
        short = ["Who?\tThe old dog walked.", "what is red?\tA big red car.",
                 "Where?\tnear the city"]
        peer = HfQuestionAnswering(hf, 16, 4, 6)
        questions, contexts = zip(*(text.split("\t") for text in short))
        theirs = peer(list(questions), list(contexts))
        assert [a["answer"] for a in task_exports.predictor(saved).predict(short)] == [
            a["answer"] for a in theirs]
    else:
        model = transformers.AutoModelForMultipleChoice.from_pretrained(hf).eval()
        tokenizer = transformers.AutoTokenizer.from_pretrained(hf)
        for text, answer in zip(inputs, ours):
            context, *endings = text.split("\t")
            encoded = tokenizer([context] * len(endings), endings, truncation=True,
                                max_length=16, padding=True, return_tensors="pt")
            with torch.no_grad():
                logits = model(**{k: v[None] for k, v in encoded.items()}).logits[0].numpy()
            probabilities = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
            assert int(np.argmax(logits)) == answer["choice"]
            np.testing.assert_allclose(probabilities, answer["probabilities"], atol=1e-4)


RERANK_INPUTS = ["who walked\tThe old dog walked to the river.", "who walked\tsnow",
                 "who walked\ta big red car", "what is red\tA big red car.", "what is red\tsnow"]


@pytest.fixture(scope="module")
def reranker(tmp_path_factory):
    """(a --task_name=rerank run's SavedModel, its Hugging Face export), made once for the file's
    tests (a test that changes a directory changes its own copy)."""
    from test_export import _fine_tuned_run, export_run

    root = tmp_path_factory.mktemp("reranker")
    run = root / "run"
    run.mkdir()
    _fine_tuned_run(run, "classifier/rerank", "classifier", 2, None)
    return (export_run(run, "classifier", root / "saved", task_name="RERANK"),
            export_run(run, "huggingface", root / "hf"))


def test_a_reranker_exports_as_a_cross_encoder_and_reranks_the_same(reranker, tmp_path):
    """A reranker's directory is a sentence-transformers cross-encoder (one logit, its sigmoid
    CrossEncoder's score); predict.py serves it with the run's labels and probabilities, and
    --rerank orders the candidates as from the SavedModel."""
    from bert_runner.serving import predictor
    from bert_tasks.classifier import reranking

    saved, made = reranker
    hf = str(shutil.copytree(made, tmp_path / "hf"))
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert len(config["id2label"]) == 1 and config["sentence_transformers"] == {
        "activation_fn": "torch.nn.modules.activation.Sigmoid"}
    # Loaded as predict.py loads them (no warm-up): the pairs build only the signature they use.
    expected, got = (predictor.Predictor(path, warm_up=False) for path in (saved, hf))
    _assert_same_results(expected.predict(RERANK_INPUTS), got.predict(RERANK_INPUTS))
    # Without export.json (a cross-encoder of the Hub's): the same, by its one logit.
    (tmp_path / "hf" / "export.json").unlink()
    bare = predictor.Predictor(hf, warm_up=False)
    _assert_same_results(expected.predict(RERANK_INPUTS), bare.predict(RERANK_INPUTS))
    # predict.py --rerank of the SavedModel: the directory's ranking, as JSON lines.
    out = io.StringIO()
    inputs = predictor.read_inputs(RERANK_INPUTS)
    reranking.print_reranked(saved, inputs, "json", out)
    printed = [json.loads(line) for line in out.getvalue().splitlines()]
    ranked = reranking.rerank(bare, inputs)
    assert [[c["was"] for c in q["ranked"]] for q in printed] == [
        [c["was"] for c in q["ranked"]] for q in ranked]
    _assert_same_results(printed, ranked)


@pytest.mark.large
def test_sentence_transformers_cross_encoder_scores_as_our_reranker(reranker):
    """sentence-transformers' CrossEncoder on the directory: its scores are our probabilities of
    "relevant" (within 1e-4), its rank() our order."""
    sentence_transformers = require("sentence_transformers")
    from bert_runner.serving import predictor

    saved, hf = reranker
    ours = [r["probabilities"]["1"] for r in predictor.Predictor(saved).predict(RERANK_INPUTS)]
    model = sentence_transformers.CrossEncoder(hf, max_length=16)
    pairs = [tuple(text.split("\t")) for text in RERANK_INPUTS]
    np.testing.assert_allclose(model.predict(pairs), ours, atol=1e-4)
    passages = [p for q, p in pairs if q == "who walked"]
    ranked = model.rank("who walked", passages)
    assert [r["corpus_id"] for r in ranked] == list(np.argsort(ours[:len(passages)])[::-1])
