"""A thing's name or identifier as a question writes it beside the kind of thing: "a branch called feature-x", "the
users table", "the table 'orders'", "user U12345". It fills a parameter named after that kind (`branch_name`,
`tableName`; `user_id`, `pageId`), and nothing else: a bare word is a name only next to the word for what it names.
A switch is on where the question names it (`switch_in`). A call that would say only which thing to a tool that
updates it (`what_an_update_changes`) is none."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from router.schemas import choices_of
from router.stages.written import words_of
from router.values import Capability

_KIND = re.compile(r"^([a-z]{3,})(?:_name|Name)$")  # branch_name, tableName; not `name` alone, nor `first_name`
_NOT_KINDS = frozenset({"first", "last", "full", "middle", "display", "user", "given", "family", "nick", "real"})
# Quotes, not apostrophes: an opening quote follows no letter ("Don't delete the users' branch" quotes nothing).
_QUOTED = (r"(?<!\w)\"([^\"\n]{1,64})\"(?!\w)|(?<!\w)'([^'\n]{1,64})'(?!\w)|(?<!\w)`([^`\n]{1,64})`(?!\w)|"
           r"\u201c([^\u201d\n]{1,64})\u201d")
_WORD = r"([\w][\w.\-/]{0,99}(?<![.\-/]))"
# Words that stand between "the" and a kind of thing without naming one ("the current branch", "the whole table"),
# or follow "called" without being a name ("a table named in the ticket").
_NOT_NAMES = frozenset(
    "a an the this that these those it its them my your our their his her each every any some all no which what "
    "whose current new old same other whole entire first last next previous prior default remote local following "
    "above below given specified selected active existing latest recent top bottom second third final original "
    "right wrong correct empty temporary only big biggest large largest small smallest dead stale broken upstream "
    "downstream source target base head parent child one two three four five six seven eight nine ten several many "
    "few database sql git repo repository in on at by for from to with without after before like as of into onto "
    "over under about".split())
# A word between "the" and a kind of thing that ends as most English adjectives do ("the available roles", "the
# aeronautical charts", "the existing branch") describes the thing rather than names it; a name so ending ("the
# staging branch") is missed, not mistaken.
_DESCRIBES = re.compile(r"(?:al|ble|ive|ous|ic|ful|less|ent|ant|ary|ing|ed|est)$", re.I)
_THE = re.compile(r"\bthe\s+$", re.I)


def loosely_named(question: str, span: tuple[int, int]) -> bool:
    """Whether the name at `span` is a bare word between "the" and its kind ("the users table"), not called so or
    quoted: a guess that a parameter the tool can do without does not take."""
    return _THE.search(question[:span[0]]) is not None and question[span[0] - 1:span[0]] not in "\"'`\u201c"


def kind_named_by(parameter: str) -> str | None:
    """The kind of thing a parameter takes the name of ("branch" of `branch_name`), else None."""
    found = _KIND.match(parameter)
    kind = found.group(1).lower() if found else None
    return kind if kind not in _NOT_KINDS else None


def name_in(question: str, parameter: str, free: Callable[[tuple[int, int]], bool],
            kind: str | None = None, loose: bool = True) -> tuple[tuple[int, int], str] | None:
    """The span and value of the name the question first gives a thing of the parameter's kind (or of `kind`), where
    `free`; unless `loose`, not a bare word between "the" and the kind ("the users table").
    The first mention decides: one that names nothing ("the table called default, not the users table", "a branch
    named after the ticket") gives no name rather than the next; and several things of the kind ("the tables
    called users and orders", "the three branches") give none, for a parameter that takes one."""
    kind = kind or kind_named_by(parameter)
    if kind is None:
        return None
    k, several = re.escape(kind), rf"{re.escape(kind)}e?s\b"
    patterns = (rf"\b{k}s?\s+(?:called|named|titled)\s+(?:{_QUOTED}|{_WORD})",  # a branch called feature-x
                rf"\b{k}s?\s+(?:{_QUOTED})",  # the table "orders"
                rf"(?:{_QUOTED})\s+{k}s?\b",  # the "orders" table
                rf"\b{k}\s+([A-Za-z][\w.\-]*)(?<![.\-])(?![\w\-])",  # node worker-1, namespace kube-system
                *([rf"\bthe\s+{_WORD}\s+{k}s?\b"] if loose else []))  # the users table
    mentions = sorted((m.start(), i, m) for i, pattern in enumerate(patterns)
                      for m in re.finditer(pattern, question, re.I))
    for _, i, m in mentions:
        group = next(g for g in range(1, (m.lastindex or 0) + 1) if m.group(g) is not None)
        value, span = m.group(group), m.span(group)
        if not free(span) or (i == 3 and not re.search(r"\d|\w[-_.]\w", value)):
            continue  # already another parameter's, or a word after the kind's that names nothing ("node in ...")
        if re.search(several, m.group(0), re.I) or value.lower() in _NOT_NAMES or value.lower() == kind or \
                (i == 4 and (_DESCRIBES.search(value) or value.isdigit())):
            return None
        return span, value
    return None


# An identifier as questions write one: letters and digits with a digit in it ("U12345", "C024BE91L", a UUID,
# "inv_2024-001"); digits alone only after "id", "#" or "number", or four of them or more ("page 2" is no page's id),
# and a date or a time only so.
_ID = r"([A-Za-z0-9](?:[\w.:\-]*[A-Za-z0-9])?)"
_ID_MARK = r"(?:(?:id|number|no\.)\s*[:#=]?\s*|#)"
_DATE_LIKE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}|\d{1,2}:\d{2}(?::\d{2})?")
# The last word of a parameter for an identifier: "id", or "ts" for a message's timestamp (Slack's `thread_ts`).
_ID_WORDS = frozenset({"id", "ts"})
_GENERIC_IDS = frozenset({"request", "session", "client", "trace", "correlation", "idempotency", "api", "external"})


