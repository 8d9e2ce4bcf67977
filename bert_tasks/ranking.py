"""Ranking metrics of scored candidate lists, shared by the sentence-embedding retrieval
evaluation and the reranker's: recall@k, MRR@10 and nDCG@10 with binary relevance, as
sentence-transformers' InformationRetrievalEvaluator computes them (`ndcg` with log2 discounts,
the ideal order putting every relevant candidate first).

    metrics = ranking_metrics(scores, relevant)     # scores [Q, P]; relevant: Q sets of columns
    metrics = list_metrics(lists, scores, relevant)  # each query its own candidates (a reranker)
"""
import math

import numpy as np

RECALL_AT = (1, 10)
CUTOFF = 10


def ranks_of_relevant(scores, relevant):
    """For each query (a row of `scores`), the 1-based ranks of its relevant columns when the
    row is sorted by descending score (ties: the lower column first, a stable order)."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), axis=1, kind="stable")
    ranks = np.empty_like(order)
    rows = np.arange(order.shape[0])[:, None]
    ranks[rows, order] = np.arange(1, order.shape[1] + 1)[None, :]
    return [np.sort(ranks[q, sorted(columns)]) for q, columns in enumerate(relevant)]


def metrics_from_ranks(ranks):
    """{recall_at_1, recall_at_10, mrr_at_10, ndcg_at_10} (float64 means over queries) from each
    query's sorted ranks of its relevant candidates (`ranks_of_relevant`)."""
    values = {f"recall_at_{k}": [] for k in RECALL_AT}
    values.update(mrr_at_10=[], ndcg_at_10=[])
    for query_ranks in ranks:
        query_ranks = np.asarray(query_ranks)
        for k in RECALL_AT:
            values[f"recall_at_{k}"].append(np.mean(query_ranks <= k))
        top = query_ranks[query_ranks <= CUTOFF]
        values["mrr_at_10"].append(1.0 / top[0] if len(top) else 0.0)
        ideal = np.sum(1.0 / np.log2(np.arange(2, min(len(query_ranks), CUTOFF) + 2)))
        values["ndcg_at_10"].append(np.sum(1.0 / np.log2(top + 1)) / ideal)
    return {name: float(np.mean(v)) for name, v in values.items()}


def ranking_metrics(scores, relevant):
    """The metrics of `scores` (float `[Q, P]`, higher is better) with `relevant` (Q non-empty
    collections of column indices)."""
    return metrics_from_ranks(ranks_of_relevant(scores, relevant))


def _expected(num_candidates, num_relevant):
    """The metrics' expected values over every order of `num_candidates` candidates of which
    `num_relevant` are relevant, each order equally likely: a random order's, exactly."""
    n, r = num_candidates, num_relevant
    cut = min(CUTOFF, n)
    metrics = {f"recall_at_{k}": min(k, n) / n for k in RECALL_AT}
    # The first relevant candidate is at rank j with probability C(n - j, r - 1) / C(n, r).
    metrics["mrr_at_10"] = sum(math.comb(n - j, r - 1) / j for j in range(1, cut + 1)) / (
        math.comb(n, r))
    # Each relevant candidate's rank is uniform on 1..n.
    gains = sum(1.0 / math.log2(j + 1) for j in range(1, cut + 1))
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(r, CUTOFF) + 1))
    metrics["ndcg_at_10"] = r * gains / n / ideal
    return metrics


def _mean_expected(sizes):
    """The mean over queries of `_expected` of each (candidates, relevant) in `sizes`."""
    each = [_expected(n, r) for n, r in sizes]
    return {name: float(np.mean([e[name] for e in each])) for name in each[0]}


def chance_metrics(num_candidates, relevant_counts):
    """The metrics of a random order, exactly (their expected values): the baseline beside
    them."""
    return _mean_expected([(num_candidates, count) for count in relevant_counts])


def candidate_lists(queries):
    """`[[index, ...] per query]`: runs of consecutive equal `queries` (a reranker's rows), in
    order."""
    lists = []
    for index, query in enumerate(queries):
        if lists and queries[lists[-1][0]] == query:
            lists[-1].append(index)
        else:
            lists.append([index])
    return lists


def _relevant_lists(lists, relevant):
    """The lists with at least one relevant candidate (the others rank nothing)."""
    return [group for group in lists if any(relevant[i] for i in group)]


def list_metrics(lists, scores, relevant):
    """The metrics of candidate lists (`candidate_lists`) ranked by `scores` (float [N], higher
    first), `relevant` bool [N]; lists without a relevant candidate are left out."""
    groups = _relevant_lists(lists, relevant)
    ranks = [ranks_of_relevant(np.asarray([[scores[i] for i in group]]),
                               [[k for k, i in enumerate(group) if relevant[i]]])[0]
             for group in groups]
    return metrics_from_ranks(ranks)


def list_chance_metrics(lists, relevant):
    """`list_metrics` of a random order of each list, exactly (their expected values)."""
    return _mean_expected([(len(group), sum(bool(relevant[i]) for i in group))
                           for group in _relevant_lists(lists, relevant)])
