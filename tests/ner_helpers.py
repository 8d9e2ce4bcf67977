"""Synthetic CoNLL-2003 data in the tiny fixture vocabulary, learnable in a few steps.

Entities: PER is an animal ("dog", or "dogs" = dog ##s, two sub-tokens), optionally followed by
"sun" or "moon" (a two-word entity); LOC is "city", "hill" or "river", optionally followed by
"road" or "house". Those words occur nowhere else, so a word's tag follows from the word; all
other words are filler tagged O. The files are IOB1 as the original CoNLL-2003 (chunks start with
I-; B- only between adjacent chunks of one type) with -DOCSTART- documents.
"""
import random

from conftest import FIXTURES

TINY = FIXTURES / "modeling" / "tiny"

ANIMALS = "dog cat bird fish dogs cats birds".split()
PLACES = "city hill river".split()
FILLER = ("the a of to and in is was it for on with as at by he she they we you this that be "
          "are from or had have not but tree car star rain snow wind red blue green good bad "
          "fast slow happy sad run walk jump swim read write sing play eat drink sleep see").split()


def _entity(rng):
    if rng.random() < 0.5:
        return [rng.choice(ANIMALS)] + ([rng.choice(["sun", "moon"])] if rng.random() < 0.4
                                        else []), "PER"
    return [rng.choice(PLACES)] + ([rng.choice(["road", "house"])] if rng.random() < 0.4
                                   else []), "LOC"


def sentence(rng, length):
    """(words, IOB1 tags) of one sentence of about `length` words."""
    words, tags = [], []
    prev_type = None
    while len(words) < length:
        # Adjacent entities of one type (IOB1's B-) are rare, as in CoNLL-2003.
        if rng.random() < (0.3 if prev_type is None else 0.05):
            entity, entity_type = _entity(rng)
            first = "B" if prev_type == entity_type else "I"
            tags += [first + "-" + entity_type] + ["I-" + entity_type] * (len(entity) - 1)
            words += entity
            prev_type = entity_type
        else:
            words.append(rng.choice(FILLER))
            tags.append("O")
            prev_type = None
    return words, tags


def conll_text(num_documents, seed, sentences_per_document=4, max_length=10):
    """A CoNLL-2003 file's text (word POS chunk NER columns)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(num_documents):
        lines += ["-DOCSTART- -X- -X- O", ""]
        for _ in range(sentences_per_document):
            words, tags = sentence(rng, rng.randint(2, max_length))
            lines += ["%s NN I-NP %s" % (w, t) for w, t in zip(words, tags)] + [""]
    return "\n".join(lines) + "\n"


def write_conll_dir(directory, train_documents=30, dev_documents=8, test_documents=8):
    """Writes train.txt, dev.txt, test.txt into `directory`; returns it as str."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, count, seed in (("train.txt", train_documents, 1), ("dev.txt", dev_documents, 2),
                              ("test.txt", test_documents, 3)):
        (directory / name).write_text(conll_text(count, seed), encoding="utf-8")
    return str(directory)
