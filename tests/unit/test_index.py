from __future__ import annotations

import math

import numpy as np
import pytest

from router.retrieval.catalog import CatalogIndex, CatalogTexts
from router.retrieval.hybrid import BM25, MIN_PROBES, HybridIndex, InMemoryVectorStore, Probe, minmax, self_tuned_alpha
from router.retrieval.text import tokenize
from router.settings import RoutingSettings
from router.values import Capability, Catalog
from tests.unit.helpers import embed_texts, fake_embed, small_catalogs

DOCS = [
    "get the current time in a timezone",
    "convert a time between two time zones",
    "add two numbers together",
    "multiply two numbers",
    "search the web for a query",
    "read a file from disk",
]
QUERY = "current time in Tokyo"


def _index(alpha: float, dense_top_n: int = 100, vectors: bool = True) -> HybridIndex:
    return HybridIndex(DOCS, embed_texts(DOCS) if vectors else None, alpha=alpha, dense_top_n=dense_top_n)


def _qvec(text: str = QUERY) -> np.ndarray:
    return embed_texts([text])[0]


# --- minmax ---------------------------------------------------------------------------------


def test_minmax_scales_to_unit_interval() -> None:
    np.testing.assert_allclose(minmax(np.array([2.0, 4.0, 3.0])), [0.0, 1.0, 0.5])


def test_minmax_of_a_constant_vector_is_one_when_positive_and_zero_otherwise() -> None:
    np.testing.assert_array_equal(minmax(np.array([0.7, 0.7])), [1.0, 1.0])
    np.testing.assert_array_equal(minmax(np.array([0.0, 0.0])), [0.0, 0.0])
    np.testing.assert_array_equal(minmax(np.array([-0.3, -0.3])), [0.0, 0.0])


def test_minmax_of_an_empty_vector_is_empty() -> None:
    assert minmax(np.array([])).size == 0


# --- vector store ---------------------------------------------------------------------------


def test_vector_store_returns_nearest_first_and_clips_n() -> None:
    store = InMemoryVectorStore(np.eye(3, dtype=np.float32))
    q = np.array([0.2, 0.9, 0.4], dtype=np.float32)
    ids, sims = store.top(q, 10)
    assert ids.tolist() == [1, 2, 0]
    np.testing.assert_allclose(sims, [0.9, 0.4, 0.2], rtol=1e-6)
    ids, _ = store.top(q, 1)
    assert ids.tolist() == [1]


def test_vector_store_within_restricts_to_the_given_ids() -> None:
    store = InMemoryVectorStore(np.eye(3, dtype=np.float32))
    ids, sims = store.top(np.array([0.2, 0.9, 0.4], dtype=np.float32), 5, within=np.array([0, 2]))
    assert ids.tolist() == [2, 0]
    np.testing.assert_allclose(sims, [0.4, 0.2], rtol=1e-6)


# --- hybrid fusion --------------------------------------------------------------------------


def test_every_hit_carries_its_true_dense_and_bm25_components() -> None:
    index = _index(alpha=0.6)
    hits = index.search(QUERY, _qvec(), k=len(DOCS))
    vectors = embed_texts(DOCS)
    bm25 = index.bm25_scores(tokenize(QUERY), np.arange(len(DOCS)))
    assert sorted(h.doc for h in hits) == list(range(len(DOCS)))
    for h in hits:
        assert h.dense == pytest.approx(float(vectors[h.doc] @ _qvec()), abs=1e-5)
        assert h.bm25 == pytest.approx(float(bm25[h.doc]))
    assert bm25[0] > 0 and bm25[2] == 0.0  # doc 0 shares words with the query, doc 2 none


def test_bm25_is_okapi_with_a_positive_idf_for_common_words() -> None:
    # "time" is in 2 of 3 documents: classic Okapi IDF would be negative and *lower* their scores.
    docs = ["time clock", "time zone", "add numbers"]
    index = HybridIndex(docs, None)
    scores = index.bm25_scores(["time"], np.arange(3))
    assert scores[0] > 0 and scores[1] > 0 and scores[2] == 0.0
    # same length, same term frequency: same score; and the value is Okapi's with Lucene's IDF
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    k1, b, avgdl = 1.5, 0.75, 2.0
    expected = idf * (1 * (k1 + 1)) / (1 + k1 * (1 - b + b * 2 / avgdl))
    assert scores[0] == pytest.approx(expected)
    assert scores[1] == pytest.approx(expected)


