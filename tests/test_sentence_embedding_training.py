"""run_sentence_embeddings.py: the in-batch negatives loss (against a NumPy reference, and split
over replicas), the ranking metrics, and the script end to end on the tiny model: retrieval
better than the starting model's, the vectors served from its checkpoint and from the
sentence-transformers directory it writes, and its refusals."""
import itertools
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from modeling_helpers import TINY
from refusals import assert_refused, message
from test_xla import assert_compiled_run_agrees

NOUNS = ["dog", "cat", "bird", "fish", "tree", "house", "car", "road", "river", "city", "hill",
         "sun", "moon", "star", "rain", "snow", "wind"]
ADJECTIVES = ["red", "blue", "green", "small", "big", "old", "new", "good", "bad", "fast", "slow",
              "happy", "sad"]
VERBS = ["run", "walk", "jump", "swim", "read", "write", "sing", "play", "eat", "drink", "sleep",
         "see"]


def _softmax_rows(logits):
    logits = logits - logits.max(axis=1, keepdims=True)
    return np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def reference_loss(queries, positives, negatives, scale, symmetric):
    """MultipleNegativesRankingLoss written out in NumPy, float64."""
    candidates = np.concatenate([positives, negatives]) if negatives is not None else positives
    forward = _softmax_rows(scale * _unit(queries) @ _unit(candidates).T)
    loss = -np.log(np.diag(forward[:, :len(queries)]))
    if symmetric:
        backward = _softmax_rows(scale * _unit(positives) @ _unit(queries).T)
        loss = (loss - np.log(np.diag(backward))) / 2
    return loss.mean()


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("with_negatives", [False, True])
def test_in_batch_negatives_loss_is_the_softmax_over_every_passage_of_the_batch(
        symmetric, with_negatives):
    from modeling.bert.sentence_encoder import in_batch_negatives_loss

    rng = np.random.default_rng(0)
    queries, positives = rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
    negatives = rng.normal(size=(12, 8)) if with_negatives else None
    expected = reference_loss(queries, positives, negatives, 20.0, symmetric)
    loss, per_query = in_batch_negatives_loss(
        queries.astype("float32"), positives.astype("float32"),
        None if negatives is None else negatives.astype("float32"), 20.0, symmetric)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    assert per_query.shape == (6,)
    # Two replicas of 3 queries each, every passage gathered: their mean is the batch's loss.
    halves = []
    for replica in (0, 1):
        mine = slice(3 * replica, 3 * replica + 3)
        halves.append(float(in_batch_negatives_loss(
            queries[mine].astype("float32"), positives.astype("float32"),
            None if negatives is None else negatives.astype("float32"), 20.0, symmetric,
            first=3 * replica, all_queries=queries.astype("float32"))[0]))
    np.testing.assert_allclose(np.mean(halves), expected, rtol=1e-5)


