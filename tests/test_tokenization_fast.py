"""The tf.text fast path: same word-pieces as the original on every fixture case, packing like the
original classifier features, tf.data / SavedModel use, and its one pinned difference."""
import json
import random

import numpy as np
import pytest
import tensorflow as tf

import vocab
from vocab import fast_tokenizer
from vocab import tokenization


@pytest.fixture(scope="module")
def vocab_files(fixtures_dir):
    return {"uncased": (vocab.bundled_vocab_file(), True),
            "cased": (str(fixtures_dir / "tokenization" / "cased_vocab.txt"), False)}


@pytest.fixture(scope="module")
def fast(vocab_files):
    return {mode: fast_tokenizer.FastBertTokenizer(*args) for mode, args in vocab_files.items()}


@pytest.fixture(scope="module")
def faithful(vocab_files):
    return {mode: tokenization.FullTokenizer(*args) for mode, args in vocab_files.items()}


@pytest.mark.parametrize("mode", ["uncased", "cased"])
def test_all_fixture_cases(tokenization_cases, fast, mode):
    tok = fast[mode]
    texts = [c["text"] for c in tokenization_cases]
    ids = tok.tokenize(tf.constant([t.encode("utf-8", "surrogatepass") for t in texts]))
    strings = tok.tokenize_to_strings(tf.constant([t.encode("utf-8") for t in texts]))
    batch = tok.tokenize_batch(texts, batch_size=100)  # several chunks
    for case, got_ids, got_strings, got_batch in zip(tokenization_cases, ids.to_list(),
                                                     strings.to_list(),
                                                     batch):
        want = case[mode]
        assert got_ids == want["ids"], case["id"]
        assert [s.decode("utf-8") for s in got_strings] == want["tokens"], case["id"]
        assert got_batch == want["tokens"], case["id"]
    assert ids.dtype == tf.int32


# Inputs aimed at each place where tf.text and the original differ, and at the routing.
EDGE_CASES = [
    "", " \t\r\n ", "Plain ASCII, with punctuation!", "[UNK] [CLS] [MASK]",
    "ΟΔΟΣ ΣΑΣ Σ aΣ.b ΑΣ'Β ΑΣ\u200bΒ ΑΣ\x0bΒ ΑΣ\u0301 ʰΣ ªΣ ΑΣΣ",   # final sigma contexts
    "İstanbul ẞ ß ǅ Ⅷ Ⓐ ﬁ ＡＢＣ ²", "e\u0301 é \u0345 a\u0308\u0323",  # case, NFD, marks
    "vertical\x0btab soft\u00adhyphen zero\u200bwidth bom\ufeff del\x7fete nul\x00 \ufffd",
    "nbsp\u00a0ideo\u3000line\u2028para\u2029 nel\x85 fs\x1cx",      # whitespace variants
    "中国\uf900\U0002f800 한국어 カタカナ 〇", "≠≮≯\u1fef `", "🙂wink €5 ©™°",
    "a" * 200, "a" * 201, "é" * 200, "é" * 201, "中" * 201, "x" + "\u0301" * 250,
    "mixed ascii and é in one batch", "\U000e0041tag \ue000pua \u0378cn",
]


@pytest.mark.parametrize("mode", ["uncased", "cased"])
def test_edge_cases_and_fuzz_match_faithful(fast, faithful, mode):
    rng = random.Random(1234)
    pool = list("aAzZ09 .,'!?-$^`~[]#\t\n") + [c for t in EDGE_CASES for c in t[:12]]
    texts = EDGE_CASES + ["".join(rng.choice(pool) for _ in range(rng.randint(0, 25)))
                          for _ in range(1500)]
    want = [faithful[mode].tokenize(t) for t in texts]
    ids = fast[mode].tokenize(tf.constant([t.encode("utf-8") for t in texts])).to_list()
    for text, got, expected in zip(texts, ids, want):
        assert got == faithful[mode].convert_tokens_to_ids(expected), repr(text)
    assert fast[mode].tokenize_batch(texts) == want


def test_invalid_utf8_is_dropped_like_the_original(fast, faithful):
    texts = [b"ab\xffcd", b"\xe2\x82", b"caf\xc3", b"\xed\xa0\x80x", b"a\xc3(b", b"x\xf0\x9f\x98y z"]
    got = fast["uncased"].tokenize(tf.constant(texts)).to_list()
    assert got == [faithful["uncased"].convert_tokens_to_ids(faithful["uncased"].tokenize(t))
                   for t in texts]
    assert fast["uncased"].tokenize_batch(texts) == [faithful["uncased"].tokenize(t)
                                                     for t in texts]


def test_lone_surrogate_falls_back(fast, faithful):
    texts = ["ok", "bad \udc80 surrogate", "fine"]
    assert fast["uncased"].tokenize_batch(texts) == [faithful["uncased"].tokenize(t)
                                                     for t in texts]


def test_the_char_tables_candidates_are_every_code_point_that_may_matter():
    """`char_tables._candidates` (a loop over the ranges between the skipped ones) is its
    definition: every scalar value outside the inert ranges whose category is not Cn or Co."""
    import unicodedata

    from vocab import char_tables

    inert = set().union(*(range(lo, hi + 1) for lo, hi in char_tables._INERT_RANGES))
    expected = [(cp, chr(cp), unicodedata.category(chr(cp)))
                for cp in range(char_tables._NUM_CODEPOINTS)
                if cp not in char_tables._SURROGATES and cp not in inert
                and unicodedata.category(chr(cp)) not in ("Cn", "Co")]
    assert char_tables._candidates() == expected


