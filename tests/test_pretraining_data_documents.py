"""Reading lines into documents: `TokenizedLines`, `build_documents` against the original loop."""
import pickle

import pytest

import vocab
from bert_tasks.pretraining.data.documents import LineTokenizer, build_documents
from vocab import tokenization

VOCAB_FILE = vocab.bundled_vocab_file()

# Blank and whitespace-only lines (document boundaries) at the start, in runs and at the end;
# lines of control characters only (no word-pieces: dropped without ending the document); a
# lone surrogate (the fast tokenizer's fallback). "\x1f" is whitespace to `str.strip`, so its line
# is a boundary, as in the original.
LINES = ["", "  ", "First document, first line.", "\x00\x7f", "Second line of it.", "", "", "\t",
         "A one-line document.", "", "Control \x01 chars inside, é and 中文.", "\x1f",
         "bad \udc80 surrogate", "Last line, no blank after it.", " ", ""]


def original_documents(lines, tokenizer):
    """The original create_training_instances' reading loop, on ids."""
    documents = [[]]
    for line in lines:
        line = line.strip()
        if not line:
            documents.append([])
        tokens = tokenizer.tokenize(line)
        if tokens:
            documents[-1].append(tokenizer.convert_tokens_to_ids(tokens))
    return documents


@pytest.fixture(scope="module", params=["faithful", "fast"])
def line_tokenizer(request):
    return LineTokenizer(VOCAB_FILE, True, request.param)


@pytest.mark.parametrize("block_size", [1, 3, 5, len(LINES)])
def test_build_documents_is_the_original_loop_for_any_blocks(line_tokenizer, block_size):
    blocks = [LINES[i:i + block_size] for i in range(0, len(LINES), block_size)]
    documents, num_lines = build_documents(blocks, line_tokenizer)
    want = original_documents(LINES, tokenization.FullTokenizer(VOCAB_FILE, True))
    assert documents == want
    assert num_lines == len(LINES)
    assert [len(d) for d in documents] == [0, 0, 2, 0, 0, 1, 1, 2, 0, 0]


def test_tokenized_lines_survive_pickling(line_tokenizer):
    """What the parent sends to a worker process: a few arrays that rebuild the same documents."""
    tokenized = line_tokenizer.tokenize_lines(LINES)
    sent = pickle.loads(pickle.dumps(tokenized))
    documents, received = [[]], [[]]
    tokenized.append_to(documents)
    sent.append_to(received)
    assert received == documents and sent.num_lines == len(LINES)
    assert all(type(i) is int for d in received for s in d for i in s)
