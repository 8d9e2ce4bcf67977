"""Plain prose -> the create_pretraining_data input format (one sentence per line, blank line between
documents), for books such as the bundled Project Gutenberg novels in `data/austen/`.

* A Project Gutenberg header (up to `*** START OF ...`) and footer (from `*** END OF ...`) are
  dropped when present.
* Paragraphs are separated by blank lines; their lines are joined with spaces.
* A heading paragraph (`CHAPTER IV`, `Chapter 12`, `VOLUME II`, `BOOK 1`, with an optional title
  after a period) starts a new document and is itself dropped, so each chapter is one document
  (the text before the first heading, such as a title page, is a document too).
* Sentences are split after `.`, `!` or `?` (and any closing quotes or brackets) followed by
  whitespace and an uppercase letter, digit or opening quote, except after common abbreviations
  (`Mr.`, `Mrs.`, `Dr.`, `St.`, ...). A heuristic, good enough for next sentence prediction.

    python -m bert_tasks.pretraining.data.corpus data/austen/*.txt > austen_corpus.txt

Every file is checked (it exists, can be read, is UTF-8) before the first line is written: the
output is usually a shell redirect, which a refusal halfway could not take back. A refusal is
one line on stderr naming the file (and line), with exit code 2.
"""
import re
import sys

PROG = "python -m bert_tasks.pretraining.data.corpus"

_GUTENBERG_START = re.compile(r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)
_GUTENBERG_END = re.compile(r"^\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)
_HEADING = re.compile(r"^(CHAPTER|VOLUME|BOOK)\s+([IVXLC]+|\d+)\b\.?.{0,80}$", re.I)
_ABBREVIATIONS = ("Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "Messrs", "Mme", "Prof", "Capt", "Col",
                  "Gen", "Lt", "Rev", "No", "vs", "etc", "i.e", "e.g")
# After [.!?] but not after "Mr." etc.: optional closing quotes/brackets (kept), the whitespace
# (replaced by a line break), then what a sentence starts with.
_SENTENCE_END = re.compile(
    r"(?<=[.!?])" + "".join(r"(?<!\b%s\.)" % re.escape(a) for a in _ABBREVIATIONS)
    + r"([\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")


def strip_gutenberg_boilerplate(text):
    """The text between the Project Gutenberg START and END markers, or all of it if absent."""
    start = _GUTENBERG_START.search(text)
    if start:
        text = text[start.end():]
    end = _GUTENBERG_END.search(text)
    if end:
        text = text[:end.start()]
    return text


def split_sentences(paragraph):
    """One paragraph (str, any whitespace) -> list of sentences (str, single-spaced)."""
    paragraph = " ".join(paragraph.split())
    if not paragraph:
        return []
    return [s for s in _SENTENCE_END.sub(lambda m: m.group(1) + "\n", paragraph).split("\n") if s]


def gutenberg_to_corpus(text):
    """Book text -> corpus text: one sentence per line, a blank line after each document.

    Args:
      text: str, paragraphs separated by blank lines (`\\r\\n` line ends are fine).
    Returns:
      str ending with "\\n\\n" after the last document ("" if there is no sentence).
    """
    documents, current = [], []
    for paragraph in re.split(r"\n\s*\n", strip_gutenberg_boilerplate(text).replace("\r", "")):
        if _HEADING.match(paragraph.strip()):
            documents.append(current)
            current = []
        else:
            current.extend(split_sentences(paragraph))
    documents.append(current)
    return "".join("\n".join(doc) + "\n\n" for doc in documents if doc)


def check_input(path):
    """Raises ValueError naming `path` (and the line) if it cannot be read or is not UTF-8."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ValueError("cannot read input file %s: %s" % (path, e.strerror or e)) from None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_start = data.rfind(b"\n", 0, e.start) + 1
        raise ValueError("input file %s line %d is not valid UTF-8 (byte 0x%02x at column %d)"
                         % (path, data.count(b"\n", 0, e.start) + 1, data[e.start],
                            e.start - line_start + 1)) from None


def main(paths):
    """Writes the corpus of `paths` to stdout; returns the exit code (2: refused, nothing
    written)."""
    try:
        for path in paths:
            check_input(path)
    except ValueError as e:
        sys.stderr.write("%s: error: %s; nothing was written\n" % (PROG, e))
        return 2
    for path in paths:
        with open(path, encoding="utf-8") as f:
            sys.stdout.write(gutenberg_to_corpus(f.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
