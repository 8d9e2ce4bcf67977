"""Hugging Face ELECTRA directories in and out, against transformers itself (torch on CPU).

transformers' `ElectraModel`, `ElectraForPreTraining` and `ElectraForMaskedLM` (tiny, random
weights, saved with `save_pretrained`) load into this project's encoder and pre-training model
and compute the same outputs; the pre-training model written by `write_hugging_face` (the
discriminator's directory with the generator's in `generator/`) loads in transformers with the
same outputs and reads back bit for bit; a generator given for a discriminator, a
discriminator without its generator and a generator that is not the discriminator's are
refused.
"""
import json
import re
import shutil

import numpy as np
import pytest

from optional_packages import require

# Round trips through transformers: the large tier (tests/README.md).
pytestmark = pytest.mark.large
torch, transformers = require("torch", "transformers")

from modeling import checkpoint as checkpoints  # noqa: E402
from modeling import families  # noqa: E402
from modeling.checkpoint import original as original_layout  # noqa: E402
from modeling.checkpoint.hugging_face import (  # noqa: E402
    read_config, read_hf_weights, write_safetensors)
from modeling.electra.config import ElectraConfig  # noqa: E402
from modeling.electra.family import ELECTRA as electra  # noqa: E402
from modeling_helpers import save_like_the_trainer  # noqa: E402
from refusals import message  # noqa: E402

VOCAB_SIZE = 50
# The discriminator: embedding tables narrower than the encoder (embeddings_project).
SIZES = dict(vocab_size=VOCAB_SIZE, embedding_size=16, hidden_size=32, num_hidden_layers=2,
             num_attention_heads=2, intermediate_size=48, max_position_embeddings=40)
# Its generator as the pre-training model builds it (`ElectraConfig.generator_config`): half
# the hidden size and layers, heads hidden / 64 (at least 1), feed-forward 4 x hidden.
GENERATOR_SIZES = dict(SIZES, hidden_size=16, num_hidden_layers=1, num_attention_heads=1,
                       intermediate_size=64)
ATOL = 1e-5


def _randomise(module, seed):
    """Every parameter of a torch module drawn at random (transformers starts biases at 0 and
    LayerNorm at 1, which would hide a bias or a gamma loaded in the wrong place)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator) * 0.1
            parameter.copy_(noise + (1.0 if "LayerNorm.weight" in name else 0.0))
    return module.eval()


def _vocab(directory):
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words += [f"w{i}" for i in range(VOCAB_SIZE - len(words))]
    (directory / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")


def _save(model, directory):
    model.save_pretrained(directory)
    _vocab(directory)
    return directory


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    """transformers' models and their saved directories: `encoder` (a bare `ElectraModel`),
    `discriminator` (`ElectraForPreTraining`, its generator in `generator/`), `alone` (the same
    discriminator without it). The generator's tables are the discriminator's, as ELECTRA's."""
    root = tmp_path_factory.mktemp("electra_hf")
    discriminator = _randomise(transformers.ElectraForPreTraining(
        transformers.ElectraConfig(**SIZES)), 0)
    generator = _randomise(transformers.ElectraForMaskedLM(
        transformers.ElectraConfig(**GENERATOR_SIZES)), 1)
    generator.electra.embeddings.load_state_dict(discriminator.electra.embeddings.state_dict())
    encoder = _randomise(transformers.ElectraModel(transformers.ElectraConfig(**SIZES)), 2)
    _save(discriminator, root / "discriminator")
    _save(generator, root / "discriminator" / "generator")
    _save(discriminator, root / "alone")
    _save(encoder, root / "encoder")
    return {"root": root, "discriminator": discriminator, "generator": generator,
            "encoder": encoder}


def _batch():
    """A padded batch and masked-LM features: ids `[2, 12]`, the second row 7 tokens long;
    3 masked positions a row (never 0: [CLS])."""
    rng = np.random.default_rng(7)
    ids = rng.integers(5, VOCAB_SIZE, size=(2, 12)).astype(np.int32)
    ids[:, 0] = 2
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    ids[1, 7:] = 0
    segments = np.zeros_like(ids)
    segments[0, 6:] = 1
    positions = np.array([[1, 4, 9], [2, 3, 5]], np.int32)
    original = ids.copy()
    masked = ids.copy()
    np.put_along_axis(masked, positions, 4, axis=1)  # [MASK]
    return {"input_ids": masked, "original_ids": original, "input_mask": mask,
            "segment_ids": segments, "masked_lm_positions": positions,
            "masked_lm_ids": np.take_along_axis(original, positions, axis=1)}


