"""Every reader accepts a UTF-8 byte-order mark (what Windows editors and spreadsheets write) and
reads the file as without it: classifier TSV, pre-training text, vocab.txt here; SWAG CSV, CoNLL
and SQuAD JSON beside their readers' other tests (test_swag_data, test_ner_data, test_squad_data).
The BOM must not become part of a first field, word or token."""
import codecs

from bert_tasks.classifier.files import read_tsv_lines
from bert_tasks.pretraining.data.reading import iter_line_blocks
from vocab.tokenization import load_vocab


def _both(tmp_path, name, text):
    plain, marked = tmp_path / f"plain_{name}", tmp_path / f"bom_{name}"
    plain.write_bytes(text.encode("utf-8"))
    marked.write_bytes(codecs.BOM_UTF8 + text.encode("utf-8"))
    return str(plain), str(marked)


def test_classifier_tsv(tmp_path):
    # CoLA's layout: no header, so the first field of line 1 is data.
    plain, marked = _both(tmp_path, "train.tsv", "gj04\t1\t\tOur friends won't buy this.\r\n"
                                                "gj04\t0\t*\tThey drank the pub.\n")
    assert read_tsv_lines(marked) == read_tsv_lines(plain)
    assert read_tsv_lines(marked)[0][1][0] == "gj04"


def test_pretraining_text(tmp_path):
    plain, marked = _both(tmp_path, "corpus.txt", "First sentence.\r\nSecond one.\n\nNext doc.\n")
    assert list(iter_line_blocks([marked])) == list(iter_line_blocks([plain]))
    assert list(iter_line_blocks([marked]))[0][0] == "First sentence."
    # A file of fewer bytes than a BOM is read whole.
    tiny, _ = _both(tmp_path, "tiny.txt", "a")
    assert list(iter_line_blocks([tiny])) == [["a"]]


def test_vocab(tmp_path):
    plain, marked = _both(tmp_path, "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    assert load_vocab(marked) == load_vocab(plain)
    assert list(load_vocab(marked))[0] == "[PAD]"
