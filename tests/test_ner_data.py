"""bert_tasks.ner.conll, bert_tasks.ner.tags, bert_tasks.ner.features, bert_tasks.ner.predictions: the CoNLL reader, IOB schemes, windows
with document context, TFRecords and the predictions file."""
import random
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_runner import cli
from bert_tasks.ner import conll, conlleval, features, predictions, tags
from bert_tasks.ner.sets import NerSet
from bert_tasks.ner.task import NerTask
from bert_runner.inputs import decode_record
from bert_runner.tfrecords import write_records
from vocab import bundled_vocab_file
from vocab.tokenization import FullTokenizer
from refusals import message as refusal_message

CONLL_TEXT = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O
to TO B-VP O
boycott VB I-VP O
British JJ B-NP I-MISC
lamb NN I-NP O
. . O O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP I-LOC
1996-08-22 CD I-NP O
"""


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(bundled_vocab_file(), do_lower_case=True)


def _read(text, path="eng.train"):
    return conll.read_conll_lines(text.splitlines(True), path)


def test_reader_documents_sentences_and_iob2():
    documents = _read(CONLL_TEXT)
    assert [len(d.sentences) for d in documents] == [2, 1]
    assert documents[0].docstart_columns == ["-DOCSTART-", "-X-", "-X-", "O"]
    first = documents[0].sentences[0]
    assert first.words[:3] == ["EU", "rejects", "German"]
    assert first.tags[:3] == ["B-ORG", "O", "B-MISC"]  # IOB1 I- starts converted
    assert first.columns[0] == ["EU", "NNP", "B-NP", "I-ORG"]  # input kept as read
    assert first.line_number == 3
    assert documents[0].sentences[1].tags == ["B-PER", "I-PER"]
    assert documents[1].sentences[0].line_number == 18
    assert conll.sentences_of(documents)[2].words == ["BRUSSELS", "1996-08-22"]


def test_reader_without_docstart_and_bytes():
    documents = conll.read_conll_lines([b"a B-X\n", b"b I-X\n", b"\n", b"\n", b"c O\n"], "f")
    assert len(documents) == 1 and documents[0].docstart_columns is None
    assert [s.tags for s in documents[0].sentences] == [["B-X", "I-X"], ["O"]]


@pytest.mark.parametrize("text, message", [
    ("a NN O\nb O\n", "f.txt:2: 2 columns, but line 1 has 3"),
    ("a\n", "f.txt:1: 1 column"),
    ("a NN O\nb NN I_PER\n", "f.txt:2: tag 'I_PER' is not O, B-<type> or I-<type>"),
    ("a NN B-\n", "f.txt:1: tag 'B-'"),
    ("-DOCSTART- -X- O\n\n", "f.txt: no sentences"),
])
def test_reader_errors_name_file_and_line(text, message):
    with pytest.raises(conll.ConllFormatError, match=message):
        conll.read_conll_lines(text.splitlines(True), "f.txt")


def test_reader_file_errors(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok O\n\xff O\n")
    with pytest.raises(conll.ConllFormatError,
                       match="bad.txt:2: " + re.escape(refusal_message("input-not-utf8"))):
        conll.read_conll_file(str(path))
    with pytest.raises(conll.ConllFormatError, match="missing.txt: no such file"):
        conll.read_conll_file(str(tmp_path / "missing.txt"))
    with pytest.raises(conll.ConllFormatError, match="f.txt:2: 2 " + re.escape(
            refusal_message("conll-columns")) + " 1 has 3"):
        conll.read_conll_lines(["a NN O\n", "b O\n"], "f.txt")


def test_a_directory_where_a_conll_file_is_expected(tmp_path):
    """TensorFlow's reader raised FailedPreconditionError "<path>; Is a directory" from inside."""
    (tmp_path / "train.txt").mkdir()
    path = conll.split_file(str(tmp_path), "train")
    with pytest.raises(IsADirectoryError) as info:
        conll.read_conll_file(path)
    assert cli.refusal(info.value) == "%s: %s" % (tmp_path / "train.txt",
                                                  refusal_message("input-is-a-directory"))


