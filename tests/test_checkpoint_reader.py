"""modeling.checkpoint: one reader for every starting point a user may give, one writer, and no
module outside `modeling/` that reads or writes a layout itself."""
import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from bert_runner.runs import checkpoints as run_checkpoints, labels as run_labels
from bert_runner.runs import record as run_records
from bert_runner.runs.model_files import model_files
from modeling import BertClassifier, BertModel, LoraSettings, checkpoint as checkpoints, with_lora
from modeling_helpers import TINY, encoder_inputs, tiny_config, tiny_expected
from refusals import message
from test_modeling_imports import imported_modules

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The checkpoint package's own modules, and the model's naming: what only `modeling/` imports.
# `modeling.checkpoint` itself and its `files` (atomic writes) are the package's public face; a
# run's files beside its checkpoints are the machinery's (`bert_runner.runs`).
_INTERNALS = ("modeling.checkpoint.original", "modeling.checkpoint.hugging_face",
              "modeling.checkpoint.adapters", "modeling.checkpoint.reader",
              "modeling.checkpoint.layout", "modeling.checkpoint.config_files",
              "modeling.checkpoint.writer", "modeling.bert.checkpoint_names",
              "modeling.layers.lora",
              "modeling.tf1_checkpoint", "modeling.hf_checkpoint")


def test_only_the_model_package_reads_or_writes_a_checkpoint_layout():
    sources = [p for p in ROOT.rglob("*.py")
               if p.relative_to(ROOT).parts[0] not in ("modeling", "tests")
               and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)]
    assert len(sources) > 100  # the scripts, the machinery, the tasks, experiments, bench
    found = sorted(f"{p.relative_to(ROOT)} imports {module}" for p in sources
                   for module in imported_modules(p) if module in _INTERNALS)
    assert found == []


def _outputs(model):
    return model(encoder_inputs(tiny_expected()), training=False)["sequence_output"].numpy()


@pytest.fixture(scope="module")
def reference():
    """The tiny encoder from its original-layout checkpoint, and its outputs."""
    model = BertModel(tiny_config())
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    return model, _outputs(model)


def test_an_original_checkpoint_by_prefix_or_folder(reference):
    for given in (TINY / "bert_model.ckpt", TINY):
        found = run_checkpoints.open_checkpoint(given)
        assert (found.layout, found.family.name, found.record) == (checkpoints.ORIGINAL, "bert",
                                                                   None)
        assert found.location == str(TINY / "bert_model.ckpt")
        assert found.shapes["bert/embeddings/word_embeddings"] == [99, 32]
        assert found.identity_file() == str(TINY / "bert_model.ckpt.index")
        model = BertModel(tiny_config())
        found.load_into(model, strict=False)
        np.testing.assert_array_equal(_outputs(model), reference[1])


def _run_directory(directory, model, record, labels=None):
    """`directory` as a run leaves it: ckpt-1 of `model`, its run.json and label_list.txt."""
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=checkpoints.ModelVariables.of_model(model)), str(directory), 1)
    manager.save(checkpoint_number=1)
    run_records.write_output_dir_record(str(directory), record)
    if labels:
        run_labels.write_label_list(str(directory), labels)


def test_a_run_by_output_dir_ckpt_or_seed_folder_with_its_record_and_labels(reference, tmp_path):
    classifier = BertClassifier(tiny_config(), 3)
    checkpoints.load_checkpoint(classifier, TINY / "bert_model.ckpt", strict=False)
    classifier.classifier.output_bias.assign([1.0, 2.0, 3.0])
    _run_directory(tmp_path, classifier, {"task": "classifier/mrpc", "do_lower_case": True},
                   ["a", "b", "c"])
    (tmp_path / "seed_3").mkdir()
    _run_directory(tmp_path / "seed_3", classifier, {"task": "classifier/mrpc"}, ["a", "b", "c"])
    for given in (tmp_path, tmp_path / "ckpt-1", tmp_path / "seed_3"):
        found = run_checkpoints.open_checkpoint(given, "--teacher")
        assert (found.layout, found.family.name) == (checkpoints.RUN, "bert")
        assert found.record["task"] == "classifier/mrpc"
        assert found.labels == ["a", "b", "c"]
        again = BertClassifier(tiny_config(), 3)
        found.load_into(again, strict=True)  # the head too
        np.testing.assert_array_equal(again.classifier.output_bias.numpy(), [1.0, 2.0, 3.0])
        np.testing.assert_array_equal(_outputs(again.encoder), reference[1])
    assert run_checkpoints.open_checkpoint(tmp_path).do_lower_case is True
    # A run's head is another task's for a model of another number of labels: said so.
    with pytest.raises(ValueError, match="written by a run of task 'classifier/mrpc'"):
        run_checkpoints.open_checkpoint(tmp_path).check_fits(BertClassifier(tiny_config(), 2))