_ID_OF = re.compile(r"\b(?:id|identifier)\s+of\s+(?:the\s+|a\s+|an\s+)?([A-Za-z][\w ]*)", re.I)
_KIND_ID = re.compile(r"([A-Za-z][\w ]*?)\s+id\b", re.I)


def kind_identified_by(parameter: str, description: str = "") -> str | None:
    """The kind of thing a parameter takes the identifier of ("channel" of `channel_id`, "data source" of
    `dataSourceId`, "thread" of `thread_ts`, and a parameter named for its kind whose description says it takes its
    ID: Stripe's `payment_intent`, "The ID of the PaymentIntent to refund"), else None."""
    words = words_of(parameter)
    if len(words) < 2 or words[-1] not in _ID_WORDS or words[-2] in _GENERIC_IDS:
        said = [words_of(m.group(1))[:len(words)] for m in _ID_OF.finditer(description)] + \
            [words_of(m.group(1))[-len(words):] for m in _KIND_ID.finditer(description)]  # "... by this charge ID"
        return " ".join(words) if words and words in said else None
    return " ".join(words[:-1])


def identifier_in(question: str, parameter: str, free: Callable[[tuple[int, int]], bool],
                  description: str = "") -> tuple[tuple[int, int], str] | None:
    """The span and value of the identifier the question first gives a thing of the parameter's kind ("the profile of
    user U12345", "page id 42", "`channel_id`: C123"), where `free`; several of the kind ("users U1 and U2") give
    none."""
    kind = kind_identified_by(parameter, description)
    if kind is None:
        return None
    k = r"\s+".join(map(re.escape, kind.split()))
    patterns = (rf"\b{k}(s?)\s+(?:with\s+(?:the\s+)?)?({_ID_MARK})?[\"'`\u201c]?{_ID}(?![\w:\-]|\.\w)",
                rf"\b{re.escape(parameter)}()\s*[:=]?\s*()`?{_ID}(?![\w:\-]|\.\w)")
    mentions = sorted((m for p in patterns for m in re.finditer(p, question, re.I)), key=lambda m: m.start())
    for m in mentions:
        value, span = m.group(3), m.span(3)
        if not free(span):
            continue
        if m.group(1) or not re.search(r"\d", value) or (not m.group(2) and (
                (value.isdigit() and len(value) < 4) or _DATE_LIKE.fullmatch(value))):
            return None
        return span, value
    return None


