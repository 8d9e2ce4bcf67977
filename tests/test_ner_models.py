"""The NER heads and their task: BertTokenClassifier (shapes, TF1 names and round trip,
get_config, bf16), NerTask's loss and outputs, the feature-based BiLSTM tagger, the Table 7
layer choices and the activation cache (against a direct forward pass)."""
import numpy as np
import pytest
import tensorflow as tf

from modeling.checkpoint import original as original_layout
from modeling import checkpoint as checkpoints
from modeling import BertTokenClassifier
from modeling_helpers import TINY, tiny_config, tiny_expected
from bert_tasks.ner import conll, feature_based, features as ner_features, tags
from bert_tasks.ner.activations import ActivationCache, load_frozen_encoder
from bert_tasks.ner.lstm_tagger import BiLstmTagger
from bert_tasks.ner.task import NerTask
from ner_helpers import conll_text
from vocab.tokenization import FullTokenizer

LABELS = tags.label_list(["LOC", "PER"])


# [3, 16], the shape of tiny_expected()'s inputs: the encoder's kernels compile for one shape.
def token_features(batch=3, seq=16, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), np.int32)
    mask[:, seq - 2:] = 0
    weights = np.zeros((batch, seq), np.float32)
    weights[:, 1:4] = 1.0
    return {"input_ids": rng.integers(5, 99, (batch, seq)).astype(np.int32), "input_mask": mask,
            "segment_ids": np.zeros((batch, seq), np.int32),
            "label_ids": rng.integers(0, len(LABELS), (batch, seq)).astype(np.int32),
            "label_weights": weights, "window_index": np.arange(batch, dtype=np.int32)}


@pytest.fixture(scope="module")
def model():
    model = BertTokenClassifier(tiny_config(), len(LABELS))
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    return model


