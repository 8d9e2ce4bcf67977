"""A Hugging Face directory as the model of a run (bert_runner.runs.model_files, the shared
loader), and sentence vectors: extract_features.py --pooling and the embedding SavedModel, on a
tiny Hugging Face model the test writes from the fixture."""
import json

import numpy as np
import pytest

from modeling_helpers import TINY, tiny_config
from refusals import message

LINES = TINY / "extract_features" / "input.txt"


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    """The tiny fixture encoder in Hugging Face's layout (tanh GELU: "gelu_new")."""
    from modeling import BertModel, checkpoint as checkpoints
    from modeling.checkpoint.hugging_face import save_hf_model

    model = BertModel(tiny_config())
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    return save_hf_model(model, tmp_path_factory.mktemp("hf") / "tiny", TINY / "vocab.txt", True)


def test_the_directory_gives_config_and_vocabulary(hf_dir, tmp_path):
    from bert_runner.runs.model_files import model_files
    from modeling import checkpoint as checkpoints

    files = model_files(None, None, hf_dir, max_seq_length=16)
    assert files.config.to_dict() == tiny_config().to_dict()  # "gelu_new" is the tanh "gelu"
    assert (files.config_file, files.vocab_file) == (f"{hf_dir}/config.json", f"{hf_dir}/vocab.txt")
    same = model_files(str(TINY / "bert_config.json"), None, hf_dir)
    assert same.config_file == str(TINY / "bert_config.json")
    # The directory's own files as the flags (docs/modeling.md): its config.json is read in
    # Hugging Face's terms ("gelu_new" the tanh GELU, "gelu" the exact one).
    own = model_files(f"{hf_dir}/config.json", f"{hf_dir}/vocab.txt", hf_dir)
    assert own.config.to_dict() == tiny_config().to_dict()
    exact = tmp_path / "config.json"
    exact.write_text(json.dumps({**json.loads(open(f"{hf_dir}/config.json").read()),
                                 "hidden_act": "gelu"}))
    assert checkpoints.load_config(str(exact)).hidden_act == "gelu_exact"
    # The erf GELU against the directory's tanh one: the outputs would differ by up to 1e-3.
    other = tmp_path / "bert_config.json"
    other.write_text(json.dumps({**tiny_config().to_dict(), "hidden_act": "gelu_exact"}))
    with pytest.raises(ValueError, match=message("hf-config-mismatch")) as error:
        model_files(str(other), None, hf_dir)
    assert f"{other}" in str(error.value) and f"{hf_dir}/config.json" in str(error.value)
    assert "hidden_act 'gelu_exact' vs 'gelu'" in str(error.value)
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_bytes((tmp_path / "bert_config.json").read_bytes())
    with pytest.raises(ValueError, match=message("checkpoint-directory-neither-layout")):
        model_files(None, None, str(partial))


def test_the_shared_loader_takes_the_directory(hf_dir):
    import tensorflow as tf

    from modeling import BertClassifier
    from modeling import checkpoint as checkpoints

    model = BertClassifier(tiny_config(), 3)
    checkpoints.check_init_checkpoint(model, hf_dir)
    report = checkpoints.initialize_from_checkpoint(model, hf_dir)
    assert report.missing == ["output_weights", "output_bias"]  # the head: newly initialised
    np.testing.assert_array_equal(
        np.asarray(model.encoder.encoder_layers[1].output_kernel),
        tf.train.load_checkpoint(str(TINY / "bert_model.ckpt")).get_tensor(
            "bert/encoder/layer_1/output/dense/kernel"))


def test_pooling_over_real_tokens(hf_dir):
    """`modeling.layers.pooling.pool` against NumPy on the full padded features ([CLS], mean,
    max)."""
    from modeling import BertModel
    from modeling.layers.pooling import pool
    from modeling import checkpoint as checkpoints

    model = BertModel(tiny_config())
    checkpoints.initialize_from_checkpoint(model, hf_dir)
    outputs = _outputs(model)
    for pooling in ("cls", "mean", "max"):
        np.testing.assert_allclose(pool(*outputs, pooling, normalize=True),
                                   _reference(outputs, pooling), atol=2e-6, err_msg=pooling)