def test_fused_score_is_alpha_dense_norm_plus_one_minus_alpha_bm25_norm() -> None:
    alpha = 0.6
    hits = _index(alpha=alpha).search(QUERY, _qvec(), k=len(DOCS))
    dense = np.array([h.dense for h in hits])
    bm25 = np.array([h.bm25 for h in hits])
    for h, dn, bn in zip(hits, minmax(dense), minmax(bm25), strict=True):
        assert h.dense_norm == pytest.approx(dn)
        assert h.bm25_norm == pytest.approx(bn)
        assert h.hybrid == pytest.approx(alpha * h.dense_norm + (1 - alpha) * h.bm25_norm)
    assert [h.hybrid for h in hits] == sorted((h.hybrid for h in hits), reverse=True)
    assert hits[0].doc == 0


def test_alpha_zero_ranks_by_bm25_alone() -> None:
    hits = _index(alpha=0.0).search(QUERY, _qvec(), k=len(DOCS))
    for h in hits:
        assert h.hybrid == pytest.approx(h.bm25_norm)
        assert h.dense_norm == 0.0
    bm25 = [h.bm25 for h in hits]
    assert bm25 == sorted(bm25, reverse=True)


def test_alpha_one_ranks_by_dense_similarity_alone() -> None:
    # "numbers" only appears in the query as a dense signal when BM25 is switched off.
    query = "time numbers numbers numbers"
    hits = _index(alpha=1.0).search(query, _qvec(query), k=len(DOCS))
    for h in hits:
        assert h.hybrid == pytest.approx(h.dense_norm)
    dense = [h.dense for h in hits]
    assert dense == sorted(dense, reverse=True)


def test_per_call_alpha_overrides_the_index_alpha() -> None:
    index = _index(alpha=1.0)
    hits = index.search(QUERY, _qvec(), k=3, alpha=0.0)
    assert len(hits) == 3 and all(h.hybrid == pytest.approx(h.bm25_norm) for h in hits)


def test_without_vectors_the_index_is_bm25_only() -> None:
    index = _index(alpha=0.6, vectors=False)
    assert index.dense is False
    assert index.alpha == 0.0
    hits = index.search(QUERY, None, k=2)
    assert len(hits) == 2 and hits[0].doc == 0
    assert all(h.dense == 0.0 and h.hybrid == pytest.approx(h.bm25_norm) for h in hits)


def test_without_a_query_vector_a_dense_index_falls_back_to_bm25() -> None:
    hits = _index(alpha=0.9).search(QUERY, None, k=2)
    assert len(hits) == 2 and hits[0].doc == 0
    assert all(h.hybrid == pytest.approx(h.bm25_norm) for h in hits)


def test_within_restricts_the_search_to_the_given_documents() -> None:
    within = np.array([2, 3, 5])
    for index in (_index(alpha=0.6), _index(alpha=0.6, vectors=False)):
        hits = index.search(QUERY, _qvec(), k=10, within=within)
        assert sorted(h.doc for h in hits) == [2, 3, 5]


def test_only_the_dense_top_n_are_scored() -> None:
    # BM25 would love doc 4 ("search the web for a query"), but dense recall of one document keeps only
    # the nearest vector.
    query = "search web query"
    qvec = embed_texts(["get the current time in a timezone"])[0]
    hits = _index(alpha=0.5, dense_top_n=1).search(query, qvec, k=10)
    assert [h.doc for h in hits] == [0]


def test_k_limits_the_number_of_hits() -> None:
    assert len(_index(alpha=0.6).search(QUERY, _qvec(), k=2)) == 2


def test_mismatched_vector_count_is_rejected() -> None:
    with pytest.raises(ValueError, match="2 vectors for 6 documents"):
        HybridIndex(DOCS, embed_texts(DOCS[:2]))


def test_empty_index_returns_no_hits() -> None:
    assert HybridIndex([], None).search("anything", None, k=5) == []


# --- catalog index --------------------------------------------------------------------------


def _catalog_index(**routing: object) -> CatalogIndex:
    texts = CatalogTexts.build(small_catalogs())
    return CatalogIndex(
        texts, embed_texts(texts.tool_dense), embed_texts(texts.server_dense), RoutingSettings(**routing)
    )


def test_catalog_texts_put_name_words_params_and_server_in_the_documents() -> None:
    texts = CatalogTexts.build(small_catalogs())
    assert [c.name for c in texts.capabilities] == [
        "get_current_time",
        "world_clock",
        "add",
        "multiply",
        "echo",
    ]
    assert texts.owner == (0, 1, 2, 2, 3)
    first = texts.tool_dense[0]
    assert first.startswith("get current time: Get the current time")
    assert "Parameters: timezone." in first
    assert "Server time: current time and time zone conversion" in first
    # the name is repeated in the sparse text so that it outweighs prose
    assert texts.tool_sparse[0].count("get current time") == 3


