"""Hugging Face layout in and out: a checkpoint the test writes from the tiny fixture's weights,
and `save_hf_model`'s directory read back (weights, outputs, the file format)."""
import json
import re
import struct
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from modeling import BertModel, BertPretrainer, gelu_exact
from modeling.checkpoint import original as original_layout
from modeling import checkpoint as checkpoints
from modeling.checkpoint.hugging_face import read_config as config_from_hf
from modeling.checkpoint.hugging_face import save_hf_model, write_safetensors
from modeling.bert.family import BERT
from modeling_helpers import TINY, encoder_inputs, tiny_config, tiny_expected
from optional_packages import require
from refusals import message


def hf_checkpoint_from_fixture(directory, bert_prefix=True):
    """The fixture's TF1 weights under Hugging Face names, with its config.json.

    bert_prefix=False names the encoder weights as a bare Hugging Face `BertModel` saves them.
    """
    reader = tf.train.load_checkpoint(str(TINY / "bert_model.ckpt"))
    tensors = {}
    for name in reader.get_variable_to_shape_map():
        hf, transpose = BERT.hf_name(name)
        value = reader.get_tensor(name)
        if not bert_prefix:
            hf = hf.removeprefix("bert.")
        tensors[hf] = value.T if transpose else value
    # Hugging Face also saves the tied decoder and position ids; both must be ignored.
    tensors["cls.predictions.decoder.weight"] = reader.get_tensor("bert/embeddings/word_embeddings")
    config = {**tiny_config().to_dict(), "hidden_act": "gelu", "model_type": "bert", "layer_norm_eps": 1e-12}
    (directory / "config.json").write_text(json.dumps(config))
    write_safetensors(directory / "model.safetensors", tensors)
    (directory / "vocab.txt").write_bytes((TINY / "vocab.txt").read_bytes())
    return reader


def test_hf_config_uses_exact_gelu(tmp_path):
    hf_checkpoint_from_fixture(tmp_path)
    config = config_from_hf(tmp_path / "config.json")
    assert config.hidden_act == "gelu_exact"
    assert config.vocab_size == 99 and config.intermediate_size == 37


def test_every_tensor_lands_where_its_name_says(tmp_path):
    reader = hf_checkpoint_from_fixture(tmp_path)
    model = BertPretrainer(config_from_hf(tmp_path / "config.json"))
    report = checkpoints.load_checkpoint(model, tmp_path)  # strict
    names = original_layout.variable_map(model)
    assert sorted(report.loaded) == sorted(names)
    for name, var in names.items():
        np.testing.assert_array_equal(np.asarray(var), reader.get_tensor(name), err_msg=name)
    # The exact erf GELU (Hugging Face's "gelu"), not the original's tanh approximation: at
    # these points the two differ by up to 5e-4.
    x = tf.constant([-3.0, -1.5, -0.5, 0.5, 1.5, 3.0])
    activation = model.encoder.encoder_layers[0].activation
    np.testing.assert_allclose(np.asarray(activation(x)), np.asarray(gelu_exact(x)), atol=1e-6)


def test_encoder_only_checkpoint_without_prefix_loads(tmp_path):
    reader = hf_checkpoint_from_fixture(tmp_path, bert_prefix=False)
    model = BertModel(config_from_hf(tmp_path / "config.json"))
    checkpoints.load_checkpoint(model, tmp_path / "model.safetensors", strict=False)
    np.testing.assert_array_equal(
        np.asarray(model.encoder_layers[1].query_kernel),
        reader.get_tensor("bert/encoder/layer_1/attention/self/query/kernel"))


def test_wrong_config_is_reported_with_shapes(tmp_path):
    hf_checkpoint_from_fixture(tmp_path)
    config = config_from_hf(tmp_path / "config.json")
    config.intermediate_size = 38
    with pytest.raises(ValueError, match=r"bert/encoder/layer_0/intermediate/dense/kernel: model \[32, 38\], checkpoint \[32, 37\]"):
        checkpoints.load_checkpoint(BertPretrainer(config), tmp_path)