def test_logits_are_the_layer_on_every_real_position(model):
    features = token_features()
    logits = model(features)["logits"]
    assert logits.shape == (3, 16, len(LABELS)) and logits.dtype == "float32"
    sequence = model.encoder({"input_ids": features["input_ids"],
                              "input_mask": features["input_mask"],
                              "token_type_ids": features["segment_ids"]})["sequence_output"]
    layer = model.classifier
    expected = np.asarray(sequence) @ np.asarray(layer.output_weights).T + np.asarray(
        layer.output_bias)
    # The encoder skips padded rows (`skip_padding`): their logits are not computed.
    real = features["input_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(logits)[real], expected[real], rtol=1e-5, atol=1e-5)


def test_tf1_names_and_round_trip(tmp_path, model):
    names = original_layout.variable_map(model)
    assert list(names)[-2:] == ["output_weights", "output_bias"]  # run_classifier's place
    assert tuple(names["output_weights"].shape) == (len(LABELS), 32)
    expected = tiny_expected()
    sequence = model.encoder({"input_ids": expected["input_ids"],
                              "input_mask": expected["input_mask"],
                              "token_type_ids": expected["segment_ids"]})["sequence_output"]
    np.testing.assert_allclose(sequence, expected["sequence_output"], atol=1e-5)
    prefix = original_layout.save_tf1_checkpoint(model, tmp_path / "bert_model.ckpt")
    again = BertTokenClassifier(tiny_config(), len(LABELS))
    checkpoints.load_checkpoint(again, prefix)  # strict: every name present
    features = token_features(seed=1)
    np.testing.assert_array_equal(again(features)["logits"], model(features)["logits"])


def test_get_config_round_trip(model):
    config = model.get_config()
    assert config["num_labels"] == len(LABELS)
    rebuilt = BertTokenClassifier.from_config(config)
    rebuilt.set_weights(model.get_weights())
    features = token_features(seed=2)
    np.testing.assert_array_equal(rebuilt(features)["logits"], model(features)["logits"])


@pytest.mark.large
def test_bf16(model):
    mixed = BertTokenClassifier(tiny_config(), len(LABELS), dtype="mixed_bfloat16")
    mixed.set_weights(model.get_weights())
    assert mixed.classifier.compute_dtype == "bfloat16"
    assert mixed.classifier.output_weights.dtype == "float32"
    features = token_features(seed=3)
    logits = mixed(features)["logits"]
    assert logits.dtype == "float32"
    np.testing.assert_allclose(logits, model(features)["logits"], atol=2e-2)


def test_task_loss_is_the_mean_over_scored_positions(model, tmp_path):
    task = NerTask(None, 8, entity_types=["LOC", "PER"])
    assert task.label_list == LABELS
    features = token_features(seed=4)
    loss, metrics = task.loss(model, features, training=False)
    logits = np.asarray(model(features)["logits"], np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = -np.take_along_axis(log_probs, features["label_ids"][..., None], -1)[..., 0]
    weights = features["label_weights"]
    assert float(loss) == pytest.approx((picked * weights).sum() / weights.sum(), rel=1e-4)
    assert metrics == {}
    outputs = task.predict_step(model, features)
    np.testing.assert_array_equal(outputs["predicted_ids"], np.argmax(logits, -1))
    np.testing.assert_allclose(outputs["loss_sum"], (picked * weights).sum(1), rtol=1e-4)
    np.testing.assert_array_equal(outputs["num_scored"], [3, 3, 3])
    assert task.build_model(tiny_config()).num_labels == len(LABELS)


def tagger_inputs(num_inputs, batch=3, steps=6, hidden=8, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, steps), np.int32)
    mask[0, 4:] = 0
    return {"activations": rng.normal(size=(batch, steps, num_inputs, hidden)).astype(np.float32),
            "word_mask": mask}


@pytest.mark.parametrize("combination, num_inputs", [
    ("single", 1), ("weighted_sum", 4), ("concat", 4)])
def test_tagger_shapes_and_mask(combination, num_inputs):
    tagger = BiLstmTagger(num_inputs, combination, lstm_units=5, num_labels=len(LABELS))
    inputs = tagger_inputs(num_inputs)
    logits = tagger(inputs)
    assert logits.shape == (3, 6, len(LABELS)) and logits.dtype == "float32"
    # Padding words do not change the real words' outputs (both directions are masked).
    changed = {k: v.copy() for k, v in inputs.items()}
    changed["activations"][0, 4:] = 100.0
    np.testing.assert_allclose(tagger(changed)[0, :4], logits[0, :4], atol=1e-5)


def test_tagger_config_round_trip_and_bf16():
    tagger = BiLstmTagger(4, "weighted_sum", lstm_units=5, num_labels=len(LABELS))
    inputs = tagger_inputs(4)
    logits = tagger(inputs)
    rebuilt = BiLstmTagger.from_config(tagger.get_config())
    rebuilt(inputs)
    rebuilt.set_weights(tagger.get_weights())
    np.testing.assert_array_equal(rebuilt(inputs), logits)
    mixed = BiLstmTagger.from_config({**tagger.get_config(), "dtype": "mixed_bfloat16"})
    mixed(inputs)
    mixed.set_weights(tagger.get_weights())
    bf16 = mixed(inputs)
    assert bf16.dtype == "float32"
    np.testing.assert_allclose(bf16, logits, atol=0.05)


def test_weighted_sum_starts_as_the_mean_and_concat_keeps_each_layer():
    inputs = tagger_inputs(2)
    weighted = BiLstmTagger(2, "weighted_sum", 5, 3)
    weighted(inputs)
    mean = np.asarray(inputs["activations"]).mean(axis=2)
    np.testing.assert_allclose(weighted._combine(tf.constant(inputs["activations"])), mean,
                               rtol=1e-6)
    concat = BiLstmTagger(2, "concat", 5, 3)
    combined = concat._combine(tf.constant(inputs["activations"]))
    np.testing.assert_array_equal(combined[..., 8:], inputs["activations"][:, :, 1])
    with pytest.raises(ValueError, match="combination must be one of"):
        BiLstmTagger(1, "max", 5, 3)


def test_table7_choices():
    layers = {c.key: c.layers(12) for c in feature_based.FEATURE_CHOICES}
    assert layers == {
        "embeddings": [0], "second_to_last": [11], "last": [12],
        "weighted_sum_last_four": [9, 10, 11, 12], "concat_last_four": [9, 10, 11, 12],
        "weighted_sum_all": list(range(1, 13))}
    assert [c.paper_dev_f1 for c in feature_based.FEATURE_CHOICES] == [
        91.0, 95.6, 94.9, 95.9, 96.1, 95.5]
    with pytest.raises(ValueError, match="needs at least 4 encoder layers; the model has 2"):
        feature_based.CHOICES_BY_KEY["concat_last_four"].layers(2)


def test_activation_cache_holds_each_words_first_sub_token(tmp_path):
    documents = conll.read_conll_lines(conll_text(3, seed=5).splitlines(True), "d.txt")
    sentences = conll.sentences_of(documents)
    tokenizer = FullTokenizer(str(TINY / "vocab.txt"))
    bert = load_frozen_encoder(tiny_config(), str(TINY / "bert_model.ckpt"))
    settings = {"data": "d.txt"}
    directory = str(tmp_path / "cache")
    # Batches of 3 windows of 16: token_features' shape, whose kernels are compiled already.
    cache = ActivationCache.build(directory, settings, bert, documents, tokenizer, LABELS,
                                  max_seq_length=16, batch_size=3)
    assert cache.num_sentences == len(sentences) and cache.num_layers == 3
    np.testing.assert_array_equal(np.diff(cache.sentence_starts), [len(s.words) for s in sentences])
    assert [LABELS[i] for i in cache.label_ids] == [t for s in sentences for t in s.tags]
    # Every word's row is the encoder's output at its first sub-token in its window.
    windows = list(ner_features.make_windows(documents, tokenizer, 16))
    rows = []
    for window in windows:
        ids = np.array([tokenizer.convert_tokens_to_ids(window.tokens)], np.int32)
        out = bert({"input_ids": ids})
        stacked = np.stack([out["embedding_output"][0]] + [x[0] for x in out[
            "all_encoder_layers"]], axis=1)
        rows.append(stacked[window.label_positions])
    expected = np.concatenate(rows)
    for layer, array in enumerate(cache.layers([0, 1, 2])):
        assert array.dtype == np.float16
        np.testing.assert_allclose(array, expected[:, layer], atol=2e-2, rtol=2e-3)
    # Same settings: reused as is; other settings: computed again.
    stamp = (tmp_path / "cache" / "layer_00.npy").stat().st_mtime_ns
    ActivationCache.build(directory, settings, bert, documents, tokenizer, LABELS, 16, 3)
    assert (tmp_path / "cache" / "layer_00.npy").stat().st_mtime_ns == stamp
    again = ActivationCache.build(directory, {"data": "other"}, bert, documents, tokenizer,
                                  LABELS, 16, 3)
    assert again.settings["data"] == "other"
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        "label_ids.npy", "layer_00.npy", "layer_01.npy", "layer_02.npy", "sentence_starts.npy",
        "settings.json"]

    batches = feature_based.SentenceBatches(cache, [1, 2], batch_size=5)
    (inputs, labels, weights) = batches[0]
    assert inputs["activations"].shape[:3] == (5, 16, 2) and inputs["activations"].shape[3] == 32
    np.testing.assert_array_equal(weights.sum(1), [len(s.words) for s in sentences[:5]])
    np.testing.assert_array_equal(labels[0, :len(sentences[0].words)],
                                  cache.label_ids[:len(sentences[0].words)])