def test_flat_search_without_server_weight_ranks_by_the_hybrid_score_alone() -> None:
    index = _catalog_index(method="flat", server_weight=0.0)
    q = "multiply two numbers"
    ranked = index.search(q, embed_texts([q])[0], k=3)
    assert len(ranked) == 3 and ranked[0].capability.name == "multiply"
    assert all(r.score == r.hit.hybrid and r.server_score is None for r in ranked)


def test_flat_search_blends_each_tool_with_its_server_document() -> None:
    index = _catalog_index(method="flat", server_weight=0.4)
    q = "multiply two numbers"
    ranked = index.search(q, embed_texts([q])[0], k=5)
    assert ranked[0].capability.name == "multiply"
    servers = {h.doc: h.hybrid for h in index.servers.search(q, embed_texts([q])[0], 10)}
    names = [c.backend for c in index.texts.catalogs]
    for r in ranked:
        assert r.server_score == pytest.approx(servers[names.index(r.capability.backend)])
        assert r.score == pytest.approx(0.6 * r.hit.hybrid + 0.4 * r.server_score)
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)


def test_the_server_document_decides_between_two_equally_matching_tools() -> None:
    """Two servers offer a tool with the same name and description; the one whose server is about the
    question wins, and its server score says why."""
    tool = {"name": "search", "description": "Search for items"}
    catalogs = [
        Catalog(backend="papers", version="1", description="academic papers, arxiv preprints and citations",
                capabilities=(Capability(backend="papers", **tool),)),
        Catalog(backend="shop", version="1", description="online store products, prices and orders",
                capabilities=(Capability(backend="shop", **tool),)),
    ]
    texts = CatalogTexts.build(catalogs)
    index = CatalogIndex(texts, None, None, RoutingSettings())  # BM25 alone: deterministic
    for question, server in (("search arxiv papers on retrieval", "papers"), ("search products and prices", "shop")):
        first, second = index.search(question, None, k=2)
        assert first.capability.backend == server
        assert first.server_score == 1.0 and second.server_score == 0.0


def test_the_directories_of_a_path_in_a_question_do_not_pull_tools_named_after_them() -> None:
    """"/root/markdown/x.md" names the asker's folders: a markdown converter must not outrank the
    file writer the task needs because of them."""
    catalogs = [
        Catalog(backend="files", version="1", description="read and write files on disk",
                capabilities=(Capability(backend="files", name="write_file",
                                         description="Write text to a file, replacing it"),)),
        Catalog(backend="markdown", version="1", description="markdown conversion",
                capabilities=(Capability(backend="markdown", name="convert_to_markdown",
                                         description="Convert a web page to markdown"),)),
    ]
    index = CatalogIndex(CatalogTexts.build(catalogs), None, None, RoutingSettings())  # BM25 alone
    ranked = index.search("write the notes to /root/markdown/notes/today.txt", None, k=2)
    assert ranked[0].capability.name == "write_file"
    assert ranked[1].hit.bm25 == 0.0  # "markdown" in the path is not a word of the question


def test_backend_restriction_only_returns_that_backends_capabilities() -> None:
    index = _catalog_index()
    q = "current time"
    ranked = index.search(q, embed_texts([q])[0], k=10, backends={"calc"})
    assert {r.capability.backend for r in ranked} == {"calc"}
    assert len(ranked) == 2
    assert index.search(q, embed_texts([q])[0], k=10, backends={"nope"}) == []


def test_two_level_ranks_servers_first_and_combines_scores_like_mcp_zero() -> None:
    index = _catalog_index(method="two_level", top_servers=1)
    q = "add numbers calculator"
    ranked = index.search(q, embed_texts([q])[0], k=5)
    assert {r.capability.backend for r in ranked} == {"calc"}  # only the single top server
    for r in ranked:
        assert r.server_score is not None
        s, h = r.server_score, r.hit.hybrid
        assert r.score == pytest.approx(s * h * max(s, h))
    assert ranked[0].capability.name == "add"


def test_two_level_is_not_used_when_the_search_is_restricted_to_backends() -> None:
    index = _catalog_index(method="two_level", top_servers=1)
    q = "add numbers calculator"
    ranked = index.search(q, embed_texts([q])[0], k=5, backends={"echo", "time"})
    assert ranked and {r.capability.backend for r in ranked} == {"echo", "time"}
    # the flat ranking's blend, not MCP-Zero's product
    assert all(r.score == pytest.approx(0.65 * r.hit.hybrid + 0.35 * (r.server_score or 0)) for r in ranked)