def test_a_hugging_face_directory_or_weights_file(reference, tmp_path):
    directory = checkpoints.write_hugging_face(reference[0], tmp_path / "hf", TINY / "vocab.txt",
                                               do_lower_case=True)
    for given in (directory, f"{directory}/model.safetensors"):
        found = checkpoints.open_checkpoint(given)
        assert (found.layout, found.family.name) == (checkpoints.HUGGING_FACE, "bert")
        assert found.config.to_dict() == tiny_config().to_dict()
        assert (found.config_file, found.vocab_file, found.do_lower_case) == (
            f"{directory}/config.json", f"{directory}/vocab.txt", True)
        assert found.identity_file() == f"{directory}/model.safetensors"
        model = BertModel(tiny_config())
        found.load_into(model, strict=True)
        np.testing.assert_allclose(_outputs(model), reference[1], atol=1e-6)
    # The config and vocabulary of a run come from beside the weights file as from the folder.
    files = model_files(None, None, f"{directory}/model.safetensors")
    assert (files.config_file, files.vocab_file) == (f"{directory}/config.json",
                                                     f"{directory}/vocab.txt")
    # A weights file alone: the config from --bert_config_file.
    alone = tmp_path / "alone.safetensors"
    alone.write_bytes((pathlib.Path(directory) / "model.safetensors").read_bytes())
    found = checkpoints.open_checkpoint(alone)
    assert (found.layout, found.config, found.vocab_file) == (checkpoints.HUGGING_FACE, None, None)
    model = BertModel(tiny_config())
    found.load_into(model, strict=True)
    np.testing.assert_allclose(_outputs(model), reference[1], atol=1e-6)


def test_adapters_over_their_base_load_merged_and_write_merged(reference, tmp_path):
    lora_model = BertClassifier(tiny_config(), 2)
    checkpoints.load_checkpoint(lora_model, TINY / "bert_model.ckpt", strict=False)
    lora_model = with_lora(lora_model, LoraSettings(rank=2, alpha=4))
    layer = lora_model.encoder.encoder_layers[1]
    rng = np.random.default_rng(3)
    for variable in lora_model.variables:
        if variable.path.endswith("lora_b"):
            variable.assign(rng.normal(size=variable.shape).astype("float32"))
    path = checkpoints.write_adapters(lora_model, str(tmp_path), {"task": "classifier/cola"})
    assert pathlib.Path(path).name == checkpoints.ADAPTERS_FILE
    expected = _outputs(lora_model.encoder)
    a = next(v for v in layer.variables if v.path.endswith("query/lora_a")).numpy()
    b = next(v for v in layer.variables if v.path.endswith("query/lora_b")).numpy()
    merged_query = layer.query_kernel.numpy() + 2.0 * (a.astype(np.float64) @ b)

    plain = BertClassifier(tiny_config(), 2)
    found = checkpoints.open_checkpoint(TINY / "bert_model.ckpt", lora_adapters=path)
    found.load_into(plain, strict=False)
    np.testing.assert_allclose(plain.encoder.encoder_layers[1].query_kernel.numpy(), merged_query,
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_outputs(plain.encoder), expected, atol=1e-5)
    # Onto another base: refused, naming both.
    other = tmp_path / "other" / "bert_model.ckpt"
    moved = BertModel(tiny_config())
    checkpoints.load_checkpoint(moved, TINY / "bert_model.ckpt", strict=False)
    moved.pooler.bias.assign(moved.pooler.bias + 1.0)
    checkpoints.write_original(moved, other)
    with pytest.raises(ValueError, match="trained on another base model"):
        checkpoints.open_checkpoint(other, lora_adapters=path).load_into(
            BertClassifier(tiny_config(), 2), strict=False)
    # Every writer writes the merged model: the original layout read back is the merged one.
    written = checkpoints.write_original(lora_model, tmp_path / "merged" / "bert_model.ckpt")
    back = BertClassifier(tiny_config(), 2)
    checkpoints.load_checkpoint(back, written, strict=True)
    np.testing.assert_allclose(_outputs(back.encoder), expected, atol=1e-5)


