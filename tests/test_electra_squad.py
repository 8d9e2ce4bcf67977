"""ELECTRA's SQuAD head (`modeling.electra.squad`) against the original's own
`get_prediction_module` (fixtures/electra/squad, made by make_electra_squad_fixture.py), its
loss, its names, run_squad's task wiring, and the beam decoding against a restatement of the
original's `qa_metrics.write_predictions`."""
import collections

import numpy as np
import pytest

import vocab
from bert_tasks.squad import examples as sq_examples, features as sq_features, postprocess
from vocab import tokenization

from conftest import FIXTURES

ELECTRA = FIXTURES / "electra"


@pytest.fixture(scope="module")
def original():
    return dict(np.load(ELECTRA / "squad" / "original_head.npz"))


@pytest.fixture(scope="module")
def config():
    from modeling.checkpoint import load_config
    return load_config(str(ELECTRA / "tiny" / "hparams.json"))


@pytest.fixture(scope="module")
def model(config):
    """run_squad's span model of the tiny ELECTRA (the SQuAD task's `build_model`: the family's,
    with its beam head), built once for the tests of its names, its loss and the task wiring."""
    from bert_tasks.squad import task as sq_task
    return sq_task.build_model(config)


def _head(original):
    """An `ElectraSquadHead` holding the fixture's weights (original names in creation order)."""
    from modeling.electra.squad import ElectraSquadHead

    hidden = original["sequence"].shape[-1]
    beam = original["predict/start_top_index"].shape[-1]
    head = ElectraSquadHead(hidden, beam_size=beam)
    head.build()
    names = [str(n) for n in original["variable_order"]]
    variables = [v for layer in head.layers_in_order() for v in (layer.kernel, layer.bias)]
    assert [n.split("/")[-2] for n in names[::2]] == [
        "dense", "qa_hidden", "dense_1", "dense_2", "dense_3"]
    for name, variable in zip(names, variables):
        variable.assign(original["var/" + name])
    return head


def _call(head, original, training):
    from modeling.electra.squad import answer_mask

    mask = answer_mask(original["input_mask"], original["segment_ids"])
    starts = original["start_positions"] if training else None
    return {k: np.asarray(v) for k, v in head(original["sequence"], mask, starts).items()}


def test_training_outputs_and_loss_are_the_originals(original, model):
    out = _call(_head(original), original, training=True)
    for name in ("start_logits", "end_logits", "answerable_logit"):
        np.testing.assert_allclose(out[name], original["train/" + name], rtol=1e-5, atol=1e-4)
    features = {name: original[name] for name in (
        "start_positions", "end_positions", "is_impossible")}
    # The original's per-window losses, averaged over the batch.
    loss = float(model.span_loss(features, out))
    np.testing.assert_allclose(loss, original["train/losses"].mean(), rtol=1e-5)
    # v1.1 records carry no is_impossible: the answerable term then has labels 0, as the
    # original's squadv1 task trains it.
    v1 = {**features, "is_impossible": np.zeros_like(original["is_impossible"])}
    no_labels = {k: v for k, v in features.items() if k != "is_impossible"}
    assert float(model.span_loss(no_labels, out)) == pytest.approx(
        float(model.span_loss(v1, out)), rel=1e-6)
    assert float(model.span_loss(v1, out)) != pytest.approx(loss, rel=1e-3)


def test_prediction_beams_are_the_originals(original):
    out = _call(_head(original), original, training=False)
    np.testing.assert_array_equal(out["start_top_index"], original["predict/start_top_index"])
    np.testing.assert_array_equal(out["end_top_index"], original["predict/end_top_index"])
    for name in ("start_top_log_probs", "end_top_log_probs", "answerable_logit", "start_logits"):
        np.testing.assert_allclose(out[name], original["predict/" + name], rtol=1e-5, atol=1e-4)


def test_family_model_names_and_layer_rates(model):
    from modeling.checkpoint import original
    from modeling.optimization import layerwise_rates

    head = [(name, tuple(v.shape)) for name, v in model.tf1_head_variables()]
    h = model.config.hidden_size
    assert head == [
        ("task_specific/squad/dense/kernel", (h, 1)), ("task_specific/squad/dense/bias", (1,)),
        ("task_specific/squad/qa_hidden/kernel", (2 * h, 512)),
        ("task_specific/squad/qa_hidden/bias", (512,)),
        ("task_specific/squad/dense_1/kernel", (512, 1)), ("task_specific/squad/dense_1/bias", (1,)),
        ("task_specific/squad/dense_2/kernel", (2 * h, 512)),
        ("task_specific/squad/dense_2/bias", (512,)),
        ("task_specific/squad/dense_3/kernel", (512, 1)), ("task_specific/squad/dense_3/bias", (1,))]
    assert list(original.variable_map(model))[-len(head):] == [name for name, _ in head]
    rates = layerwise_rates(model, 0.8)
    layers = model.config.num_hidden_layers
    for _, variable in model.tf1_head_variables():
        assert rates[variable.path] == 1.0
    top = [path for path in rates if f"layer_{layers - 1}/" in path]
    # The top layer sits two below the head (ELECTRA's `_get_layer_lrs`).
    assert top and all(rates[p] == pytest.approx(0.8 ** 2) for p in top)


