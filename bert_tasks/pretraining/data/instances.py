"""Masked-LM / next-sentence training instances, random-number-exact with the original.

Given the same documents and a `random.Random(seed)` in the same state, `InstanceBuilder` makes the
same instances as the original `create_pretraining_data.py` (commit eedf571), because it makes the
same calls on the generator in the same order with the same arguments. That order is the contract
of this module; change it and the records change:

1. `create_training_instances`: `shuffle(documents)` (empty documents removed first).
2. For each of `dupe_factor` passes, for each document in shuffled order,
   `create_instances_from_document`:
   a. `random()` < short_seq_prob ? then `randint(2, max_seq_length - 3)` for the target length.
   b. For each chunk of sentences that reaches the target (or ends the document):
      * `randint(1, len(chunk) - 1)` for the A/B split, only if the chunk has >= 2 sentences;
      * `random()` < 0.5 for "random next", only if the chunk has >= 2 sentences (a one-sentence
        chunk is always random next: the original's `or` short-circuits);
      * if random next: up to 10 x `randint(0, len(documents) - 1)` until a different document,
        then `randint(0, len(that document) - 1)` for its first sentence;
      * `truncate_seq_pair`: one `random()` per removed token (front if < 0.5, else back);
      * `create_masked_lm_predictions`: `shuffle(candidates)`, then per masked word-piece
        `random()` < 0.8 -> [MASK]; else `random()` < 0.5 -> keep; else `randint(0, V - 1)`
        picks the replacement from the vocab in file order (any entry, [PAD] and [unusedN] too).
        Other shares (`MaskingRates`) change the two thresholds 0.8 and 0.5, nothing else.
3. `shuffle(instances)` over all instances of all passes.

Without next sentence prediction (`next_sentence=False`, the paper's "No NSP" ablation) step 2b
draws no "random next" and B is always the rest of the chunk: `randint(1, len(chunk) - 1)` for
the split of a chunk of >= 2 sentences, then truncation and masking as above. A one-sentence
chunk becomes a single segment `[CLS] A [SEP]` (truncated to max_seq_length - 2 tokens, one
`random()` per removed token, from the front if < 0.5).

`random` and `randint` are CPython's own. `shuffle` is `shuffle` below: CPython's Fisher-Yates
(`random.Random.shuffle`, from the end, `j = _randbelow(i + 1)` by `getrandbits(k)` with rejection)
inlined, which draws the same numbers about twice as fast; it is the hot spot (one shuffle of
~125 candidates per instance). Tests check it against `random.Random.shuffle` of the running
interpreter. The output is the original's on Python 3 (Python 2 differs: `spec/data.md` §0).

Tokens are handled as vocab ids, not strings: candidates for masking are positionally every token
but [CLS] and the two [SEP]s (text never tokenizes to those: '[' is punctuation), and whole-word
masking tests "starts with ##" through a precomputed id set. Sentences are lists of ids.
"""
import collections


class TrainingInstance(collections.namedtuple(
        "TrainingInstance",
        ["input_ids", "num_a_tokens", "masked_lm_positions", "masked_lm_ids", "is_random_next"])):
    """One sentence pair, after masking, unpadded.

    Attributes:
      input_ids: list[int], `[CLS] A [SEP] B [SEP]` with masked positions replaced; length
        <= max_seq_length.
      num_a_tokens: int, len(A). Segment ids are 0 for the first num_a_tokens + 2 positions.
      masked_lm_positions: list[int], ascending positions of the masked tokens.
      masked_lm_ids: list[int], the original ids at those positions (the labels).
      is_random_next: bool, True when B comes from another place (label 1). Always False
        without next sentence prediction.
    """

    @property
    def segment_ids(self):
        """list[int] of len(input_ids): 0 for [CLS] A [SEP], 1 for B [SEP]."""
        num_a = self.num_a_tokens + 2
        return [0] * num_a + [1] * (len(self.input_ids) - num_a)


