"""bert_tasks.pretraining.data.corpus: book text -> one sentence per line, blank line between chapters."""
import os

from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus, split_sentences

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