def _torch_inputs(batch, ids):
    return {"input_ids": torch.tensor(batch[ids], dtype=torch.long),
            "attention_mask": torch.tensor(batch["input_mask"], dtype=torch.long),
            "token_type_ids": torch.tensor(batch["segment_ids"], dtype=torch.long)}


def _ours(model, batch):
    """Our pre-training model's generator logits `[B, P, V]` on the masked ids and
    discriminator logits `[B, S]` on the original ids (the samples are the masked tokens
    themselves, so nothing is replaced)."""
    out = model({**{k: batch[k] for k in ("input_ids", "input_mask", "segment_ids",
                                          "masked_lm_positions", "masked_lm_ids")},
                 "sampled_ids": batch["masked_lm_ids"]})
    assert not np.asarray(out["is_replaced"]).any()
    return np.asarray(out["masked_lm_logits"]), np.asarray(out["discriminator_logits"])


def _theirs(discriminator, generator, batch):
    """transformers' generator logits at the masked positions and discriminator logits."""
    with torch.no_grad():
        logits = generator(**_torch_inputs(batch, "input_ids")).logits.numpy()
        disc = discriminator(**_torch_inputs(batch, "original_ids")).logits.numpy()
    return np.take_along_axis(logits, batch["masked_lm_positions"][:, :, None], axis=1), disc


def _pretrainer(config, seed):
    """Our pre-training model with every variable drawn at random."""
    model = families.build_model("pretrainer", config)
    rng = np.random.default_rng(seed)
    for var in model.variables:
        if "seed_generator" not in var.path:
            value = rng.normal(0.0, 0.1, var.shape) + (1.0 if "gamma" in var.path else 0.0)
            var.assign(value.astype(np.float32))
    return model


def _tiny_config(**overrides):
    return ElectraConfig(**{**SIZES, "generator_hidden_size": 0.5, "generator_layers": 0.5,
                            **overrides}).validate()


def test_names_map_every_tensor_of_the_three_models(hf):
    root = hf["root"]
    model = families.build_model("pretrainer", _tiny_config())
    names = original_layout.variable_map(model)
    for name in names:
        assert electra.original_name(electra.hf_name(name)[0]) == (name, electra.hf_name(name)[1])

    def read(directory):
        return {electra.original_name(n)[0] for n in
                electra.normalise_hf_names(read_hf_weights(directory))}

    encoder = {n for n in names if n.startswith(("electra/"))}
    assert read(root / "encoder") == encoder  # no prefix, no head
    assert read(root / "discriminator") == encoder | {
        n for n in names if n.startswith("discriminator_predictions/")}
    # The generator's directory, read alone: its encoder under electra/ (its own layers and the
    # shared tables), its head.
    generator = read(root / "discriminator" / "generator")
    assert generator == {n for n in encoder if n.startswith("electra/embeddings/")} | {
        "electra/" + n[len("generator/"):] if n.startswith("generator/") else n
        for n, _ in model.generator_names()}


def test_transformers_electra_model_loads_into_the_encoder(hf):
    found = checkpoints.open_checkpoint(hf["root"] / "encoder")
    assert (found.layout, found.family.name) == (checkpoints.HUGGING_FACE, "electra")
    assert found.config.hidden_act == "gelu_exact" and found.config.embedding_size == 16
    model = families.build_model("encoder", found.config)
    found.load_into(model, strict=True)
    batch = _batch()
    ours = model({"input_ids": batch["original_ids"], "input_mask": batch["input_mask"],
                  "token_type_ids": batch["segment_ids"]})["sequence_output"]
    with torch.no_grad():
        theirs = hf["encoder"](**_torch_inputs(batch, "original_ids")).last_hidden_state.numpy()
    np.testing.assert_allclose(np.asarray(ours), theirs, atol=ATOL)
    # An ElectraForPreTraining directory starts a fine-tuning model: its encoder, no head.
    classifier = families.build_model("classifier", found.config, 3)
    checkpoints.open_checkpoint(hf["root"] / "alone").load_into(classifier, strict=False)
    np.testing.assert_array_equal(
        np.asarray(classifier.encoder.encoder_layers[1].query_kernel),
        hf["discriminator"].electra.encoder.layer[1].attention.self.query.weight.detach().numpy().T)