class MaskingRates(collections.namedtuple("MaskingRates", ["mask", "random"])):
    """What becomes of a word-piece chosen for prediction: [MASK] with probability `mask`, a random
    vocab entry with probability `random`, itself otherwise (the paper's Table 8 ablation).

    The original draws `random() < 0.8` for [MASK], then `random() < 0.5` for "keep" among the
    rest; other rates change those two thresholds only, so the defaults draw the same numbers.
    """

    def __new__(cls, mask=0.8, random=0.1):
        if not (0.0 <= mask <= 1.0 and 0.0 <= random <= 1.0 and mask + random <= 1.0 + 1e-9):
            raise ValueError("masking rates mask=%g, random=%g: each must be in [0, 1] and their "
                             "sum at most 1" % (mask, random))
        return super().__new__(cls, mask, random)

    @property
    def keep_threshold(self):
        """P(keep | not [MASK]): the second draw keeps the token below this value.

        Rounded to 12 digits: (1 - 0.8 - 0.1) / (1 - 0.8) is 0.49999999999999994 in floating
        point, and the original compares with 0.5 exactly.
        """
        if self.mask >= 1.0:
            return 1.0  # never drawn
        return round(max(0.0, 1.0 - self.mask - self.random) / (1.0 - self.mask), 12)