def test_ranking_metrics_by_hand():
    from bert_tasks import ranking

    scores = np.array([[0.9, 0.1, 0.5, 0.3],    # relevant {2}: rank 2
                       [0.2, 0.8, 0.1, 0.0],    # relevant {1}: rank 1
                       [0.1, 0.2, 0.3, 0.4]])   # relevant {0, 1}: ranks 3 and 4
    metrics = ranking.ranking_metrics(scores, [{2}, {1}, {0, 1}])
    assert metrics["recall_at_1"] == pytest.approx((0 + 1 + 0) / 3)
    assert metrics["recall_at_10"] == pytest.approx(1.0)
    assert metrics["mrr_at_10"] == pytest.approx((1 / 2 + 1 + 1 / 3) / 3)
    ideal_two = 1 + 1 / np.log2(3)
    ndcg = [1 / np.log2(3), 1.0, (1 / np.log2(4) + 1 / np.log2(5)) / ideal_two]
    assert metrics["ndcg_at_10"] == pytest.approx(np.mean(ndcg))
    # A random order's, exactly: the mean over all 24 orders of 4 candidates.
    orders = np.array(list(itertools.permutations(range(4))), np.float64)
    for relevant in ([{0}] * 24, [{0, 2}] * 24):
        chance = ranking.chance_metrics(4, [len(r) for r in relevant])
        expected = ranking.ranking_metrics(-orders, relevant)
        assert chance == pytest.approx(expected, abs=1e-12)
    assert ranking.chance_metrics(4, [1])["mrr_at_10"] == pytest.approx(
        (1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert ranking.chance_metrics(40, [1])["recall_at_1"] == pytest.approx(1 / 40)


def topic_pairs(rng, count, negatives=0):
    """Pairs whose query names a topic (an adjective and a noun) and whose positive is a sentence
    about the same topic in other words; hard negatives share the noun, not the adjective."""
    topics = rng.sample([(a, n) for a in ADJECTIVES for n in NOUNS], count)
    pairs = []
    for adjective, noun in topics:
        verb, other = rng.sample(VERBS, 2)
        pair = {"query": f"the {adjective} {noun}",
                "positive": f"a {noun} that is {adjective} can {verb} and {other} ."}
        if negatives:
            wrong = rng.sample([a for a in ADJECTIVES if a != adjective], negatives)
            pair["negatives"] = [f"a {noun} that is {a} can {verb} ." for a in wrong]
        pairs.append(pair)
    return pairs


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def run_script(*args):
    command = [sys.executable, str(ROOT / "run_sentence_embeddings.py"),
               f"--vocab_file={TINY / 'vocab.txt'}", f"--bert_config_file={TINY / 'bert_config.json'}",
               *args]
    return subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


@pytest.mark.large
def test_trains_retrieval_above_the_start_and_serves_the_vectors(tmp_path):
    rng = random.Random(0)
    pairs = topic_pairs(rng, 200, negatives=1)
    train = write_jsonl(tmp_path / "train.jsonl", pairs[:160])
    # TSV for evaluation; queries unseen in training.
    dev = tmp_path / "dev.tsv"
    dev.write_text("".join(f"{p['query']}\t{p['positive']}\n" for p in pairs[160:]))
    out = tmp_path / "out"
    process = run_script(
        f"--init_checkpoint={TINY / 'bert_model.ckpt'}", f"--train_file={train}",
        f"--eval_file={dev}", "--do_train", "--do_eval", f"--output_dir={out}",
        "--max_seq_length=16", "--train_batch_size=16", "--num_train_epochs=4",
        "--learning_rate=1e-3", "--save_checkpoints_steps=40", "--iterations_per_loop=40")
    assert process.returncode == 0, process.stderr[-3000:]
    start = json.loads((out / "eval_start.json").read_text())
    report = json.loads((out / "eval_report.json").read_text())
    assert report["metrics"]["global_step"] == 40 and start["metrics"]["global_step"] == 0
    assert report["metrics"]["mrr_at_10"] > start["metrics"]["mrr_at_10"] + 0.2, (start, report)
    assert report["metrics"]["recall_at_1"] > start["metrics"]["recall_at_1"]
    start_mrr = "%.4f" % start["metrics"]["mrr_at_10"]
    assert report["baselines"]["mrr_at_10"].startswith(f"starting model {start_mrr}; random order")
    assert "(40 queries, 40 passages)" in report["baselines"]["recall_at_1"]

    served = out / "sentence_transformers"
    modules = json.loads((served / "modules.json").read_text())
    assert [m["path"] for m in modules] == ["", "1_Pooling", "2_Normalize"]
    assert json.loads((served / "1_Pooling" / "config.json").read_text())[
        "pooling_mode_mean_tokens"]
    assert json.loads((served / "sentence_bert_config.json").read_text())["max_seq_length"] == 16
    # The checkpoint (the encoder under its usual names) and the Hugging Face directory give
    # extract_features.py the same vectors: both load as an encoder.
    lines = tmp_path / "lines.txt"
    lines.write_text("the red dog\na cat that is sad can sing .\n")
    vectors = []
    for model, model_flags in (("checkpoint", [f"--init_checkpoint={out / 'ckpt-40'}",
                                               f"--vocab_file={TINY / 'vocab.txt'}",
                                               f"--bert_config_file={TINY / 'bert_config.json'}"]),
                               ("directory", [f"--init_checkpoint={served}"])):
        output = tmp_path / f"{model}.npy"
        process = subprocess.run(
            [sys.executable, str(ROOT / "extract_features.py"), *model_flags,
             f"--input_file={lines}", f"--output_file={output}", "--pooling=mean", "--normalize",
             "--output_format=npy", "--max_seq_length=16"], capture_output=True, text=True)
        assert process.returncode == 0, process.stderr[-3000:]
        vectors.append(np.load(output))
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors[0], axis=1), 1.0, rtol=1e-5)