# A commit, for a parameter that takes one by its name (`revision`, `rev`, `commit`, `sha`, `commit_sha`): its hash
# written out (seven to forty hexadecimal digits, a letter among them: "commit 1a2b3c4"), HEAD written as git does
# ("HEAD~2"), or the last commit and the one before it in words, which git calls HEAD and HEAD~1.
_REVISION_PARAMETERS = frozenset({"revision", "rev", "commit", "sha", "commitsha", "commithash", "hash"})
_REVISION = re.compile(
    r"(?<![\w~^-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)([0-9a-f]{7,40})(?![\w-])|\b(HEAD(?:[~^]\d*)*)(?![\w~^])"
    r"|(?i:\b(?:the|my|our)\s+(?:(last|latest|most\s+recent|newest)|(previous|prior|penultimate|second[- ]to[- ]last))"
    r"\s+commit\b)")


# A commit named as a bound ("What changed since the last commit?") is where changes start, not the commit shown.
_BOUND = re.compile(r"\b(?:since|after|before|until|till|from)\s+$", re.I)


def revision_in(question: str, parameter: str,
                free: Callable[[tuple[int, int]], bool]) -> tuple[tuple[int, int], str] | None:
    """The span and revision of the first commit the question names where `free` ("Show me the last commit": HEAD),
    but as a bound, for a parameter that takes one; None for another parameter, or where the question names none."""
    if "".join(words_of(parameter)) not in _REVISION_PARAMETERS:
        return None
    for m in _REVISION.finditer(question):
        if free(m.span()) and not _BOUND.search(question, 0, m.start()):
            return m.span(), m.group(1) or m.group(2) or ("HEAD" if m.group(3) else "HEAD~1")
    return None


_NOT = re.compile(r"\b(?:not|no|without|non|never|don'?t|doesn'?t|isn'?t)\W+(?:\w+\W+){0,4}$", re.I)
# A word between a determiner and the end of a phrase is a noun ("Publish the draft", "the draft to the blog"); one
# before another word describes it ("the raw HTML", "a dry run").
_DETERMINER = re.compile(r"\b(?:the|a|an|this|that|my|your|our|its|their)\s+$", re.I)
# The word as what a clause is about ("raw HTML is unreadable", "it was locked by mistake") says how things are.
_SUBJECT = re.compile(r"(?:\s+\w+)?\s+(?:is|are|was|were|by)\b", re.I)
_PHRASE_END = re.compile(r"\s*(?:[.,;:!?)]|$|(?:of|to|for|in|on|at|with|and|or|now|please|as|from|into)\b)", re.I)


def switch_in(question: str, parameter: str,
              free: Callable[[tuple[int, int]], bool]) -> tuple[tuple[int, int], bool] | None:
    """The span of the word that turns on a switch the question names ("Fetch the raw HTML" for `raw`, "List them
    recursively" for `recursive`, "Show the hidden files" for `hidden`; `include_hidden` only with both words), where
    `free`. A switch named within a few words after "not", "no" or "without" is left as it is, and so is one the
    question uses as a noun ("Publish the draft" sets no `draft`) or says is so ("raw HTML is unreadable", "locked by
    mistake"). Only a tool that only reads takes a switch so (`_derive`): one that acts is not told how on a guess."""
    words = [w for w in words_of(parameter) if len(w) >= 3]
    found = [re.search(rf"\b{re.escape(w)}{'(?:ly)?' if w.endswith('ive') else ''}\b", question, re.I) for w in words]
    if not words or len(words) < len(words_of(parameter)) or not all(found):
        return None
    spans = [m.span() for m in found if m]
    if any(_NOT.search(question[max(0, a - 60):a]) or _SUBJECT.match(question, b) or (
            _DETERMINER.search(question[max(0, a - 8):a]) and _PHRASE_END.match(question, b)) for a, b in spans):
        return None
    span = min(spans)
    return (span, True) if free(span) else None


