"""Choosing the local embedding model by name: the base MiniLM and the fine-tuned one shipped in models/."""

from __future__ import annotations

import numpy as np
import pytest

from models import model_dir
from router.config import EmbeddingSettings
from router.embeddings import BASE_MODEL, LocalMiniLM, build_embedder
from router.errors import ConfigError

TUNED = "all-MiniLM-L6-v2-tool-retrieval"
TEXTS = ["what time is it in Tokyo", "get current time: Get the current time in a timezone. Parameters: timezone."]


@pytest.fixture(scope="module")
def base() -> LocalMiniLM:
    return LocalMiniLM()


@pytest.fixture(scope="module")
def tuned() -> LocalMiniLM:
    return build_embedder(EmbeddingSettings(model=TUNED))  # type: ignore[return-value]


def test_the_base_model_is_the_default_and_its_cache_id_follows_its_weights(base: LocalMiniLM) -> None:
    assert base.model == BASE_MODEL == EmbeddingSettings().model
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


@pytest.mark.parametrize("name", [BASE_MODEL, TUNED])
def test_the_files_come_from_the_named_folder(name: str) -> None:
    folder = model_dir(name)
    assert (folder / "model.onnx").stat().st_size < 32 * 2**20
    assert (folder / "tokenizer.json").read_bytes() == (model_dir(BASE_MODEL) / "tokenizer.json").read_bytes()


def test_a_folder_without_its_onnx_file_is_a_config_error(tmp_path, monkeypatch) -> None:
    import models

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
