"""Tokenisation for sparse retrieval: identifiers split into words, stop words dropped, light stemming.

Tool names arrive as ``get_current_time``, ``searchRepositories`` or ``read-file``; questions as
prose. Both go through `tokenize` so that "search repositories" meets ``searchRepositories``.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import regex

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
CJK = re.compile(f"[{_CJK_RANGES}]")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
# Letters, digits and the marks that belong to them (a Hindi vowel sign, a Thai tone), in every script but
# those: a word of accented Latin, Cyrillic, Greek or Devanagari is one word.
_WORD = regex.compile(f"(?V1)[[\\p{{L}}\\p{{N}}\\p{{M}}]--[{_CJK_RANGES}]]+")

STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own please same
    she should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves using use used via also etc e.g i.e let lets me tell give
    """.split()
)

# Ordered longest first; a suffix is only removed when a stem of three or more letters remains.
_SUFFIXES = ("ational", "ization", "ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ers",
             "er", "ed", "es", "s")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    if len(word) <= 3 or word.isdigit():
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word  # class, process: a plural never ends in -ss
            base = word[: -len(suffix)]
            if suffix in ("ies", "ied"):
                return base + "y"
            if suffix in ("ing", "ed", "er", "ers", "ings") and len(base) > 3 and base[-1] == base[-2]:
                return base[:-1]  # running -> run, stopped -> stop
            return base
    return word


def split_identifier(text: str) -> str:
    """``getCurrentTime`` / ``get_current_time`` / ``get-current-time`` -> ``get current time``."""
    return _CAMEL.sub(" ", text).replace("_", " ").replace("-", " ").replace(".", " ").replace("/", " ")


def words(text: str) -> list[str]:
    """Lower-case words of `text`, identifiers split, stop words kept, accents dropped ("résumé" is "resume",
    as many write it)."""
    found = _ASCII_WORD.findall(split_identifier(text)) if text.isascii() else \
        _WORD.findall(split_identifier(_unaccented(text)))
    out = [w.lower() for w in found]
    # CJK scripts have no spaces: index their characters one by one.
    out.extend(CJK.findall(text))
    return out


def _unaccented(text: str) -> str:
    """Latin, Greek and Cyrillic letters without their accents ("é" is "e"); the marks of other scripts are part
    of their letters (a Devanagari vowel sign), and a Hangul syllable is not taken apart."""
    out: list[str] = []
    for c in unicodedata.normalize("NFKC", text):  # compatibility forms first: ligatures, full-width digits
        if c < _ACCENTED_SCRIPTS_END:
            out.extend(d for d in unicodedata.normalize("NFKD", c) if not unicodedata.combining(d))
        else:
            out.append(c)
    return "".join(out)


_ACCENTED_SCRIPTS_END = "\u0530"  # Latin, its extensions, Greek and Cyrillic come before


def tokenize(text: str) -> list[str]:
    """Tokens for BM25: split, lower-cased, stop words removed, stemmed."""
    # Single CJK characters are kept: `words` indexes those scripts one character at a time.
    return [stem(w) for w in words(text)
            if w not in STOP_WORDS and (len(w) > 1 or w.isdigit() or CJK.match(w) is not None)]


# A URL is left whole; a file-system path (at least one directory, then a name) is matched so that
# only its extension is kept.
_URL_OR_PATH = re.compile(r"(?P<url>(?<![\w+.-])[A-Za-z][\w+.-]*://\S+)"
                          r"|(?<![\w.:/~-])(?:~|\.{1,2})?/(?:[\w.-]+/)+(?P<name>[\w-]+(?:\.[\w-]+)*)/?")


def _path_to_extension(match: re.Match[str]) -> str:
    if match.group("url"):
        return match.group(0)
    name = match.group("name")
    return " " + name.rsplit(".", 1)[1] if "." in name else " "