_HOW = frozenset({"force", "dry", "verbose", "quiet", "confirm", "recursive", "wait", "notify", "async", "timeout"})
_UPDATES = frozenset({"update", "patch", "edit", "modify", "change", "alter", "set"})
# The last word of a parameter that says which thing, not what to make of it: `issue_number`, `page_id`, `owner`.
_WHICH = frozenset({"id", "ids", "number", "key", "slug", "owner", "repo", "repository", "path", "name", "uri", "url",
                    "ts", "uuid", "handle"})


def what_an_update_changes(cap: Capability, props: dict[str, dict[str, Any]], required: list[str],
                           out: dict[str, Any]) -> list[str] | None:
    """The optional parameters of a tool that updates something (`update_issue`, `API-patch-page`) that say what to
    change, when a call derived from the question would set none of them and its required ones only say which
    thing: "Close issue 42" sent as `update_issue(issue_number=42)` would change nothing and look done. None where
    that is not so."""
    if cap.read_only or not _UPDATES & set(words_of(cap.name)[:2]):
        return None

    def which(name: str) -> bool:  # `issue_number`, or Stripe's `dispute`: "The ID of the dispute to update"
        return (words_of(name) or [""])[-1] in _WHICH or \
            kind_identified_by(name, str(props.get(name, {}).get("description", ""))) is not None

    # A flag of how to do it is no change: `update_index(force)` refreshes the index, whatever `force` says.
    changes = [n for n in props if n not in required and not which(n) and not _HOW & set(words_of(n))]
    return changes if changes and all(map(which, required)) and not any(n in out for n in changes) else None


# A tool that does several things says which by one parameter (`action`, `operation`, `command`, `method`); a call
# that sets it to one of these only reads, whatever else the tool may do: a browser's `tabs` tool also opens and
# closes tabs, and "List the open tabs" calls it with `action: list`.
_DOES = frozenset({"action", "operation", "op", "command", "cmd", "method", "verb"})
_READS = frozenset("list get read show view status info describe search find query count check inspect lookup fetch "
                   "retrieve".split())


def reads_by_its_action(cap: Capability, arguments: dict[str, Any]) -> bool:
    """Whether the call's arguments choose, of the tool's enumerated actions, one that only reads."""
    props = cap.input_schema.get("properties") if isinstance(cap.input_schema, dict) else None
    return isinstance(props, dict) and any(
        name.lower() in _DOES and isinstance(value, str) and value.lower() in _READS
        and isinstance(props.get(name), dict) and value in (choices_of(props[name]) or ())
        for name, value in arguments.items())


# What a tool writes (a commit's message, an issue's title), as the question gives it: quoted after the word for it
# ('the message "fix typo"', 'titled "Login fails"'), or after "with the message" to the request's end ("Commit my
# changes with message fix typo"); unquoted, nothing else may follow ("... and push them" gives none).
_WRITTEN = frozenset({"message", "title", "comment", "subject", "caption"})


def text_given(question: str, parameter: str, free: Callable[[tuple[int, int]], bool]
               ) -> tuple[tuple[int, int], str] | None:
    """The span and value of the text the question gives for a parameter named for what a tool writes."""
    kind = (words_of(parameter) or [""])[-1]
    if kind not in _WRITTEN:
        return None
    k = "titled|title" if kind == "title" else re.escape(kind)
    patterns = (rf"\b(?:{k})s?\s*[:=]?\s*(?:{_QUOTED})",
                rf"\bwith\s+(?:the\s+|a\s+)?(?:\w+\s+)?(?:{k})\s+(?![\"'`\u201c])([^\n]{{1,200}}?)[.!]?\s*$")
    for pattern in patterns:
        m = re.search(pattern, question, re.I)
        group = next((g for g in range(1, (m.lastindex or 0) + 1) if m.group(g) is not None), 0) if m else 0
        if m and group and free(m.span(group)):
            value = m.group(group).strip()
            if pattern is patterns[1] and (re.search(r"\band\b", value, re.I) or value.lower() in _NOT_NAMES):
                return None
            return m.span(group), value
    return None


