"""analyse: a question's vector and intent, before any live state enters.

Agents repeat questions, so the result is cached per caller and question (`routing.query_cache_size`):
a shared entry would answer another caller's question faster, and every answer shows its stages' times,
so a caller could tell what others had asked. A question analysed while the index had no vectors is
analysed again once it has them.
"""

from __future__ import annotations

from router.cache import LRU
from router.literals import EmbedFn
from router.retrieval.intent import IntentClassifier
from router.retrieval.text import spelled
from router.values import Analysis


class Analyser:
    def __init__(self, classifier: IntentClassifier, embed: EmbedFn, cache_size: int) -> None:
        self.classifier = classifier
        self._embed = embed
        self._cache: LRU[tuple[str, str], Analysis] = LRU(cache_size)

    async def analyse(self, question: str, *, dense: bool, intent: str | None = None, caller: str = "") -> Analysis:
        """`dense`: the index has vectors, so the question needs one; `intent`: the caller's override;
        `caller`: who asks (its own cache entries)."""
        override = self.classifier.resolve(intent) if intent else None  # an unknown intent is a 400 first
        analysis = self._cache.get((caller, question))
        if analysis is None or (analysis.vector is None and dense):
            vector = (await self._embed([spelled(question)]))[0] if dense else None
            name, source, scores = self.classifier.classify(question, vector)
            analysis = Analysis(question=question, vector=vector, intent=name, intent_source=source,  # type: ignore[arg-type]
                                intent_scores=scores, caller=caller)
            self._cache.put((caller, question), analysis)
        if override is None:
            return analysis
        return Analysis(question=question, vector=analysis.vector, intent=override, intent_source="override",
                        caller=caller)
