"""The faithful tokenizer against the original's outputs (every fixture case) and bad input."""
import json
import warnings

import pytest

import vocab
from vocab import tokenization


@pytest.fixture(scope="module")
def tokenizers(fixtures_dir):
    return {
        "uncased": tokenization.FullTokenizer(vocab.bundled_vocab_file(), do_lower_case=True),
        "cased": tokenization.FullTokenizer(
            str(fixtures_dir / "tokenization" / "cased_vocab.txt"), do_lower_case=False),
    }


@pytest.mark.parametrize("mode", ["uncased", "cased"])
def test_all_fixture_cases(tokenization_cases, tokenizers, mode):
    assert len(tokenization_cases) == 302
    tok = tokenizers[mode]
    for case in tokenization_cases:
        want = case[mode]
        got_basic = tok.basic_tokenizer.tokenize(case["text"])
        got = tok.tokenize(case["text"])
        ids = tok.convert_tokens_to_ids(got)
        assert (got_basic, got, ids) == (want["basic_tokens"], want["tokens"], want["ids"]), case["id"]
        assert tok.convert_ids_to_tokens(ids) == got
        # Bytes input is decoded as UTF-8, as the original does.
        assert tok.tokenize(case["text"].encode("utf-8", "surrogatepass")) == got


def test_validate_case_matches_checkpoint(fixtures_dir):
    path = fixtures_dir / "tokenization" / "validate_case_cases.json"
    entries = json.loads(path.read_text(encoding="utf-8"))
    assert len(entries) == 13
    for entry in entries:
        args = (entry["do_lower_case"], entry["init_checkpoint"])
        if entry["raises"]:
            with pytest.raises(ValueError) as err:
                tokenization.validate_case_matches_checkpoint(*args)
            assert str(err.value) == entry["message"]
        else:
            tokenization.validate_case_matches_checkpoint(*args)


def test_bundled_vocabs():
    assert len(tokenization.load_vocab(vocab.bundled_vocab_file())) == 30522
    assert len(tokenization.load_vocab(vocab.bundled_vocab_file("chinese_L-12_H-768_A-12"))) == 21128
    with pytest.raises(ValueError, match="unknown bundled vocab 'nope'"):
        vocab.bundled_vocab_file("nope")


def test_unicode_helpers():
    assert tokenization.convert_to_unicode(b"caf\xc3\xa9\xff!") == "café!"  # bad byte dropped
    assert tokenization.printable_text(b"x") == "x"
    with pytest.raises(ValueError, match="Unsupported string type"):
        tokenization.convert_to_unicode(3)


def test_empty_and_blank_input(tokenizers):
    for text in ["", "   ", "\x00\u200b\ufffd", b"\xff\xfe"]:
        assert tokenizers["uncased"].tokenize(text) == []


def _write(tmp_path, data):
    path = tmp_path / "vocab.txt"
    path.write_bytes(data)
    return str(path)


def test_vocab_file_format(tmp_path):
    # '\r' is dropped (TF 2.x GFile), tokens are str.strip()ped, a blank line is the token "".
    path = _write(tmp_path, b"[UNK]\r\n  [CLS] \n\n[SEP]\nla\rst")
    v = tokenization.load_vocab(path)
    assert list(v.items()) == [("[UNK]", 0), ("[CLS]", 1), ("", 2), ("[SEP]", 3), ("last", 4)]


def test_duplicates_warn_and_later_index_wins(tmp_path):
    path = _write(tmp_path, b"[UNK]\n[CLS]\n[SEP]\na\nb\na\n")
    with pytest.warns(tokenization.DuplicateVocabWarning, match=r"vocab.txt.*'a' \(lines 4 and 6\)"):
        tok = tokenization.FullTokenizer(path)
    assert list(tok.vocab.items())[3] == ("a", 5)
    assert 3 not in tok.inv_vocab
    assert tok.convert_tokens_to_ids(tok.tokenize("A b")) == [5, 4]


@pytest.mark.parametrize("data, message", [
    (b"", r"vocab.txt is empty"),
    (b"[UNK]\n[CLS]\n", r"vocab.txt lacks the required token\(s\) \[SEP\]"),
    (b"a\nb\n", r"vocab.txt lacks the required token\(s\) \[UNK\], \[CLS\], \[SEP\]"),
    (b"[UNK]\n[CLS]\nab\xffc\n[SEP]\n", r"vocab.txt line 3 is not valid UTF-8"),
])
def test_bad_vocab_files(tmp_path, data, message):
    with pytest.raises(tokenization.VocabError, match=message):
        tokenization.FullTokenizer(_write(tmp_path, data))


def test_missing_vocab_file(tmp_path):
    with pytest.raises(tokenization.VocabError, match="cannot read vocab file .*nope.txt"):
        tokenization.FullTokenizer(str(tmp_path / "nope.txt"))


def test_unknown_lookup_names_the_item(tokenizers):
    with pytest.raises(KeyError, match="'zzzz-not-a-token' is not in the vocabulary"):
        tokenizers["uncased"].convert_tokens_to_ids(["zzzz-not-a-token"])
    with pytest.raises(KeyError, match="999999"):
        tokenizers["uncased"].convert_ids_to_tokens([999999])


def test_original_unit_examples():
    # From the original tokenization_test.py.
    wp = tokenization.WordpieceTokenizer(
        {t: i for i, t in enumerate(["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed",
                                     "wa", "un", "runn", "##ing"])})
    assert wp.tokenize("") == []
    assert wp.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert wp.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
    basic = tokenization.BasicTokenizer(do_lower_case=True)
    assert basic.tokenize(u" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert basic.tokenize(u"ah\u535A\u63A8zz") == ["ah", "\u535A", "\u63A8", "zz"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tokenization.load_vocab(vocab.bundled_vocab_file())  # the real vocab has no duplicates
