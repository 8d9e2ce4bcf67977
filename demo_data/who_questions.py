"""Bundled SQuAD data: "who" questions whose answer is a character's name."""
import json
import os
import re

from demo_data import AUSTEN, TASK_NOVELS, TITLES
from bert_tasks.pretraining.data.corpus import split_sentences, strip_gutenberg_boilerplate

NAMES = ("Elizabeth Jane Lydia Kitty Lizzy Darcy Bingley Wickham Collins Charlotte Bennet "
         "Gardiner Catherine Georgiana Lucas William Emma Harriet Knightley Weston Elton "
         "Woodhouse Churchill Frank Fairfax Bates Martin Smith Perry").split()
_NAME = "(?:%s)" % "|".join(NAMES)
# A name, with an optional title and surname ("Mr. Darcy", "Jane Fairfax"); possessives
# ("Darcy's") would make "who's", so they are not answers.
_PERSON = re.compile(r"\b(?:(?:Mr|Mrs)\. |(?:Miss|Lady|Sir|Colonel|Captain) )?%s(?: %s)?\b(?!'s)"
                     % (_NAME, _NAME))
_SQUAD_PARAGRAPH_WORDS = (20, 70)
_SQUAD_DEV_EVERY = 5            # every 5th paragraph with questions goes to dev
_SQUAD_PARAGRAPHS_PER_NOVEL = 160


def who_question(sentence, match):
    """The sentence as a question, the name replaced by "who": "Who walked to Meryton?"."""
    before, after = sentence[:match.start()], sentence[match.end():]
    question = before + ("Who" if not before.strip(" \"'") else "who") + after
    return question.rstrip(" .,;:!?\"'_") + "?"


def paragraph_questions(sentences):
    """Sentences (str) of one paragraph -> (context, [(question, answer, answer_start)]).

    A sentence of 6 words or more with exactly one name gives one question.
    """
    context, qas = "", []
    for sentence in sentences:
        offset = len(context) + (1 if context else 0)
        context = f"{context} {sentence}" if context else sentence
        matches = list(_PERSON.finditer(sentence))
        if len(matches) == 1 and len(sentence.split()) >= 6:
            match = matches[0]
            qas.append((who_question(sentence, match), match.group(0), offset + match.start()))
    return context, qas


def make_squad_data(austen_dir=AUSTEN):
    """SQuAD v1.1 datasets from the task novels: {"train": dataset, "dev": dataset}.

    Contexts are paragraphs of 20 to 70 words from the first chapters of each novel; each
    question is one of its sentences with a name replaced by "who", the answer that name.
    """
    splits = {"train": [], "dev": []}
    for novel in TASK_NOVELS:
        with open(os.path.join(austen_dir, novel + ".txt"), encoding="utf-8") as f:
            text = strip_gutenberg_boilerplate(f.read()).replace("\r", "")
        paragraphs = {"train": [], "dev": []}
        kept = 0
        for raw in re.split(r"\n\s*\n", text):
            sentences = split_sentences(raw)
            words = sum(len(s.split()) for s in sentences)
            if not _SQUAD_PARAGRAPH_WORDS[0] <= words <= _SQUAD_PARAGRAPH_WORDS[1]:
                continue
            context, qas = paragraph_questions(sentences)
            if not qas:
                continue
            split = "dev" if kept % _SQUAD_DEV_EVERY == _SQUAD_DEV_EVERY - 1 else "train"
            paragraphs[split].append({"context": context, "qas": [
                {"id": f"{novel}-{kept:03d}-{i}", "question": q,
                 "answers": [{"text": a, "answer_start": start}]}
                for i, (q, a, start) in enumerate(qas)]})
            kept += 1
            if kept == _SQUAD_PARAGRAPHS_PER_NOVEL:
                break
        for split, items in paragraphs.items():
            splits[split].append({"title": TITLES[novel], "paragraphs": items})
    return {split: {"version": "1.1", "data": data} for split, data in splits.items()}


def squad_json(dataset):
    """Compact, stable text of a SQuAD dataset (what the bundled files hold)."""
    return json.dumps(dataset, ensure_ascii=False, separators=(",", ":")) + "\n"


def first_questions(dataset, limit):
    """The dataset cut to its first `limit` questions (all of them for None)."""
    if limit is None:
        return dataset
    data = []
    for article in dataset["data"]:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            if limit <= 0:
                break
            qas = paragraph["qas"][:limit]
            limit -= len(qas)
            paragraphs.append({**paragraph, "qas": qas})
        data.append({**article, "paragraphs": paragraphs})
    return {**dataset, "data": data}


def count_questions(dataset):
    """The number of questions in a SQuAD dataset (dict)."""
    return sum(len(p["qas"]) for a in dataset["data"] for p in a["paragraphs"])