def _outputs(model):
    """(last layer [4, 16, H], input_mask [4, 16]) of LINES, padded features."""
    import extract_features
    from vocab.tokenization import FullTokenizer

    tokenizer = FullTokenizer(str(TINY / "vocab.txt"), do_lower_case=True)
    rows = [extract_features.convert_example(a, b, tokenizer, 16)[1:]
            for _, a, b in extract_features.read_examples(str(LINES))]
    ids, mask, types = (np.array([r[k] for r in rows]) for k in range(3))
    out = model({"input_ids": ids, "input_mask": mask, "token_type_ids": types})
    return np.asarray(out["sequence_output"]), mask


def _reference(outputs, pooling):
    """L2-normalised vectors of LINES in NumPy, from their `_outputs`."""
    out, mask = outputs
    m = mask[:, :, None] > 0
    vectors = {"cls": out[:, 0], "mean": (out * m).sum(1) / m.sum(1),
               "max": np.where(m, out, -np.inf).max(1)}[pooling]
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_extract_features_vectors_through_the_embedding_graph(hf_dir, tmp_path):
    """extract_features' --pooling path: the embedding SavedModel's graph (fast tokenizer, rows
    sorted by length, several model calls), then both output formats."""
    import extract_features
    from bert_runner.runs.model_files import model_files
    from bert_runner.serving import embedding
    from bert_runner.serving import provenance
    from vocab.fast_tokenizer import FastBertTokenizer

    files = model_files(None, None, hf_dir)
    model = provenance.load_encoder(files.config, hf_dir)
    examples = list(extract_features.read_examples(str(LINES)))
    module = embedding.EmbeddingExport(model, FastBertTokenizer(files.vocab_file, True), 16, "max",
                                    True, rows_per_call=3)
    vectors = extract_features.sentence_vectors(module, examples)
    np.testing.assert_allclose(vectors, _reference(_outputs(model), "max"), atol=2e-6)
    extract_features.write_sentence_vectors(vectors, examples, str(tmp_path / "v.npy"), "npy")
    np.testing.assert_array_equal(np.load(tmp_path / "v.npy"), vectors)
    assert (tmp_path / "v.txt").read_text() == LINES.read_text()
    extract_features.write_sentence_vectors(vectors, examples, str(tmp_path / "v.jsonl"), "jsonl")
    records = [json.loads(line) for line in open(tmp_path / "v.jsonl")]
    assert [r["linex_index"] for r in records] == [0, 1, 2, 3]
    assert records[0]["text"] == "The dog runs fast. ||| a big cat"
    np.testing.assert_allclose([r["embedding"] for r in records], vectors, atol=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.jsonl", "v.npy", "v.txt"]
    with pytest.raises(ValueError, match="--output_format=npy writes a .npy file"):
        extract_features.lines_file(str(tmp_path / "v.bin"))


def test_config_and_vocab_flags_are_required_unless_the_directory_holds_them(hf_dir):
    from absl import flags

    from bert_runner import flags as run_flags

    values = flags.FlagValues()
    for name in ("bert_config_file", "vocab_file", "init_checkpoint"):
        flags.DEFINE_string(name, None, "", flag_values=values)
    run_flags.require_model_files("bert_config_file", "vocab_file", flag_values=values)
    values(["x", f"--init_checkpoint={hf_dir}"])
    assert values.bert_config_file is None
    with pytest.raises(flags.IllegalFlagValueError,
                       match="--bert_config_file is required unless --init_checkpoint is a "
                             "Hugging Face model directory"):
        values(["x", f"--init_checkpoint={TINY / 'bert_model.ckpt'}"])