def test_corrupt_safetensors_names_the_file(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 5) + b"{oops")
    with pytest.raises(ValueError, match="model.safetensors: corrupt safetensors header"):
        checkpoints.load_checkpoint(BertModel(tiny_config()), tmp_path / "model.safetensors")
    # Cut short (an interrupted download): said so, with what is missing.
    write_safetensors(tmp_path / "whole.safetensors", {"a": np.zeros((4, 4), np.float32)})
    data = (tmp_path / "whole.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[:-10])
    with pytest.raises(ValueError, match=re.escape(message("hf-weights-truncated"))):
        checkpoints.load_checkpoint(BertModel(tiny_config()), tmp_path / "model.safetensors")


def test_unreadable_pytorch_weights_name_the_file(tmp_path, monkeypatch):
    """torch's own errors for a `pytorch_model.bin` cut short name no file ("[Errno 22] Invalid
    argument", from its zip reader): the refusal names it. torch itself is stood in for, with
    what it raises and returns."""
    weights = tmp_path / "pytorch_model.bin"
    weights.write_bytes(b"PK\x03\x04")

    def cut_short(path, **options):
        raise OSError(22, "Invalid argument")

    fake_torch = types.SimpleNamespace(load=cut_short, is_tensor=lambda v: False)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    with pytest.raises(ValueError, match=re.escape(message("hf-torch-unreadable"))) as error:
        checkpoints.load_checkpoint(BertModel(tiny_config()), weights)
    assert str(error.value).startswith(f"{weights}: ")
    assert "Invalid argument" in str(error.value) and "\n" not in str(error.value)
    # A file that loads but holds no state dict (a bare tensor, a training checkpoint).
    fake_torch.load = lambda path, **options: {"state_dict": {}}
    with pytest.raises(ValueError, match=re.escape(message("hf-torch-unreadable"))):
        checkpoints.load_checkpoint(BertModel(tiny_config()), weights)


def test_tf1_name_inverts_hf_name():
    for name in original_layout.variable_map(BertPretrainer(tiny_config())):
        assert BERT.original_name(BERT.hf_name(name)[0]) == (name, BERT.hf_name(name)[1])


def _header(path):
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    return size, json.loads(data[8:8 + size]), len(data) - 8 - size


@pytest.mark.parametrize("hidden_act, hf_act", [("gelu", "gelu_new"), ("gelu_exact", "gelu")])
def test_written_directory_reads_back_identical(tmp_path, hidden_act, hf_act):
    """Our writer, then our reader: the same weights and outputs; the files in the layout
    transformers.BertModel.from_pretrained reads (checked by hand with transformers: see
    docs/modeling.md)."""
    config = tiny_config()
    config.hidden_act = hidden_act  # the GELU flavour goes out and comes back
    model = BertModel(config)
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    out = save_hf_model(model, tmp_path / "hf", TINY / "vocab.txt", do_lower_case=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no temporary left
    hf = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf["hidden_act"] == hf_act and hf["model_type"] == "bert"
    assert hf["architectures"] == ["BertModel"] and hf["layer_norm_eps"] == 1e-12
    assert {k: hf[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers",
                               "num_attention_heads", "intermediate_size",
                               "max_position_embeddings", "type_vocab_size")} == {
        "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 37, "max_position_embeddings": 64, "type_vocab_size": 2}
    assert (tmp_path / "hf" / "vocab.txt").read_bytes() == (TINY / "vocab.txt").read_bytes()
    size, header, body = _header(tmp_path / "hf" / "model.safetensors")
    assert size % 8 == 0 and header.pop("__metadata__") == {"format": "pt"}
    assert len(header) == 39 and "encoder.layer.1.attention.self.query.weight" in header
    assert header["encoder.layer.0.intermediate.dense.weight"]["shape"] == [37, 32]  # [out, in]
    ends = sorted(v["data_offsets"] for v in header.values())
    assert ends[0][0] == 0 and ends[-1][1] == body
    assert all(a[1] == b[0] for a, b in zip(ends, ends[1:]))
    assert {v["dtype"] for v in header.values()} == {"F32"}

    config = config_from_hf(tmp_path / "hf" / "config.json")
    assert config.hidden_act == hidden_act
    back = BertModel(config)
    checkpoints.load_checkpoint(back, out)  # strict: every variable
    for (name, a), (_, b) in zip(original_layout.variable_map(model).items(),
                                 original_layout.variable_map(back).items()):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
    inputs = encoder_inputs(tiny_expected())
    np.testing.assert_array_equal(np.asarray(back(inputs)["sequence_output"]),
                                  np.asarray(model(inputs)["sequence_output"]))
    with pytest.raises(FileExistsError, match="already exists"):
        save_hf_model(model, out, TINY / "vocab.txt", do_lower_case=True)


def test_pretraining_model_writes_its_heads_and_reads_back(tmp_path):
    """The pre-training model goes out as transformers' `BertForPreTraining` saves it (its
    encoder under `bert.`, both heads under `cls.`, the decoder left to the tying to the word
    embeddings) and comes back with every weight (checked by hand with transformers: see
    docs/modeling.md)."""
    model = BertPretrainer(tiny_config())
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt")  # strict: the heads too
    save_hf_model(model, tmp_path / "hf", TINY / "vocab.txt", do_lower_case=True)
    hf = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf["architectures"] == ["BertForPreTraining"]
    _, header, _ = _header(tmp_path / "hf" / "model.safetensors")
    header.pop("__metadata__")
    assert {name: v["shape"] for name, v in header.items() if name.startswith("cls.")} == {
        "cls.predictions.bias": [99],
        "cls.predictions.transform.dense.weight": [32, 32],
        "cls.predictions.transform.dense.bias": [32],
        "cls.predictions.transform.LayerNorm.weight": [32],
        "cls.predictions.transform.LayerNorm.bias": [32],
        "cls.seq_relationship.weight": [2, 32],
        "cls.seq_relationship.bias": [2]}
    assert len(header) == 46 and "bert.embeddings.word_embeddings.weight" in header

    back = BertPretrainer(config_from_hf(tmp_path / "hf" / "config.json"))
    checkpoints.load_checkpoint(back, tmp_path / "hf")  # strict: every variable
    ours, theirs = original_layout.variable_map(model), original_layout.variable_map(back)
    assert list(ours) == list(theirs)
    for name in ours:
        np.testing.assert_array_equal(np.asarray(ours[name]), np.asarray(theirs[name]),
                                      err_msg=name)


# A fine-tuned model of each kind, written with its head (`save_hf_model(head=True)`): the
# transformers class, its config.json and safetensors names, and our reader's logits back.
HEAD_CASES = [
    # (family, kind, outputs, labels, architecture, problem_type, head names and shapes)
    ("bert", "classifier", 3, ["neg", "neu", "pos"], "BertForSequenceClassification",
     "single_label_classification", {"classifier.weight": [3, 32], "classifier.bias": [3]}),
    ("bert", "classifier", 1, None, "BertForSequenceClassification", "regression",
     {"classifier.weight": [1, 32], "classifier.bias": [1]}),
    ("bert", "multi_label", 4, ["a", "b", "c", "d"], "BertForSequenceClassification",
     "multi_label_classification", {"classifier.weight": [4, 32], "classifier.bias": [4]}),
    ("bert", "token", 5, ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], "BertForTokenClassification",
     None, {"classifier.weight": [5, 32], "classifier.bias": [5]}),
    ("bert", "span", None, None, "BertForQuestionAnswering", None,
     {"qa_outputs.weight": [2, 32], "qa_outputs.bias": [2]}),
    ("bert", "multiple_choice", 3, None, "BertForMultipleChoice", None,
     {"classifier.weight": [1, 32], "classifier.bias": [1]}),
    ("electra", "token", 5, ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
     "ElectraForTokenClassification", None,
     {"classifier.weight": [5, 32], "classifier.bias": [5]}),
    ("electra", "multiple_choice", 3, None, "ElectraForMultipleChoice", None,
     {"classifier.weight": [1, 32], "classifier.bias": [1]}),
]


def _head_config(family):
    if family == "bert":
        config = tiny_config()
        config.hidden_act = "gelu_exact"  # transformers' "gelu": its logits match ours exactly
        return config
    from modeling.electra.config import ElectraConfig

    return ElectraConfig(vocab_size=99, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=48,
                         max_position_embeddings=40).validate()


def _head_model(family, kind, outputs, seed=3):
    """The `kind` model of the family's tiny config, every weight drawn at random (its head
    large, so that every token moves the logits)."""
    from modeling import families

    model = families.build_model(kind, _head_config(family), *(
        () if outputs is None else (outputs,)))
    rng = np.random.default_rng(seed)
    for var in model.variables:
        if "seed_generator" not in var.path:
            value = rng.normal(0.0, 0.1, var.shape) + (1.0 if "gamma" in var.path else 0.0)
            var.assign(value.astype(np.float32))
    for _, var in model.tf1_head_variables():
        var.assign(rng.normal(0.0, 1.0, var.shape).astype(np.float32))
    return model


def _head_features(kind, choices=3):
    """A batch for `kind`: 3 rows of 16 ids (one padded), two segments; [2, choices, 16] for
    multiple choice. The tiny fixture's [3, 16], whose kernels other tests compile too."""
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 99, (3, 16)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 8:] = 0
    segments = np.zeros_like(ids)
    segments[:, 6:] = 1
    features = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    if kind == "multiple_choice":
        features = {k: np.stack([v[:choices], v[::-1][:choices]]) for k, v in features.items()}
    return features


def _real(kind, features, logits):
    """The logits at real tokens (a token classifier's padded rows hold nothing)."""
    return logits * features["input_mask"][..., None] if kind == "token" else logits


@pytest.mark.parametrize("family,kind,outputs,labels,architecture,problem_type,head",
                         HEAD_CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in HEAD_CASES])
