"""add_vocab_words.py (bert_tasks.pretraining.vocab_building.add_words): words take the [unused*]
slots first (same shapes, same outputs on old text), then grow the word embeddings and the
masked-LM output bias (old rows bit for bit); mean-of-pieces and random rows; the refusals."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from modeling import checkpoint as checkpoints
from bert_tasks.pretraining.vocab_building import add_words
from conftest import ROOT
from modeling import BertModel, BertPretrainer, BertConfig
from modeling.checkpoint import original as original_layout
from modeling_helpers import TINY, encoder_inputs, tiny_config, tiny_expected, tiny_pretrainer
from refusals import assert_refused, message
from vocab import tokenization

# Words of the tiny vocabulary that no fixture text uses become its [unused*] slots.
UNUSED = {"eat": "[unused0]", "drink": "[unused1]", "sleep": "[unused2]"}
GROWN = (add_words.WORD_EMBEDDINGS, add_words.OUTPUT_BIAS)


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    """The tiny model's vocab.txt with three [unused*] slots (ids 95-97)."""
    lines = [UNUSED.get(t, t) for t in tokenization.read_vocab_lines(str(TINY / "vocab.txt"))]
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in lines), encoding="utf-8")
    return path


def _run(tmp_path, vocab_file, words, checkpoint=TINY / "bert_model.ckpt", **flags):
    (tmp_path / "words.txt").write_text(words, encoding="utf-8")
    return add_words.extend_checkpoint(add_words.Options(
        vocab_file=str(vocab_file), bert_config_file=str(TINY / "bert_config.json"),
        init_checkpoint=str(checkpoint), words_file=str(tmp_path / "words.txt"),
        output_dir=str(tmp_path / "out"), **flags))


def _tensors(prefix):
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_words_take_the_unused_slots_and_old_text_gives_the_same_outputs(tmp_path, vocab_file):
    result = _run(tmp_path, vocab_file, "dogs\n\n walked \ndogs\nbirds\n")  # dogs twice: once
    assert [(w.word, w.id, w.slot, w.old_pieces) for w in result.words] == [
        ("dogs", 95, "[unused0]", ("dog", "##s")), ("walked", 96, "[unused1]", ("walk", "##ed")),
        ("birds", 97, "[unused2]", ("bird", "##s"))]
    out = tmp_path / "out"
    lines = tokenization.read_vocab_lines(str(out / "vocab.txt"))
    assert lines[95:98] == ["dogs", "walked", "birds"] and len(lines) == 99
    assert tiny_config().to_json_string() == (out / "bert_config.json").read_text()
    tokenizer = tokenization.FullTokenizer(str(out / "vocab.txt"), do_lower_case=True)
    assert tokenizer.tokenize("The dogs walked, birds sing.") == [
        "the", "dogs", "walked", ",", "birds", "sing", "."]

    old, new = _tensors(TINY / "bert_model.ckpt"), _tensors(result.checkpoint)
    assert {n: v.shape for n, v in new.items()} == {n: v.shape for n, v in old.items()}
    for name in set(old) - set(GROWN):
        assert np.array_equal(old[name], new[name]), name
    vocab = tokenization.load_vocab(str(TINY / "vocab.txt"))
    for word in result.words:  # mean of the old pieces' rows and biases
        ids = [vocab[p] for p in word.old_pieces]
        for name in GROWN:
            np.testing.assert_allclose(new[name][word.id], old[name][ids].mean(axis=0), atol=1e-7)
    others = [i for i in range(99) if i not in (95, 96, 97)]
    for name in GROWN:
        assert np.array_equal(new[name][others], old[name][others])

    # The scripts' loader takes it; text of the old vocabulary gives the same outputs.
    model = BertPretrainer(tiny_config())
    checkpoints.initialize_from_checkpoint(model, result.checkpoint)
    inputs = encoder_inputs(tiny_expected())
    before, after = tiny_pretrainer().encoder(inputs), model.encoder(inputs)
    for key in ("sequence_output", "pooled_output"):
        assert np.array_equal(np.asarray(before[key]), np.asarray(after[key])), key


