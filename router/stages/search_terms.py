"""What a search looks for, as a request writes it: "Search memory for alice" looks for `alice`, "Find repositories
about vector databases" for `vector databases`, 'Search GitHub code for "def main"' for `def main`. Given the whole
request, a search matches the request's own words too ("search", "memory"): a tool that matches text (a knowledge
graph's names, a code index) then finds nothing, an answer that says the thing is not there.

    search_terms("Search memory for alice", {"memory", "search", "node"}, {"memory"})    # "alice"
    search_terms("What is the capital of Peru?", set(), set())                          # None: not a search

Where the search looks ("memory" of the memory server, "the web" of a web search) and what kind of thing it looks
for ("repositories about ...") are left out only when the tool's own texts name them: "Find pizza places in Chicago"
stays whole but for "Find". English reads "search X for Y" as looking in X for Y, and so does this.

The words a question is about (`content_words`), and those of them a capability's texts never name (`unmatched_words`),
are read here too.
"""

from __future__ import annotations

import re
from typing import Any

from router.retrieval.text import STOP_WORDS, stem, tokenize, words
from router.stages.written import words_of
from router.values import Capability

# Parameters that take a search's terms, not a question to answer (`question`, `prompt` and `text` keep it whole).
_SEARCH_PARAMETERS = frozenset({"query", "q", "search", "searchquery", "keywords", "keyword", "terms", "term",
                                "searchterm", "searchterms", "querystring"})
_REQUEST = re.compile(r"^\s*(?:please\s+)?(?:(?:can|could|would)\s+you\s+)?(?P<verb>search|look\s+up|look\s+for|"
                      r"find(?!\s+out\b)|query)\s+(?:(?:me|us)\s+)?(?P<rest>\S.*)$", re.I | re.S)
_LONGEST = 300  # characters: a request written as a search is short, and longer text is read no further
# "search [in] <where> for <terms>"; "find <things> about <terms>"; "<terms> in <where>".
_FOR = re.compile(r"^(?:(?:in|through|within)\s+)?(?P<where>(?:[\w'-]+\s+){0,4}?)for\s+(?P<terms>\S.*)$", re.I)
_ABOUT = re.compile(r"^(?P<things>(?:[\w'-]+\s+){0,3}?[\w'-]+)\s+(?:about|named|called|matching|containing|"
                    r"mentioning)\s+(?P<terms>\S.*)$", re.I)
_WHERE = re.compile(r"^(?P<terms>.+?)\s+(?:in|on|from|across|within)\s+(?P<where>(?:[\w'-]+\s+){0,2}[\w'-]+)$", re.I)
_QUOTED = re.compile(r"\"([^\"\n]{1,200})\"|'([^'\n]{1,200})'|`([^`\n]{1,200})`|\u201c([^\u201d\n]{1,200})\u201d")
_NO_PLACE = frozenset("the a an my our your all any some of".split())


def takes_search_terms(parameter: str) -> bool:
    return parameter.replace("_", "").replace("-", "").lower() in _SEARCH_PARAMETERS


def search_terms(question: str, own_words: set[str], places: set[str]) -> str | None:
    """What a request written as a search looks for: the request without its verb, the place searched and the kind
    of thing sought (when `own_words`, the tool's and its backend's, name them; a place after the terms only when
    `places`, its backend's, do: "Search for memory leaks in Node" keeps "in Node"), unquoted when that is all one
    quote. None: not written as a search, longer than such a request, or nothing left but the tool's own words, so
    the question stays whole."""
    request = _REQUEST.match(question) if len(question) <= _LONGEST else None
    if request is None:
        return None
    verb, terms = request["verb"].lower(), request["rest"].rstrip(" \t\n?.!")
    if verb in ("search", "query"):
        found = _FOR.match(terms)
        if found and _names_only(found["where"], own_words):
            terms = found["terms"]
    elif (found := _ABOUT.match(terms)) and _names_only(found["things"], own_words):
        terms = found["terms"]
    if (found := _WHERE.match(terms)) and _names_only(found["where"], places, at_least_one=True):
        terms = found["terms"]
    if _names_only(terms, own_words) or re.match(r"(?:and|or|then|but)\b", terms, re.I):
        return None  # "Find and delete the duplicates" looks for nothing it says
    quoted = _QUOTED.fullmatch(terms.strip())  # 'Search GitHub code for "def main"'; not 'python -"monty python"'
    return next(g for g in quoted.groups() if g is not None) if quoted else terms.strip()