def test_a_fine_tuned_model_is_written_as_its_transformers_class_and_reads_back(
        tmp_path, family, kind, outputs, labels, architecture, problem_type, head):
    from modeling import families

    model = _head_model(family, kind, outputs)
    directory = checkpoints.write_hugging_face(model, tmp_path / "hf", TINY / "vocab.txt", True,
                                               head=True, labels=labels)
    hf = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf["architectures"] == [architecture] and hf["model_type"] == family
    assert hf.get("problem_type") == problem_type
    if kind in ("classifier", "multi_label", "token"):
        names = labels or [f"LABEL_{i}" for i in range(outputs)]
        assert hf["id2label"] == {str(i): name for i, name in enumerate(names)}
        assert hf["label2id"] == {name: i for i, name in enumerate(names)}
    else:
        assert "id2label" not in hf
    # The run's labels also as its label_list.txt, which the scripts read beside a checkpoint.
    label_list = tmp_path / "hf" / "label_list.txt"
    assert (label_list.read_text().split() if label_list.exists() else None) == labels
    _, header, _ = _header(tmp_path / "hf" / "model.safetensors")
    header.pop("__metadata__")
    prefix = f"{family}."
    assert {n: v["shape"] for n, v in header.items() if not n.startswith(prefix)} == head
    # transformers' token and span classes have no pooler; the others keep BERT's.
    assert any(".pooler." in n for n in header) == (
        family == "bert" and kind not in ("token", "span"))
    if kind == "multiple_choice":
        assert _tensor(tmp_path / "hf" / "model.safetensors", "classifier.bias") == [0.0]
        assert (family == "electra") == (hf.get("summary_use_proj") is False)

    back = families.build_model(kind, checkpoints.load_config(f"{directory}/config.json"),
                                *(() if outputs is None else (outputs,)))
    checkpoints.load_checkpoint(back, directory, strict=False)
    features = _head_features(kind)
    ours, theirs = model(features), back(features)
    for key in ours:
        np.testing.assert_array_equal(_real(kind, features, np.asarray(theirs[key])),
                                      _real(kind, features, np.asarray(ours[key])), err_msg=key)


