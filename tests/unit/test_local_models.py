"""Choosing the local embedding model by name: the base MiniLM and the fine-tuned one shipped in models/."""

from __future__ import annotations

import numpy as np
import pytest

from mcp_router.models import model_dir
from router.errors import ConfigError
from router.retrieval.embeddings import BASE_MODEL, FLOAT_FROM_TOKENS, LocalMiniLM, build_embedder, int8_is_fast
from router.settings import EmbeddingSettings

TUNED = "all-MiniLM-L6-v2-tool-retrieval"
TEXTS = ["what time is it in Tokyo", "get current time: Get the current time in a timezone. Parameters: timezone."]


@pytest.fixture(scope="module")
def base() -> LocalMiniLM:
    return LocalMiniLM()


@pytest.fixture(scope="module")
def tuned() -> LocalMiniLM:
    return build_embedder(EmbeddingSettings(model=TUNED))  # type: ignore[return-value]


def test_the_trained_model_is_the_configured_default_and_the_base_stays_available(base: LocalMiniLM) -> None:
    assert EmbeddingSettings().model == TUNED
    assert base.model == BASE_MODEL  # LocalMiniLM() alone is the untrained base (the RAG server's model)
    assert base.model_id.startswith(f"{BASE_MODEL}-onnx-")


def test_a_shipped_model_loads_by_name_with_its_own_cache_id(base: LocalMiniLM, tuned: LocalMiniLM) -> None:
    assert isinstance(tuned, LocalMiniLM)
    assert tuned.model == TUNED
    assert tuned.model_id.startswith(TUNED) and tuned.model_id != base.model_id
    vecs = tuned.encode(TEXTS)
    assert vecs.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    # Different weights give different vectors for the same text.
    assert float((vecs * base.encode(TEXTS)).sum(axis=1).min()) < 0.999


def test_a_texts_vector_does_not_depend_on_the_texts_embedded_with_it(base: LocalMiniLM) -> None:
    # Run in a padded batch with activations quantised per run, a long neighbour changed a question's
    # vector (cosine down to 0.98), and so could change its route under load.
    long_text = " ".join(["search the web for recent news articles about a topic and summarise them"] * 12)
    alone = base.encode([TEXTS[0]])
    np.testing.assert_allclose(base.encode([long_text, TEXTS[0], "x"])[1], alone[0], atol=1e-6)
    np.testing.assert_allclose(base.encode(["", "  "]), base.encode(["."])[[0, 0]], atol=1e-6)  # blank: "."


def test_a_catalog_spread_over_threads_gets_the_vectors_it_gets_in_one(base: LocalMiniLM) -> None:
    catalog = [f"{TEXTS[1]} Variant {i}: for the {i % 7}th region." for i in range(70)]
    spread = LocalMiniLM(parallel=3)
    np.testing.assert_array_equal(spread.encode(catalog), base.encode(catalog))
    np.testing.assert_array_equal(spread.encode(TEXTS), base.encode(TEXTS))  # a few run in one thread


def test_a_catalog_run_in_batches_of_one_length_gets_each_texts_own_vector(base: LocalMiniLM) -> None:
    # Texts of one token length, unlike in what they say, batched together as a catalog is.
    catalog = [f"{word} the {i} records" for i in range(12) for word in ("get", "delete", "zebra", "quantum")]
    lengths = {len(base._tok.encode(t).ids) for t in catalog}
    assert len(lengths) < len(catalog) // 8  # so most runs hold several texts
    alone = np.concatenate([base.encode([t]) for t in catalog])
    np.testing.assert_array_equal(base.encode(catalog), alone)


@pytest.mark.parametrize("name", [BASE_MODEL, TUNED])
def test_the_files_come_from_the_named_folder(name: str) -> None:
    folder = model_dir(name)
    assert (folder / "model.onnx").stat().st_size < 32 * 2**20
    assert (folder / "tokenizer.json").read_bytes() == (model_dir(BASE_MODEL) / "tokenizer.json").read_bytes()


def test_a_folder_without_its_onnx_file_is_a_config_error(tmp_path, monkeypatch) -> None:
    import mcp_router.models as models

    (tmp_path / "half-model").mkdir()
    (tmp_path / "half-model" / "tokenizer.json").write_text("{}")
    monkeypatch.setattr(models, "_HERE", tmp_path)
    with pytest.raises(ConfigError, match=r"model\.onnx missing"):
        LocalMiniLM(model="half-model")


def test_an_unknown_name_is_a_config_error_naming_the_available_models() -> None:
    with pytest.raises(ConfigError) as err:
        LocalMiniLM(model="no-such-model")
    message = str(err.value)
    assert "no-such-model" in message
    assert BASE_MODEL in message and TUNED in message


def test_float_compute_gives_the_int8_vectors_within_rounding_under_its_own_cache_id(base: LocalMiniLM) -> None:
    # One file, run two ways: the int8 weights folded into float32 at load, or fused into int8 products.
    as_int8 = LocalMiniLM(compute="int8")
    as_float = LocalMiniLM(compute="float")
    assert (as_int8.compute, as_float.compute) == ("int8", "float")
    assert as_float.model_id != as_int8.model_id  # their vectors never mix in a cache
    assert base.compute in ("int8", "float") and base.model_id in (as_int8.model_id, as_float.model_id)
    short, long_text = TEXTS  # under and over FLOAT_FROM_TOKENS
    assert len(as_int8._tok.encode(short).ids) < FLOAT_FROM_TOKENS <= len(as_int8._tok.encode(long_text).ids)
    a, b = as_int8.encode(TEXTS), as_float.encode(TEXTS)
    np.testing.assert_array_equal(a[0], b[0])  # a short text stays in int8, where it runs faster
    assert not np.array_equal(a[1], b[1])  # a long one really runs in float (int8 would give the same bits)
    assert float(a[1] @ b[1]) > 0.999
    # Its length alone decides: the same vector alone and in a catalog's batch.
    catalog = [f"{long_text} Variant {i}." for i in range(40)]
    np.testing.assert_array_equal(as_float.encode(catalog)[7], as_float.encode([catalog[7]])[0])


@pytest.mark.parametrize(("machine", "flags", "fast"), [
    ("x86_64", "fpu sse2 avx2 avx512f avx512bw", False),     # AVX-512 without VNNI: float is faster
    ("x86_64", "fpu sse2 avx2 avx512f avx512_vnni", True),
    ("x86_64", "fpu sse2 avx2 avx_vnni", True),
    ("aarch64", "fp asimd asimddp", True),                    # not x86: the file's own int8
])
def test_int8_is_chosen_where_the_processor_has_int8_dot_products(machine: str, flags: str, fast: bool) -> None:
    cpuinfo = f"processor\t: 0\nmodel name\t: some cpu\nflags\t\t: {flags}\n"
    assert int8_is_fast(machine, cpuinfo) is fast
    assert int8_is_fast("x86_64", "processor : 0\n") is False  # no flags line: nothing to rely on


def test_compute_is_a_setting_the_embedder_follows() -> None:
    assert EmbeddingSettings().compute == "auto"
    assert build_embedder(EmbeddingSettings(compute="float")).compute == "float"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="compute"):
        EmbeddingSettings(compute="fp16")