def _features(batch, seq, rng):
    segment = np.zeros((batch, seq), np.int32)
    segment[:, 5:] = 1
    return {"unique_ids": np.arange(batch, dtype=np.int32) + 7,
            "input_ids": rng.integers(5, 99, (batch, seq)).astype(np.int32),
            "input_mask": np.ones((batch, seq), np.int32), "segment_ids": segment,
            "start_positions": np.array([6, 0], np.int32),
            "end_positions": np.array([8, 0], np.int32),
            "is_impossible": np.array([0, 1], np.int32)}


def test_squad_task_reads_the_declared_outputs(config, model):
    """run_squad's task: the loss is the model's, the training records read is_impossible, the
    prediction keeps the beams, which become BeamResults; and the training step compiles with
    XLA (the gold start is a feature, the beams fixed k)."""
    import tensorflow as tf

    from bert_tasks.squad import task as sq_task

    task = sq_task.SquadTask(32, doc_stride=8, max_query_length=8)
    assert "is_impossible" not in task.feature_spec(True)
    task = task.settle({}, None, config)
    assert "is_impossible" in task.feature_spec(True)
    assert "is_impossible" not in task.feature_spec(False)
    features = _features(2, 16, np.random.default_rng(0))
    loss, metrics = task.loss(model, features, True)
    assert metrics == {} and np.isfinite(float(loss))

    # XLA compiles the head's training step: the gold start is a feature (the encoder's own
    # compilation is tested elsewhere; its output is fed here).
    from modeling.electra.squad import answer_mask

    sequence = np.random.default_rng(1).normal(size=(2, 16, config.hidden_size)).astype("float32")

    @tf.function(jit_compile=True)
    def step(sequence, features):
        with tf.GradientTape() as tape:
            mask = answer_mask(features["input_mask"], features["segment_ids"])
            loss = model.span_loss(features, model.span(sequence, mask,
                                                        features["start_positions"]))
        return loss, tape.gradient(loss, model.span.trainable_variables)

    loss, grads = step(sequence, features)
    assert np.isfinite(float(loss)) and all(g is not None for g in grads)

    prediction = {k: v for k, v in features.items()
                  if k not in ("start_positions", "end_positions", "is_impossible")}
    batch = {k: np.asarray(v) for k, v in task.predict_step(model, prediction).items()}
    assert sorted(batch) == sorted(("unique_ids",) + model.prediction_outputs)
    assert batch["end_top_index"].shape == (2, 16, 16)  # k = min(beam_size 20, S 16)
    results = list(sq_task.raw_results([batch], 2))
    assert [type(r) for r in results] == [postprocess.BeamResult] * 2
    assert results[1].unique_id == 8
    np.testing.assert_array_equal(results[1].end_top_index, batch["end_top_index"][1])


# --- Decoding: the original qa_metrics rule, restated on the original's feature dicts. ---