def test_transformers_pretraining_directories_load_into_the_pretrainer(hf):
    found = checkpoints.open_checkpoint(hf["root"] / "discriminator")
    # The generator's size from generator/config.json beside it.
    assert (found.config.generator_hidden_size, found.config.generator_layers) == (0.5, 0.5)
    model = families.build_model("pretrainer", found.config)
    report = found.load_into(model, strict=True)
    assert sorted(report.loaded) == sorted(original_layout.variable_map(model))
    batch = _batch()
    for ours, theirs in zip(_ours(model, batch),
                            _theirs(hf["discriminator"], hf["generator"], batch)):
        np.testing.assert_allclose(ours, theirs, atol=ATOL)


def _loads_cleanly(cls, directory):
    """transformers' `cls` from `directory`, checked to have found every weight it has."""
    model, info = cls.from_pretrained(directory, output_loading_info=True)
    assert not any(info[key] for key in ("missing_keys", "unexpected_keys",
                                         "mismatched_keys")), info
    return model.eval()


def test_pretrainer_written_loads_in_transformers_and_reads_back_exactly(tmp_path):
    config = _tiny_config()
    model = _pretrainer(config, 3)
    _vocab(tmp_path)
    out = tmp_path / "out"
    checkpoints.write_hugging_face(model, out, tmp_path / "vocab.txt", do_lower_case=True)
    top = json.loads((out / "config.json").read_text())
    assert (top["architectures"], top["model_type"], top["hidden_act"],
            top["embedding_size"]) == (["ElectraForPreTraining"], "electra", "gelu", 16)
    generator_config = json.loads((out / "generator" / "config.json").read_text())
    assert generator_config["architectures"] == ["ElectraForMaskedLM"]
    assert {k: generator_config[k] for k in GENERATOR_SIZES} == GENERATOR_SIZES
    for folder in (out, out / "generator"):
        assert (folder / "vocab.txt").read_bytes() == (tmp_path / "vocab.txt").read_bytes()
        assert json.loads((folder / "tokenizer_config.json").read_text())["do_lower_case"]

    discriminator = _loads_cleanly(transformers.ElectraForPreTraining, out)
    generator = _loads_cleanly(transformers.ElectraForMaskedLM, out / "generator")
    batch = _batch()
    for ours, theirs in zip(_ours(model, batch), _theirs(discriminator, generator, batch)):
        np.testing.assert_allclose(ours, theirs, atol=ATOL)

    found = checkpoints.open_checkpoint(out)
    assert found.config == config  # every key, the generator's fractions too
    back = families.build_model("pretrainer", found.config)
    found.load_into(back, strict=True)
    paths = {v.path: v for v in back.variables}
    weights = [v for v in model.variables if "seed_generator" not in v.path]
    assert len(weights) == len(original_layout.variable_map(model))
    for var in weights:
        assert np.array_equal(np.asarray(var), np.asarray(paths[var.path])), var.path


def test_a_pretraining_runs_checkpoint_exports_both_directories(tmp_path):
    """A pre-training run's checkpoint (ckpt-N, the trainer's own) read into the pre-training
    model, then written: the discriminator's directory and the generator's, as the run left
    them."""
    config = _tiny_config()
    model = _pretrainer(config, 4)
    run = save_like_the_trainer(model, tmp_path / "run")
    found = checkpoints.open_checkpoint(run)
    assert (found.layout, found.family.name) == (checkpoints.RUN, "electra")
    again = families.build_model("pretrainer", config)
    found.load_into(again, strict=True)
    _vocab(tmp_path)
    out = checkpoints.write_hugging_face(again, tmp_path / "hf", tmp_path / "vocab.txt", True)
    back = families.build_model("pretrainer", checkpoints.open_checkpoint(out).config)
    checkpoints.open_checkpoint(out).load_into(back, strict=True)
    for (name, a), (_, b) in zip(original_layout.variable_map(model).items(),
                                 original_layout.variable_map(back).items()):
        assert np.array_equal(np.asarray(a), np.asarray(b)), name


