"""The paper's "LTR & No NSP" model (Table 5) and "+ BiLSTM": causal self-attention, the
next-token loss, the LTR records, the objective recorded in bert_config.json, and an LTR
checkpoint fine-tuned by run_classifier with and without --bilstm_on_top (in process)."""
import json
import random
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertClassifier, BertConfig, BertModel, BertSpanLabeler, next_token_loss
from modeling.bert.config import OBJECTIVE_KEY
from modeling_helpers import TINY, TINY_TRAIN
from refusals import message
from bert_tasks.pretraining.data.features import ExampleEncoder, name_to_features
from bert_tasks.pretraining.data.instances import InstanceBuilder
from bert_tasks.pretraining.data.ltr import LtrInstanceBuilder
from bert_tasks.pretraining.data.reading import InputError
from bert_tasks.pretraining.data.validation import check_records
from vocab import tokenization

SEQ = 16


def _config(objective=None):
    values = json.loads((TINY_TRAIN / "bert_config.json").read_text())
    if objective:
        values[OBJECTIVE_KEY] = objective
    return BertConfig.from_dict(values)


@pytest.fixture(scope="module")
def causal_models():
    """A causal encoder with fast kernels and its copy with the reference ones."""
    keras.utils.set_random_seed(3)
    fast = BertModel(_config("ltr"), kernels="fast")
    reference = BertModel(_config("ltr"), kernels="reference")
    reference.set_weights(fast.get_weights())
    return fast, reference


def _batch(seed=0):
    ids = np.random.RandomState(seed).randint(5, 99, size=(3, 12))
    mask = np.ones_like(ids)
    mask[1, 9:] = 0
    mask[2, 5:] = 0
    return ids, mask


@pytest.mark.parametrize("kernels", [0, 1], ids=["fast", "reference"])
@pytest.mark.parametrize("skip_padding", [False, True])
def test_an_output_at_i_does_not_change_when_tokens_after_i_change(
        causal_models, kernels, skip_padding):
    model = causal_models[kernels]
    ids, mask = _batch()
    changed = ids.copy()
    changed[:, 4:] = np.random.RandomState(1).randint(5, 99, size=(3, 8))

    def outputs(input_ids):
        out = model({"input_ids": input_ids, "input_mask": mask}, skip_padding=skip_padding)
        return [np.asarray(layer) for layer in out["all_encoder_layers"]]

    for before, after in zip(outputs(ids), outputs(changed)):
        np.testing.assert_array_equal(before[:, :4], after[:, :4])
        # Real positions from 4 on see the changed tokens (padded rows: zeros with skip_padding).
        assert np.abs(before[0, 4:] - after[0, 4:]).max(axis=-1).min() > 1e-3


def test_a_bidirectional_model_sees_later_tokens():
    """The control: without the key, position 0 changes when a later token does."""
    keras.utils.set_random_seed(3)
    model = BertModel(_config())
    ids, mask = _batch()
    changed = ids.copy()
    changed[:, 8] = 7
    before = np.asarray(model({"input_ids": ids, "input_mask": mask})["sequence_output"])
    after = np.asarray(model({"input_ids": changed, "input_mask": mask})["sequence_output"])
    assert np.abs(before[0, 0] - after[0, 0]).max() > 1e-4


def test_fast_and_reference_kernels_agree_on_the_causal_mask(causal_models):
    ids, mask = _batch(2)
    inputs = {"input_ids": ids, "input_mask": mask}
    fast, reference = (model(inputs) for model in causal_models)
    np.testing.assert_allclose(np.asarray(fast["sequence_output"]),
                               np.asarray(reference["sequence_output"]), atol=2e-5)


def test_the_pooled_output_reads_the_last_real_token(causal_models):
    model = causal_models[1]
    ids, mask = _batch()
    out = model({"input_ids": ids, "input_mask": mask})
    sequence = np.asarray(out["sequence_output"])
    last = sequence[np.arange(3), mask.sum(axis=1) - 1]
    expected = np.tanh(last @ np.asarray(model.pooler.kernel) + np.asarray(model.pooler.bias))
    np.testing.assert_allclose(np.asarray(out["pooled_output"]), expected, atol=1e-5)


def test_the_objective_is_recorded_only_for_ltr(tmp_path):
    original = _config()
    assert not original.causal and OBJECTIVE_KEY not in original.to_dict()
    ltr = original.with_objective("ltr")
    assert ltr.causal and json.loads(ltr.to_json_string())[OBJECTIVE_KEY] == "ltr"
    # The original's keys and values unchanged; "mlm" writes the original's file.
    assert {k: v for k, v in ltr.to_dict().items() if k != OBJECTIVE_KEY} == original.to_dict()
    assert ltr.with_objective("mlm").to_json_string() == original.to_json_string()
    path = tmp_path / "bert_config.json"
    ltr.to_json_file(path)
    assert BertConfig.from_json_file(path).causal
    path.write_text(ltr.to_json_string().replace('"ltr"', '"rtl"'))
    with pytest.raises(ValueError, match="pretraining_objective 'rtl' is not one of mlm, ltr"):
        BertConfig.from_json_file(path)