def question_tokens(text: str) -> list[str]:
    """BM25 tokens of a question: a file path counts only by its extension. Its directories are the
    asker's own layout ("/root/markdown/report.md"), not evidence of the capability wanted, and they
    drew tools named after them above the ones the task needs."""
    text = spelled(text)
    return tokenize(_URL_OR_PATH.sub(_path_to_extension, text) if "/" in text else text)


_PERCENT = re.compile(r"(?<=\d)\s?%")
# A web address with its scheme (or "www."), up to a space, a quote or a square bracket ("[x](https://a.example)"); or
# a host of a common top-level domain written bare ("example.com/docs"; not "bob@example.com", nor a file name).
_ADDRESS_REST = r"[^\s<>\"'`\u2018\u2019\u201c\u201d\[\]]"
URL = re.compile(rf"\b(?:https?://|www\.){_ADDRESS_REST}+|(?<![\w@./:-])(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+"
                 rf"(?:com|org|net|io|dev|ai|app|edu|gov)(?:/{_ADDRESS_REST}*)?(?![\w@-])", re.I)
_SCHEME_OR_WWW = re.compile(r"^(?:[a-z][\w+.-]*://)?(?:www\.)?", re.I)


# An arithmetic operator between numbers, as the words it stands for: "17 * 23" and "17 times 23" gave the model
# nothing of a product, and "times" drew the time server's tools ("17 x 23" needs its spaces: "1920x1080" is a size).
_OPERATOR = re.compile(r"(?<=[\d)])\s*(\*\*|\^|[*\u00d7\u00f7+]|(?<=\s)(?:x|/|times)(?=\s))\s*(?=[\d(.])", re.I)
_OPERATOR_WORDS = {"**": "to the power of", "^": "to the power of", "*": "multiplied by", "\u00d7": "multiplied by",
                   "x": "multiplied by", "times": "multiplied by", "\u00f7": "divided by", "/": "divided by",
                   "+": "plus"}
_DIGIT = re.compile(r"\d")


def spelled(question: str) -> str:
    """The question as both retrievers read it. A symbol that stands for a word is spelled out: "7% of 300" gave
    BM25 only "300" (and an FAQ entry on a 300-second cache) and the model no sense of a percentage. A web address
    reads as the site it is on: the model put "Navigate to https://news.ycombinator.com" closer to a browser's
    going back a page (cosine 0.18) than to its navigating to a URL (0.15; "Navigate to a URL" 0.69), the address's
    pieces outweighing the request's words. As "a URL on news ycombinator" (0.52 and 0.44) it keeps the site,
    which can name the backend meant. An operator between numbers reads as its words ("17 multiplied by 23")."""
    if "%" in question:
        question = _PERCENT.sub(" percent", question)
    if _DIGIT.search(question):
        question = _OPERATOR.sub(lambda m: f" {_OPERATOR_WORDS[m.group(1).lower()]} ", question)
    return URL.sub(_site, question) if "." in question else question


def _site(address: re.Match[str]) -> str:
    written = address.group(0)
    whole = written.rstrip(".,;:!?")  # a sentence's punctuation after the address stays the sentence's
    host = re.split(r"[/:?#]", _SCHEME_OR_WWW.sub("", whole), maxsplit=1)[0]
    words = host.split(".")[:-1]  # the top-level domain says nothing of the site
    site = f"a URL on {' '.join(words)}" if words and not host.replace(".", "").isdigit() else "a URL"
    return site + written[len(whole):]


# A run of spaces is entered at its start only: tried from each of its spaces, a long run took a minute.
_CLAUSE = re.compile(r"(?:[.;!?]\s+|,\s*(?:and\s+|then\s+)?|(?<!\s)\s+and\s+then\s+|(?<!\s)\s+then\s+"
                     r"|(?<!\s)\s+and\s+(?=[a-z]+\b))", re.I)


def clauses(text: str) -> list[str]:
    """The steps of a multi-step request ("find X, then save it to Y"), each with some content."""
    parts = [p.strip(" ,.;") for p in _CLAUSE.split(text)]
    return [p for p in parts if len(tokenize(p)) >= 2]
