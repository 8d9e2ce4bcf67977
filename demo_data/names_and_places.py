"""The characters' names and places, labelled by a gazetteer, in CoNLL-2003 layout."""
from demo_data import TASK_NOVELS, read_novel
from demo_data.who_questions import NAMES
from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus

# The names-and-places task: the gazetteer that labels the novels (the SQuAD names and more).
NER_GAZETTEER = {
    "PER": NAMES + ("Mary Denny Forster Philips Fitzwilliam Hurst Goddard Taylor Dixon Campbell "
                    "Cole Isabella John Henry Robert").split(),
    "LOC": ["Longbourn", "Netherfield", "Meryton", "Pemberley", "Rosings", "Hunsford", "Lambton",
            "Derbyshire", "Hertfordshire", "Kent", "London", "Brighton", "Bath", "Scotland",
            "Gracechurch Street", "Newcastle", "Highbury", "Hartfield", "Randalls", "Donwell",
            "Donwell Abbey", "Enscombe", "Maple Grove", "Box Hill", "Richmond", "Weymouth",
            "Ireland", "Yorkshire", "Surrey", "Kingston", "Bristol", "Abbey-Mill Farm", "Windsor",
            "Cromer", "England", "Europe", "Oxford", "Cambridge", "Ramsgate", "Hyde Park"],
}


def names_and_places_conll(chapters, scheme="IOB2"):
    """The names-and-places task in CoNLL-2003 layout: {"train.txt": text, "dev.txt": text} and
    {"train.txt": sentences, "dev.txt": sentences}, each sentence (words, tags in `scheme`: IOB2,
    or IOB1 as CoNLL-2003 is distributed, the same chunks).

    Each chapter is a document (`-DOCSTART-`), each corpus line a sentence of CoNLL-style words
    (`bert_tasks.ner.gazetteer.tokenize`), tagged PER / LOC where the gazetteer lists them. `chapters` =
    (train, dev) chapters of each task novel: the first ones after the title page, then the next.
    """
    from bert_tasks.ner.gazetteer import Gazetteer, tokenize
    from bert_tasks.ner.tags import in_scheme

    gazetteer = Gazetteer(NER_GAZETTEER)
    splits = {"train.txt": [], "dev.txt": []}
    for novel in TASK_NOVELS:
        novel_chapters = gutenberg_to_corpus(read_novel(novel)).split("\n\n")[1:]
        start = 0
        for name, count in zip(splits, chapters):
            for chapter in novel_chapters[start:start + count]:
                splits[name].append([(words, in_scheme(gazetteer.tag(words), scheme)) for words in
                                     map(tokenize, chapter.split("\n")) if words])
            start += count
    texts = {}
    for name, documents in splits.items():
        lines = []
        for document in documents:
            lines += ["-DOCSTART- O", ""]
            for words, tags in document:
                lines += [f"{word} {tag}" for word, tag in zip(words, tags)] + [""]
        texts[name] = "\n".join(lines)
    return texts, {name: [sentence for document in documents for sentence in document]
                   for name, documents in splits.items()}


def capitalised_word_tags(words):
    """The capitalised-word baseline: runs of capitalised words (not the sentence's first word,
    not "I") are PER entities."""
    tags = []
    for i, word in enumerate(words):
        if i and word[:1].isupper() and word[1:].islower() and word != "I":
            tags.append("I-PER" if tags and tags[-1] != "O" else "B-PER")
        else:
            tags.append("O")
    return tags