@pytest.mark.large
def test_negatives_are_gathered_across_replicas(tmp_path):
    """Under a MirroredStrategy of two CPU devices, each replica's loss scores its queries
    against both replicas' passages: the step's gradients are the one-device batch's."""
    code = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import numpy as np, tensorflow as tf
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
from bert_tasks.embeddings.task import SentenceEmbeddingTask
from modeling import BertConfig
config = BertConfig.from_json_file({str(TINY / 'bert_config.json')!r})
task = SentenceEmbeddingTask(8, symmetric=True)
rng = np.random.default_rng(0)
features = {{"input_ids": rng.integers(5, 99, (4, 3, 8)).astype("int32"),
            "input_mask": np.ones((4, 3, 8), "int32"), "segment_ids": np.zeros((4, 3, 8), "int32")}}
def grads(model, batch):
    with tf.GradientTape() as tape:
        loss, _ = task.loss(model, batch, training=False)
    return loss, tape.gradient(loss, model.trainable_variables)
one = task.build_model(config)
loss, expected = grads(one, features)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    two = task.build_model(config)
two.set_weights(one.get_weights())
dataset = strategy.experimental_distribute_dataset(
    tf.data.Dataset.from_tensors(features).unbatch().batch(4))
per_replica = strategy.run(lambda b: grads(two, b), args=(next(iter(dataset)),))
losses = strategy.experimental_local_results(per_replica[0])
assert len(losses) == 2
np.testing.assert_allclose(np.mean([float(l) for l in losses]), float(loss), rtol=1e-5)
for got, want in zip(per_replica[1], expected):
    if want is None:
        continue
    summed = sum(np.asarray(tf.convert_to_tensor(g)) for g in strategy.experimental_local_results(got))
    np.testing.assert_allclose(summed / 2, np.asarray(tf.convert_to_tensor(want)), atol=1e-5)
