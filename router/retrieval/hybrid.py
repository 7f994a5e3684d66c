"""HybridIndex: dense recall, BM25 over the recalled candidates, and alpha fusion, explained per item.

    index = HybridIndex(texts_for_bm25, vectors, alpha=0.6, dense_top_n=200)
    hits = index.search("what time is it in Tokyo", query_vector, k=5)
    hits[0].hybrid, hits[0].dense, hits[0].bm25        # every score component, for explanations

Dense recall takes the top-N documents by cosine; BM25 (IDF from the whole corpus) scores only
those; both are min-max normalised over the recalled set and fused:
``hybrid = alpha * dense_norm + (1 - alpha) * bm25_norm``. Without vectors the index is BM25-only.
`self_tuned_alpha` raises alpha for a catalog on which BM25 does not help, judged from pseudo-queries
made of the catalog's own descriptions (no labels).
The vector search sits behind `VectorStore`, so an ANN index can replace the in-memory matrix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from router.retrieval.text import tokenize


class VectorStore(Protocol):
    """Nearest neighbours by cosine over L2-normalised vectors."""

    def __len__(self) -> int: ...

    def top(self, query: np.ndarray, n: int, within: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Ids and cosine scores of the `n` nearest items (restricted to `within` when given), best first."""
        ...

    def scores(self, query: np.ndarray, ids: np.ndarray) -> np.ndarray: ...

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """The vectors of `ids` (to build the index of a subset without embedding again)."""
        ...