def _tensor(path, name):
    from modeling.checkpoint.hugging_face import read_safetensors

    return read_safetensors(path)[name].tolist()


@pytest.mark.parametrize("kind,outputs,why", [
    ("classifier", 2, "is not ElectraForSequenceClassification's head (classifier.dense, GELU, "
                      "classifier.out_proj)"),
    ("multi_label", 2, "is not ElectraForSequenceClassification's head"),
    ("span", None, "is not ElectraForQuestionAnswering's single qa_outputs layer")])
def test_a_head_transformers_has_no_class_for_is_refused_writing_nothing(tmp_path, kind, outputs,
                                                                          why):
    """ELECTRA's own classifier and SQuAD heads, and a BiLSTM on top: `NoHfClass` saying why,
    before any file is written."""
    from modeling import families
    from modeling.family import NoHfClass

    model = families.build_model(kind, _head_config("electra"),
                                 *(() if outputs is None else (outputs,)))
    with pytest.raises(NoHfClass, match=re.escape(why)):
        checkpoints.write_hugging_face(model, tmp_path / "hf", TINY / "vocab.txt", True,
                                       head=True)
    bilstm = families.build_model("token", tiny_config(), 3, bilstm_on_top=True)
    with pytest.raises(NoHfClass, match=re.escape("a BiLSTM on top of the encoder")):
        checkpoints.write_hugging_face(bilstm, tmp_path / "hf", TINY / "vocab.txt", True,
                                       head=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.large
@pytest.mark.parametrize("family,kind,outputs,labels,architecture,problem_type,head",
                         HEAD_CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in HEAD_CASES])
