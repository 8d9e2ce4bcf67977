"""build_vocab.py: the original's layout, the original's word splitting, tokenizers that read the
output, a learned vocab that beats a random one, bounded memory, clear errors, atomic output."""
import collections
import os
import re
import subprocess
import sys

import pytest

import vocab
from bert_tasks.pretraining.data import pipeline, reading
from bert_tasks.pretraining.data.reading import InputError
from vocab import tokenization
from vocab.fast_tokenizer import FastBertTokenizer
from bert_tasks.pretraining.vocab_building import building, layout, learner, quality, words
from bert_tasks.pretraining.vocab_building.word_table import WordTable
from refusals import assert_refused, message

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUSTEN = os.path.join(ROOT, "data", "austen")
# Lines a learned vocab must handle beyond English prose: CJK, accents, other scripts, controls.
EXTRA_LINES = ["他说中文很好。中文字典", "Café au lait, naïve résumé; ÉCOLE",
               "Ελληνικά και русский текст", "tab\there\x00and\u200bzero-width", "中文字"]


def _austen_lines(name, start, stop):
    with open(os.path.join(AUSTEN, name), encoding="utf-8") as f:
        return f.read().split("\n")[start:stop]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two files: 3,000 lines of Emma (and EXTRA_LINES) and 1,000 of Pride and Prejudice."""
    folder = tmp_path_factory.mktemp("corpus")
    (folder / "a.txt").write_text(
        "\n".join(_austen_lines("emma.txt", 0, 3000) + EXTRA_LINES * 3) + "\n", encoding="utf-8")
    (folder / "b.txt").write_text(
        "\n".join(_austen_lines("prideprejudice.txt", 0, 1000)) + "\n", encoding="utf-8")
    return folder


def _options(corpus, output, **overrides):
    flags = dict(input_file=str(corpus / "*.txt"), output_file=str(output), vocab_size=1200,
                 min_count=3)
    flags.update(overrides)
    return building.Options(**flags)


@pytest.fixture(scope="module")
def uncased(corpus, tmp_path_factory):
    """(vocab file, BuildStats) learned uncased with the original's 994 unused slots."""
    output = tmp_path_factory.mktemp("uncased") / "vocab.txt"
    return output, building.build_vocab(_options(corpus, output))


def test_reserved_block_is_the_originals():
    original = tokenization.read_vocab_lines(vocab.bundled_vocab_file())
    assert layout.reserved_tokens() == original[:999]
    short = layout.reserved_tokens(99, extra=["[URL]"])
    assert [short.index(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [
        0, 100, 101, 102, 103]
    assert short[-1] == "[URL]" and len(short) == 105
    assert layout.reserved_tokens(2) == ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]",
                                         "[SEP]", "[MASK]"]


@pytest.mark.parametrize("case", ["uncased", "cased"])
def test_words_are_the_original_basic_tokenizers(tokenization_cases, case):
    """Counted words equal the original's BasicTokenizer output on all 302 fixture texts."""
    counter = words.WordCounter(do_lower_case=case == "uncased")
    expected = collections.Counter()
    for row in tokenization_cases:
        assert counter.count(row["text"]) == collections.Counter(row[case]["basic_tokens"]), (
            row["id"])
        expected.update(row[case]["basic_tokens"])
    assert counter.count("\n".join(row["text"] for row in tokenization_cases)) == expected


def test_word_table_drops_the_rarest_when_full():
    table = WordTable(capacity=4)
    table.add({"a": 5, "b": 1, "c": 2})
    assert table.max_dropped_count == 0 and len(table) == 3
    table.add({"d": 1, "e": 3})  # 5 words > 4: drop counts <= 2, leaving at most 2
    assert dict(table.counts) == {"a": 5, "e": 3} and table.max_dropped_count == 2
    table.add({"b": 4, "a": 1})
    assert dict(table.counts) == {"a": 6, "e": 3, "b": 4}