class InMemoryVectorStore:
    """A float32 matrix; exact search. Adequate to tens of thousands of tools (see benchmarks)."""

    def __init__(self, vectors: np.ndarray) -> None:
        self._m = np.ascontiguousarray(vectors, dtype=np.float32)

    def __len__(self) -> int:
        return int(self._m.shape[0])

    def top(self, query: np.ndarray, n: int, within: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        if within is None:
            sims = self._m @ query
            ids = np.arange(len(sims))
        else:
            ids = within
            sims = self._m[within] @ query
        n = min(n, len(sims))
        if n <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        if n < len(sims):
            part = np.argpartition(-sims, n - 1)[:n]
        else:
            part = np.arange(len(sims))
        order = part[np.argsort(-sims[part], kind="stable")]
        return ids[order], sims[order]

    def rows(self, ids: np.ndarray) -> np.ndarray:
        return self._m[ids]

    def scores(self, query: np.ndarray, ids: np.ndarray) -> np.ndarray:
        return self._m[ids] @ query


_MAX_QUERY_TERMS = 64


class BM25:
    """Okapi BM25 (k1 1.5, b 0.75) over postings, with Lucene's IDF ``log(1 + (N - df + 0.5) / (df + 0.5))``.

    Lucene's IDF stays positive: the classic one goes negative for terms in more than half the
    documents, so in a small catalog (two time tools both mentioning "time") a matching word would
    lower a tool's score. Each term keeps its documents and their precomputed term weights as numpy
    arrays, so scoring a query costs one vector addition per query term, not a loop over documents.
    """

    def __init__(self, corpus: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.size = len(corpus)
        lengths = np.array([len(doc) for doc in corpus], dtype=np.float64)
        self.k1, self.b = k1, b
        self.avgdl = max(float(lengths.mean()) if self.size else 1.0, 1e-9)
        norm = k1 * (1 - b + b * lengths / self.avgdl)
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for i, doc in enumerate(corpus):
            counts: dict[str, int] = {}
            for term in doc:
                counts[term] = counts.get(term, 0) + 1
            for term, tf in counts.items():
                docs, weights = postings.setdefault(term, ([], []))
                docs.append(i)
                weights.append(tf * (k1 + 1) / (tf + norm[i]))
        self.idf = {t: math.log(1 + (self.size - len(d) + 0.5) / (len(d) + 0.5)) for t, (d, _) in postings.items()}
        self._postings = {t: (np.array(d, dtype=np.int64), self.idf[t] * np.array(w))
                          for t, (d, w) in postings.items()}

    def scores(self, query_terms: Sequence[str]) -> np.ndarray:
        """The score of every document; a term repeated in the query counts each time."""
        out = np.zeros(self.size)
        for term in query_terms:
            posting = self._postings.get(term)
            if posting is not None:
                out[posting[0]] += posting[1]
        return out

    def score_document(self, doc: Sequence[str], query_terms: Sequence[str]) -> float:
        """The score a document outside the corpus would get, under the corpus's IDF and mean length."""
        counts: dict[str, int] = {}
        for term in doc:
            counts[term] = counts.get(term, 0) + 1
        norm = self.k1 * (1 - self.b + self.b * len(doc) / self.avgdl)
        return sum(self.idf.get(t, 0.0) * counts[t] * (self.k1 + 1) / (counts[t] + norm)
                   for t in query_terms if t in counts)



@dataclass(frozen=True, slots=True)
class Hit:
    """One scored document, with every component of its score."""

    doc: int
    dense: float
    bm25: float
    dense_norm: float
    bm25_norm: float
    hybrid: float


def minmax(values: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; a constant vector maps to 1 where positive and 0 otherwise."""
    if values.size == 0:
        return values.astype(np.float64)
    lo, hi = float(values.min()), float(values.max())
    if hi - lo < 1e-12:
        return np.full(values.shape, 1.0 if hi > 0 else 0.0)
    return (values - lo) / (hi - lo)


@dataclass(frozen=True, slots=True)
class Probe:
    """A pseudo-query for `self_tuned_alpha`: a sentence taken out of document `doc`'s description, and
    that document without it (Inverse Cloze Task, Lee et al. 2019)."""

    doc: int
    tokens: list[str]  # the sentence, tokenised as a question
    vector: np.ndarray  # the sentence, embedded
    doc_tokens: list[str]  # the document without the sentence, tokenised for BM25
    doc_vector: np.ndarray  # the document without the sentence, embedded


ALPHA_GRID = tuple(i / 10 for i in range(11))
MIN_PROBES = 5  # fewer pseudo-queries than this say nothing: the floor stands


def self_tuned_alpha(index: HybridIndex, probes: Sequence[Probe], floor: float) -> float:
    """The fusion weight this catalog's own pseudo-queries rank their documents best with (mean reciprocal
    rank over `ALPHA_GRID`), never below `floor` (the configured alpha).

    A pseudo-query is a sentence of a document's own description, so it shares words with its document by
    construction (a description restates the tool's name): it overstates what BM25 adds for a real
    question. Its alpha is therefore taken only as evidence that BM25 should weigh less, never more: on a
    catalog of short descriptions where word overlap misleads (API descriptions, one line each), it picks
    dense alone, while where BM25 helps it picks a low alpha and the floor stands."""
    if index._store is None or index._bm25 is None or len(probes) < MIN_PROBES:
        return floor
    n = index.dense_top_n
    grid = np.array(ALPHA_GRID)
    reciprocal = np.zeros(grid.size)
    for p in probes:
        terms = index._query_terms(p.tokens)
        # The recalled set as search() would see it, the probe's document replaced by its shortened form.
        ids, dense = index._store.top(p.vector, n + 1)
        others = ids != p.doc
        ids, dense = ids[others], dense[others].astype(np.float64)
        own = float(p.doc_vector @ p.vector)
        if ids.size >= n and own < dense[n - 1]:
            continue  # not recalled: no alpha can rank it (it counts as a miss for every alpha)
        ids, dense = ids[: n - 1], np.append(dense[: n - 1], own)
        bm25 = np.append(index._bm25.scores(terms)[ids], index._bm25.score_document(p.doc_tokens, terms))
        dense_norm = minmax(dense)
        bm25_norm = minmax(bm25) if bm25.max() > 0 else np.zeros(bm25.size)
        fused = grid[:, None] * dense_norm + (1 - grid[:, None]) * bm25_norm  # one row per alpha
        target = fused[:, -1:]
        # Ties share the rank: a document tied with others at zero is not found.
        rank = 1 + (fused > target).sum(axis=1) + 0.5 * ((fused == target).sum(axis=1) - 1)
        reciprocal += 1 / rank
    best = float(grid[int(np.argmax(reciprocal))])
    return max(floor, best)


class HybridIndex:
    def __init__(
        self,
        texts: Sequence[str],
        vectors: np.ndarray | None = None,
        *,
        alpha: float = 0.6,
        dense_top_n: int = 200,
        store: VectorStore | None = None,
    ) -> None:
        self.size = len(texts)
        self.alpha = alpha if (vectors is not None or store is not None) else 0.0
        self.dense_top_n = dense_top_n
        corpus = [tokenize(t) or ["<empty>"] for t in texts]
        self._bm25 = BM25(corpus) if corpus else None
        if store is None and vectors is not None:
            if len(vectors) != self.size:
                raise ValueError(f"{len(vectors)} vectors for {self.size} documents")
            store = InMemoryVectorStore(vectors)
        # Rows on a zero vector stand for texts the model could not embed yet: no cosine recalls them, so every
        # search takes them in for BM25 to score.
        self._unembedded = (np.flatnonzero(~np.asarray(vectors).any(axis=1)) if vectors is not None
                            else np.empty(0, dtype=np.int64))
        self._store = store

    @property
    def dense(self) -> bool:
        return self._store is not None

    def vectors(self, ids: Sequence[int]) -> np.ndarray | None:
        return None if self._store is None else self._store.rows(np.asarray(ids, dtype=np.int64))

    def bm25_scores(self, tokens: list[str], ids: np.ndarray) -> np.ndarray:
        if self._bm25 is None or not tokens or ids.size == 0:
            return np.zeros(ids.size)
        return self._bm25.scores(self._query_terms(tokens))[ids]

    def _query_terms(self, tokens: list[str]) -> list[str]:
        """A long question (a pasted document) keeps its most informative distinct terms, once each, so
        that BM25's cost stays bounded; a short question is scored as it is."""
        assert self._bm25 is not None
        unique = set(tokens)
        if len(unique) <= _MAX_QUERY_TERMS:
            return tokens
        idf = self._bm25.idf
        return sorted(unique, key=lambda t: (-idf.get(t, 0.0), t))[:_MAX_QUERY_TERMS]

    def search(
        self,
        query: str,
        query_vector: np.ndarray | None,
        k: int,
        *,
        alpha: float | None = None,
        within: np.ndarray | None = None,
        tokens: list[str] | None = None,
        prior: np.ndarray | None = None,
        prior_weight: float = 0.0,
        recall: int | None = None,
        wanted: np.ndarray | None = None,
    ) -> list[Hit]:
        """Rank documents for `query`; `within` restricts the search to some document ids. With a
        `prior` (a score per document), the order is ``(1 - prior_weight) * hybrid + prior_weight * prior``.
        `recall`: how many documents the dense half recalls for BM25 to score (`dense_top_n` unless given);
        `wanted`: only these documents are returned, scored among all the recalled ones."""
        if self.size == 0:
            return []
        a = self.alpha if alpha is None else alpha
        toks = tokenize(query) if tokens is None else tokens
        if self._store is not None and query_vector is not None:
            ids, dense = self._store.top(query_vector, recall or self.dense_top_n, within)
            dense = dense.astype(np.float64)
            if self._unembedded.size:
                extra = self._unembedded if within is None else np.intersect1d(self._unembedded, within)
                extra = extra[~np.isin(extra, ids)]
                ids, dense = np.concatenate([ids, extra]), np.concatenate([dense, np.zeros(extra.size)])
        else:
            ids = within if within is not None else np.arange(self.size)
            dense = np.zeros(ids.size)
            a = 0.0
        bm25 = self.bm25_scores(toks, ids)
        dense_norm = minmax(dense) if a > 0 else np.zeros(ids.size)
        bm25_norm = minmax(bm25) if bm25.max(initial=0.0) > 0 else np.zeros(ids.size)
        hybrid = a * dense_norm + (1 - a) * bm25_norm
        ranking = hybrid if prior is None else (1 - prior_weight) * hybrid + prior_weight * prior[ids]
        order = np.argsort(-ranking, kind="stable")
        if wanted is not None:
            order = order[np.isin(ids[order], wanted)]
        order = order[:k]
        return [
            Hit(int(ids[i]), float(dense[i]), float(bm25[i]), float(dense_norm[i]), float(bm25_norm[i]),
                float(hybrid[i]))
            for i in order
        ]