_RENAMED = re.compile(rf"\brenam(?:e|ing)\b[^;!?\n]*?\s(?:to|as|into)\s+(?:{_QUOTED}|{_WORD})"
                      r"(?:\s+(?:in|of|on|at|within|inside|for)\s[^\n]*)?\s*[.!]?\s*$", re.I)  # "... to Data in a.xlsx"


def new_name_in(question: str, parameter: str, free: Callable[[tuple[int, int]], bool]
                ) -> tuple[tuple[int, int], str] | None:
    """The span and value of the new name a rename gives ("Rename Sheet1 to Data", 'rename the channel to "ops"'), for
    a parameter for one (`new_name`, `newTitle`): the last words of the question, after "to", "as" or "into", but for
    where it is."""
    words = words_of(parameter)
    if len(words) < 2 or words[0] != "new" or words[-1] not in ("name", "title"):
        return None
    return _named_by(_RENAMED.search(question), free)


_NAMES_A_THING = frozenset({("name",), ("display", "name"), ("full", "name"), ("new", "name")})
# What a thing is called: quoted, a run of capitalised words ("Jane Doe", "SPRING"), or one word, up to the end of the
# request or a word that goes on with something else ("... named Jane Doe with email ...").
_CALLED = re.compile(rf"\b(?:called|named|titled)\s+(?:{_QUOTED}|([A-Z0-9][\w.\-]*(?:\s+[A-Z0-9][\w.\-]*)*)|"
                     r"([\w][\w.\-]*))(?=\s*(?:[.,;:!?)]|$|(?:with|and|for|to|in|on|at|from|that|which|whose|as|"
                     r"under|by|of|please)\b))")


def called_in(question: str, parameter: str, free: Callable[[tuple[int, int]], bool]
              ) -> tuple[tuple[int, int], str] | None:
    """The span and value of what the question says a thing is called ("Create a customer named Jane Doe", "a coupon
    called SPRING"), for a parameter that takes a thing's name and no kind's (`name`, `display_name`)."""
    if tuple(words_of(parameter)) not in _NAMES_A_THING:
        return None
    return _named_by(_CALLED.search(question), free)


def _named_by(m: re.Match[str] | None, free: Callable[[tuple[int, int]], bool]) -> tuple[tuple[int, int], str] | None:
    """The span and value of the first group `m` matched, where `free` and when it names something."""
    group = next((g for g in range(1, (m.lastindex or 0) + 1) if m.group(g) is not None), 0) if m else 0
    if not (m and group and free(m.span(group))) or m.group(group).lower() in _NOT_NAMES:
        return None
    return m.span(group), m.group(group)


# Words a number of a thing's identifier may follow: its own kind's, a mark, or words that only join ("the anime with
# ID 5012", "anime 5012", "resource 5 and 6").
_JOINING = frozenset("id ids no number num with is of and or to the a an for".split())
_WORD_BEFORE = re.compile(r"([A-Za-z]+)\W{0,3}$")


def counts_another_thing(question: str, start: int, kind: str) -> bool:
    """Whether the number at `start` follows a word for another thing than `kind` ("I am on episode 100" counts
    episodes, not the anime whose id is asked), so it is no identifier of `kind`."""
    before = _WORD_BEFORE.search(question, max(0, start - 40), start)
    if before is None:
        return False
    word = before.group(1).lower()
    return word not in _JOINING and word not in kind.split() and word.rstrip("s") not in kind.split()


def quoted_beside(question: str, parameter: str, free: Callable[[tuple[int, int]], bool]
                  ) -> tuple[tuple[int, int], str] | None:
    """The span and value of what the question quotes right beside the parameter's own words, where `free`: 'the tag
    "cute"', 'my user ID is "g-user123"', 'the "Rosaceae" family' (`tag`, `userId`, `family`). A full stop or comma
    inside the closing quote ends the sentence, not the value."""
    words = words_of(parameter)
    if not words:
        return None
    k = r"[\s_-]*".join(map(re.escape, words))
    patterns = (rf"\b{k}s?\s*(?:(?:is|was|of|=)\s+|[:=]\s*)?(?:{_QUOTED})", rf"(?:{_QUOTED})\s+{k}s?\b")
    mentions = sorted((m.start(), m) for p in patterns for m in re.finditer(p, question, re.I))
    for _, m in mentions:
        group = next(g for g in range(1, (m.lastindex or 0) + 1) if m.group(g) is not None)
        (start, end), value = m.span(group), m.group(group).rstrip(".,;")
        if _LISTED_BEFORE.search(question, 0, start - 1) or _LISTED_AFTER.match(question, end + 1):
            return None  # 'the "A", "B" and "C" charts': several, for a parameter that takes one
        if value.strip() and free((start, end)):
            return (start, end), value
    return None