def test_an_ltr_model_has_no_hugging_face_form():
    from modeling.bert.family import BERT

    with pytest.raises(ValueError, match=message("hf-export-ltr")):
        BERT.config_to_hf(_config("ltr"))
    assert BERT.config_to_hf(_config())["model_type"] == "bert"


def test_next_token_loss_equals_a_numpy_reference():
    rng = np.random.RandomState(0)
    logits = rng.randn(2, 4, 7).astype(np.float32)
    ids = np.array([[1, 2, 3, 4, 5], [6, 5, 4, 0, 0]])
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    loss, per_position, _ = next_token_loss(logits, ids, mask)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    targets = [(b, i) for b in range(2) for i in range(4) if mask[b, i + 1]]
    expected = -np.mean([log_probs[b, i, ids[b, i + 1]] for b, i in targets])
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    assert np.asarray(per_position).shape == (8,)


def _vocab():
    return tokenization.load_vocab(str(TINY_TRAIN / "vocab.txt"))


def _documents(seed, count=12):
    rng = random.Random(seed)
    return [[[rng.randrange(5, 99) for _ in range(rng.randrange(2, 9))]
             for _ in range(rng.randrange(1, 8))] for _ in range(count)]


def test_ltr_instances_are_unmasked_single_segments_of_one_document():
    vocab = _vocab()
    builder = LtrInstanceBuilder(vocab, SEQ, 0.1, 0.15, 4)
    documents = _documents(0)
    text = {tuple(t for s in d for t in s) for d in documents}
    instances = builder.create_training_instances(documents, 2, random.Random(1))
    assert len(instances) > 24
    for instance in instances:
        ids = instance.input_ids
        assert ids[0] == vocab["[CLS]"] and ids[-1] == vocab["[SEP]"] and len(ids) <= SEQ
        assert instance.segment_ids == [0] * len(ids) and not instance.masked_lm_positions
        assert vocab["[MASK]"] not in ids and not instance.is_random_next
        body = tuple(ids[1:-1])  # a stretch of one document's text
        assert any(body == d[i:i + len(body)] for d in text for i in range(len(d)))


def _write(path, builder, next_sentence, masked_lm, seed=0):
    encoder = ExampleEncoder(SEQ, 4, 98, next_sentence, masked_lm=masked_lm)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for instance in builder.create_training_instances(_documents(seed, 24), 2,
                                                          random.Random(seed)):
            writer.write(encoder.encode(instance))
    return path


def ltr_records(path, seed=0):
    return _write(path, LtrInstanceBuilder(_vocab(), SEQ, 0.1, 0.15, 4), False, False, seed)


def test_ltr_records_parse_and_each_objective_refuses_the_others(tmp_path):
    ltr = ltr_records(tmp_path / "ltr.tfrecord")
    mlm = _write(tmp_path / "mlm.tfrecord",
                 InstanceBuilder(_vocab(), SEQ, 0.1, 0.15, 4, next_sentence=False), False, True)
    spec = name_to_features(SEQ, 4, next_sentence=False, masked_lm=False)
    record = next(iter(tf.data.TFRecordDataset(str(ltr))))
    parsed = tf.io.parse_single_example(record, spec)
    assert sorted(parsed) == ["input_ids", "input_mask", "segment_ids"]
    assert check_records([str(ltr)], SEQ, 0, 99, 2, masked_lm=False).next_sentence is False
    with pytest.raises(InputError, match=re.escape(message("ltr-records-for-masked-lm"))):
        check_records([str(ltr)], SEQ, 4, 99, 2)
    with pytest.raises(InputError, match=re.escape(message("masked-lm-records-for-ltr"))):
        check_records([str(mlm)], SEQ, 0, 99, 2, masked_lm=False)


@pytest.fixture(scope="module")
def ltr_run(tmp_path_factory):
    """run_pretraining --pretraining_objective=ltr on LTR records, 4 steps, in this process."""
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.pretraining.ltr_task import LtrPretrainingTask

    tmp = tmp_path_factory.mktemp("ltr")
    data = ltr_records(tmp / "ltr.tfrecord")
    out = tmp / "pretraining"
    task = LtrPretrainingTask(SEQ, str(data), num_train_steps=4, num_warmup_steps=1,
                              max_eval_steps=2)
    result = driver.run_command(task, RunConfig(
        str(out), bert_config_file=str(TINY_TRAIN / "bert_config.json"), do_train=True,
        do_eval=True, train_batch_size=8, eval_batch_size=8, learning_rate=1e-3,
        save_checkpoints_steps=4, iterations_per_loop=4))
    return out, result


def test_ltr_pretraining_records_its_objective_and_evaluates(ltr_run, caplog):
    out, result = ltr_run
    config = json.loads((out / "bert_config.json").read_text())
    assert config[OBJECTIVE_KEY] == "ltr"
    assert {k: v for k, v in config.items() if k != OBJECTIVE_KEY} == json.loads(
        (TINY_TRAIN / "bert_config.json").read_text())
    assert result.trainer.model.encoder.config.causal
    metrics = result.eval_results
    assert sorted(metrics) == ["global_step", "loss", "next_token_accuracy", "next_token_loss"]
    assert metrics["global_step"] == 4 and 0 < metrics["next_token_loss"] < 10
    assert (out / "ckpt-4.index").exists()


