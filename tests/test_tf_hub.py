"""TF Hub text-encoder SavedModels in: Model Garden's own exports (tests/fixtures/tfhub, made by
its unchanged export_tfhub.py) read through the one checkpoint reader, their settings from the
SavedModel itself; the features equal the SavedModel's own outputs and those of the original
checkpoint it was made from; other SavedModels refused in one line."""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURES, ROOT
from modeling_helpers import TINY
from refusals import assert_refused

HUB = FIXTURES / "tfhub"
ENCODERS = ["bert_encoder", "bert_encoder_variant", "electra_encoder"]


def _outputs(found, expected):
    """The encoder outputs of `found` (a TF_HUB Checkpoint) on the fixture's inputs."""
    from modeling import families

    model = families.build_model("encoder", found.config)
    found.load_into(model, strict=False)
    return model({"input_ids": expected["input_word_ids"], "input_mask": expected["input_mask"],
                  "token_type_ids": expected["input_type_ids"]})


@pytest.mark.parametrize("name", ENCODERS)
def test_a_model_garden_encoder_reads_with_its_own_settings_and_gives_its_outputs(name):
    from modeling import checkpoint

    found = checkpoint.open_checkpoint(HUB / name)
    info = json.loads((HUB / name / "info.json").read_text())
    expected = dict(np.load(HUB / name / "expected.npz"))
    assert found.layout == checkpoint.TF_HUB
    assert found.vocab_file == str(HUB / name / "assets" / "vocab.txt")
    assert found.do_lower_case is True
    given = info["config"].get("bert_config") or info["config"]
    config = found.config
    if name == "electra_encoder":  # its embeddings are narrower than its layers: ELECTRA's
        assert (found.family.name, config.embedding_size) == ("electra", 16)
    else:
        assert found.family.name == "bert"
        for key in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size", "hidden_act", "max_position_embeddings",
                    "type_vocab_size", "vocab_size"):
            assert getattr(config, key) == given[key], key
    outputs = _outputs(found, expected)
    real = expected["input_mask"][..., None].astype(bool)
    layers = np.stack([np.asarray(layer) for layer in outputs["all_encoder_layers"]])
    np.testing.assert_allclose(np.where(real, layers, 0),
                               np.where(real, expected["encoder_outputs"], 0), atol=1e-5)
    if found.family.name == "bert":  # ELECTRA has no pooler
        np.testing.assert_allclose(np.asarray(outputs["pooled_output"]),
                                   expected["pooled_output"], atol=1e-5)


def test_the_masked_lm_head_reads_from_the_mlm_sub_object():
    from modeling import checkpoint, families

    found = checkpoint.open_checkpoint(HUB / "bert_encoder")
    expected = dict(np.load(HUB / "bert_encoder" / "expected.npz"))
    model = families.build_model("pretrainer", found.config)
    report = found.load_into(model, strict=False)
    assert not [n for n in report.missing if n.startswith("cls/predictions")]
    logits = model({"input_ids": expected["input_word_ids"], "input_mask": expected["input_mask"],
                    "segment_ids": expected["input_type_ids"],
                    "masked_lm_positions": expected["masked_lm_positions"]})["masked_lm_logits"]
    np.testing.assert_allclose(np.asarray(logits), expected["mlm_logits"], atol=1e-5)


def test_features_through_the_saved_model_equal_the_original_checkpoints(tmp_path):
    """bert_encoder was exported from the tiny original checkpoint: extract_features.py reads
    it with no config, vocabulary or casing flag and writes the same features."""
    (tmp_path / "in.txt").write_text("the dog runs fast. ||| a big cat\nHello there\n")
    common = [sys.executable, str(ROOT / "extract_features.py"),
              f"--input_file={tmp_path / 'in.txt'}", "--layers=-1,-2", "--max_seq_length=16"]
    original = [f"--init_checkpoint={TINY / 'bert_model.ckpt'}",
                f"--bert_config_file={TINY / 'bert_config.json'}",
                f"--vocab_file={TINY / 'vocab.txt'}"]
    for name, flags in (("hub", [f"--init_checkpoint={HUB / 'bert_encoder'}"]),
                        ("original", original)):
        result = subprocess.run(common + flags + [f"--output_file={tmp_path / name}.jsonl"],
                                cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-2000:]
    hub, original = ([json.loads(line) for line in open(tmp_path / f"{name}.jsonl")]
                     for name in ("hub", "original"))
    assert len(hub) == len(original) == 2
    for a, b in zip(hub, original):
        assert [f["token"] for f in a["features"]] == [f["token"] for f in b["features"]]
        for fa, fb in zip(a["features"], b["features"]):
            for la, lb in zip(fa["layers"], fb["layers"]):
                np.testing.assert_allclose(la["values"], lb["values"], atol=2e-5)


def test_a_saved_model_of_another_api_is_refused_in_one_line(tmp_path):
    import tensorflow as tf

    other = tf.Module()
    other.v = tf.Variable(1.0)
    tf.saved_model.save(other, str(tmp_path / "other"))
    result = subprocess.run(
        [sys.executable, str(ROOT / "extract_features.py"),
         f"--input_file={TINY / 'vocab.txt'}", f"--output_file={tmp_path / 'out.jsonl'}",
         f"--init_checkpoint={tmp_path / 'other'}", f"--vocab_file={TINY / 'vocab.txt'}"],
        cwd=ROOT, capture_output=True, text=True)
    assert_refused(result, "tf-hub-not-an-encoder")
    assert not (tmp_path / "out.jsonl").exists()