_LISTED_BEFORE = re.compile(r"[\"'`\u201d]\s*(?:,|\band\b|\bor\b)\s*(?:(?:and|or)\s+)?$", re.I)
_LISTED_AFTER = re.compile(r"\s*(?:,|\band\b|\bor\b)\s*(?:(?:and|or)\s+)?[\"'`\u201c]", re.I)


# An IP address, for a parameter named or described as one (`ip`, `ipAddress`; "The IP address to check").
_IP = re.compile(r"(?<![\w.:])(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7})(?![\w:]|\.\d)")
_IP_DESCRIBED = re.compile(r"\bIP(?:v[46])?\s+address", re.I)


def ip_in(question: str, parameter: str, description: str, free: Callable[[tuple[int, int]], bool]
          ) -> tuple[tuple[int, int], str] | None:
    """The span and value of the first IP address the question writes, where `free`, for a parameter for one."""
    words = words_of(parameter)
    if not ({"ip", "ipv4", "ipv6"} & set(words) or _IP_DESCRIBED.search(description)):
        return None
    for m in _IP.finditer(question):
        try:
            ipaddress.ip_address(m.group(0))
        except ValueError:
            continue
        if free(m.span()):
            return m.span(), m.group(0)
    return None


# A code a question labels with the standard it belongs to ("(ICAO: KLAX)", "its FAA identifier, AVL"), for a
# parameter whose name or description names that standard (`icao_code`; `apt`, "FAA or ICAO airport identifier").
_LABEL = re.compile(r"\b[A-Z]{2,6}\b")
_NOT_LABELS = frozenset({"ID", "IDS", "URL", "URI", "API", "HTTP", "JSON", "XML", "CSV", "UTC", "GMT", "OR", "AND"})
_CODE = (r"(?:\s+(?:code|identifier|id|designator))?\s*[:,=]?\s*[\"'`\u201c]?([A-Z0-9]{2,8})\b"
         r"(?![\"'`\u201d]?\s*(?:,|and|or)\s+[\"'`\u201c]?[A-Z0-9]{2,8}\b)")  # one code, not the first of a list


def code_labelled(question: str, parameter: str, description: str, free: Callable[[tuple[int, int]], bool]
                  ) -> tuple[tuple[int, int], str] | None:
    """The span and value of the code the question labels with a standard the parameter names ("ICAO: KLAX" for
    `icao_code`), where `free`. Codes of several things ("(ICAO: KJFK) and ... (ICAO: KLGA)", 'codes "EDDH" and
    "EDDF"') give none: the parameter takes one."""
    pattern = _labelled(parameter, description)
    if pattern is None:
        return None
    found = [m for m in pattern.finditer(question) if re.search(r"[A-Z]", m.group(1))]
    if len({m.group(1) for m in found}) != 1 or not free(found[0].span(1)):
        return None
    return found[0].span(1), found[0].group(1)


@lru_cache(maxsize=4096)
def _labelled(parameter: str, description: str) -> re.Pattern[str] | None:
    """A code after any standard the parameter names, found once per parameter: every candidate's derivation asks."""
    labels = {w.upper() for w in words_of(parameter)} | set(_LABEL.findall(description))
    labels = {w for w in labels - _NOT_LABELS if len(w) >= 2 and _LABEL.fullmatch(w)}
    return re.compile(rf"\b(?:{'|'.join(map(re.escape, sorted(labels)))}){_CODE}") if labels else None
