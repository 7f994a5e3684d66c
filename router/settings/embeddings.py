"""The embedding model (`embeddings`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from router.settings.base import Strict


class EmbeddingSettings(Strict):
    """The model that embeds questions and capability texts."""

    provider: Literal["local", "openai"] = Field(default="local", description=(
        "local: a model shipped in models/ (int8 ONNX); openai: an OpenAI-compatible embeddings endpoint."))
    model: str = Field(default="all-MiniLM-L6-v2-tool-retrieval", description=(
        "The model name: a folder of models/ (all-MiniLM-L6-v2-tool-retrieval, trained for tool retrieval; "
        "all-MiniLM-L6-v2, the untrained base), or the name sent to the endpoint for openai."))
    placement: Literal["replica", "deployment"] | None = Field(default=None, description=(
        "Where questions are embedded: replica runs the model inside each router replica (in a thread, concurrent "
        "questions batched); deployment in its own Serve deployment, for large or GPU models. Unset: by model "
        "size (the small local models and remote endpoints run in the replica)."))
    base_url: str | None = Field(default=None, description="The endpoint's base URL (openai provider).")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Environment variable holding the endpoint's key.")
    batch_size: int = Field(default=64, ge=1, le=2048, description=(
        "Most texts in one embedding call (one request to an endpoint; the local model still runs each text "
        "alone)."))
    max_batch_wait_s: float = Field(default=0.005, ge=0, description=(
        "While other questions are being embedded, how long the next batch waits to fill."))
    timeout_s: float = Field(default=30.0, gt=0, description="Longest one request to the endpoint may take.")
    threads: int = Field(default=1, ge=1, le=64, description=(
        "onnxruntime intra-op threads of the local model (one keeps a shared machine responsive)."))
    compute: Literal["auto", "int8", "float"] = Field(default="auto", description=(
        "How the local model multiplies its int8 weights: int8 (fast where the processor has int8 dot products, "
        "x86 VNNI); float (the weights also unpacked to float32 at load, about 65 MB more per process, for texts "
        "of 16 tokens or more: faster on x86 without VNNI; shorter texts stay int8); auto: float on x86 without "
        "VNNI, else int8 (ARM: not measured)."))
    parallel: int = Field(default=2, ge=1, le=64, description=(
        "Runs of a catalog's texts the local model embeds at once, each in its own thread (a run is up to 512 "
        "tokens of texts of one length). The few questions of a moment run in one thread."))