def test_the_family_is_recorded_or_found_by_names(tmp_path):
    found = checkpoints.open_checkpoint(TINY)
    assert found.family.encoder_names(BertModel(tiny_config()))[0][0] == (
        "bert/embeddings/word_embeddings")
    record = tmp_path / "run.json"
    record.write_text(json.dumps({"family": "albert"}))
    for name in ("bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001"):
        (tmp_path / name).write_bytes((TINY / name).read_bytes())
    with pytest.raises(ValueError, match=message("checkpoint-family-unknown") + " 'albert'") as e:
        run_checkpoints.open_checkpoint(tmp_path)
    assert str(record) in str(e.value)  # the run.json that names it


def test_a_config_file_is_read_by_the_family_that_claims_it(tmp_path, monkeypatch):
    """The original's bert_config.json is BERT's; a file another family claims is read by it."""
    from modeling import families
    from modeling.bert.family import BERT, BertFamily

    class Other(BertFamily):
        name = "other"

        def claims_config(self, data):
            return "model_size" in data

        def config_from_dict(self, data, path):
            return ("other's config", path)

    monkeypatch.setitem(families._FAMILIES, "other", Other())
    hparams = tmp_path / "hparams.json"
    hparams.write_text(json.dumps({"model_size": "small"}))
    assert checkpoints.load_config(str(hparams)) == ("other's config", str(hparams))
    assert checkpoints.load_config(str(TINY / "bert_config.json")) == tiny_config()
    # Every public name stays what it names once its module is imported (none is a submodule's).
    assert callable(checkpoints.load_config) and not [
        name for name in checkpoints.__all__
        if isinstance(getattr(checkpoints, name), type(checkpoints))]
    # A family's models are of the kinds the tasks build, no other.
    with pytest.raises(ValueError, match="unknown kinds \\['regressor'\\]"):
        type("Regressor", (BertFamily,), {"models": {**BERT.models, "regressor": None}})
    # Claimed by none: BERT's reader says what the file lacks.
    (tmp_path / "bare.json").write_text("{}")
    with pytest.raises(ValueError, match="missing key"):
        checkpoints.load_config(str(tmp_path / "bare.json"))


def test_which_layout_a_path_is_in_is_told_without_tensorflow():
    """The flags' checks (`bert_runner.flags.require_model_files`) run before a script imports
    TensorFlow: a refusal there is one line, with none of TensorFlow's start-up logging."""
    import subprocess
    import sys

    code = ("import sys; from modeling.checkpoint import HF_DIRECTORY, check_partial_directory, "
            "hf_home, read_casing; print(sorted({'tensorflow', 'keras'} & set(sys.modules)))")
    # `-E`: a fresh interpreter, not one forked from the tests' server (tests/forked_scripts.py),
    # which has imported TensorFlow.
    out = subprocess.run([sys.executable, "-E", "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_shape_mismatch_says_why_from_the_runs_record(reference, tmp_path):
    """A run's encoder read with a config of another hidden_size: the run's own bert_config.json
    is named with the keys that differ, not another task's head (whatever task the run was); a
    head of other shapes is another task's only when the run was another task."""
    from modeling import BertConfig

    pretraining = tmp_path / "pretraining"
    pretraining.mkdir()
    _run_directory(pretraining, reference[0], {"task": "pretraining"})
    (pretraining / "bert_config.json").write_text(tiny_config().to_json_string())
    wider = tmp_path / "wider.json"
    wider.write_text(json.dumps({**tiny_config().to_dict(), "hidden_size": 64}))
    for task in ("pretraining", None):
        with pytest.raises(ValueError, match=message("checkpoint-encoder-other-config")) as error:
            run_checkpoints.open_checkpoint(pretraining).check_fits(
                BertModel(BertConfig.from_json_file(wider)), str(wider), task=task)
        text = str(error.value)
        assert message("checkpoint-shape-mismatch") in text
        assert (f"its run ({pretraining / 'run.json'}) trained the model of "
                f"{pretraining / 'bert_config.json'}, not that of {wider} (hidden_size 64, the "
                f"run's 32): pass --bert_config_file={pretraining / 'bert_config.json'}") in text
        assert "another task's head" not in text

    classifier = BertClassifier(tiny_config(), 3)
    checkpoints.load_checkpoint(classifier, TINY / "bert_model.ckpt", strict=False)
    run = tmp_path / "multilabel"
    run.mkdir()
    _run_directory(run, classifier, {"task": "classifier/multilabel"})
    found = run_checkpoints.open_checkpoint(run)
    with pytest.raises(ValueError, match="shape mismatch classifier/output_weights") as error:
        found.check_fits(BertClassifier(tiny_config(), 2), task="classifier/multilabel")
    assert "another task's head" not in str(error.value)
    assert "a run of this task ('classifier/multilabel'" in str(error.value)
    with pytest.raises(ValueError, match="another task's head under the same names"):
        found.check_fits(BertClassifier(tiny_config(), 2), task="ner")