def _names_only(words: str, own_words: set[str], at_least_one: bool = False) -> bool:
    """Whether every word of `words` but articles is one of the tool's own (a plural as its singular)."""
    named = [w for w in re.findall(r"[a-z0-9]+", words.lower()) if w not in _NO_PLACE]
    return (bool(named) or not at_least_one) and all(w in own_words or w.rstrip("s") in own_words for w in named)


def own_words(*texts: str) -> set[str]:
    """The words of a tool's name, description and backend, each also without a plural's s."""
    words = {w for text in texts for w in [*words_of(text), *re.findall(r"[a-z0-9]+", text.lower())]}
    return words | {w.rstrip("s") for w in words}


# Words that ask for an answer rather than say what it is about, or say only how much of it ("everything in
# memory" asks for the whole of what the reader returns), or say which backend is to answer ("use the memory
# server"): they need no echo in a capability's texts.
ASKING = frozenset(map(stem, "show list get print display see find fetch return provide want need like know "
                             "everything anything whole entire every use using server servers backend backends"
                             .split()))


def content_words(question: str) -> list[str]:
    """The question's words (lower-cased) that say what it is about: not stop words, nor words that only ask."""
    return [w for w in words(question) if w not in STOP_WORDS and len(w) > 1 and stem(w) not in ASKING]


def says_more(question: str, *texts: str) -> bool:
    """Whether the question says anything `texts` (a tool's name, description, backend) do not, stop words and words
    that only ask ("show", "get") aside: a value the router could not read, which a default would silently replace."""
    own = own_words(*texts)
    return any(w not in own and w.rstrip("s") not in own for w in content_words(question))


def unmatched_words(cap: Capability, question: str, server_description: str = "") -> list[str]:
    """The question's content words (lower-cased) that nothing in the capability's texts, or its server's
    description, names."""
    own = set(tokenize(f"{cap.backend} {cap.name} {cap.title or ''} {cap.description} "
                       f"{schema_words(cap.input_schema)} {server_description}"))
    out: dict[str, str] = {}
    for word in content_words(question):
        if (s := stem(word)) not in own and not _adverb_of(word, own) and not _plural_of(word, own):
            out.setdefault(s, word)
    return list(out.values())


def _plural_of(word: str, own: set[str]) -> bool:
    """Whether `word` is a singular or plural of one of `own` that retrieval's stems keep apart ("note" and "notes"
    stem to "note" and "not", "files" and "file" to "fil" and "file"). Only here, as `_adverb_of`: retrieval measured
    worse with the two joined."""
    return stem(f"{word}s") in own if not word.endswith("s") else stem(word[:-1]) in own


def _adverb_of(word: str, own: set[str]) -> bool:
    """Whether `word` is an adverb of one of `own` ("recently" of "recent", "weekly" of "week"). Only here: as a
    retrieval token "-ly" would join words it does not (ital-y, app-ly)."""
    return len(word) > 5 and word.endswith("ly") and stem(word[:-2]) in own


def schema_words(schema: Any) -> str:
    """Every key and string of a JSON schema, as one text."""
    if isinstance(schema, dict):
        return " ".join(f"{k} {schema_words(v)}" for k, v in schema.items())
    if isinstance(schema, list):
        return " ".join(schema_words(v) for v in schema)
    return schema if isinstance(schema, str) else ""