def test_iob1_and_iob2_conversions_keep_conllevals_chunks():
    rng = random.Random(0)
    all_tags = ["O"] + ["%s-%s" % (p, t) for p in "BI" for t in ("PER", "LOC")]
    for _ in range(300):
        sentence = [rng.choice(all_tags) for _ in range(rng.randint(1, 10))]
        iob2 = tags.to_iob2(sentence)
        assert tags.to_iob2(iob2) == iob2
        assert all(t == "O" or t.startswith("B-") or p.split("-")[-1] == t[2:]
                   for p, t in zip(["O"] + iob2, iob2))
        for same_chunks in (iob2, tags.to_iob1(iob2)):
            counts = conlleval.count_sequences([sentence], [same_chunks])
            assert counts.correct_chunks == counts.found_correct == counts.found_guessed


def test_label_list_and_types():
    assert tags.entity_types_of([["B-PER", "O"], ["I-LOC"]]) == ["LOC", "PER"]
    assert tags.label_list(["LOC", "PER"]) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    assert tags.parse_tag("B-ORG") == ("B", "ORG") and tags.parse_tag("E-ORG") is None


def test_resolve_label_list():
    train = [["B-PER", "O"], ["B-LOC"]]
    assert tags.resolve_label_list(None, train) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    assert tags.resolve_label_list(["PER", "LOC"], train)[1] == "B-PER"  # the flag's order
    recorded = tags.label_list(["LOC", "PER"])
    assert tags.resolve_label_list(None, None, recorded, "out/label_list.txt") == recorded
    with pytest.raises(ValueError, match="differs from the one of the run in out/label_list.txt"):
        tags.resolve_label_list(["PER"], None, recorded, "out/label_list.txt")
    with pytest.raises(ValueError, match="no label list: give --entity_types"):
        tags.resolve_label_list(None, None)
    with pytest.raises(ValueError, match="has no entity"):
        tags.resolve_label_list(None, [["O"]])


def test_to_iob1_and_scheme_of():
    iob2 = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-PER"]
    iob1 = tags.to_iob1(iob2)
    assert iob1 == ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-PER"]
    assert tags.to_iob2(iob1) == iob2
    assert tags.scheme_of([iob1]) == "IOB1" and tags.scheme_of([iob2, ["O"]]) == "IOB2"


def _scored(window):
    return [window.tokens[p] for p in window.label_positions]


def test_windows_document_context(tokenizer):
    documents = _read(CONLL_TEXT)
    windows = list(features.make_windows(documents, tokenizer, max_seq_length=12))
    assert [(w.sentence_index, w.word_start) for w in windows] == [(0, 0), (1, 0), (2, 0)]
    # Sentence 0 (9 pieces) fills the window with 1 piece of the next sentence.
    assert windows[0].tokens == ["[CLS]", "eu", "rejects", "german", "call", "to", "boycott",
                                 "british", "lamb", ".", "peter", "[SEP]"]
    assert _scored(windows[0]) == ["eu", "rejects", "german", "call", "to", "boycott", "british",
                                   "lamb", "."]
    # Sentence 1 has no right context: the left side takes all the room.
    assert windows[1].tokens[1:-1] == ["rejects", "german", "call", "to", "boycott", "british",
                                       "lamb", ".", "peter", "blackburn"]
    assert windows[1].label_positions == [9, 10]
    # Documents do not share context; only the first piece of "1996-08-22" is scored.
    assert windows[2].tokens == ["[CLS]", "brussels", "1996", "-", "08", "-", "22", "[SEP]"]
    assert windows[2].label_positions == [1, 2]
    alone = list(features.make_windows(documents, tokenizer, 12, document_context=False))
    assert alone[1].tokens == ["[CLS]", "peter", "blackburn", "[SEP]"]


def test_windows_split_long_sentences_and_balance_context(tokenizer):
    documents = _read(CONLL_TEXT)
    windows = list(features.make_windows(documents, tokenizer, max_seq_length=8))
    assert [(w.sentence_index, w.word_start) for w in windows] == [(0, 0), (0, 6), (1, 0), (2, 0)]
    # Words 6..8 (3 pieces) with 3 pieces of room: 1 left, then the right side's 2.
    assert windows[1].tokens == ["[CLS]", "boycott", "british", "lamb", ".", "peter", "blackburn",
                                 "[SEP]"]
    assert _scored(windows[1]) == ["british", "lamb", "."]
    assert all(len(w.tokens) <= 8 for w in windows)