def test_pinned_difference_canonical_reordering(tmp_path):
    """NFD reorders non-Mn combining marks (here U+1D16D ccc 226 before U+1D165 ccc 216); the
    graph's per-character map does not. tokenize_batch falls back and stays exact."""
    path = tmp_path / "vocab.txt"
    path.write_text("[UNK]\n[CLS]\n[SEP]\na\n##\U0001d165\n##\U0001d16d\n", encoding="utf-8")
    text = "a\U0001d16d\U0001d165"
    original = tokenization.FullTokenizer(str(path)).tokenize(text)
    assert original == ["a", "##\U0001d165", "##\U0001d16d"]
    tok = fast_tokenizer.FastBertTokenizer(str(path))
    assert tok.tokenize(tf.constant([text])).to_list() == [[3, 5, 4]]  # input order kept
    assert tok.tokenize_batch([text]) == [original]


@pytest.mark.parametrize("mode", ["uncased", "cased"])
def test_tokenize_batch_ids_are_the_faithful_ids(fast, faithful, mode):
    """Flat ids + row splits across several graph batches, fallback lines included."""
    texts = EDGE_CASES + ["bad \udc80 surrogate", "a\U0001d16d\U0001d165 b", "", "last line"]
    ids, row_splits = fast[mode].tokenize_batch_ids(texts, batch_size=7)
    assert ids.dtype == np.int32 and row_splits.dtype == np.int64
    assert len(row_splits) == len(texts) + 1 and row_splits[-1] == len(ids)
    for i, text in enumerate(texts):
        want = faithful[mode].convert_tokens_to_ids(faithful[mode].tokenize(text))
        assert ids[row_splits[i]:row_splits[i + 1]].tolist() == want, repr(text)
    empty_ids, empty_splits = fast[mode].tokenize_batch_ids([])
    assert empty_ids.shape == (0,) and empty_splits.tolist() == [0]


def _truncate_seq_pair(tokens_a, tokens_b, max_length):
    """The original run_classifier._truncate_seq_pair."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def test_truncated_pair_lengths_matches_original_loop():
    la, lb, budget = np.meshgrid(np.arange(15), np.arange(15), np.arange(1, 14), indexing="ij")
    la, lb, budget = la.ravel(), lb.ravel(), budget.ravel()
    got_a, got_b = (t.numpy() for t in fast_tokenizer.truncated_pair_lengths(
        tf.constant(la), tf.constant(lb), tf.constant(budget)))
    for i in range(len(la)):
        a, b = list(range(la[i])), list(range(lb[i]))
        _truncate_seq_pair(a, b, budget[i])
        assert (got_a[i], got_b[i]) == (len(a), len(b)), (la[i], lb[i], budget[i])


@pytest.mark.parametrize("task", ["mrpc", "cola", "mnli", "xnli"])
def test_pack_matches_original_classifier_features(fixtures_dir, fast, task):
    features = json.loads((fixtures_dir / "classifier" / ("%s_features.json" % task)).read_text())
    rows = [r for split in ("train", "dev", "test") if isinstance(features[split], list)
            for r in features[split]]
    tok = fast["uncased"]
    a = tok.tokenize(tf.constant([r["text_a"] for r in rows]))
    b = tok.tokenize(tf.constant([r["text_b"] or "" for r in rows]))
    packed = tok.pack(a, b, max_seq_length=features["max_seq_length"])
    if all(r["text_b"] is None for r in rows):
        single = tok.pack(a, max_seq_length=features["max_seq_length"])
        for key in packed:
            np.testing.assert_array_equal(single[key], packed[key])
    for key in ("input_ids", "input_mask", "segment_ids"):
        assert packed[key].dtype == tf.int32
        np.testing.assert_array_equal(packed[key].numpy(), [r[key] for r in rows], err_msg=key)


def test_tf_data_and_saved_model(tmp_path, fast):
    tok = fast["uncased"]
    texts = ["Hello, World!", "Ünïcode ΣΑΣ 中文", ""]
    want = tok.tokenize(tf.constant(texts)).to_list()

    ds = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(tok.tokenize)
    assert [ids for batch in ds for ids in batch.to_list()] == want

    class Serving(tf.Module):
        def __init__(self, tokenizer):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
        def __call__(self, text_a, text_b):
            t = self.tokenizer
            return t.pack(t.tokenize(text_a), t.tokenize(text_b), max_seq_length=16)

    module = Serving(tok)
    expected = module(tf.constant(texts), tf.constant(texts[::-1]))
    tf.saved_model.save(module, str(tmp_path / "sm"))
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    got = loaded(tf.constant(texts), tf.constant(texts[::-1]))
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key])
    assert loaded.tokenizer.tokenize(tf.constant(texts)).to_list() == want


def test_vocab_checks_and_duplicates(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[UNK]\n[CLS]\n\n[SEP]\nhello\nhello\n", encoding="utf-8")
    with pytest.warns(tokenization.DuplicateVocabWarning):
        tok = fast_tokenizer.FastBertTokenizer(str(path))
    assert tok.tokenize(tf.constant(["hello x"])).to_list() == [[5, 0]]  # later index wins
    path.write_text("[UNK]\n[SEP]\n", encoding="utf-8")
    with pytest.raises(tokenization.VocabError, match=r"vocab.txt lacks .*\[CLS\]"):
        fast_tokenizer.FastBertTokenizer(str(path))