class InstanceBuilder(object):
    """Creates `TrainingInstance`s from tokenized documents, in the original's RNG order.

    Args:
      vocab: token -> id mapping in file order (`FullTokenizer.vocab`); needs [CLS], [SEP], [MASK].
      max_seq_length: int >= 5.
      short_seq_prob: probability of a shorter target length.
      masked_lm_prob: fraction of tokens to mask (rounded half to even, at least 1).
      max_predictions_per_seq: cap on masked tokens per instance.
      do_whole_word_mask: mask whole words (a word-piece starting with ## joins the previous one).
      masking_rates: `MaskingRates` of the chosen word-pieces (default 80/10/10).
      next_sentence: False for the "No NSP" ablation: B is always the actual continuation, and
        a one-sentence chunk is a single segment (see the module docstring).
    """

    def __init__(self, vocab, max_seq_length, short_seq_prob, masked_lm_prob,
                 max_predictions_per_seq, do_whole_word_mask=False, masking_rates=MaskingRates(),
                 next_sentence=True):
        self.max_seq_length = max_seq_length
        self.short_seq_prob = short_seq_prob
        self.masked_lm_prob = masked_lm_prob
        self.max_predictions_per_seq = max_predictions_per_seq
        self.do_whole_word_mask = do_whole_word_mask
        self.mask_threshold = masking_rates.mask
        self.keep_threshold = masking_rates.keep_threshold
        self.next_sentence = next_sentence
        self.cls_id, self.sep_id, self.mask_id = vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"]
        # The original draws from list(vocab.keys()) and maps the word back through the vocab;
        # with duplicate vocab lines that is not range(len(vocab)), so keep the mapping.
        self.replacement_ids = [vocab[word] for word in vocab]
        self.subword_ids = frozenset(i for word, i in vocab.items() if word.startswith("##"))

    def create_training_instances(self, documents, dupe_factor, rng, report=None, convert=None):
        """The original `create_training_instances` after reading: documents -> instances.

        Args:
          documents: list of documents; a document is a list of sentences, a sentence a non-empty
            list of token ids. Empty documents are dropped. The list is shuffled in place.
          dupe_factor: number of passes over the documents.
          rng: `random.Random`.
          report: optional callable(documents_done, documents_total, num_instances), called after
            each document of each pass (for progress logging).
          convert: optional function applied to each instance when it is made (serialization,
            say, so that memory holds records rather than instances). The final shuffle moves
            the converted items exactly as it would move the instances.
        Returns:
          list of `TrainingInstance` (or `convert`ed instances), shuffled.
        """
        documents[:] = [d for d in documents if d]
        shuffle(documents, rng)
        instances = []
        total = dupe_factor * len(documents)
        for dupe in range(dupe_factor):
            for document_index in range(len(documents)):
                made = self.create_instances_from_document(documents, document_index, rng)
                instances.extend(made if convert is None else map(convert, made))
                if report is not None:
                    report(dupe * len(documents) + document_index + 1, total, len(instances))
        shuffle(instances, rng)
        return instances

    def create_instances_from_document(self, all_documents, document_index, rng):
        """The original `create_instances_from_document`: one document -> list of instances."""
        document = all_documents[document_index]
        max_num_tokens = self.max_seq_length - 3  # [CLS], [SEP], [SEP]
        target_seq_length = max_num_tokens
        if rng.random() < self.short_seq_prob:
            target_seq_length = rng.randint(2, max_num_tokens)

        instances = []
        current_chunk = []
        current_length = 0
        i = 0
        while i < len(document):
            current_chunk.append(document[i])
            current_length += len(document[i])
            if i == len(document) - 1 or current_length >= target_seq_length:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = _concat(current_chunk[:a_end])
                if not self.next_sentence:
                    is_random_next = False
                    tokens_b = _concat(current_chunk[a_end:])  # empty for a one-sentence chunk
                elif len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    tokens_b = self._random_next(
                        all_documents, document_index, target_seq_length - len(tokens_a), rng)
                    # The unused sentences go back to the document for the next chunk.
                    i -= len(current_chunk) - a_end
                else:
                    is_random_next = False
                    tokens_b = _concat(current_chunk[a_end:])
                instances.append(self._make_instance(tokens_a, tokens_b, is_random_next, rng))
                current_chunk = []
                current_length = 0
            i += 1
        return instances

    @staticmethod
    def _random_next(all_documents, document_index, target_b_length, rng):
        """Sentences from a random other document, from a random start, until target length."""
        for _ in range(10):
            random_document_index = rng.randint(0, len(all_documents) - 1)
            if random_document_index != document_index:
                break  # After 10 misses (a one-document corpus) the same document is used.
        random_document = all_documents[random_document_index]
        random_start = rng.randint(0, len(random_document) - 1)
        tokens_b = []
        for sentence in random_document[random_start:]:
            tokens_b.extend(sentence)
            if len(tokens_b) >= target_b_length:  # A target <= 0 still takes one sentence.
                break
        return tokens_b

    def _make_instance(self, tokens_a, tokens_b, is_random_next, rng):
        """`[CLS] A [SEP] B [SEP]`, or `[CLS] A [SEP]` when B is empty (only without NSP)."""
        max_num_tokens = self.max_seq_length - (3 if tokens_b else 2)
        a_start, a_stop, b_start, b_stop = truncate_seq_pair(
            len(tokens_a), len(tokens_b), max_num_tokens, rng)
        tokens_a = tokens_a[a_start:a_stop]
        tokens = [self.cls_id] + tokens_a + [self.sep_id]
        if tokens_b:
            tokens += tokens_b[b_start:b_stop] + [self.sep_id]
        positions, labels = self.create_masked_lm_predictions(tokens, len(tokens_a), rng)
        return TrainingInstance(tokens, len(tokens_a), positions, labels, is_random_next)

    def create_masked_lm_predictions(self, tokens, num_a_tokens, rng):
        """The original `create_masked_lm_predictions`, masking `tokens` in place.

        Args:
          tokens: list of ids, `[CLS] A [SEP] B [SEP]` or `[CLS] A [SEP]`; modified in place.
          num_a_tokens: len(A).
          rng: `random.Random`.
        Returns:
          (positions, label_ids): ascending masked positions and the original ids there.
        """
        # Everything but [CLS] (0), the middle [SEP] and the last [SEP] is a candidate (with a
        # single segment the second range is empty).
        candidates = list(range(1, num_a_tokens + 1))
        candidates += range(num_a_tokens + 2, len(tokens) - 1)
        if self.do_whole_word_mask:
            groups = []
            for index in candidates:
                # As in the original, a leading ## of B joins the last word of A across [SEP].
                if groups and tokens[index] in self.subword_ids:
                    groups[-1].append(index)
                else:
                    groups.append([index])
            candidates = groups
        # Shuffling ints or one-element lists draws the same numbers: only the length matters.
        shuffle(candidates, rng)

        num_to_predict = masked_count(len(tokens), self.max_predictions_per_seq,
                                      self.masked_lm_prob)
        if not self.do_whole_word_mask:
            candidates = [[index] for index in candidates[:num_to_predict]]

        masked = []
        mask_threshold, keep_threshold = self.mask_threshold, self.keep_threshold
        for group in candidates:
            if len(masked) >= num_to_predict:
                break
            if len(masked) + len(group) > num_to_predict:
                continue  # This whole word does not fit; a later, shorter one may.
            # Groups never overlap, so the original's "already covered" test never fires.
            # As in the original, each word-piece of a whole word draws its own fate.
            for index in group:
                masked.append((index, tokens[index]))
                if rng.random() < mask_threshold:
                    tokens[index] = self.mask_id
                elif rng.random() >= keep_threshold:  # else: keep the original token.
                    tokens[index] = self.replacement_ids[
                        rng.randint(0, len(self.replacement_ids) - 1)]
        masked.sort()
        return [index for index, _ in masked], [label for _, label in masked]