def test_every_word_scored_once_on_random_documents(tokenizer):
    rng = random.Random(1)
    vocabulary = ["the", "Bennet", "unaffected", "Longbourn", "!", "1996-08-22", "\u200b", "x" * 30]
    lines = []
    for _ in range(6):
        lines += ["-DOCSTART- O", ""]
        for _ in range(rng.randint(1, 5)):
            lines += ["%s O" % rng.choice(vocabulary) for _ in range(rng.randint(1, 30))] + [""]
    documents = _read("\n".join(lines) + "\n")
    sentences = conll.sentences_of(documents)
    for max_seq_length in (3, 7, 16, 64):
        document_pieces = []  # per sentence: the pieces of its document
        for document in documents:
            pieces = sum(len(tokenizer.tokenize(word)[:max_seq_length - 2] or ["[UNK]"])
                         for s in document.sentences for word in s.words)
            document_pieces += [pieces] * len(document.sentences)
        windows = list(features.make_windows(documents, tokenizer, max_seq_length))
        seen = [(w.sentence_index, w.word_start + k)
                for w in windows for k in range(len(w.label_positions))]
        assert seen == [(s, i) for s, sentence in enumerate(sentences)
                        for i in range(len(sentence.words))]
        for w in windows:
            assert len(w.tokens) <= max_seq_length
            assert w.tokens[0] == "[CLS]" and w.tokens[-1] == "[SEP]"
            words = sentences[w.sentence_index].words
            for k, position in enumerate(w.label_positions):
                expected = (tokenizer.tokenize(words[w.word_start + k]) or ["[UNK]"])[0]
                assert w.tokens[position] == expected
            # Full windows unless they hold the whole document.
            if len(w.tokens) < max_seq_length:
                assert len(w.tokens) - 2 == document_pieces[w.sentence_index]


def test_check_labels_names_line():
    documents = _read(CONLL_TEXT)
    with pytest.raises(ValueError, match=r"eng.train:13: tag 'I-PER' is not in the label list"):
        features.check_labels(conll.sentences_of(documents),
                              tags.label_list(["LOC", "MISC", "ORG"]), "eng.train")


