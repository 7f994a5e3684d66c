"""Intent classification from prototype embeddings plus keywords, with a caller override.

    texts = IntentClassifier.prototype_texts(settings.intents)     # embed these once
    clf = IntentClassifier(settings.intents, {name: vectors, ...})
    intent, source, scores = clf.classify("review this pull request", query_vector)
    clf.resolve("code-review")   # an override; an unknown name raises UnknownIntent (400)
"""

from __future__ import annotations

import re

import numpy as np

from router.errors import UnknownIntent
from router.settings.intents import IntentSettings

# Below this prototype similarity, with no keyword hit, the question gets the default intent.
_MIN_SIMILARITY = 0.15


class IntentClassifier:
    def __init__(self, settings: IntentSettings, prototypes: dict[str, np.ndarray]) -> None:
        self.settings = settings
        self.names = list(settings.intents)
        # One prototype per intent: the mean of its description and examples, re-normalised.
        self._proto = np.stack([self._mean(prototypes[n]) for n in self.names]) if prototypes else None
        self._keywords = {
            n: [re.compile(rf"\b{re.escape(k.lower())}\b") for k in d.keywords] for n, d in settings.intents.items()
        }

    @staticmethod
    def prototype_texts(settings: IntentSettings) -> dict[str, list[str]]:
        return {n: [d.description, *d.examples] for n, d in settings.intents.items()}

    @staticmethod
    def _mean(vectors: np.ndarray) -> np.ndarray:
        v = np.asarray(vectors, dtype=np.float32).mean(axis=0)
        return v / max(float(np.linalg.norm(v)), 1e-12)

    def resolve(self, intent: str) -> str:
        if intent not in self.settings.intents:
            raise UnknownIntent(f"unknown intent {intent!r}; allowed values: {', '.join(self.names)}",
                                intent=intent, allowed=self.names)
        return intent

    def classify(self, question: str, query_vector: np.ndarray | None) -> tuple[str, str, dict[str, float]]:
        """(intent, source, score per intent); source is "classified" or "default"."""
        text = question.lower()
        kw = np.array([min(1.0, sum(bool(p.search(text)) for p in self._keywords[n]) / 2) for n in self.names])
        if self._proto is not None and query_vector is not None:
            sims = self._proto @ query_vector
        else:
            sims = np.zeros(len(self.names))
        w = self.settings.keyword_weight
        blended = (1 - w) * sims + w * kw
        scores = {n: round(float(s), 4) for n, s in zip(self.names, blended, strict=True)}
        best = int(np.argmax(blended))
        if kw[best] == 0 and sims[best] < _MIN_SIMILARITY:
            return self.settings.default, "default", scores
        return self.names[best], "classified", scores