def test_task_model_written_as_electra_model(tmp_path):
    config = _tiny_config(hidden_act="gelu_exact")
    model = families.build_model("classifier", config, 3)
    _vocab(tmp_path)
    out = checkpoints.write_hugging_face(model, tmp_path / "out", tmp_path / "vocab.txt", True)
    hf = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (hf["architectures"], hf["hidden_act"]) == (["ElectraModel"], "gelu")
    assert not (tmp_path / "out" / "generator").exists()
    theirs = _loads_cleanly(transformers.ElectraModel, out)
    batch = _batch()
    ours = model.encoder({"input_ids": batch["original_ids"], "input_mask": batch["input_mask"],
                       "token_type_ids": batch["segment_ids"]})["sequence_output"]
    with torch.no_grad():
        expected = theirs(**_torch_inputs(batch, "original_ids")).last_hidden_state.numpy()
    np.testing.assert_allclose(np.asarray(ours), expected, atol=ATOL)


def test_a_generator_is_refused_where_a_discriminator_is_expected(hf, tmp_path):
    directory = hf["root"] / "discriminator" / "generator"
    found = checkpoints.open_checkpoint(directory)
    for kind, args in (("encoder", ()), ("classifier", (2,)), ("pretrainer", ())):
        model = families.build_model(kind, found.config, *args)
        with pytest.raises(ValueError, match=re.escape(message("electra-hf-generator"))) as refused:
            found.load_into(model, strict=False)
        assert str(directory) in str(refused.value) and "\n" not in str(refused.value)
        assert "electra-small-discriminator" in str(refused.value)
    # Told by its head's weights, whatever its config.json says.
    unnamed = shutil.copytree(directory, tmp_path / "unnamed")
    config = json.loads((unnamed / "config.json").read_text())
    config["architectures"] = ["ElectraModel"]
    (unnamed / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=re.escape(message("electra-hf-generator"))):
        checkpoints.open_checkpoint(unnamed).check_fits(
            families.build_model("encoder", found.config))


def test_the_pretrainer_needs_the_generator_of_its_discriminator(hf, tmp_path):
    config = checkpoints.open_checkpoint(hf["root"] / "discriminator").config
    model = families.build_model("pretrainer", config)
    # The discriminator alone: refused by the model's required parts, nothing loaded.
    before = np.asarray(model.encoder.encoder_layers[0].query_kernel).copy()
    with pytest.raises(ValueError,
                       match=re.escape(message("electra-pretraining-no-generator"))) as refused:
        checkpoints.open_checkpoint(hf["root"] / "alone").load_into(model, strict=False)
    assert str(hf["root"] / "alone") in str(refused.value) and "generator/" in str(refused.value)
    np.testing.assert_array_equal(np.asarray(model.encoder.encoder_layers[0].query_kernel), before)

    # A generator whose embedding tables are not the discriminator's.
    other = shutil.copytree(hf["root"] / "discriminator", tmp_path / "other")
    weights = read_hf_weights(other / "generator")
    weights["electra.embeddings.position_embeddings.weight"][3, 1] += 1e-3
    write_safetensors(other / "generator" / "model.safetensors", weights, {"format": "pt"})
    with pytest.raises(ValueError,
                       match=re.escape(message("electra-hf-generator-tables"))) as refused:
        checkpoints.open_checkpoint(other).load_into(model, strict=False)
    assert str(other / "model.safetensors") in str(refused.value)
    assert str(other / "generator" / "model.safetensors") in str(refused.value)

    # A generator of another size than the model's config describes (another --bert_config_file).
    smaller = families.build_model("pretrainer", _tiny_config(generator_hidden_size=0.25))
    with pytest.raises(ValueError, match="describes another generator than the pre-training"):
        checkpoints.open_checkpoint(hf["root"] / "discriminator").load_into(smaller, False)


def test_hf_config_round_trip(tmp_path):
    for config in (_tiny_config(), _tiny_config(hidden_act="gelu", embedding_size=32),
                   _tiny_config(generator_hidden_size=0.3, generator_layers=1.0)):
        path = tmp_path / "config.json"
        path.write_text(json.dumps(electra.config_to_hf(config)))
        back = read_config(path)
        assert isinstance(back, ElectraConfig) and back.to_dict() == config.to_dict()
    hf = electra.config_to_hf(_tiny_config(hidden_act="gelu"))
    assert (hf["hidden_act"], hf["model_type"]) == ("gelu_new", "electra")
    # transformers' own config.json: its "gelu" is the exact erf GELU.
    transformers.ElectraConfig(**SIZES).save_pretrained(tmp_path / "theirs")
    theirs = read_config(tmp_path / "theirs" / "config.json")
    assert theirs.hidden_act == "gelu_exact"
    assert {k: getattr(theirs, k) for k in SIZES} == SIZES