def test_tfrecords_and_predictions_file(tmp_path, tokenizer):
    documents = _read(CONLL_TEXT)
    sentences = conll.sentences_of(documents)
    label_list = tags.label_list(tags.entity_types_of(s.tags for s in sentences))
    windows = list(features.make_windows(documents, tokenizer, 8))
    path = str(tmp_path / "eval.tf_record")
    records = features.tf_examples(windows, sentences, label_list, tokenizer, 8)
    assert write_records(path, records, features.padding_example(8), multiple=3) == (4, 2)
    spec = features.name_to_features(8)
    records = [decode_record(r, spec) for r in tf.data.TFRecordDataset(path)]
    second = records[1]
    assert second["window_index"].numpy() == 1
    weights = second["label_weights"].numpy()
    np.testing.assert_array_equal(weights, [0, 0, 1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(second["label_ids"].numpy()[2:5],
                                  [label_list.index("B-MISC"), 0, 0])
    np.testing.assert_array_equal(second["segment_ids"].numpy(), np.zeros(8))
    np.testing.assert_array_equal(records[3]["input_mask"].numpy(), [1] * 8)
    for padding in records[4:]:  # TPU padding: nothing scored, no window
        assert padding["window_index"].numpy() == -1 and not padding["label_weights"].numpy().any()
    records = records[:4]

    # Predicting the gold labels everywhere reproduces the gold tags and scores 100.
    predicted_ids = [r["label_ids"].numpy() for r in records]
    predicted = predictions.sentence_tags(windows, predicted_ids, sentences, label_list)
    assert predicted == [s.tags for s in sentences]
    out = tmp_path / "predictions.txt"
    counts = predictions.write_predictions(str(out), documents, predicted)
    assert conlleval.metrics(counts)["overall"]["f1"] == 100.0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[:3] == ["-DOCSTART- -X- -X- O O", "", "EU NNP B-NP I-ORG B-ORG"]
    assert conlleval.count_lines(lines) == counts
    assert counts.tokens == 15  # 13 words and the two -DOCSTART- lines, as conlleval.pl counts


def _label_ids(record, window):
    label_ids = record.features.feature["label_ids"].int64_list.value
    return [label_ids[p] for p in window.label_positions]


@pytest.mark.parametrize("scheme", ["IOB1", "IOB2"])
def test_names_are_learned_in_iob1_and_predictions_written_in_the_files_scheme(
        tmp_path, tokenizer, scheme):
    # Learned as IOB2, "Blackburn" after "Peter" is I-PER but "Blackburn" alone B-PER: a per-word
    # tagger that sees the lone surname more often tags B-PER after "Peter" and splits the name
    # in two wrong chunks. As IOB1 both are I-PER; B- stays only between two touching chunks.
    text = ("-DOCSTART- O\n\nPeter I-PER\nBlackburn I-PER\nmet O\nBlackburn I-PER\n"
            "Smith B-PER\nin O\nRome I-LOC\n")
    path = tmp_path / "train.txt"
    path.write_text(text if scheme == "IOB1" else text.replace(" I-", " B-").replace(
        "Blackburn B-PER\nmet", "Blackburn I-PER\nmet"), encoding="utf-8")
    data = NerSet.read(str(path))
    assert data.scheme == scheme
    learned = {}
    for label_scheme in tags.SCHEMES:
        task = NerTask(str(tmp_path), 16, ["LOC", "PER"], label_scheme=label_scheme)
        converted = task.records(data, "train", tokenizer, None)
        record = next(iter(converted.records))
        learned[label_scheme] = [task.label_list[i]
                                 for i in _label_ids(record, converted.index.windows[0])]
        assert data.windows is None  # the set read is left as it is
    assert learned == {"IOB1": ["I-PER", "I-PER", "O", "I-PER", "B-PER", "O", "I-LOC"],
                       "IOB2": ["B-PER", "I-PER", "O", "B-PER", "B-PER", "O", "B-LOC"]}
    assert NerTask(str(tmp_path), 16).label_scheme == "IOB1"

    def last_column(file):
        return [line.split()[-1] for line in file.read_text(encoding="utf-8").splitlines()[2:]
                if line]

    # Whatever the model predicts, the file gets its own scheme, with the same chunks.
    for predicted in learned.values():
        out = tmp_path / "predictions.txt"
        counts = predictions.write_predictions(str(out), data.documents, [predicted], data.scheme)
        assert last_column(out) == last_column(path)
        assert conlleval.metrics(counts)["overall"]["f1"] == 100.0
    # A stray B- inside a name splits it in either scheme: two chunks, neither correct.
    split = ["I-PER", "B-PER", "O", "I-PER", "B-PER", "O", "I-LOC"]
    for written_scheme in tags.SCHEMES:
        counts = conlleval.count_sequences([data.sentences[0].tags],
                                           [tags.in_scheme(split, written_scheme)])
        assert (counts.found_guessed, counts.correct_chunks) == (5, 3)


def test_gazetteer_labels_text():
    from bert_tasks.ner.gazetteer import Gazetteer, tokenize

    gazetteer = Gazetteer({"PER": ["Elizabeth", "Bennet", "Frank"],
                           "LOC": ["Box Hill", "Bath", "Hill Street"]})
    words = tokenize("Elizabeth Bennet's walk to Box Hill, not Bath; frank Mr. Frank.")
    assert words == ["Elizabeth", "Bennet", "'s", "walk", "to", "Box", "Hill", ",", "not", "Bath",
                     ";", "frank", "Mr.", "Frank", "."]
    assert gazetteer.tag(words) == ["B-PER", "I-PER", "O", "O", "O", "B-LOC", "I-LOC", "O", "O",
                                    "B-LOC", "O", "O", "O", "B-PER", "O"]
    # The longest name wins; adjacent names of one type are one entity.
    assert gazetteer.tag(["Hill", "Street", "Bath"]) == ["B-LOC", "I-LOC", "I-LOC"]
    assert gazetteer.tag(["Bath", "Frank"]) == ["B-LOC", "B-PER"]
    with pytest.raises(ValueError, match="'Bath' is listed as LOC and as PER"):
        Gazetteer({"LOC": ["Bath"], "PER": ["Bath"]})


def test_a_byte_order_mark_is_not_a_word(tmp_path):
    """A file saved with a UTF-8 BOM reads as the same documents (the BOM would otherwise turn
    `-DOCSTART-` into a word, and be copied into the predictions file)."""
    path = tmp_path / "eng.testa"
    path.write_bytes(b"\xef\xbb\xbf" + CONLL_TEXT.encode("utf-8"))
    with_bom, without = conll.read_conll_file(str(path)), _read(CONLL_TEXT)
    assert [d.docstart_columns for d in with_bom] == [d.docstart_columns for d in without]
    assert [s.columns for s in conll.sentences_of(with_bom)] == [
        s.columns for s in conll.sentences_of(without)]
