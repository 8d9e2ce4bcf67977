"""bert_tasks.pretraining.data.corpus: book text -> one sentence per line, blank line between chapters."""
import os
import subprocess
import sys

import pytest

from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus, split_sentences
from refusals import assert_refused

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BOOK = """The Project Gutenberg eBook of A Test\r
\r
*** START OF THE PROJECT GUTENBERG EBOOK A TEST ***\r
\r
A TEST\r
\r
CHAPTER I\r
\r
Mr. Smith arrived at St. Mary's at noon. "Is it late?" she asked.\r
It was! Nobody
answered (as usual.) Then it rained.\r
\r
Chapter 2. The Return\r
\r
A single sentence without a final stop\r
\r
*** END OF THE PROJECT GUTENBERG EBOOK A TEST ***\r
License text that must not appear.\r
"""


def test_gutenberg_to_corpus():
    assert gutenberg_to_corpus(BOOK) == (
        "A TEST\n\n"
        "Mr. Smith arrived at St. Mary's at noon.\n"
        "\"Is it late?\" she asked.\n"
        "It was!\n"
        "Nobody answered (as usual.)\n"
        "Then it rained.\n\n"
        "A single sentence without a final stop\n\n")


def test_split_sentences_keeps_abbreviations_and_lowercase_continuations():
    assert split_sentences("Dr. Who met Mrs. Jones, i.e. a friend. And so on... no end? Yes.") == [
        "Dr. Who met Mrs. Jones, i.e. a friend.", "And so on... no end?", "Yes."]
    assert split_sentences("  \n ") == []


def test_austen_novel_gives_one_document_per_chapter():
    with open(os.path.join(ROOT, "data", "austen", "persuasion.txt"), encoding="utf-8") as f:
        corpus = gutenberg_to_corpus(f.read())
    documents = corpus.rstrip("\n").split("\n\n")
    assert len(documents) == 24 + 1  # 24 chapters and the title page
    assert all(line.strip() == line and line for doc in documents for line in doc.split("\n"))


def _corpus(*paths):
    return subprocess.run([sys.executable, "-m", "bert_tasks.pretraining.data.corpus", *paths],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_the_command_writes_every_files_corpus(tmp_path):
    (tmp_path / "a.txt").write_text(BOOK, encoding="utf-8", newline="")
    (tmp_path / "b.txt").write_text("Une phrase. Deux phrases.\n", encoding="utf-8")
    process = _corpus(str(tmp_path / "a.txt"), str(tmp_path / "b.txt"))
    assert process.returncode == 0 and process.stderr == ""
    assert process.stdout == gutenberg_to_corpus(BOOK) + "Une phrase.\nDeux phrases.\n\n"


@pytest.mark.parametrize("bad, case, named", [
    ("missing.txt", "corpus-input-unreadable", "missing.txt: No such file or directory"),
    ("folder", "corpus-input-unreadable", "folder: Is a directory"),
    ("latin1.txt", "corpus-input-not-utf8", "latin1.txt line 3"),
])
def test_a_bad_file_is_refused_before_any_text_is_written(tmp_path, bad, case, named):
    """A missing file was a FileNotFoundError traceback; bytes that are not UTF-8, a
    UnicodeDecodeError traceback after the earlier files' text was already on stdout."""
    (tmp_path / "a.txt").write_text(BOOK, encoding="utf-8")
    (tmp_path / "folder").mkdir()
    (tmp_path / "latin1.txt").write_bytes("Fine.\n\nCaf\u00e9 au lait.\n".encode("latin-1"))
    process = _corpus(str(tmp_path / "a.txt"), str(tmp_path / bad), str(tmp_path / "a.txt"))
    assert_refused(process, case)
    assert named in process.stderr and len(process.stderr.splitlines()) == 1
    assert process.stdout == ""
