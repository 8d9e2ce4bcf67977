"""The reserved entries at the top of a `vocab.txt`, in the original release's layout.

bert-base-uncased's `vocab.txt` starts `[PAD]` (id 0), `[unused0]`..`[unused98]` (ids 1-99),
`[UNK] [CLS] [SEP] [MASK]` (ids 100-103), `[unused99]`..`[unused993]` (ids 104-998); its real
tokens start at id 999. `reserved_tokens(994)` is exactly that block, so a learned vocab keeps
every id the original's code and checkpoints know. Fewer unused slots keep `[UNK]`..`[MASK]` at
100-103 as long as there are at least 99; with fewer they move up (`[UNK]` = num_unused + 1).
The `[unused*]` slots are there to be renamed later (new special tokens, no re-training of the
other embeddings). Extra reserved tokens (`--reserved_tokens`) follow the last unused slot.
"""
PAD_TOKEN = "[PAD]"
# Looked up by name by the original's scripts: FullTokenizer ([UNK]), the classifier and SQuAD
# ([CLS], [SEP]), pre-training data ([MASK]).
SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Unused slots before [UNK] in the original, which puts [UNK] at id 100.
UNUSED_BEFORE_SPECIALS = 99
# The original's number of unused slots (ids 1-99 and 104-998).
ORIGINAL_NUM_UNUSED = 994


def unused_token(index):
    return "[unused%d]" % index


def reserved_tokens(num_unused=ORIGINAL_NUM_UNUSED, extra=()):
    """The reserved block: `[PAD]`, unused slots, `[UNK] [CLS] [SEP] [MASK]`, unused, `extra`.

    Args:
      num_unused: int >= 0, number of `[unusedN]` slots.
      extra: further tokens, in order (checked with `check_extra_tokens`).
    Returns:
      list of str, the first `1 + num_unused + 4 + len(extra)` lines of the vocab.
    """
    before = min(num_unused, UNUSED_BEFORE_SPECIALS)
    return ([PAD_TOKEN] + [unused_token(i) for i in range(before)] + list(SPECIAL_TOKENS)
            + [unused_token(i) for i in range(before, num_unused)] + list(extra))


def check_extra_tokens(extra, num_unused):
    """Problems with extra reserved tokens, as a list of messages (empty when all are fine).

    A token must be one line of the vocab file as `load_vocab` reads it back (non-empty, no
    whitespace) and appear once, not clashing with `[PAD]`, `[UNK]`..`[MASK]` or the unused slots.
    """
    problems = []
    builtin = set(reserved_tokens(num_unused))
    seen = set()
    for token in extra:
        if not token or token.split() != [token]:
            problems.append("%r is empty or contains whitespace" % token)
        elif token in builtin:
            problems.append("%r is already reserved" % token)
        elif token in seen:
            problems.append("%r is listed twice" % token)
        seen.add(token)
    return problems