# bit_length of small ints, looked up instead of computed in the shuffle loop.
_BIT_LENGTH = [n.bit_length() for n in range(1024)]


def masked_count(num_tokens, max_predictions_per_seq, masked_lm_prob):
    """The original's number of word-pieces to mask in a pair of `num_tokens`:
    min(max_predictions_per_seq, max(1, round(num_tokens * masked_lm_prob))). round() is
    Python 3's half-to-even: 70 tokens * 0.15 = 10.5 -> 10."""
    return min(max_predictions_per_seq, max(1, int(round(num_tokens * masked_lm_prob))))


def shuffle(x, rng):
    """Shuffles list `x` in place exactly as `rng.shuffle(x)` for a `random.Random` `rng`.

    CPython's `shuffle` calls `_randbelow(i + 1)` for i = len(x)-1 .. 1, and `_randbelow(n)` draws
    `getrandbits(n.bit_length())` until the result is < n. Same draws, without the method calls.
    """
    getrandbits = rng.getrandbits
    bit_length = _BIT_LENGTH
    for i in range(len(x) - 1, 0, -1):
        n = i + 1
        k = bit_length[n] if n < 1024 else n.bit_length()
        j = getrandbits(k)
        while j >= n:
            j = getrandbits(k)
        x[i], x[j] = x[j], x[i]


def truncate_seq_pair(len_a, len_b, max_num_tokens, rng):
    """The original `truncate_seq_pair` on lengths: which slices of A and B survive.

    While len(A) + len(B) > max_num_tokens, the longer one (B on ties) loses its first token if
    `rng.random() < 0.5`, else its last. Front truncation can leave B (or A) starting with ##.

    Returns:
      (a_start, a_stop, b_start, b_stop): keep A[a_start:a_stop] and B[b_start:b_stop].
    """
    a_start, a_stop, b_start, b_stop = 0, len_a, 0, len_b
    while (a_stop - a_start) + (b_stop - b_start) > max_num_tokens:
        front = rng.random() < 0.5
        if a_stop - a_start > b_stop - b_start:
            if front:
                a_start += 1
            else:
                a_stop -= 1
        elif front:
            b_start += 1
        else:
            b_stop -= 1
    return a_start, a_stop, b_start, b_stop


def _concat(sentences):
    """Concatenation of a list of token-id lists."""
    tokens = []
    for sentence in sentences:
        tokens.extend(sentence)
    return tokens