def _original_rule(example, features, results, n_best_size, max_answer_length, v2, threshold):
    """qa_metrics.SpanBasedQAScorer.write_predictions (joint_prediction, answerable_classifier)
    for one example, then the evaluation's null threshold: (prediction, nbest, null odds)."""
    Prelim = collections.namedtuple("Prelim", "feature start end start_logit end_logit")
    prelim, score_null = [], 1000000
    for index, (feature, result) in enumerate(zip(features, results)):
        if v2:
            score_null = min(score_null, result.answerable_logit)
        for i, start in enumerate(result.start_top_index):
            for j, end in enumerate(result.end_top_index[i]):
                if start >= len(feature.tokens) or end >= len(feature.tokens) or start == 0:
                    continue
                if start not in feature.token_to_orig_map or end not in feature.token_to_orig_map:
                    continue
                if not feature.token_is_max_context.get(start, False):
                    continue
                if end < start or end - start + 1 > max_answer_length:
                    continue
                prelim.append(Prelim(index, start, end, result.start_top_log_probs[i],
                                     result.end_top_log_probs[i, j]))
    prelim = sorted(prelim, key=lambda x: x.start_logit + x.end_logit, reverse=True)
    nbest, seen = [], set()
    for pred in prelim:
        if len(nbest) >= n_best_size:
            break
        feature = features[pred.feature]
        tok_text = " ".join(feature.tokens[pred.start:pred.end + 1])
        tok_text = " ".join(tok_text.replace(" ##", "").replace("##", "").strip().split())
        orig = example.doc_tokens[feature.token_to_orig_map[pred.start]:
                                  feature.token_to_orig_map[pred.end] + 1]
        text = postprocess.get_final_text(tok_text, " ".join(orig), True)
        if text in seen:
            continue
        seen.add(text)
        nbest.append((text, float(pred.start_logit), float(pred.end_logit)))
    if not nbest:
        nbest.append(("empty", 0.0, 0.0))
    best = next(entry for entry in nbest if entry[0])
    if not v2:
        return best[0], nbest, None
    return ("" if score_null > threshold else best[0]), nbest, score_null


@pytest.fixture(scope="module")
def decoding_case():
    """One example over three windows with hand-made beams (K 4): starts and ends in the
    question, at [CLS], past the tokens, without max context, too long, reversed, and valid."""
    tokenizer = tokenization.FullTokenizer(vocab.bundled_vocab_file(), do_lower_case=True)
    context = ("the old dog sat by the river while the young cat slept in the warm sun near "
               "the big house on the hill")
    doc_tokens, _ = sq_examples.split_context(context)
    example = sq_examples.SquadExample("q1", "where did the dog sit?", doc_tokens)
    seq, stride, query = 24, 4, 8
    features = list(sq_features.convert_examples_to_features([example], tokenizer, seq, stride,
                                                             query, False))
    windows = list(sq_features.iter_windows([example], tokenizer, seq, stride, query, False))
    assert len(features) >= 3
    rng = np.random.default_rng(5)
    results = []
    for feature in features:
        k = 4
        starts = rng.choice(seq, k, replace=False).astype(np.int32)
        starts[0] = 10  # a context position of every window
        ends = np.stack([np.clip(s + rng.integers(-2, 6, k), 0, seq - 1) for s in starts])
        start_lp = np.sort(rng.normal(-1.0, 1.0, k))[::-1].astype(np.float32)
        end_lp = np.sort(rng.normal(-1.0, 1.0, (k, k)), axis=1)[:, ::-1].astype(np.float32)
        results.append(postprocess.BeamResult(
            feature.unique_id, start_lp, starts, end_lp, ends.astype(np.int32),
            np.float32(rng.normal())))
    return example, features, windows, results


@pytest.mark.parametrize("v2", [False, True])
def test_beam_decoding_is_the_original_rule(decoding_case, v2):
    example, features, windows, results = decoding_case
    threshold = -2.75
    out = postprocess.compute_predictions([example], windows, results[::-1], 3, 4, True, v2,
                                          threshold)
    text, nbest, null = _original_rule(example, features, results, 3, 4, v2, threshold)
    assert [(e["text"], e["start_logit"], e["end_logit"]) for e in out.nbest["q1"]] == nbest
    probs = postprocess.compute_softmax([s + e for _, s, e in nbest])
    assert [e["probability"] for e in out.nbest["q1"]] == pytest.approx(probs)
    assert out.predictions["q1"] == text
    assert len(nbest) == 3 and "empty" not in [t for t, _, _ in nbest]  # the case has spans
    assert (out.null_odds.get("q1") == null) if v2 else out.null_odds == {}


def test_no_answer_at_the_threshold(decoding_case):
    """v2.0: the null odds are the least answerable logit of the windows; "" when they exceed
    the threshold (the original's evaluation: na_prob > qa_na_threshold)."""
    example, features, windows, results = decoding_case

    def predict(logits, threshold=-2.75):
        beams = [r._replace(answerable_logit=np.float32(a)) for r, a in zip(results, logits)]
        out = postprocess.compute_predictions([example], windows, beams, 3, 4, True, True,
                                              threshold)
        want = _original_rule(example, features, beams, 3, 4, True, threshold)
        assert (out.predictions["q1"], out.null_odds["q1"]) == (want[0], want[2])
        return out.predictions["q1"], out.null_odds["q1"]

    others = [5.0] * (len(results) - 1)
    answer, odds = predict([-2.75] + others)  # at the threshold: answered
    assert answer and odds == -2.75
    assert predict([-2.5] + others)[0] == ""  # above it: no answer
    assert predict(others + [-3.0])[0] == answer  # the most answerable window decides


