"""An optional OpenAI-compatible chat model (`llm`)."""

from __future__ import annotations

import os

from pydantic import Field, SecretStr

from router.settings.base import Strict


class LLMSettings(Strict):
    """An optional OpenAI-compatible chat model; everything but `/v1/chat` works without one."""

    base_url: str | None = Field(default=None, description=(
        "An OpenAI-compatible endpoint (vLLM, Ollama, ...); omit for api.openai.com."))
    model: str | None = Field(default=None, description=(
        "The chat model; the LLM is used once this and `base_url` or an API key are set."))
    api_key: SecretStr | None = Field(default=None, description="The API key; else read from `api_key_env`.")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Environment variable holding the API key.")
    timeout_s: float = Field(default=30.0, gt=0, description=(
        "Longest one model request may take (each retry as long again)."))
    max_retries: int = Field(default=2, ge=0, le=10, description=(
        "Retries on connection errors, 408, 409, 429 and 5xx, with backoff."))
    max_tool_turns: int = Field(default=8, ge=1, le=50, description=(
        "Model calls per tool loop of `/v1/chat`: the default and the most a request may ask for."))
    max_tool_calls: int = Field(default=8, ge=1, le=128, description=(
        "Tool calls of one model answer that `/v1/chat` sends; the model reads that the rest were refused."))
    max_tool_result_chars: int = Field(default=20_000, ge=100, description=(
        "Characters of a tool's result the model reads; the rest is cut, with a note saying how much."))
    deadline_s: float = Field(default=120.0, gt=0, le=600, description=(
        "Deadline of a `/v1/chat` turn that names none, model and tool calls included (a policy's "
        "`max_deadline_s` lowers it)."))

    @property
    def configured(self) -> bool:
        return bool(self.model and (self.base_url or self.resolved_api_key()))

    def resolved_api_key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        return os.environ.get(self.api_key_env)