def test_transformers_loads_each_head_with_no_missing_key_and_our_logits(
        tmp_path, family, kind, outputs, labels, architecture, problem_type, head):
    """transformers' AutoModelFor* of each export: no missing, unexpected or mismatched key, and
    the logits ours computes within 1e-4."""
    transformers, torch = require("transformers", "torch")
    model = _head_model(family, kind, outputs)
    directory = checkpoints.write_hugging_face(model, tmp_path / "hf", TINY / "vocab.txt", True,
                                               head=True, labels=labels)
    auto = {"classifier": transformers.AutoModelForSequenceClassification,
            "multi_label": transformers.AutoModelForSequenceClassification,
            "token": transformers.AutoModelForTokenClassification,
            "span": transformers.AutoModelForQuestionAnswering,
            "multiple_choice": transformers.AutoModelForMultipleChoice}[kind]
    theirs, info = auto.from_pretrained(directory, output_loading_info=True)
    assert type(theirs).__name__ == architecture
    assert not any(info.get(key) for key in ("missing_keys", "unexpected_keys",
                                             "mismatched_keys", "error_msgs")), info
    features = _head_features(kind)
    with torch.no_grad():
        out = theirs.eval()(
            input_ids=torch.tensor(features["input_ids"], dtype=torch.long),
            attention_mask=torch.tensor(features["input_mask"], dtype=torch.long),
            token_type_ids=torch.tensor(features["segment_ids"], dtype=torch.long))
    ours = model(features)
    for key in ours:
        value = getattr(out, "logits" if key == "logits" else key).numpy()
        np.testing.assert_allclose(_real(kind, features, value),
                                   _real(kind, features, np.asarray(ours[key])), atol=1e-4,
                                   err_msg=key)
    if labels:
        assert theirs.config.id2label == dict(enumerate(labels))
    assert theirs.config.problem_type == problem_type


def test_a_class_configured_for_another_head_is_not_read_as_ours(tmp_path):
    """An ElectraForMultipleChoice directory whose config projects the summary (transformers'
    default, summary_use_proj) computes another head than ours: its classifier is not read as
    the choice scorer (which stays newly initialised), rather than computing other scores."""
    from modeling import families

    model = _head_model("electra", "multiple_choice", 3)
    directory = checkpoints.write_hugging_face(model, tmp_path / "hf", TINY / "vocab.txt", True,
                                               head=True)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert families.get("electra").head_of_hf_config(config).architecture == \
        "ElectraForMultipleChoice"
    config.update(summary_use_proj=True, summary_activation="gelu")
    (tmp_path / "hf" / "config.json").write_text(json.dumps(config))
    assert families.get("electra").head_of_hf_config(config) is None
    back = families.build_model("multiple_choice", _head_config("electra"), 3)
    report = checkpoints.load_checkpoint(back, directory, strict=False)
    assert "cls/swag/output_weights" in report.missing


@pytest.mark.large
def test_transformers_pipelines_answer_as_our_model_on_the_exports(tmp_path):
    """transformers' pipeline() on the exports ("text-classification", "token-classification"),
    its own tokenizer from the directory's files, against our tokenizer and model: the same labels
    and tags, probabilities within 1e-4 (accents and capitals included)."""
    transformers, _ = require("transformers", "torch")
    from vocab.tokenization import FullTokenizer

    tokenizer = FullTokenizer(str(TINY / "vocab.txt"), do_lower_case=True)

    def ours(model, text):
        pieces = ["[CLS]"] + tokenizer.tokenize(text) + ["[SEP]"]
        ids = np.array([tokenizer.convert_tokens_to_ids(pieces)], np.int32)
        logits = np.asarray(model({"input_ids": ids, "input_mask": np.ones_like(ids),
                                   "segment_ids": np.zeros_like(ids)})["logits"])[0]
        return pieces, np.asarray(tf.nn.softmax(logits, axis=-1))

    texts = ["the dog runs fast", "a big red car and a small blue car", "Thé BIG cät SINGS?"]
    labels = ["neg", "neu", "pos"]
    model = _head_model("bert", "classifier", 3)
    pipe = transformers.pipeline("text-classification", top_k=None, model=str(
        checkpoints.write_hugging_face(model, tmp_path / "cls", TINY / "vocab.txt", True,
                                       head=True, labels=labels)))
    for text in texts:
        theirs = {r["label"]: r["score"] for r in pipe([text])[0]}
        np.testing.assert_allclose([theirs[label] for label in labels], ours(model, text)[1],
                                   atol=1e-4)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    model = _head_model("bert", "token", 5)
    pipe = transformers.pipeline("token-classification", ignore_labels=[], model=str(
        checkpoints.write_hugging_face(model, tmp_path / "tok", TINY / "vocab.txt", True,
                                       head=True, labels=tags)))
    for text in texts:
        pieces, probabilities = ours(model, text)
        found = pipe(text)
        assert [r["word"] for r in found] == pieces[1:-1]
        assert [r["entity"] for r in found] == [tags[int(p.argmax())]
                                                for p in probabilities[1:-1]]
        np.testing.assert_allclose([r["score"] for r in found],
                                   probabilities[1:-1].max(axis=-1), atol=1e-4)
