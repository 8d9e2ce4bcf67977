"""run_squad's model side (bert_tasks.squad.task) and its scoring decisions (bert_tasks.squad.evaluate), in process."""
import numpy as np
import pytest
import tensorflow as tf

from modeling_helpers import tiny_config
from bert_tasks.squad import evaluate, postprocess, task


def test_training_steps_are_the_originals():
    from bert_runner.run_config import RunConfig

    # The original README's SQuAD v1.1 run: 87,599 questions, batch 12, 2 epochs.
    run = RunConfig("out", train_batch_size=12, num_train_epochs=2.0, warmup_proportion=0.1)
    assert run.training_steps(87599, "questions") == (14599, 1459)
    with pytest.raises(ValueError, match="5 questions at --train_batch_size=32 for "
                                         "--num_train_epochs=3.0 make 0 training steps"):
        RunConfig("out", train_batch_size=32).training_steps(5, "questions")


def test_span_model_trains_everything_but_the_pooler():
    """The span loss does not reach the pooler: the original's optimizer skipped its None
    gradient; here it is not trainable, and every trainable variable gets a gradient."""
    model = task.build_model(tiny_config())
    pooler = {id(v) for v in model.encoder.pooler.weights}
    assert pooler and not pooler & {id(v) for v in model.trainable_variables}
    rng = np.random.default_rng(0)
    features = {
        "input_ids": tf.constant(rng.integers(5, 99, (2, 16)), tf.int32),
        "input_mask": tf.ones((2, 16), tf.int32),
        "segment_ids": tf.zeros((2, 16), tf.int32),
        "start_positions": tf.constant([3, 0]),
        "end_positions": tf.constant([5, 0]),
    }
    with tf.GradientTape() as tape:
        loss, metrics = task.span_loss_fn(model, features, training=False)
    assert metrics == {} and loss.shape == ()
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None for g in grads)
    out = task.predict_step(model, {**features, "unique_ids": tf.constant([7, 8])})
    assert out["start_logits"].shape == (2, 16) and out["unique_ids"].numpy().tolist() == [7, 8]


def test_a_copy_of_the_span_model_keeps_its_pooler_untrained():
    """The frozen pooler is the model's constructor argument: a copy in another mode keeps it,
    frozen or not."""
    from modeling import BertSpanLabeler
    from modeling.inference import copy_with

    model = task.build_model(tiny_config())
    copy = copy_with(model, recompute=True)
    assert copy is not model and copy.get_config()["train_pooler"] is False
    pooler = {id(v) for v in copy.encoder.pooler.weights}
    assert pooler and not pooler & {id(v) for v in copy.trainable_variables}
    trained = copy_with(BertSpanLabeler(tiny_config(), train_pooler=True), recompute=True)
    assert trained.get_config()["train_pooler"] is True
    assert {id(v) for v in trained.encoder.pooler.weights} <= {
        id(v) for v in trained.trainable_variables}


def test_raw_results_one_per_feature():
    batches = [{"unique_ids": np.array([1000000000, 1000000001], np.int32),
                "start_logits": np.zeros((2, 4), np.float32),
                "end_logits": np.ones((2, 4), np.float32)},
               {"unique_ids": np.array([1000000002], np.int32),
                "start_logits": np.zeros((1, 4), np.float32),
                "end_logits": np.ones((1, 4), np.float32)}]
    results = list(task.raw_results(iter(batches), 3))
    assert [r.unique_id for r in results] == [1000000000, 1000000001, 1000000002]
    assert all(type(r.unique_id) is int and r.end_logits.dtype == np.float32 for r in results)


def test_on_a_tpu_the_windows_end_in_padding_that_no_result_keeps(tmp_path):
    """A TPU's prediction batches are all full: the prediction windows are followed by padding
    windows up to a multiple of the batch size (`SquadTask.padding_record`: zeros, unique id 0,
    parsed as any window), and `raw_results` stops at the real windows."""
    import json

    from bert_runner import splits
    from bert_runner.inputs import decode_record
    from bert_runner.run_config import RunConfig
    from modeling_helpers import TINY
    from test_run_squad import squad_data
    from vocab.tokenization import FullTokenizer

    (tmp_path / "dev.json").write_text(json.dumps(squad_data(3, seed=1)[0]))
    squad = task.SquadTask(32, predict_file=str(tmp_path / "dev.json"), doc_stride=8,
                           max_query_length=8)
    run = RunConfig(str(tmp_path), use_tpu=True, predict_batch_size=8)
    split = splits.write_split(squad, squad.read_examples("predict"), "predict",
                               FullTokenizer(str(TINY / "vocab.txt")), run)
    real = split.num_examples
    assert split.num_padding == -real % 8 > 0
    rows = [decode_record(r, squad.feature_spec(False))
            for r in tf.data.TFRecordDataset(split.files)]
    ids = [int(row["unique_ids"]) for row in rows]
    assert len(ids) == real + split.num_padding
    assert min(ids[:real]) >= 1000000000 and ids[real:] == [0] * split.num_padding
    assert not any(np.any(row["input_ids"]) or np.any(row["input_mask"]) for row in rows[real:])
    batches = [{"unique_ids": np.array(ids[i:i + 8]),
                "start_logits": np.zeros((len(ids[i:i + 8]), 32), np.float32),
                "end_logits": np.zeros((len(ids[i:i + 8]), 32), np.float32)}
               for i in range(0, len(ids), 8)]
    assert [r.unique_id for r in task.raw_results(iter(batches), real)] == ids[:real]


def _data(answers, impossible=None):
    qas = []
    for i, texts in enumerate(answers):
        qa = {"id": "q%d" % i, "question": "?"}
        if texts is not None:
            qa["answers"] = [{"text": t, "answer_start": 0} for t in texts]
        if impossible is not None:
            qa["is_impossible"] = impossible[i]
        qas.append(qa)
    return {"data": [{"paragraphs": [{"context": "x", "qas": qas}]}]}


def test_should_score():
    dev, test = _data([["dog"], ["cat"]]), _data([None, None])
    assert evaluate.should_score(None, dev, "dev.json") is True
    assert evaluate.should_score(None, test, "test.json") is False
    assert evaluate.should_score(False, dev, "dev.json") is False
    assert evaluate.should_score(True, dev, "dev.json") is True
    with pytest.raises(ValueError, match="--do_eval needs gold answers, but test.json has none"):
        evaluate.should_score(True, test, "test.json")
    with pytest.raises(evaluate.SquadFormatError, match=r"bad.json: data\[0\]\.paragraphs: missing"):
        evaluate.should_score(None, {"data": [{}]}, "bad.json")


def test_score_predictions_v1_and_v2():
    v1 = postprocess.Predictions({"q0": "dog", "q1": "cat"}, {}, {})
    assert evaluate.score_predictions(_data([["dog"], ["fish"]]), v1, False) == {
        "exact_match": 50.0, "f1": 50.0}
    # v2.0 with the null odds as no-answer probabilities, as evaluate-v2.0.py --na-prob-file.
    data = _data([["dog"], []], impossible=[False, True])
    v2 = postprocess.Predictions({"q0": "dog", "q1": "cat"}, {}, {"q0": -3.0, "q1": 2.0})
    scores = evaluate.score_predictions(data, v2, True)
    assert scores == evaluate.evaluate_v2(evaluate.gold_answers(data), v2.predictions,
                                          v2.null_odds)
    assert scores["exact"] == 100.0 and scores["NoAns_total"] == 1  # q1: 2.0 > 1.0 -> no answer
