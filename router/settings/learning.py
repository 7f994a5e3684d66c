"""Settings of learning from use (`learning`): which examples are taken and how they weigh in routing."""

from __future__ import annotations

from pydantic import Field

from router.settings.base import Strict


class LearningSettings(Strict):
    """Learning from use: labelled examples (feedback, chat tool calls, routed calls) pull a capability up or
    push it down for similar questions (router/learning/evidence.py): by nearest neighbours over the examples' question
    vectors, by patterns of rejections, and by a default learned for the questions retrieval is unsure of."""

    accept_feedback: bool | None = Field(default=None, description=(
        "Whether examples are taken at all (feedback, chat, routed calls). Unset: only while the router listens "
        "on a loopback address (`server.host`), where every caller is local."))
    weight: float = Field(default=2.0, ge=0, le=4, description=(
        "Weight of the nearest-neighbour score (-1 .. 1) added to `match`. 2: examples that surely apply, to a "
        "question retrieval is no surer of than a coin toss (their score is scaled by its doubt), are worth "
        "the whole range of `match` (0 .. 1)."))
    neighbours: int = Field(default=5, ge=1, le=100, description=(
        "Nearest examples of a capability that make its score."))
    min_similarity: float = Field(default=0.4, ge=0, lt=1, description=(
        "Question cosine below which an example says nothing about a question (0.4: about the 99th percentile "
        "of the cosines between LiveMCPBench's questions for different tasks)."))
    paraphrase_similarity: float = Field(default=0.9, ge=0, le=1, description=(
        "Question cosine from which an example is about the question itself, reworded: it counts whatever "
        "retrieval's confidence, and a correction there may take the question from a backend feedback never "
        "confirmed (below it, examples never do: 0.8 let near-duplicate servers take each other's questions)."))
    acting_similarity: float = Field(default=0.8, ge=0, le=1, description=(
        "Question cosine from which an example makes a tool that may change something callable (0.8: \"Please "
        "remember that my favourite colour is green\" is 0.85 from the same request for blue; \"What is my favourite "
        "colour?\" 0.77): a faint neighbour never makes the router act. Only the asking caller's own examples "
        "count for that (callers without a key are one caller): another's word never makes it act for this one."))
    reject_after: int = Field(default=3, ge=1, le=1000, description=(
        "Times a backend must have been wrong (more than right) for questions within `reject_similarity` of a "
        "new one before it is pushed down for it: one complaint is an anecdote, several are a pattern."))
    reject_similarity: float = Field(default=0.4, ge=0, lt=1, description=(
        "Question cosine within which rejections of a backend count towards `reject_after`."))
    reject_weight: float = Field(default=0.3, ge=0, le=2, description=(
        "The most a pattern of rejections takes off `match` (n rejections take weight * n / (n + 1))."))
    default_after: int = Field(default=2, ge=1, le=1000, description=(
        "Times a capability must have been right where retrieval was unsure (below `routing.min_confidence`) "
        "before it becomes a learned default for such questions."))
    default_weight: float = Field(default=2.0, ge=0, le=10, description=(
        "Weight of a learned default: its share of the right answers where retrieval was unsure, times this, "
        "times how far below `routing.min_confidence` retrieval is for the question (0 at it). 0 turns it off."))
    max_examples_per_capability: int = Field(default=200, ge=1, le=100_000, description=(
        "Examples kept per capability; the oldest are dropped beyond it."))
    learn_from_chat: bool = Field(default=True, description=(
        "The tools an LLM called successfully in `/v1/chat` become positive examples."))
    learn_from_routed: bool = Field(default=False, description=(
        "Every routed call that succeeded becomes a positive example (it reinforces the router's own choices)."))
    decision_ttl_s: float = Field(default=3600.0, gt=0, description=(
        "How long a query's `request_id` can be given feedback on."))
    refresh_s: float = Field(default=2.0, gt=0, description=(
        "How often a replica reads the examples other replicas added."))
