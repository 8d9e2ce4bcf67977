"""NER tag schemes: IOB1 and IOB2 tags, the conversions between them and the label list.

CoNLL-2003 as distributed is IOB1: a chunk starts with `I-` and `B-` only separates two adjacent
chunks of one type. Many copies are IOB2: every chunk starts with `B-`. Both read the same under
conlleval (`bert_tasks.ner.conlleval`), and the conversions keep its chunks:

    to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]) == ["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]
    to_iob1(["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]) == ["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]
    label_list(["LOC", "PER"]) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]

run_ner.py's model learns IOB1 whatever the file's scheme (`in_scheme`), and its predictions are
written back in the file's. Why IOB1: a tagger that picks each word's label on its own, without a
CRF, decides under IOB2 at every word of a name whether it starts a chunk; where a name's words
also occur as names of their own ("Elizabeth Bennet", "Bennet") it predicts `B-` on the second
word and splits the name into two wrong chunks. Under IOB1 a word after a chunk of its type
continues it unless tagged `B-`, which the training data uses only where two chunks touch.
"""

from bert_runner.flag_ranges import Rule

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


def to_iob1(tags):
    """The IOB1 form of one sentence's tags (the inverse of `to_iob2`, same conlleval chunks): a
    `B-X` stays only where the previous tag is of type X, i.e. between two adjacent chunks."""
    out = []
    prev_type = ""
    for tag in tags:
        prefix, chunk_type = parse_tag(tag)
        if prefix == "B" and chunk_type != prev_type:
            tag = "I-" + chunk_type
        out.append(tag)
        prev_type = chunk_type
    return out


SCHEMES = ("IOB1", "IOB2")


def in_scheme(tags, scheme):
    """`tags` (one sentence's, IOB1 or IOB2, or a tagger's output: any valid tags) in `scheme`,
    "IOB1" or "IOB2": the same conlleval chunks."""
    return to_iob1(tags) if scheme == "IOB1" else to_iob2(tags)


def scheme_of(tag_lists):
    """"IOB1" if some chunk of the (valid) tag lists starts with I-, else "IOB2"."""
    return "IOB1" if any(to_iob2(tags) != list(tags) for tags in tag_lists) else "IOB2"


def label_list(entity_types):
    """The model's labels: O (id 0), then B-T, I-T for each type T in the given order."""
    labels = [OUTSIDE]
    for chunk_type in entity_types:
        labels += ["B-" + chunk_type, "I-" + chunk_type]
    return labels


def _distinct_types(types):
    return len(set(types)) == len(types) and all(
        t and not any(c.isspace() for c in t) and t != OUTSIDE and parse_tag(t) is None
        and parse_tag("B-" + t) is not None for t in types)


def entity_types_rule():
    """--entity_types' range: each a type as a tag names it after B-/I- (PER, not B-PER or O),
    none empty or twice, so that every label of the model is a tag a sentence can have."""
    return Rule("must be distinct entity types such as PER,ORG: none empty, none a tag (B-PER, "
                "O), no spaces", _distinct_types)


def entity_types_of(tag_lists):
    """Sorted entity types that occur in an iterable of tag lists (valid tags)."""
    types = set()
    for tags in tag_lists:
        types.update(parse_tag(tag)[1] for tag in tags)
    types.discard("")
    return sorted(types)


def resolve_label_list(entity_types, train_tag_lists, recorded=None, recorded_source=None):
    """The label list: of the given entity types, else of the training tags, else `recorded`.

    Args:
      entity_types: list of str (the `--entity_types` flag) or None/empty.
      train_tag_lists: iterable of the training file's tag lists, or None without one.
      recorded: the label list a previous run in the output directory recorded, or None.
      recorded_source: where `recorded` comes from, for messages.
    Raises:
      ValueError: the list differs from `recorded` (the model was trained with other labels), or
        there is nothing to take it from.
    """
    labels = None
    if entity_types:
        labels = label_list(entity_types)
    elif train_tag_lists is not None:
        types = entity_types_of(train_tag_lists)
        if not types:
            raise ValueError("the training file has no entity (every tag is O); give "
                             "--entity_types")
        labels = label_list(types)
    if labels is not None and recorded is not None and labels != recorded:
        raise ValueError("the label list %s differs from the one of the run in %s: %s"
                         % (", ".join(labels), recorded_source, ", ".join(recorded)))
    labels = labels or recorded
    if labels is None:
        raise ValueError("no label list: give --entity_types, or a data_dir with a training file")
    return labels