def test_rank_servers_lists_each_backend_once_best_first() -> None:
    index = _catalog_index()
    q = "current time in a timezone"
    servers = index.rank_servers(q, embed_texts([q])[0], k=3)
    names = [s.backend for s in servers]
    assert len(names) == len(set(names)) == 3
    assert names[0] in {"time", "clock"}
    assert set(names[:2]) == {"time", "clock"}
    assert [s.score for s in servers] == sorted((s.score for s in servers), reverse=True)


# --- self-tuned alpha -----------------------------------------------------------------------


def _probe_index() -> HybridIndex:
    # Six documents, each its own direction; document i's words are "topic{i}".
    docs = [f"topic{i} thing" for i in range(6)]
    return HybridIndex(docs, np.eye(6, 8, dtype=np.float32), alpha=0.6)


def _probe(doc: int, words: str, vector_of: int, also: int | None = None) -> Probe:
    """A pseudo-query for `doc` with these words, whose vector is document `vector_of`'s (plus some of
    document `also`'s)."""
    eye = np.eye(8, dtype=np.float32)
    v = eye[vector_of] + (0.8 * eye[also] if also is not None else 0)
    return Probe(doc, tokenize(words), v / np.linalg.norm(v), ["thing"], eye[doc])


def test_self_tuned_alpha_keeps_the_floor_with_too_few_pseudo_queries() -> None:
    assert self_tuned_alpha(_probe_index(), [_probe(0, "topic1", 0)] * (MIN_PROBES - 1), 0.6) == 0.6


def test_self_tuned_alpha_turns_bm25_off_where_its_words_point_elsewhere() -> None:
    # Each pseudo-query's vector is nearest its document, but close to a second one, whose words it has:
    # only a weight above 0.83 on the vectors finds the document.
    probes = [_probe(i, f"topic{(i + 1) % 6}", i, also=(i + 1) % 6) for i in range(6)]
    assert self_tuned_alpha(_probe_index(), probes, 0.6) == 0.9


def test_self_tuned_alpha_never_goes_below_the_floor() -> None:
    # The words find each document and the vectors point elsewhere: BM25 alone would be best.
    probes = [_probe(i, f"topic{i}", (i + 1) % 6) for i in range(6)]
    assert self_tuned_alpha(_probe_index(), probes, 0.6) == 0.6


def test_bm25_scores_a_document_outside_the_corpus_like_one_inside() -> None:
    corpus = [tokenize(d) for d in DOCS]
    bm = BM25(corpus)
    terms = tokenize(QUERY)
    assert bm.score_document(corpus[0], terms) == pytest.approx(bm.scores(terms)[0])


async def test_tune_alpha_sets_each_level_and_a_restricted_view_keeps_it() -> None:
    catalogs = small_catalogs()
    texts = CatalogTexts.build(catalogs)
    index = CatalogIndex(texts, embed_texts(texts.tool_dense), embed_texts(texts.server_dense), RoutingSettings())
    tools, servers = await index.tune_alpha(fake_embed)
    assert 0.6 <= tools <= 1.0 and 0.6 <= servers <= 1.0
    view = index.restricted(lambda cap: True, {c.backend for c in catalogs})
    assert (view.tools.alpha, view.servers.alpha) == (tools, servers)


async def test_tune_alpha_is_off_when_the_setting_is() -> None:
    texts = CatalogTexts.build(small_catalogs())
    settings = RoutingSettings(self_tune_alpha=False)
    index = CatalogIndex(texts, embed_texts(texts.tool_dense), embed_texts(texts.server_dense), settings)
    assert await index.tune_alpha(fake_embed) == (0.6, 0.6)


def test_a_document_on_a_zero_vector_is_still_scored_by_its_words() -> None:
    # The model could not embed its text yet: no cosine recalls it, so every search takes it in.
    texts = [*DOCS, "calibrate the quantum flux capacitor"]
    vectors = np.vstack([embed_texts(DOCS), np.zeros((1, embed_texts(DOCS).shape[1]), dtype=np.float32)])
    index = HybridIndex(texts, vectors, alpha=0.5, dense_top_n=1)
    query = "calibrate the flux capacitor"
    hits = index.search(query, embed_texts([query])[0], k=3)
    assert hits[0].doc == len(DOCS) and hits[0].dense == 0.0 and hits[0].bm25 > 0