print("ok")
"""
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert process.returncode == 0 and "ok" in process.stdout, process.stderr[-3000:]


TWO_PAIRS = '{"query": "a", "positive": "b"}\n{"query": "c", "positive": "d"}\n'


@pytest.mark.parametrize("case,content,args", [
    ("pairs-missing-text", '{"query": "the red dog"}\n', []),
    ("pairs-negatives-differ",
     '{"query": "a", "positive": "b", "negatives": ["c"]}\n{"query": "d", "positive": "e"}\n', []),
    ("pairs-field-named-twice",
     '{"query": "a", "positive": "b", "negative": "c", "negatives": ["d"]}\n', []),
    # The in-batch negatives of a batch of one pair: none (its loss is 0, nothing is learnt).
    ("embeddings-batch-of-one", TWO_PAIRS, ["--train_batch_size=1"]),
    # A batch of 32 from 2 pairs holds each 16 times: a query's positive is its own negative.
    ("embeddings-batch-above-pairs", TWO_PAIRS, []),
])
def test_bad_pairs_files_are_refused_before_any_work(tmp_path, case, content, args):
    train = tmp_path / "train.jsonl"
    train.write_text(content)
    out = tmp_path / "out"
    process = run_script(f"--train_file={train}", "--do_train", f"--output_dir={out}",
                         "--max_seq_length=16", *args)
    assert_refused(process, case)
    assert str(train) in process.stderr
    assert not out.exists() or not any(out.iterdir())


def test_the_training_batch_is_checked_against_the_pairs():
    from bert_tasks.embeddings.pairs import Pair
    from bert_tasks.embeddings.task import check_batch

    pairs = [Pair(f"q{i}", f"p{i}", (), i) for i in range(4)]
    check_batch(pairs, "train.jsonl", 4)
    check_batch(pairs, "train.jsonl", 4, accumulation=2)
    # Micro-batches of one pair are batches of one.
    with pytest.raises(ValueError, match=message("embeddings-batch-of-one")) as error:
        check_batch(pairs, "train.jsonl", 4, accumulation=4)
    assert "--gradient_accumulation_steps=4 (micro-batches of 1 pair)" in str(error.value)
    with pytest.raises(ValueError, match=message("embeddings-batch-above-pairs")):
        check_batch(pairs, "train.jsonl", 5)
    # A hard negative is a negative even in a batch of one.
    check_batch([Pair("q", "p", ("n",), 1)], "train.jsonl", 1)


@pytest.mark.parametrize("symmetric", [False, True])
def test_a_matching_pair_is_no_negative_of_it(symmetric):
    """A pair met twice in a batch (the data repeats, then shuffles), a passage of two queries and
    a query of two passages: the matching pairs' texts are left out of each other's softmax (both
    ways with the symmetric loss), so the loss is the softmax over the other texts only (and is
    unchanged where nothing matches). Rows are matched by hashes of their token ids."""
    from modeling.bert.sentence_encoder import in_batch_negatives_loss, same_texts, text_hashes

    rng = np.random.default_rng(1)
    texts = rng.normal(size=(6, 8)).astype("float32")
    # Pairs (q0, p0), (q1, p1), (q0, p0) again, (q2, p0), (q3, p2), (q3, p3).
    query_ids = np.int32([[5, 6, 0], [7, 8, 0], [5, 6, 0], [9, 9, 9], [6, 5, 0], [6, 5, 0]])
    positive_ids = np.int32([[1, 2, 0], [3, 4, 0], [1, 2, 0], [1, 2, 0], [2, 1, 0], [4, 3, 0]])
    queries = texts[[0, 1, 0, 2, 4, 4]] + 0.1 * rng.normal(size=(6, 8)).astype("float32")
    positives = texts[[3, 1, 3, 3, 5, 0]]
    positive_hashes, query_hashes = text_hashes(positive_ids), text_hashes(query_ids)
    matches = np.logical_or(same_texts(positive_hashes, positive_hashes),
                            same_texts(query_hashes, query_hashes))
    assert matches.tolist()[0] == [True, False, True, True, False, False]
    assert matches.tolist()[4] == [False, False, False, False, True, True]
    loss, per_query = in_batch_negatives_loss(queries, positives, scale=20.0,
                                              symmetric=symmetric, matches=matches)

    def kept_softmax(logits):
        expected = []
        for i, row in enumerate(logits):
            kept = [j for j in range(len(row)) if j == i or not matches[i, j]]
            expected.append(-np.log(_softmax_rows(row[kept][None])[0][kept.index(i)]))
        return np.array(expected)

    expected = kept_softmax(20.0 * _unit(queries) @ _unit(positives).T)
    if symmetric:
        expected = (expected + kept_softmax(20.0 * _unit(positives) @ _unit(queries).T)) / 2
    np.testing.assert_allclose(np.asarray(per_query), expected, rtol=1e-5)
    # Nothing matches: the plain loss.
    distinct = np.arange(18, dtype=np.int32).reshape(6, 3)
    plain = in_batch_negatives_loss(queries, positives, scale=20.0)[0]
    masked = in_batch_negatives_loss(queries, positives, scale=20.0,
                                     matches=same_texts(text_hashes(distinct), text_hashes(distinct)))[0]
    np.testing.assert_allclose(float(masked), float(plain), rtol=1e-6)


def test_a_line_with_both_names_of_a_field_is_refused(tmp_path):
    from bert_tasks.embeddings.pairs import read_pairs

    path = write_jsonl(tmp_path / "pairs.jsonl", [
        {"query": "a", "positive": "b"}, {"query": "c", "anchor": "d", "positive": "e"}])
    with pytest.raises(ValueError, match=message("pairs-field-named-twice")) as error:
        read_pairs(str(path))
    assert str(error.value).startswith(f'{path}:2: the pair has both "query" and "anchor"')


_EMBEDDING_MODEL = [f"--init_checkpoint={TINY / 'bert_model.ckpt'}", "--max_seq_length=16"]


def train_with_hard_negatives(tmp_path, out, jit_compile="false"):
    """A LoRA embedding run of 2 steps on 8 pairs with hard negatives, into `out`: its pairs file
    and log."""
    pairs = tmp_path / "pairs.jsonl"
    if not pairs.exists():
        write_jsonl(pairs, topic_pairs(random.Random(1), 8, negatives=1))
    process = run_script(
        *_EMBEDDING_MODEL, f"--train_file={pairs}", f"--eval_file={pairs}", "--do_train",
        "--do_eval", "--train_batch_size=4", "--num_train_epochs=1", "--learning_rate=1e-2",
        "--lora_rank=2", "--iterations_per_loop=1", f"--output_dir={out}",
        f"--jit_compile={jit_compile}")
    assert process.returncode == 0, process.stderr[-3000:]
    return pairs, process.stderr


@pytest.mark.large
def test_an_embedding_run_with_jit_compile_agrees(tmp_path):
    """The training run with hard negatives gives the same results with --jit_compile=true (as
    tests/test_xla.py checks the other scripts)."""
    train_with_hard_negatives(tmp_path, tmp_path / "trained")
    _, log = train_with_hard_negatives(tmp_path, tmp_path / "xla", jit_compile="true")
    assert_compiled_run_agrees(tmp_path / "trained", tmp_path / "xla", log)


def test_an_embedding_model_evaluates_without_training(tmp_path):
    """--do_eval alone: the starting model in a new output_dir, a finished run in its own, and
    the base with a LoRA run's adapters (docs/lora.md) each give the figures the training run
    gave for that model."""
    model = _EMBEDDING_MODEL
    trained = tmp_path / "trained"
    pairs, _ = train_with_hard_negatives(tmp_path, trained)
    start = json.loads((trained / "eval_start.json").read_text())["metrics"]
    after = json.loads((trained / "eval_report.json").read_text())["metrics"]
    assert after["global_step"] == 2 and after != {**start, "global_step": 2}
    adapters = trained / "lora_adapters.safetensors"
    for out, args, expected in (
            (tmp_path / "start", model, start),
            (trained, ["--max_seq_length=16", "--lora_rank=2"], after),
            (tmp_path / "adapters", [*model, f"--lora_adapters={adapters}"],
             {**after, "global_step": 0})):
        process = run_script(*args, f"--eval_file={pairs}", "--do_eval", f"--output_dir={out}")
        assert process.returncode == 0, (out, process.stderr[-3000:])
        report = json.loads((out / "eval_report.json").read_text())
        assert report["metrics"] == pytest.approx(expected, abs=1e-6), out


def test_a_split_without_its_file_is_refused(tmp_path):
    process = run_script("--do_eval", f"--output_dir={tmp_path / 'out'}", "--max_seq_length=16")
    assert process.returncode == 2 and "Traceback" not in process.stderr
    assert "--do_eval needs --eval_file" in process.stderr
    assert not (tmp_path / "out").exists()
