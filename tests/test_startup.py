"""bert_runner.startup: --do_lower_case against the case of the vocabulary (a warning naming the
file, the flag and the share of capitalised word-pieces), for the fine-tuning scripts
(load_tokenizer) and create_pretraining_data (its pipeline)."""
import re

import numpy as np
import pytest

import vocab
from bert_runner import startup
from bert_tasks.pretraining.data import pipeline
from modeling import BertConfig
from refusals import message

UNCASED = vocab.bundled_vocab_file()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _cased_vocab(tmp_path):
    """A small cased vocabulary, as a cased model's: capitalised words beside lower-case ones."""
    words = ["the", "a", "of", "and", "to", "in", "was", "her", "it", "he", "she", "Emma",
             "Harriet", "Knightley", "Mr", "Mrs", "London", "Highbury", "The", "##s", "##ed",
             "walk", "said", "very", "much", "would", "could", "Weston", "Elton", "Jane"]
    path = tmp_path / "cased_vocab.txt"
    path.write_text("\n".join(SPECIAL + words) + "\n", encoding="utf-8")
    return str(path)


def _config(vocab_size):
    return BertConfig(vocab_size=vocab_size, hidden_size=8, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=8)


def test_an_uncased_vocab_without_lower_casing_is_named_with_its_share(caplog):
    tokenizer = startup.load_tokenizer(UNCASED, False, None, _config(30522), "bert_config.json")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert message("uncased-vocab-keeps-case") in warnings[0]
    assert warnings[0].startswith(UNCASED) and "--do_lower_case=False" in warnings[0]
    assert re.search(r"0 of its \d+ word-pieces with letters have a capital: 0\.0%", warnings[0])
    assert "--do_lower_case=True" in warnings[0]  # what to do
    assert tokenizer.tokenize("Emma walked") == ["[UNK]", "walked"]  # what it is about


def test_a_cased_vocab_with_lower_casing_is_named(tmp_path, caplog):
    path = _cased_vocab(tmp_path)
    startup.load_tokenizer(path, True, None, _config(100), "bert_config.json")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and message("cased-vocab-lower-cased") in warnings[0]
    assert "--do_lower_case=True" in warnings[0] and "--do_lower_case=False for" in warnings[0]
    assert "11 of its 30 word-pieces" in warnings[0]  # [PAD] ... [MASK] are not counted


@pytest.mark.parametrize("cased_file, do_lower_case", [(False, True), (True, False)])
def test_matching_case_and_tiny_vocabs_say_nothing(tmp_path, cased_file, do_lower_case):
    path = _cased_vocab(tmp_path) if cased_file else UNCASED
    vocab_dict = {token: i for i, token in enumerate(open(path, encoding="utf-8").read().split())}
    assert startup.case_mismatch(vocab_dict, path, do_lower_case) is None
    # Fewer than 20 word-pieces with letters say nothing about the case.
    assert startup.case_mismatch({"[UNK]": 0, "a": 1, "b": 2}, "v.txt", False) is None


def test_create_pretraining_data_warns_too(tmp_path, caplog):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Emma walked to Highbury.\nShe was happy.\n\nThe end came.\nIt rained.\n")
    pipeline.write_records(pipeline.Options(
        input_file=str(corpus), output_file=str(tmp_path / "out.tfrecord"), vocab_file=UNCASED,
        do_lower_case=False, max_seq_length=32, max_predictions_per_seq=4, dupe_factor=1,
        tokenizer="faithful"))
    assert any(message("uncased-vocab-keeps-case") in r.getMessage() for r in caplog.records
               if r.levelname == "WARNING")


def test_vocab_case_counts_each_word_piece_by_its_characters():
    """The word-pieces with a character that has case, and those of them with an upper-case
    character, as a per-character reading counts them: characters whose case maps to more than
    one (ß), titlecase (ǅ), an upper-case symbol without a lower case (ϒ), CJK and digits."""
    def per_character(vocab):
        pieces = [t for t in vocab if not (t.startswith("[") and t.endswith("]"))]
        cased = [t for t in pieces if any(c.lower() != c.upper() for c in t)]
        return len(cased), sum(any(c.isupper() for c in t) for t in cased)

    rng = np.random.default_rng(0)
    alphabet = list("abcXYZßǅϒ猫19#é[]")
    vocab = {"[UNK]": 0, "[unused0]": 1, "ϒ": 2, "ϒa": 3}
    for length in rng.integers(1, 6, size=400):
        vocab.setdefault("".join(rng.choice(alphabet, size=length)), len(vocab))
    assert startup.vocab_case(vocab) == per_character(vocab)
    assert startup.vocab_case({"[UNK]": 0}) == (0, 0)