@pytest.mark.large
def test_raw_text_export_answers_as_run_squad(config, tmp_path):
    """export_model.py --format=squad serves the beams: the SavedModel's outputs are the
    declared ones, and `answers` (predict.py's) gives run_squad's predictions and n-best for the
    same model (its features, `task.predict_step`, `raw_results`, `compute_predictions`), in
    v1.1 and in v2.0 at the head's own threshold (-2.75)."""
    import tensorflow as tf

    from bert_tasks.squad import answers, task as sq_task
    from bert_tasks.squad.raw_text import SquadExport
    from bert_tasks.squad.task import PostprocessOptions
    from modeling import families
    from modeling.checkpoint import load_checkpoint
    from test_export import _saved
    from vocab.fast_tokenizer import FastBertTokenizer

    model = families.build_model("span", config)
    load_checkpoint(model, str(ELECTRA / "tiny" / "electra_tiny"), strict=False)
    rng = np.random.default_rng(3)  # a fixed head, large enough that the inputs matter
    for _, variable in model.tf1_head_variables():
        variable.assign(rng.normal(0.0, 1.0, variable.shape).astype(np.float32))
    # Answerable logits (null odds) of about -4.6, -1.2 and -9.5: both sides of -2.75.
    layer = model.span.answerable_logit
    layer.kernel.assign(layer.kernel * 0.1)
    layer.bias.assign(layer.bias - 22.0)
    vocab_file = str(ELECTRA / "tiny" / "vocab.txt")
    seq, stride, query, n_best, longest = 40, 12, 10, 5, 6
    options = PostprocessOptions(n_best_size=n_best, max_answer_length=longest)
    loaded, metadata = _saved(SquadExport(model, FastBertTokenizer(vocab_file, True), seq,
                                          stride, query, options), tmp_path / "1")
    assert metadata["null_score_diff_threshold"] == -2.75  # not given: the head's

    questions = ["what did the dog see?", "where is the old house?", "who can swim"]
    contexts = [
        "the old dog sat by the river while the young cat slept in the warm sun near the big "
        "house on the hill and the happy bird sang to the small fish in the blue river",
        "The old house is on the hill,\nnear the  road.", "we swim and they run fast"]
    out = {k: v.numpy() for k, v in loaded.signatures["serving_default"](
        question=tf.constant(questions), context=tf.constant(contexts)).items()}
    assert set(model.prediction_outputs) < set(out) and "start_logits" not in out
    assert out["end_top_index"].shape[2:] == (20, 20) and max(out["window_count"]) > 1

    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    examples = [sq_examples.SquadExample(str(i), q, sq_examples.split_context(c)[0])
                for i, (q, c) in enumerate(zip(questions, contexts))]
    windows = list(sq_features.iter_windows(examples, tokenizer, seq, stride, query, False))
    features = [f for w in windows for f in sq_features.window_features(
        w, examples[w.example_index], tokenizer, seq, False)]
    batch = {name: np.array([getattr(f, name) for f in features], np.int32)
             for name in ("unique_id", "input_ids", "input_mask", "segment_ids")}
    batch["unique_ids"] = batch.pop("unique_id")
    predicted = {k: np.asarray(v) for k, v in sq_task.predict_step(model, batch).items()}
    results = list(sq_task.raw_results([predicted], len(features)))
    texts = {}
    for v2 in (False, True):
        expected = postprocess.compute_predictions(examples, windows, results, n_best, longest,
                                                   True, v2, -2.75)
        got = answers.answers(questions, contexts, out,
                              {**metadata, "version_2_with_negative": v2})
        texts[v2] = [a.text for a in got]
        assert texts[v2] == [expected.predictions[str(i)] for i in range(len(got))]
        for i, answer in enumerate(got):
            want = expected.nbest[str(i)]
            assert [e["text"] for e in answer.nbest] == [e["text"] for e in want]
            np.testing.assert_allclose([e["probability"] for e in answer.nbest],
                                       [e["probability"] for e in want], atol=1e-5)
            if answer.text:  # the offsets hold the answer
                words = sq_examples.split_context(contexts[i][answer.start:answer.end])[0]
                assert " ".join(words) == answer.text
    assert texts[True] == ["" if i == 1 else text for i, text in enumerate(texts[False])]
    assert all(texts[False]) and got[1].score == pytest.approx(expected.null_odds["1"], abs=1e-4)