def test_words_past_the_slots_grow_the_two_variables(tmp_path, vocab_file):
    # An input with optimizer slots and a global step: only the model's weights are written.
    model = tiny_pretrainer()
    slots = {f"{name}/adam_{m}": np.ones(var.shape, np.float32)
             for name, var in original_layout.variable_map(model).items() for m in "mv"}
    source = original_layout.save_tf1_checkpoint(
        model, tmp_path / "in" / "bert_model.ckpt", {**slots, "global_step": np.int64(7)})
    result = _run(tmp_path, vocab_file, "dogs\nwalked\nbirds\nsinging\ncats\n", source,
                  new_word_init="random", random_seed=3)
    assert [w.id for w in result.words] == [95, 96, 97, 99, 100] and result.vocab_size == 101
    assert [w.slot for w in result.words[3:]] == [None, None]
    out = tmp_path / "out"
    assert tokenization.read_vocab_lines(str(out / "vocab.txt"))[-3:] == ["see", "singing", "cats"]

    old, new = _tensors(TINY / "bert_model.ckpt"), _tensors(result.checkpoint)
    assert set(new) == set(old)  # no adam_m, adam_v, global_step
    assert new[add_words.WORD_EMBEDDINGS].shape == (101, 32)
    assert new[add_words.OUTPUT_BIAS].shape == (101,)
    for name in old:  # every old row bit for bit: the slots' rows kept (random)
        assert np.array_equal(new[name][:99] if name in GROWN else new[name], old[name]), name
    drawn = new[add_words.WORD_EMBEDDINGS][99:]
    assert np.all(np.abs(drawn) <= 2 * 0.02) and 0.005 < drawn.std() < 0.03
    assert np.array_equal(new[add_words.OUTPUT_BIAS][99:], [0.0, 0.0])

    config = tiny_config()
    config.vocab_size = 101
    assert config.to_json_string() == (out / "bert_config.json").read_text()
    checkpoints.load_checkpoint(BertPretrainer(config), result.checkpoint, strict=True)
    assert sorted(os.listdir(out)) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                       "bert_model.ckpt.index", "vocab.txt"]


@pytest.mark.parametrize("case, words", [
    ("add-words-in-vocab", "dogs\ndog\n"),
    ("add-words-split", "ice-cream\n"),
    ("add-words-lower-case", "Darcy\n"),
    ("add-words-too-long", "a" * 201 + "\n"),
    ("add-words-none", "\n  \n"),
    ("add-words-vocab-size", "dogs\n"),
])
def test_refused_before_anything_is_written(tmp_path, vocab_file, case, words):
    if case == "add-words-vocab-size":
        short = tokenization.read_vocab_lines(str(vocab_file))[:-1]
        vocab_file = tmp_path / "vocab.txt"
        vocab_file.write_text("".join(t + "\n" for t in short), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(message(case))) as refused:
        _run(tmp_path, vocab_file, words)
    assert not (tmp_path / "out").exists()
    if case not in ("add-words-none", "add-words-vocab-size"):
        assert "line %d " % (2 if case == "add-words-in-vocab" else 1) in str(refused.value)


