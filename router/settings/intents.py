"""Settings of intent classification (`intents`): the intents, their prototype texts and keywords."""

from __future__ import annotations

from pydantic import Field, model_validator

from router.settings.base import Strict


class IntentDef(Strict):
    """One intent: its prototype embedding is the mean of its description and examples."""

    description: str = Field(description="What questions of this intent ask; part of its prototype embedding.")
    examples: list[str] = Field(default_factory=list, description="Example questions; averaged into the prototype.")
    keywords: list[str] = Field(default_factory=list, description="Words whose presence votes for this intent.")


def _default_intents() -> dict[str, IntentDef]:
    return {
        "creative-orientation": IntentDef(
            description="write, brainstorm or imagine something new: stories, poems, names, slogans, ideas",
            examples=["write a short poem about the sea", "brainstorm names for a coffee shop",
                      "draft a catchy slogan for our product", "imagine a story about a robot"],
            keywords=["write", "poem", "story", "brainstorm", "slogan", "creative", "imagine", "draft"],
        ),
        "technical-analysis": IntentDef(
            description="compute, convert, measure, compare or analyse data, numbers, units, systems, times",
            examples=["convert 5 km to miles", "what is 12 times 7", "analyse the latency figures",
                      "what time is it in Tokyo", "compare the throughput of two servers"],
            keywords=["calculate", "compute", "convert", "analyse", "analyze", "benchmark", "metrics",
                      "latency", "performance", "statistics", "how many", "how much"],
        ),
        "document-qa": IntentDef(
            description="answer a question from documents, manuals, a knowledge base or documentation",
            examples=["what does the documentation say about configuration", "how do I deploy on a cluster",
                      "according to the manual, what is the default port", "summarise the design notes"],
            keywords=["documentation", "docs", "manual", "according to", "knowledge base", "guide", "readme",
                      "faq", "policy"],
        ),
        "code-review": IntentDef(
            description="review, explain, debug or improve source code, diffs, commits and repositories",
            examples=["review this pull request", "why does this function raise a KeyError",
                      "show the git log of the repository", "refactor this python class"],
            keywords=["code", "review", "bug", "refactor", "function", "commit", "diff", "git", "repository",
                      "pull request", "python", "stack trace"],
        ),
        "general": IntentDef(
            description="anything else: everyday questions, facts, chit-chat, lookups",
            examples=["hello", "remember that my favourite colour is blue", "echo this message"],
            keywords=[],
        ),
    }


class IntentSettings(Strict):
    """Intent classification: cosine to each intent's prototype, blended with keyword hits."""

    intents: dict[str, IntentDef] = Field(default_factory=_default_intents, description=(
        "The intents a question is classified into, by name; replaces the defaults when given."))
    default: str = Field(default="general", description="The intent of a question that matches none well.")
    keyword_weight: float = Field(default=0.3, ge=0, le=1, description=(
        "Share of keyword hits in the blend with prototype-embedding similarity."))

    @model_validator(mode="after")
    def _default_is_known(self) -> IntentSettings:
        if self.default not in self.intents:
            raise ValueError(f"intents.default {self.default!r} is not one of {sorted(self.intents)}")
        return self