def test_learned_vocab_layout_and_size(uncased):
    output, stats = uncased
    tokens = tokenization.read_vocab_lines(str(output))
    assert len(tokens) == stats.vocab_size == 1200 and len(set(tokens)) == 1200
    assert tokens[:999] == layout.reserved_tokens()
    assert [tokens.index(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [
        0, 100, 101, 102, 103]
    learned = tokens[999:]
    # Every character of the learned words is a token alone and after ##.
    chars = {c for t in learned for c in t.replace("##", "", 1)}
    assert all(c in learned and "##" + c in learned for c in chars)
    assert stats.learn.calls <= 6 and stats.learn.short_by == 0
    assert stats.num_lines == 4015


def test_cjk_characters_are_words_of_their_own(uncased):
    tokens = set(tokenization.read_vocab_lines(str(uncased[0])))
    assert {"中", "文", "字"} <= tokens and "中文" not in tokens and "##文" in tokens
    tokenizer = tokenization.FullTokenizer(str(uncased[0]), do_lower_case=True)
    assert tokenizer.tokenize("中文字") == ["中", "文", "字"]


def test_full_and_fast_tokenizers_load_it_and_agree(uncased):
    vocab_file = str(uncased[0])
    full = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    fast = FastBertTokenizer(vocab_file, do_lower_case=True)
    held_out = _austen_lines("persuasion.txt", 0, 400) + EXTRA_LINES + ["ünseen ÷ glyphs ☃"]
    assert fast.tokenize_batch(held_out) == [full.tokenize(line) for line in held_out]
    assert full.tokenize("☃") == ["[UNK]"]  # not in the corpus: no token


def test_learned_vocab_beats_a_random_subset_on_held_out_text(uncased):
    output, stats = uncased
    learned = tokenization.read_vocab_lines(str(output))
    reserved = learned[:stats.num_reserved]
    held_out = words.WordCounter(True).count("\n".join(_austen_lines("persuasion.txt", 0, 2000)))
    ours = quality.figures(set(learned), held_out)
    bert = tokenization.read_vocab_lines(vocab.bundled_vocab_file())
    characters = {t for t in learned if learner.is_character_token(t)}
    for seed in (1, 2):
        fair = quality.random_subset(bert, reserved, characters, len(learned), seed)
        assert len(fair) == len(learned) and fair[:len(reserved)] == reserved
        theirs = quality.figures(set(fair), held_out)
        assert ours.words == theirs.words > 10000
        assert ours.pieces_per_word < 0.8 * theirs.pieces_per_word
        assert ours.unknown <= theirs.unknown
        plain = quality.figures(set(quality.random_subset(bert, reserved, None, len(learned),
                                                          seed)), held_out)
        assert ours.unknown < plain.unknown


def test_cased_keeps_case_and_accents(corpus, uncased, tmp_path):
    output = tmp_path / "cased.txt"
    building.build_vocab(_options(corpus, output, do_lower_case=False, num_unused=99,
                                  reserved_tokens="[URL],[EMAIL]"))
    cased = tokenization.read_vocab_lines(str(output))
    lower = set(tokenization.read_vocab_lines(str(uncased[0])))
    assert len(cased) == 1200 and cased[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert cased[104:106] == ["[URL]", "[EMAIL]"]
    assert {"Emma", "E", "É", "é"} <= set(cased)
    # Uncased: lower-cased, accents stripped (the corpus's é are e's).
    assert "e" in lower and "é" not in lower and not any(t != t.lower() for t in lower
                                                             if not t.startswith("["))
    full = tokenization.FullTokenizer(str(output), do_lower_case=False)
    fast = FastBertTokenizer(str(output), do_lower_case=False)
    lines = ["Emma Woodhouse, handsome, clever, and rich.", "Café ÉCOLE"]
    assert fast.tokenize_batch(lines) == [full.tokenize(line) for line in lines]


def test_workers_and_small_blocks_give_the_same_vocab(corpus, uncased, tmp_path, monkeypatch,
                                                      caplog):
    monkeypatch.setattr(reading, "_BLOCK_BYTES", 16384)  # many blocks, so workers share them
    monkeypatch.setattr(pipeline, "_PROGRESS_SECONDS", 0.0)
    caplog.set_level("INFO")
    output = tmp_path / "vocab.txt"
    building.build_vocab(_options(corpus, output, num_workers=2))
    assert output.read_bytes() == uncased[0].read_bytes()
    progress = [m for m in caplog.messages if m.startswith("counting words")]
    assert len(progress) > 5 and all("lines/s" in m and "ETA" in m for m in progress)


def test_bounded_table_and_line_limit(corpus, tmp_path, caplog):
    caplog.set_level("INFO")
    output = tmp_path / "vocab.txt"
    stats = building.build_vocab(_options(corpus, output, max_input_lines=2000, max_input_words=500,
                                          vocab_size=400, num_unused=99))
    assert stats.num_lines == 2000 and stats.num_distinct_words <= 1000
    assert any("the table was cut" in m for m in caplog.messages)
    assert len(tokenization.read_vocab_lines(str(output))) == 400


def test_too_little_text_gives_a_shorter_vocab_and_a_warning(corpus, tmp_path, caplog):
    output = tmp_path / "vocab.txt"
    stats = building.build_vocab(_options(corpus, output, max_input_lines=500, vocab_size=100000))
    lines = tokenization.read_vocab_lines(str(output))
    assert stats.learn.short_by > 0 and len(lines) == 100000 - stats.learn.short_by > 999
    assert stats.learn.calls == 1 and stats.learn.threshold == 3  # the lowest threshold
    assert any("not --vocab_size=100000" in m for m in caplog.messages)


def test_invalid_utf8_names_file_and_line(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"fine\nbad \xff byte\n")
    with pytest.raises(InputError, match=r"bad\.txt line 2: invalid UTF-8 byte 0xff"):
        building.build_vocab(_options(tmp_path, tmp_path / "vocab.txt"))
    assert not (tmp_path / "vocab.txt").exists()


@pytest.mark.parametrize("overrides,message", [
    ({"input_file": "/nonexistent/*.txt"}, "'/nonexistent/\\*.txt' matches no file"),
    ({"output_file": "/nonexistent/dir/vocab.txt"}, "directory /nonexistent/dir does not exist"),
    ({"vocab_size": 999}, "--vocab_size=999 leaves no room .* 999 reserved"),
    ({"vocab_size": 1050}, "--vocab_size=1050 cannot hold the 999 reserved tokens and the 138 "
                           "tokens of the 69 characters .* at least 1137"),
    ({"output_file": "/sys/vocab.txt"}, "cannot write in directory /sys"),
    ({"reserved_tokens": "[UNK],a b"}, "'\\[UNK\\]' is already reserved; .*'a b' is empty or "
                                       "contains whitespace"),
    ({"num_workers": 0}, "--num_workers=0"),
])
def test_bad_flags_fail_and_write_nothing(corpus, tmp_path, overrides, message):
    output = tmp_path / "vocab.txt"
    output.write_text("old\n")
    with pytest.raises(InputError, match=message):
        building.build_vocab(_options(corpus, overrides.pop("output_file", output), **overrides))
    assert os.listdir(tmp_path) == ["vocab.txt"] and output.read_text() == "old\n"


def test_input_without_words_fails_naming_the_files(tmp_path):
    (tmp_path / "a_empty.txt").write_text("")
    (tmp_path / "b_control.txt").write_text("\n \t\n\x00\u200b\n")
    with pytest.raises(InputError, match=r"a_empty\.txt, .*b_control\.txt: no words in 3 lines"):
        building.build_vocab(_options(tmp_path, tmp_path / "vocab.txt"))
    assert not (tmp_path / "vocab.txt").exists()


def test_an_output_file_that_is_an_input_is_refused(tmp_path, monkeypatch):
    """--output_file=--input_file exited 0 having replaced the text with its vocab."""
    text = "\n".join(_austen_lines("emma.txt", 0, 200)) + "\n"
    corpus = tmp_path / "x.txt"
    corpus.write_text(text, encoding="utf-8")
    process = subprocess.run(
        [sys.executable, os.path.join(ROOT, "build_vocab.py"), "--input_file=%s" % corpus,
         "--output_file=%s" % corpus, "--vocab_size=1200", "--min_count=1"],
        capture_output=True, text=True, cwd=ROOT)
    assert_refused(process, "output-file-is-input")
    assert "--input_file=%s" % corpus in process.stderr
    assert corpus.read_text(encoding="utf-8") == text
    # A list or a glob of inputs, another spelling of the path, a link.
    (tmp_path / "w.txt").write_text("Other words.\n")
    os.symlink(corpus, tmp_path / "link.txt")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    for input_file, output_file in (("w.txt,x.txt", "./x.txt"), ("*.txt", "sub/../x.txt"),
                                    ("x.txt", "link.txt"), ("link.txt", str(corpus))):
        with pytest.raises(InputError, match=re.escape(message("output-file-is-input"))):
            building.build_vocab(_options(tmp_path, output_file, input_file=input_file))
        assert corpus.read_text(encoding="utf-8") == text
    assert sorted(os.listdir(tmp_path)) == ["link.txt", "sub", "w.txt", "x.txt"]


def test_cli_exits_2_with_the_message(tmp_path):
    """Every flag reaches `building.Options` (main builds it from all of them); bad input exits 2.

    The flags are checked before TensorFlow is imported, so this takes a second.
    """
    output = tmp_path / "vocab.txt"
    bad = subprocess.run(
        [sys.executable, os.path.join(ROOT, "build_vocab.py"), "--input_file=/nonexistent.txt",
         "--output_file=%s" % output, "--vocab_size=5"],
        capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--vocab_size=5 leaves no room" in bad.stderr
    assert not output.exists()