def test_a_config_recording_ltr_is_refused_for_a_masked_lm(ltr_run, tmp_path):
    from bert_tasks.pretraining.task import PretrainingTask

    with pytest.raises(ValueError, match=re.escape(message("config-objective-mismatch"))):
        PretrainingTask(SEQ, 4).model_config(BertConfig.from_json_file(
            ltr_run[0] / "bert_config.json"))


@pytest.mark.large
def test_run_classifier_fine_tunes_the_ltr_checkpoint_with_the_bilstm(ltr_run, tmp_path):
    """Through the driver in process: the output dir's config builds the causal encoder, the
    BiLSTM is new and trained, the encoder comes from the checkpoint. (Without --bilstm_on_top:
    tests/test_checkpoint_sweep.py fine-tunes LTR checkpoints through the same driver.)"""
    bilstm_on_top = True
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.classifier.task import ClassifierTask
    from test_run_classifier import write_keyword_mrpc

    out = ltr_run[0]
    write_keyword_mrpc(tmp_path / "data", num_train=32, num_dev=16, num_test=4)
    run = RunConfig(str(tmp_path / "out"), bert_config_file=str(out / "bert_config.json"),
                    vocab_file=str(TINY / "vocab.txt"), init_checkpoint=str(out / "ckpt-4"),
                    do_train=True, do_eval=True, train_batch_size=16,
                    num_train_epochs=1.0, learning_rate=1e-3, bilstm_on_top=bilstm_on_top)
    result = driver.run_command(ClassifierTask("mrpc", SEQ, str(tmp_path / "data")), run)
    model = result.trainer.model
    assert model.encoder.config.causal and (model.bilstm is not None) == bilstm_on_top
    assert result.trainer.step == 2 and 0 <= result.eval_results["eval_accuracy"] <= 1
    pretrained = tf.train.load_checkpoint(str(out / "ckpt-4"))
    word_embeddings = [k for k in pretrained.get_variable_to_shape_map()
                       if "word_embeddings" in k and "OPTIMIZER" not in k][0]
    assert not np.array_equal(np.asarray(model.encoder.embeddings.word_embeddings),
                              pretrained.get_tensor(word_embeddings))  # fine-tuned from it


def test_bilstm_on_top_keeps_the_heads_shapes_and_names_its_tf1_variables(tmp_path):
    from modeling.checkpoint import original as original_layout
    from modeling import checkpoint as checkpoints

    keras.utils.set_random_seed(0)
    ids, mask = _batch()
    features = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
    classifier = BertClassifier(_config("ltr"), 3, bilstm_on_top=True)
    logits = np.asarray(classifier(features)["logits"])
    assert logits.shape == (3, 3)
    spans = BertSpanLabeler(_config("ltr"), bilstm_on_top=True)
    assert spans(features)["start_logits"].shape == (3, 12)
    names = list(original_layout.variable_map(classifier))
    assert "bilstm/forward/kernel" in names and "bilstm/backward/recurrent_kernel" in names
    # The BiLSTM's summary: a change after the last real token changes nothing.
    changed = dict(features, input_ids=np.where(mask, ids, 7))
    np.testing.assert_allclose(logits, np.asarray(classifier(changed)["logits"]), atol=1e-6)
    copy = BertClassifier.from_config(classifier.get_config())
    assert copy.bilstm is not None
    # The original layout round-trips the BiLSTM (strict: every variable on both sides).
    original_layout.save_tf1_checkpoint(classifier, str(tmp_path / "model.ckpt"))
    checkpoints.load_checkpoint(copy, str(tmp_path / "model.ckpt"))
    np.testing.assert_allclose(np.asarray(copy(features)["logits"]), logits, atol=1e-6)


def test_a_checkpoint_is_read_as_the_model_it_was_trained_as(tmp_path):
    """The objective recorded beside a checkpoint (its output_dir's bert_config.json) must be the
    config's: the original config with an LTR checkpoint would make a bidirectional encoder. A
    causal model's [CLS] sees only itself: --pooling=cls is refused for it."""
    from bert_runner.runs.model_files import model_files
    from bert_runner.startup import check_pooling

    run_dir = tmp_path / "ltr_run"
    run_dir.mkdir()
    values = json.loads((TINY_TRAIN / "bert_config.json").read_text())
    (run_dir / "bert_config.json").write_text(json.dumps({**values, OBJECTIVE_KEY: "ltr"}))
    checkpoint = str(run_dir / "ckpt-2")
    with pytest.raises(ValueError, match=re.escape(message("checkpoint-objective-mismatch"))):
        model_files(str(TINY_TRAIN / "bert_config.json"), None, checkpoint)
    files = model_files(str(run_dir / "bert_config.json"), None, checkpoint)
    assert files.config.causal

    with pytest.raises(ValueError, match=re.escape(message("pooling-cls-ltr"))):
        check_pooling("cls", files.config)
    check_pooling("mean", files.config)
    check_pooling("cls", _config())
