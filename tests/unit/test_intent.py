from __future__ import annotations

import pytest

from router.errors import UnknownIntent
from router.retrieval.intent import IntentClassifier
from router.settings.intents import IntentDef, IntentSettings
from tests.unit.helpers import embed_texts


def keyword_classifier() -> IntentClassifier:
    return IntentClassifier(IntentSettings(), {})


def test_keywords_classify_without_embeddings() -> None:
    intent, source, scores = keyword_classifier().classify("Please review this pull request", None)
    assert (intent, source) == ("code-review", "classified")
    # two keyword hits saturate the keyword score: 0.3 * 1.0
    assert scores["code-review"] == pytest.approx(0.3)
    assert scores["document-qa"] == 0.0


def test_one_keyword_hit_counts_half() -> None:
    _, _, scores = keyword_classifier().classify("write something", None)
    assert scores["creative-orientation"] == pytest.approx(0.15)


def test_keywords_match_whole_words_only() -> None:
    # "rewrite" contains "write" but is not the keyword "write"
    intent, source, _ = keyword_classifier().classify("rewriteable", None)
    assert (intent, source) == ("general", "default")


def test_no_keyword_and_no_vector_gives_the_default_intent() -> None:
    intent, source, scores = keyword_classifier().classify("hello there", None)
    assert (intent, source) == ("general", "default")
    assert set(scores) == set(IntentSettings().intents)


def test_prototype_similarity_classifies_a_question_without_keywords() -> None:
    settings = IntentSettings(
        intents={
            "weather": IntentDef(
                description="weather forecast rain sun temperature",
                examples=["will it rain tomorrow", "temperature forecast"],
            ),
            "general": IntentDef(description="anything else", examples=["hello"]),
        }
    )
    texts = IntentClassifier.prototype_texts(settings)
    assert texts["weather"][0] == "weather forecast rain sun temperature"
    clf = IntentClassifier(settings, {name: embed_texts(t) for name, t in texts.items()})
    intent, source, scores = clf.classify("is rain likely", embed_texts(["is rain likely"])[0])
    assert (intent, source) == ("weather", "classified")
    assert scores["weather"] > scores["general"]


def test_a_weak_prototype_match_falls_back_to_the_default() -> None:
    settings = IntentSettings(
        intents={
            "weather": IntentDef(description="weather forecast rain sun temperature"),
            "general": IntentDef(description="anything else"),
        }
    )
    clf = IntentClassifier(
        settings, {n: embed_texts(t) for n, t in IntentClassifier.prototype_texts(settings).items()}
    )
    q = "quantum chromodynamics lattice"
    assert clf.classify(q, embed_texts([q])[0])[:2] == ("general", "default")


def test_override_resolves_a_known_intent() -> None:
    assert keyword_classifier().resolve("document-qa") == "document-qa"


def test_unknown_intent_override_raises_listing_the_allowed_values() -> None:
    with pytest.raises(UnknownIntent) as info:
        keyword_classifier().resolve("poetry")
    err = info.value
    assert err.status_code == 400
    assert err.details["intent"] == "poetry"
    assert err.details["allowed"] == [
        "creative-orientation",
        "technical-analysis",
        "document-qa",
        "code-review",
        "general",
    ]
    for name in err.details["allowed"]:
        assert name in err.message
