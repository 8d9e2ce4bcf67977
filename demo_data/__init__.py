"""Tasks made from the bundled Jane Austen novels (`data/austen/`) for the demo and the tests:
"which novel?" (SST-2 layout), "who" questions (SQuAD v1.1), "which sentence comes next?" (SWAG)
and the characters' names and places (CoNLL-2003). Each builder returns file texts; writing them
is the caller's."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUSTEN = os.path.join(ROOT, "data", "austen")
# The tasks' two novels, in label order for "which novel?" (SST-2 labels are "0" and "1").
TASK_NOVELS = ("prideprejudice", "emma")
TITLES = {"prideprejudice": "Pride and Prejudice", "emma": "Emma"}
# Every bundled novel (the demo's pre-training corpus), in file-name order.
NOVELS = ("emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice",
          "sensesensibility")


def read_novel(novel):
    with open(os.path.join(AUSTEN, novel + ".txt"), encoding="utf-8") as f:
        return f.read()


def first_documents(corpus, count):
    """The first `count` documents (chapters) of a corpus text; all of them for None."""
    if count is None:
        return corpus
    return "".join(doc + "\n\n" for doc in corpus.split("\n\n")[:count])

