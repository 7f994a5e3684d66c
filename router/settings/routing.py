"""How a question is matched to a capability (`routing`), and smart tool selection (`tool_selection`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from router.settings.base import Strict


class ScoreWeights(Strict):
    """Weights of the composite score `match * w_match + health * w_health + perf * w_perf`."""

    match: float = Field(default=0.5, ge=0, description="Weight of relevance (retrieval score plus intent bonus).")
    health: float = Field(default=0.3, ge=0, description="Weight of health: 1 healthy, 0.5 degraded, 0 down/ejected.")
    perf: float = Field(default=0.2, ge=0, description="Weight of recent success rate and latency.")


class RoutingSettings(Strict):
    """Hybrid retrieval (dense + BM25), the composite score and the verdict (404, 409, 422)."""

    alpha: float = Field(default=0.6, ge=0, le=1, description=(
        "Fusion weight: `alpha * dense + (1 - alpha) * bm25` (1 = embeddings only, 0 = BM25 only). "
        "0.6 was best with the shipped model on LiveMCPBench, and beat 0.5 on MetaTool, which nothing was tuned on. "
        "With `self_tune_alpha` it is the least weight: each catalog may raise it."))
    self_tune_alpha: bool = Field(default=True, description=(
        "Raise `alpha` for a catalog on which BM25 does not help, judged when the index is built from "
        "pseudo-queries made of the catalog's own descriptions (a sentence taken out of a description must "
        "find its document again); no labels. It turns BM25 off on catalogs of one-line descriptions, where "
        "word overlap misleads (docs/routing.md)."))
    dense_top_n: int = Field(default=200, ge=1, description="Capabilities recalled by cosine before BM25 scores them.")
    method: Literal["flat", "two_level"] = Field(default="flat", description=(
        "flat ranks capabilities directly; two_level ranks servers first, then tools in the best servers."))
    server_weight: float = Field(default=0.35, ge=0, le=1, description=(
        "Share of a capability's retrieval score that comes from its server's own document (flat method). "
        "0.35 was best on LiveMCPBench and ToolAlpaca together (docs/routing.md)."))
    top_servers: int = Field(default=3, ge=1, description="Servers whose tools are ranked by the two_level method.")
    candidates: int = Field(default=5, ge=1, le=100, description=(
        "Candidates returned with a decision (more are kept when a resilience mode needs them)."))
    weights: ScoreWeights = Field(default=ScoreWeights(), description="Weights of the composite score.")
    intent_bonus: float = Field(default=0.1, ge=0, le=1, description=(
        "Added to the match score when the backend declares the question's intent."))
    min_confidence: float = Field(default=0.08, ge=0, le=1, description=(
        "Confidence a candidate needs to be called: the estimated probability, from its retrieval scores, "
        "that it is the right capability (router/stages/confidence.py). When no candidate reaches it the router "
        "abstains (404 with the closest candidates); a runner-up below it is never tried. 0.08 is the highest "
        "threshold that still answered 90 % of in-scope questions on the fitting half of "
        "benchmarks/abstention.py; higher declines more (docs/routing.md has the curve)."))
    min_tool_confidence: float = Field(default=0.33, ge=0, le=1, description=(
        "Tool confidence a candidate also needs to be called: given that its backend is right, the estimated "
        "probability that it is the right one of the backend's tools (router/stages/confidence.py). When the best "
        "backend's best tool falls short, the router asks which tool was meant (409 listing them) instead of "
        "calling one. Chosen by benchmarks/abstention.py (docs/routing.md)."))
    min_action_confidence: float = Field(default=0.5, ge=0, le=1, description=(
        "What a capability that may change something (not read-only by its MCP annotations or the backend's "
        "`read_only`) needs to be called without the caller naming it: the estimated probability that it is "
        "the right one (confidence times tool confidence; with the backend named, the tool confidence) at least "
        "this. 0.5: acting only when more likely right than wrong. Below it the router asks (409 with the "
        "candidates); labelled examples that vouch for it, or the caller naming the tool, let it act."))
    min_relative_match: float = Field(default=0.5, ge=0, le=1, description=(
        "Retrieval score a candidate also needs, relative to the best one, to be tried: a confidence model "
        "fitted on large catalogs tells a backend's weak tools too little from its strong one."))
    ambiguity_margin: float = Field(default=0.0, ge=0, le=1, description=(
        "Two different tools whose composite scores are this close are ambiguous: 409 (0: exact ties only)."))
    callable_margin: float = Field(default=0.15, ge=0, le=1, description=(
        "A runner-up this close to a best match that needs unknown arguments is called instead of a 422, and "
        "one this close to a best match that cannot serve the question's values instead of a 404."))
    query_cache_size: int = Field(default=4096, ge=0, description=(
        "Questions whose vector, intent and retrieval results each replica keeps, per principal (0 turns the "
        "cache off)."))


class ToolSelectionSettings(Strict):
    """Smart tool selection: the tools of the servers a conversation needs, in OpenAI format."""

    min_tools: int = Field(default=30, ge=0, description=(
        "Selection engages only above this many tools (and `min_servers`); below, every tool is returned."))
    min_servers: int = Field(default=4, ge=0, description="Selection engages only above this many servers.")
    max_servers: int = Field(default=12, ge=1, description="Most servers kept (a request may ask for fewer).")
    max_tool_share: float = Field(default=0.2, gt=0, le=1, description=(
        "Retrieval keeps whole servers, best first, until they hold this share of all tools."))
    llm_candidates: int = Field(default=15, ge=1, description="How many of retrieval's best servers an LLM picks from.")
    max_conversation_bytes: int = Field(default=64 * 1024, ge=16, description=(
        "Largest total of a conversation's user messages that selection takes: 413 above."))
    max_steps: int = Field(default=8, ge=1, le=64, description=(
        "Steps (clauses) of the latest request ranked on their own, besides the whole conversation."))
    session_cache_size: int = Field(default=10_000, ge=0, description=(
        "Sessions whose selection is reused on later turns, per replica."))


