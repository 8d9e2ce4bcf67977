"""Fill-mask (export_model.py --format=fill_mask, predict.py): `[MASK]` kept whole, each mask's
word-pieces with the masked LM's probabilities, in transformers' fill-mask pipeline's form; the
same answers from the original checkpoint, its TF Hub export and its Hugging Face directory;
refusals in one line. The large tier compares with the pipeline itself."""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURES, ROOT
from modeling_helpers import TINY
from optional_packages import needs
from refusals import assert_refused

TINY_FLAGS = [f"--bert_config_file={TINY / 'bert_config.json'}",
              f"--vocab_file={TINY / 'vocab.txt'}"]
TEXTS = ["the dog [MASK] fast.", "a [MASK] sat on the [MASK] .", "[MASK] cat runs"]


def _script(name, *args):
    return subprocess.run([sys.executable, str(ROOT / name), *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True)


def _export(folder, fmt, checkpoint, *flags):
    result = _script("export_model.py", f"--format={fmt}", f"--checkpoint={checkpoint}",
                     f"--export_dir={folder}", "--max_seq_length=32", *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


def _predict(model, *args):
    result = _script("predict.py", f"--model={model}", "--output_format=json", *args, *TEXTS)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """The fill-mask export of the tiny original checkpoint; the others (large tier) made when
    first asked for: `exports[name]`."""
    folder = tmp_path_factory.mktemp("fill_mask")
    makers = {"original": lambda: _export(folder / "original", "fill_mask",
                                          TINY / "bert_model.ckpt", *TINY_FLAGS),
              "hugging_face": lambda: _export(folder / "hf", "huggingface",
                                              TINY / "bert_model.ckpt", *TINY_FLAGS),
              "tf_hub": lambda: _export(folder / "hub", "fill_mask",
                                        FIXTURES / "tfhub" / "bert_encoder")}

    class Exports(dict):
        def __missing__(self, name):
            self[name] = makers[name]()
            return self[name]

    return Exports()


@pytest.mark.large
def test_each_mask_gets_the_masked_lms_most_likely_word_pieces(exports):
    from modeling import BertPretrainer, checkpoint
    from vocab.tokenization import load_vocab

    answers = _predict(exports["original"], "--top_k=4")
    assert [a["input"] for a in answers] == TEXTS
    one, two, first = (a["predictions"] for a in answers)
    assert len(one) == 4 and set(one[0]) == {"score", "token", "token_str", "sequence"}
    assert len(two) == 2 and all(len(mask) == 4 for mask in two)  # a list per mask
    assert [p["score"] for p in one] == sorted((p["score"] for p in one), reverse=True)
    # The probabilities are the masked LM's softmax at the mask's position.
    vocab = load_vocab(str(TINY / "vocab.txt"))
    ids = [vocab[t] for t in ("[CLS]", "the", "dog", "[MASK]", "fast", ".", "[SEP]")]
    model = BertPretrainer(_tiny_config())
    checkpoint.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    features = {"input_ids": np.array([ids]), "input_mask": np.ones((1, len(ids)), int),
                "segment_ids": np.zeros((1, len(ids)), int), "masked_lm_positions": np.array([[3]])}
    logits = np.asarray(model.masked_lm_logits(features))[0, 0].astype(np.float64)
    probabilities = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    best = np.argsort(-probabilities, kind="stable")[:4]
    assert [p["token"] for p in one] == best.tolist()
    np.testing.assert_allclose([p["score"] for p in one], probabilities[best], atol=1e-5)
    inverse = {i: t for t, i in vocab.items()}
    word = inverse[int(best[1])]
    assert one[1]["token_str"] == word
    assert one[1]["sequence"] == f"the dog {word} fast." or word.startswith("##")
    # Several masks: the filled text keeps the special tokens and the other mask.
    assert two[0][0]["sequence"].startswith("[CLS] a ") and "[MASK]" in two[0][0]["sequence"]
    assert first[0]["sequence"].endswith("cat runs")


def _tiny_config():
    from modeling import BertConfig

    return BertConfig.from_json_file(str(TINY / "bert_config.json"))


@pytest.mark.large
def test_the_tf_hub_export_and_the_hugging_face_directory_answer_as_the_original(exports):
    expected = _predict(exports["original"])
    for other in ("tf_hub", "hugging_face"):
        got = _predict(exports[other])
        for mine, theirs in zip(got, expected):
            masks = [theirs["predictions"]] if isinstance(theirs["predictions"][0], dict) \
                else theirs["predictions"]
            gots = [mine["predictions"]] if isinstance(mine["predictions"][0], dict) \
                else mine["predictions"]
            for a, b in zip(gots, masks):
                assert [p["token"] for p in a] == [p["token"] for p in b], other
                np.testing.assert_allclose([p["score"] for p in a], [p["score"] for p in b],
                                           atol=1e-5)


@pytest.mark.large
def test_a_text_without_a_mask_is_refused_in_one_line(exports):
    result = _script("predict.py", f"--model={exports['original']}", "the dog runs fast.")
    assert_refused(result, "fill-mask-no-mask")


def test_a_checkpoint_without_a_masked_lm_head_is_refused_in_one_line(tmp_path):
    # An encoder alone (Model Garden's without its mlm sub-object) has no masked-LM head.
    result = _script("export_model.py", "--format=fill_mask",
                     f"--checkpoint={FIXTURES / 'tfhub' / 'bert_encoder_variant'}",
                     f"--export_dir={tmp_path / 'out'}", "--max_seq_length=32")
    assert_refused(result, "fill-mask-no-head")
    assert not (tmp_path / "out").exists()


@pytest.mark.large
@needs("transformers", "torch")
def test_transformers_fill_mask_pipeline_gives_the_same_top_5(exports):
    """The pipeline on the Hugging Face directory (BertForPreTraining, read as BertForMaskedLM)
    against predict.py on the SavedModel: the same 5 word-pieces in order, their scores within
    1e-4, the same filled texts."""
    script = ("import json, sys\nfrom transformers import pipeline\n"
              "fill = pipeline('fill-mask', model=sys.argv[1], top_k=5)\n"
              "print(json.dumps([fill(text) for text in sys.argv[2:]]))\n")
    result = subprocess.run([sys.executable, "-c", script, str(exports["hugging_face"]), *TEXTS],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = json.loads(result.stdout.strip().splitlines()[-1])
    mine = [answer["predictions"] for answer in _predict(exports["original"])]
    for a, b in zip(mine, theirs):
        a, b = ([x] if isinstance(x[0], dict) else x for x in (a, b))
        for mask_a, mask_b in zip(a, b):
            assert [p["token"] for p in mask_a] == [p["token"] for p in mask_b]
            assert [p["token_str"] for p in mask_a] == [p["token_str"] for p in mask_b]
            assert [p["sequence"] for p in mask_a] == [p["sequence"] for p in mask_b]
            np.testing.assert_allclose([p["score"] for p in mask_a],
                                       [p["score"] for p in mask_b], atol=1e-4)


@pytest.mark.large
def test_electras_fill_mask_is_its_generators_masked_lm(tmp_path):
    """ELECTRA's masked LM is its generator: `masked_lm_logits` gives the original's generator
    logits (the fixture of google-research/electra), and its export answers."""
    from modeling import checkpoint, families

    electra = FIXTURES / "electra" / "tiny"
    found = checkpoint.open_checkpoint(electra)
    config = checkpoint.load_config(str(electra / "hparams.json"))
    model = families.build_model("pretrainer", config)
    found.load_into(model, strict=False)
    expected = dict(np.load(electra / "expected.npz"))
    logits = model.masked_lm_logits({
        "input_ids": expected["masked_input_ids"], "input_mask": expected["input_mask"],
        "segment_ids": expected["segment_ids"],
        "masked_lm_positions": expected["masked_lm_positions"]})
    np.testing.assert_allclose(np.asarray(logits), expected["gen_logits"], atol=1e-5)
    folder = _export(tmp_path / "electra", "fill_mask", electra,
                     f"--bert_config_file={electra / 'hparams.json'}")
    answers = _predict(folder, "--top_k=2")
    assert [len(a["predictions"]) for a in answers] == [2, 2, 2]