def test_an_output_dir_holding_a_model_is_refused(tmp_path, vocab_file):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "vocab.txt").write_text("[PAD]\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(message("add-words-output-exists"))):
        _run(tmp_path, vocab_file, "dogs\n")
    assert os.listdir(tmp_path / "out") == ["vocab.txt"]
    assert (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8") == "[PAD]\n"


def test_the_script_refuses_in_one_line(tmp_path, vocab_file):
    (tmp_path / "words.txt").write_text("elinor\nmrs.\n", encoding="utf-8")
    process = subprocess.run(
        [sys.executable, str(ROOT / "add_vocab_words.py"), f"--vocab_file={vocab_file}",
         f"--bert_config_file={TINY / 'bert_config.json'}",
         f"--init_checkpoint={TINY / 'bert_model.ckpt'}", f"--words_file={tmp_path / 'words.txt'}",
         f"--output_dir={tmp_path / 'out'}"], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert_refused(process, "add-words-split")
    assert "line 2 'mrs.'" in process.stderr


def test_a_checkpoint_that_does_not_load_leaves_no_output_dir(tmp_path, vocab_file):
    with pytest.raises(OSError, match="bert_model.ckpt"):  # a refusal (`cli.refusal`)
        _run(tmp_path, vocab_file, "dogs\n", checkpoint=tmp_path / "none" / "bert_model.ckpt")
    assert not (tmp_path / "out").exists()


def test_a_removed_character_is_said_and_a_long_word_warned(tmp_path, vocab_file, caplog):
    with pytest.raises(ValueError, match="line 1 'zz\\\\u200bqx' loses characters the "
                                         "BasicTokenizer removes .* seen as 'zzqx': add 'zzqx'"):
        _run(tmp_path, vocab_file, "zz\u200bqx\n")
    long_word = "q" * 150
    with caplog.at_level("WARNING"):
        _run(tmp_path, vocab_file, f"{long_word}\n")
    assert "1 word(s) longer than 100 characters (line 1" in caplog.text
    assert "Hugging Face's BertTokenizer reads such a word as [UNK]" in caplog.text


def _hf_encoder(directory, vocab_file, do_lower_case):
    """The tiny encoder alone as a Hugging Face `BertModel` directory (no pre-training head),
    with `vocab_file` and the casing recorded in its tokenizer_config.json."""
    encoder = BertModel(tiny_config())
    checkpoints.load_checkpoint(encoder, TINY / "bert_model.ckpt", strict=False)
    return encoder, checkpoints.write_hugging_face(encoder, directory, vocab_file, do_lower_case)


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_a_hugging_face_encoder_gets_its_rows_and_no_head(tmp_path, vocab_file, do_lower_case):
    """Its config, vocabulary and casing are the directory's own; the encoder is written with
    the new rows, and no head is made up for it."""
    encoder, directory = _hf_encoder(tmp_path / "hf", vocab_file, do_lower_case)
    # A capitalised word is refused under lower-casing: added, it shows the directory's casing.
    words = "dogs\nwalked\nbirds\nsinging\n" + ("" if do_lower_case else "Cats\n")
    (tmp_path / "words.txt").write_text(words, encoding="utf-8")
    result = add_words.extend_checkpoint(add_words.Options(
        vocab_file=None, bert_config_file=None, init_checkpoint=directory,
        words_file=str(tmp_path / "words.txt"), output_dir=str(tmp_path / "out")))
    size = 100 if do_lower_case else 101  # three [unused*] slots, then appended
    assert [w.id for w in result.words] == [95, 96, 97, 99] + ([] if do_lower_case else [100])
    assert result.heads == [] and result.vocab_size == size
    config = BertConfig.from_json_file(str(tmp_path / "out" / "bert_config.json"))
    assert config.to_dict() == {**tiny_config().to_dict(), "vocab_size": size}

    old, new = _tensors(TINY / "bert_model.ckpt"), _tensors(result.checkpoint)
    assert set(new) == {name for name in old if not name.startswith("cls/")}
    for name in set(new) - {add_words.WORD_EMBEDDINGS}:
        assert np.array_equal(new[name], old[name]), name
    table, old_table = new[add_words.WORD_EMBEDDINGS], old[add_words.WORD_EMBEDDINGS]
    assert table.shape == (size, 32)
    others = [i for i in range(99) if i not in (95, 96, 97)]
    assert np.array_equal(table[others], old_table[others])
    vocab = tokenization.load_vocab(str(vocab_file))
    for word in result.words:
        np.testing.assert_allclose(table[word.id], old_table[[vocab[p] for p in word.old_pieces]]
                                   .mean(axis=0), atol=1e-7)

    # Text of the old vocabulary gives the same outputs.
    model = BertModel(config)
    checkpoints.load_checkpoint(model, result.checkpoint)  # strict: the encoder, whole
    inputs = encoder_inputs(tiny_expected())
    for key in ("sequence_output", "pooled_output"):
        assert np.array_equal(np.asarray(model(inputs)[key]), np.asarray(encoder(inputs)[key]))


def test_the_script_takes_a_hugging_face_directory_alone(tmp_path, vocab_file):
    """No --vocab_file, --bert_config_file or --do_lower_case: the directory's, its cased
    tokenizer_config.json included."""
    _, directory = _hf_encoder(tmp_path / "hf", vocab_file, do_lower_case=False)
    (tmp_path / "words.txt").write_text("Cats\n", encoding="utf-8")
    process = subprocess.run(
        [sys.executable, str(ROOT / "add_vocab_words.py"), f"--init_checkpoint={directory}",
         f"--words_file={tmp_path / 'words.txt'}", f"--output_dir={tmp_path / 'out'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert process.returncode == 0, process.stderr[-3000:]
    assert "the encoder alone" in process.stderr and "--do_lower_case=False" in process.stderr
    assert tokenization.read_vocab_lines(str(tmp_path / "out" / "vocab.txt"))[95] == "Cats"

