"""NER tag schemes: IOB1 and IOB2 tags, the conversion to IOB2 and the label list.

CoNLL-2003 as distributed is IOB1: a chunk starts with `I-` and `B-` only separates two adjacent
chunks of one type. Many copies are IOB2: every chunk starts with `B-`. Both read the same under
conlleval (`ner.conlleval`); the model is trained on IOB2, where the tag says whether a word
starts a chunk:

    to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]) == ["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]
    label_list(["LOC", "PER"]) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
"""

OUTSIDE = "O"


def parse_tag(tag):
    """("B" | "I", type) of a B-/I- tag, ("O", "") of O, None of anything else."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefix, hyphen, chunk_type = tag.partition("-")
    if hyphen and prefix in ("B", "I") and chunk_type:
        return prefix, chunk_type
    return None


def to_iob2(tags):
    """The IOB2 form of one sentence's valid IOB1 or IOB2 tags (IOB2 tags come back unchanged).

    An `I-X` that starts a chunk under conlleval's rules (at the sentence start, after O or after a
    tag of another type) becomes `B-X`, so conlleval finds the same chunks in both forms.
    """
    out = []
    prev_type = ""
    for tag in tags:
        prefix, chunk_type = parse_tag(tag)
        if prefix == "I" and chunk_type != prev_type:
            tag = "B-" + chunk_type
        out.append(tag)
        prev_type = chunk_type
    return out


def label_list(entity_types):
    """The model's labels: O (id 0), then B-T, I-T for each type T in the given order."""
    labels = [OUTSIDE]
    for chunk_type in entity_types:
        labels += ["B-" + chunk_type, "I-" + chunk_type]
    return labels


def entity_types_of(tag_lists):
    """Sorted entity types that occur in an iterable of tag lists (valid tags)."""
    types = set()
    for tags in tag_lists:
        types.update(parse_tag(tag)[1] for tag in tags)
    types.discard("")
    return sorted(types)
