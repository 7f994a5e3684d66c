"""Values a question writes out as a tool takes them: a file-system path ("Read /srv/notes.txt"), a web address
("Fetch https://example.com/a"), an arithmetic expression ("Calculate (3 + 4) * 12"), a file-name pattern ("Find
the files named *.md"), a repository ("octocat/hello-world"); and the parameters that take one, by their name or
description. The pattern of a web address, `URL`, is the retrievers' (router/retrieval/text.py), which read an
address as the site it is on.

    first_free(URL, "Fetch https://example.com.", free, web_address)    # ((6, 26), "https://example.com")
    names_a_path("repo_path", "")                                       # True; "file_type", "profile": False
    takes_url("image_url", "")                                          # True; "curl", "url_count": False
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from router.schemas import type_of

# Absolute ("/root/notes.md", "~/notes.md", "C:\\data\\a.csv"), relative ("./a.csv", "docs/guide.md", "reports/"),
# or a file name with a common extension ("notes.txt"); in quotes, whole ("'/home/me/My Documents/a.txt'"). A URL
# is none, nor a trailing full stop, "3/4", "and/or", "w/", nor a pattern with a wildcard ("/srv/*.log").
_EXTENSIONS = ("txt|md|markdown|json|jsonl|csv|tsv|yaml|yml|toml|ini|cfg|conf|xml|html?|css|js|ts|py|rb|go|rs|java|"
               "c|h|cpp|sh|sql|log|pdf|docx?|xlsx?|pptx?|odt|rtf|png|jpe?g|gif|svg|webp|mp3|wav|flac|mp4|mov|zip|tar|"
               "gz|tgz|ipynb|env|lock")
PATH = re.compile(rf"(?<=['\"`])(?:~?/|\.{{1,2}}/|[A-Za-z]:\\)[^'\"`\n*]+(?=['\"`])|"  # quoted, spaces and all
                  rf"(?<![\w:/.~\\@*-])(?:~?/[^\s'\"`,;()*]+|\.{{1,2}}/[^\s'\"`,;()*]+|[A-Za-z]:\\[^\s'\"`,;()*]*|"
                  rf"(?:[\w-]+/)+[\w-][\w.-]*\.(?:{_EXTENSIONS})|(?:[\w-]{{2,}}/)+|[\w-][\w.-]*\.(?:{_EXTENSIONS}))"
                  r"(?<![.!?:])(?![\w/:@*]|[^\s'\"`]*\*)", re.I)
_PATH_WORDS = frozenset({"path", "file", "filename", "filepath", "pathname", "dir", "dirname", "directory", "folder"})
_PATH_DESCRIBED = re.compile(r"\b(?:path|directory|folder)\b", re.I)
_PATH_ROLES = frozenset({"source", "destination", "src", "dst", "dest", "input", "output"})


def words_of(name: str) -> list[str]:
    """A name's words, snake, kebab or camel case: `inputPath` -> input, path; `API-patch-page` -> api, patch, page."""
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)]


def names_a_path(name: str, description: str) -> bool:
    """Whether a parameter is for a path: its name ends with a word for one (`path`, `repo_path`, `inputPath`, not
    `file_type`, `file_id` or `profile`), or names one (`path_audio`) or a role (`source`) and its description says
    it is a path, a directory or a folder."""
    words = words_of(name)
    described = bool(_PATH_DESCRIBED.search(description))
    return bool(words) and (words[-1] in _PATH_WORDS or "".join(words[-2:]) in _PATH_WORDS or (described and (
        words[0] in _PATH_WORDS or name.lower() in _PATH_ROLES)))


_URL_WORDS = frozenset({"url", "uri", "link", "href", "website", "webpage", "homepage", "endpoint"})
_URL_DESCRIBED = re.compile(r"\b(?:url|web ?page|website|web address|link to)\b", re.I)
# Numbers joined by operators, brackets allowed: "(3 + 4) * 12", "2^10", "17 \u00d7 23". Digits, letters and the
# marks of other values (",", ":", ".") may not touch it: "1,000 + 2,000" is not "000 + 2", "sqrt(16) + 2" not
# "(16) + 2", "x^2 + 3x" not "2 + 3". No space inside an operand, so a long run of spaces or brackets is read once.
_OPERAND = r"\(*-?\d+(?:\.\d+)?\)*"
_TOUCHING = r"\w.,:^(*/+%\u00d7\u00f7\u00b2\u00b3"  # an operand or an operator of a larger expression
EXPRESSION = re.compile(rf"(?<![{_TOUCHING}]){_OPERAND}(?:\s*(?:\*\*|[-+*/\u00d7\u00f7^%])\s*{_OPERAND})+"
                        rf"(?![{_TOUCHING}])")
# Words that change an expression next to them, which a calculator given the expression would not see.
_ARITHMETIC_WORD = re.compile(r"squared|cubed|plus|minus|times|mod|modulo|divided|over|percent|of|power|factorial|"
                              r"sqrt|root|log|ln|sin|cos|tan|[a-z]", re.I)
_DATE_OR_RANGE = re.compile(r"^\d+(?:-\d+)+$")
_EXPRESSION_WORDS = frozenset({"expression", "expr", "formula", "equation", "calculation", "arithmetic"})
EXPRESSION_DESCRIBED = re.compile(r"\b(?:math(?:ematical)?|arithmetic(?:al)?|numeric(?:al)?) expression\b", re.I)


# A file-name pattern: a word with a wildcard and a letter ("*.md", "report-*.csv", "**/*.py"), not "3 * 4", nor the
# question's closing "?" or ".".
GLOB = re.compile(r"(?<![^\s'\"`(])(?=[\w.*?/-]*[A-Za-z])[\w./-]*\*[\w./*?-]*?"
                  r"(?=[\s'\"`),;:!]|[.?]+(?:[\s'\"`),;:!]|$)|$)")  # the whole word: "test_*.py|*_test.py" is none
_GLOB_WORDS = frozenset({"pattern", "glob"})
_GLOB_DESCRIBED = re.compile(r"\bglob", re.I)


def takes_glob(name: str, description: str) -> bool:
    """Whether a parameter is for a file-name pattern: its name ends with `pattern` or `glob`, or its description
    speaks of a glob."""
    words = words_of(name)
    return (bool(words) and words[-1] in _GLOB_WORDS) or bool(_GLOB_DESCRIBED.search(description))


# A SQL statement that is the request itself, opening it after "please", "run" and the like ("Run SELECT * FROM users",
# "DELETE FROM users WHERE id = 1", "Please execute 'SELECT 1 FROM t';"), its first keyword in capitals (in lower case
# only as "select * from", or with a clause after its table: "select name from users where id = 2"; "Select the users
# from Paris" is English); one the question only talks about ("What happens if I run DELETE FROM users?", "How do I do
# SELECT name FROM users in pandas?") is none. `SQL_VERBS` tells each kind by its opening words.
SQL_VERBS = {"SELECT": r"(?:SELECT|WITH)\s[^;]{0,400}?\bFROM\b|(?i:select\s+\*\s+from)\b|"
                       r"(?i:select\s[^;]{1,200}?\sfrom\s+\w+\s+(?:where\s+\w+\s*(?:[=<>!]|like\b)|"
                       r"(?:order|group)\s+by\s+\w+|limit\s+\d+))", "INSERT": r"INSERT\s+INTO\b",
             "UPDATE": r"UPDATE\s+\S+\s+SET\b", "DELETE": r"DELETE\s+FROM\b",
             "CREATE": r"CREATE\s+(?:TABLE|INDEX|VIEW|TRIGGER)\b", "DROP": r"DROP\s+(?:TABLE|INDEX|VIEW|TRIGGER)\b",
             "ALTER": r"ALTER\s+TABLE\b"}
SQL_LEAD = (r"^\s*(?i:(?:(?:please|kindly|(?:can|could|would)\s+you)\W+)*(?:(?:run|execute|exec)\s+"
            r"(?:(?:this|the)\s+(?:query|statement|sql)\W+)?)?)")
_SQL_START = re.compile(rf"{SQL_LEAD}([\"'`]?)(?:{'|'.join(SQL_VERBS.values())})")


def sql_statement(question: str) -> tuple[tuple[int, int], str] | None:
    """The span and text of the statement the request is: to its first ";" outside a string literal, or the end,
    without the request's closing punctuation or the quote it was given in ("= 'O''Brien'" keeps its own)."""
    found = _SQL_START.match(question)
    if found is None:
        return None
    start, quote, inside = found.end(1), found.group(1), False
    if quote:  # to the quote that closes it
        end = question.rfind(quote)
        text = question[start:end].rstrip() if end > start else ""
        return ((start, start + len(text)), text) if text else None
    end = len(question)
    for i in range(start, len(question)):
        if question[i] == "'":
            inside = not inside
        elif question[i] == ";" and not inside:
            end = i
            break
    text = re.sub(r"(?<=[\w)'\"*])[.?!]+$", "", question[start:end].rstrip())  # the request's full stop
    return ((start, start + len(text)), text) if text else None


_SQL_DESCRIBED = re.compile(r"\bsql\b|\bsqlite\b", re.I)


def takes_sql(name: str, description: str) -> bool:
    """Whether a parameter is for a SQL statement: named for it (`sql`, `sql_query`) or so described."""
    return "sql" in words_of(name) or bool(_SQL_DESCRIBED.search(description))


# A repository as code hosts write one, owner and name ("octocat/hello-world"): no path ("docs/guide.md" has an
# extension, "/srv/repo" a leading slash), no address, and not two small words ("and/or", "his/her").
SLUG = re.compile(r"(?<![\w./:@~\\-])([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9_-][\w.-]{0,99}(?<!\.))(?![\w/:@])")
_FILE_NAME = re.compile(rf"\.(?:{_EXTENSIONS})$", re.I)
_SMALL = frozenset("and or either nor he she his her him hers they them yes no on off in out up down true false "
                   "read write day night w s".split())


def repository_part(question: str, name: str, free: Callable[[tuple[int, int]], bool]
                    ) -> tuple[tuple[int, int], str] | None:
    """The owner or the name of the first repository the question writes out ("octocat/hello-world"), for a parameter
    named `owner` or `repo` (`repository`, `repo_name`); the name only where the owner was taken by another
    parameter (not `free`), so that a repository is given whole or not at all."""
    words = words_of(name)
    part = 1 if words[-1:] == ["owner"] else 2 if words[-1:] in (["repo"], ["repository"]) or words[-2:] == [
        "repo", "name"] else 0
    for m in SLUG.finditer(question) if part else ():
        if (m.group(1).lower() in _SMALL and m.group(2).lower() in _SMALL) or _FILE_NAME.search(m.group(2)):
            continue
        if free(m.span(part)) and (part == 1 or not free(m.span(1))):
            return m.span(part), m.group(part)
    return None


def takes_url(name: str, description: str) -> bool:
    """Whether a parameter is for a web address: its name ends with a word for one (`url`, `image_url`, `pageLink`)
    or its description calls it a URL, a web page or a website."""
    words = words_of(name)
    return (bool(words) and words[-1] in _URL_WORDS) or bool(_URL_DESCRIBED.search(description))


def takes_expression(name: str, description: str) -> bool:
    """Whether a parameter is for an arithmetic expression (`expression`, `formula`; "A mathematical expression")."""
    words = words_of(name)
    return (bool(words) and words[-1] in _EXPRESSION_WORDS) or bool(EXPRESSION_DESCRIBED.search(description))


_MAIL_BEFORE = re.compile(r"\be-?mails?\b(?:\W+\w+){0,4}?\W+$", re.I)
_MAIL_AFTER = re.compile(r"\s+(?:e-?mail\s+)?(?:address(?:es)?|e-?mails?|mailbox(?:es)?|inbox(?:es)?|accounts?)\b",
                         re.I)


# An e-mail address, for a parameter that takes one: named for it (`email`, `userEmail`), of its format, or described
# as nothing but one ("The user's phone number or email address", not "The code sent to the user's email address").
EMAIL = re.compile(r"(?<![\w.+%-])[\w.+%-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-]|\.\w)")
_EMAIL_DESCRIBED = re.compile(r"^(?:required\.\s*)?(?:string\.\s*)?(?:an?\s+|the\s+)?(?:[\w']+\s+){0,4}?(?:or\s+)?"
                              r"e-?mail(?:\s+address(?:es)?)?(?:\s*[,.;(]|$)", re.I)


def takes_email(name: str, spec: dict[str, Any]) -> bool:
    if type_of(spec) not in (None, "string"):
        return False
    return spec.get("format") == "email" or bool({"email", "mail"} & set(words_of(name))) or \
        _EMAIL_DESCRIBED.match(str(spec.get("description", "")).strip()) is not None


def email_in(question: str, free: Callable[[tuple[int, int]], bool]) -> tuple[tuple[int, int], str] | None:
    """The one e-mail address the question writes, where `free`; of several, which is meant is the caller's to say."""
    found = list(EMAIL.finditer(question))
    return (found[0].span(), found[0].group(0)) if len(found) == 1 and free(found[0].span()) else None


def web_address(question: str, span: tuple[int, int]) -> str | None:
    """The address without a sentence's closing punctuation, nor a closing bracket it did not open ("(see
    https://a.example/x)"); one of its own stays ("https://en.wikipedia.org/wiki/Mercury_(planet)"). One written
    without its scheme gets https's, as a browser's address bar gives it ("example.com": "https://example.com"), but
    not where the question speaks of mail there ("users whose email ends with example.com", "an example.com
    address"): that is a domain of addresses, not a page to read."""
    text = question[span[0]:span[1]]
    if not re.match(r"(?:https?://|www\.)", text, re.I) and (
            _MAIL_BEFORE.search(question, max(0, span[0] - 60), span[0]) or _MAIL_AFTER.match(question, span[1])):
        return None
    while text and (text[-1] in ".,;:!?" or (text[-1] == ")" and text.count(")") > text.count("("))):
        text = text[:-1]
    host = re.sub(r"^(?:https?://)?(?:www\.)?", "", text, flags=re.I)
    return None if not host else text if re.match(r"https?://", text, re.I) else f"https://{text}"


def expression(question: str, span: tuple[int, int]) -> str | None:
    """The expression as a calculator reads it (the multiplication and division signs as "*" and "/"); None for a
    date or a range, unbalanced brackets, or one a word or number next to it changes ("3 + 4 squared", "10 + 5 minus
    3", "2 (3+4)")."""
    text = question[span[0]:span[1]].strip()
    before, after = question[:span[0]].split()[-1:], question[span[1]:].split()[:1]
    if _DATE_OR_RANGE.match(text) or text.count("(") != text.count(")") or \
            any(_ARITHMETIC_WORD.fullmatch(w := word.strip(".,;:!?")) or w[:1].isdigit() for word in (*before, *after)):
        return None
    return text.replace("\u00d7", "*").replace("\u00f7", "/")


def a_path(question: str, span: tuple[int, int]) -> str | None:
    """The path at `span`, but none inside quotes that also hold a wildcard ("'/srv/a b.*'" names no "/srv/a")."""
    start, end = span
    if start and (quote := question[start - 1]) in "'\"`":
        close = question.find(quote, end)
        if close != -1 and "*" in question[end:close]:
            return None
    return question[start:end]


def first_free(pattern: re.Pattern[str], question: str, free: Callable[[tuple[int, int]], bool],
               read: Callable[[str, tuple[int, int]], str | None]) -> tuple[tuple[int, int], str] | None:
    """The span and value of the first match of `pattern` where `free` that `read` accepts."""
    for m in pattern.finditer(question):
        value = read(question, m.span())
        if value is not None and free(m.span()):
            return m.span(), value
    return None


_TO = re.compile(r"\b(?:to|into|onto|as)\s+['\"`]?$", re.I)


def paths_in(question: str, free: Callable[[tuple[int, int]], bool]) -> list[tuple[tuple[int, int], str]]:
    """The span and value of every path the question gives where `free`, in order, when it gives several: one is
    for a tool that takes one ("Read /a.txt" is `read_file`'s, not `read_multiple_files`'), and none where one is
    where something goes ("Copy /a.txt to /b.txt" is no pair of files to read)."""
    found = [(m.span(), path) for m in PATH.finditer(question)
             if (path := a_path(question, m.span())) is not None and free(m.span())]
    return found if len(found) > 1 and not any(_TO.search(question, max(0, s - 8), s) for (s, _), _ in found) else []


def matched(question: str, span: tuple[int, int]) -> str:
    return question[span[0]:span[1]]


# A key of the keyboard, by the name browsers and automation tools give it (`KeyboardEvent.key`, Playwright's
# `keyboard.press`), where the question presses it ("Press Enter", "hit the down arrow") or calls it a key ("the
# Escape key"): "Delete the row" presses nothing.
_KEYS = {"enter": "Enter", "return": "Enter", "escape": "Escape", "esc": "Escape", "tab": "Tab", "space": "Space",
         "spacebar": "Space", "backspace": "Backspace", "delete": "Delete", "insert": "Insert", "home": "Home",
         "end": "End", "page up": "PageUp", "page down": "PageDown", **{
             f"{way} arrow": f"Arrow{way.title()}" for way in ("up", "down", "left", "right")}, **{
             f"arrow {way}": f"Arrow{way.title()}" for way in ("up", "down", "left", "right")}}
_KEY_NAME = "|".join(sorted((k.replace(" ", r"\s+") for k in _KEYS), key=len, reverse=True)) + r"|f(?:1[0-2]|[1-9])"
KEY = re.compile(rf"(?i:\b(?:press|hit|push|tap)\s+(?:the\s+)?({_KEY_NAME})(?!\w)|\b(?:the\s+)?({_KEY_NAME})\s+key\b)")
_KEY_DESCRIBED = re.compile(r"\bkey\b[^.]*\bpress|\bpress[^.]*\bkey\b|\bkeyboard\b", re.I)


def takes_key(name: str, description: str) -> bool:
    """Whether a parameter is for a key to press: named `key` (`keyName`), and described as a key pressed or a
    keyboard's (not a dictionary's or an API's key)."""
    return words_of(name)[:1] == ["key"] and bool(_KEY_DESCRIBED.search(description))


def key_in(question: str, free: Callable[[tuple[int, int]], bool]) -> tuple[tuple[int, int], str] | None:
    """The span and name of the first key the question presses, where `free`."""
    for m in KEY.finditer(question):
        group = 1 if m.group(1) is not None else 2
        if free(m.span(group)):
            written = re.sub(r"\s+", " ", m.group(group).lower())
            return m.span(group), _KEYS.get(written) or written.upper()  # F1-F12
    return None


def takes_path(name: str, spec: dict[str, Any]) -> bool:
    """Whether a parameter takes a file-system path (a string named or described as one: `names_a_path`)."""
    return type_of(spec) in (None, "string") and "enum" not in spec and \
        names_a_path(name, str(spec.get("description", "")))


def takes_paths(name: str, spec: dict[str, Any]) -> bool:
    """Whether a parameter takes a path, or an array of them (`paths`, "Array of file paths to read")."""
    items = spec.get("items")
    return takes_path(name, spec) or (type_of(spec) == "array" and isinstance(items, dict) and takes_path(
        re.sub(r"s$", "", name), {**items, "description": spec.get("description", "")}))


# A value whose shape the schema gives as a `pattern` (a Jira issue key, "^[A-Z][A-Z0-9_]+-\d+$"): a word of the
# question that matches it whole. A pattern that these words match too says nothing of a value's shape.
_TOKEN = re.compile(r"[^\s,;!?()\[\]{}\"'`<>]+")
_ANY_WORDS = ("the", "a", "show", "Show", "1", "123", "x", "hello world", "é")


@lru_cache(maxsize=1024)
def _shape(pattern: str) -> re.Pattern[str] | None:
    try:
        shape = re.compile(pattern)
    except (re.error, RecursionError):  # a JSON-schema pattern Python does not read is no shape to go by
        return None
    return None if any(shape.search(w) for w in _ANY_WORDS) else shape


# Values a description shows "e.g." in quotes ("Jira issue key (e.g., 'PROJ-123', 'ACV2-642')"), each read as its
# shape: a run of capitals (and digits after them), of small letters, of digits, and every other mark as itself.
_EXAMPLES = re.compile(r"\be\.g\.?,?\s*((?:[`'\"][^`'\"\n]{1,60}[`'\"]\s*,?\s*(?:or\s+)?)+)", re.I)
_EXAMPLE = re.compile(r"[`'\"]([^`'\"\n]{1,60})[`'\"]")
_RUN = re.compile(r"[A-Z][A-Z0-9_]*|[a-z][a-z0-9_]*|\d+|.", re.S)


@lru_cache(maxsize=4096)
def example_pattern(description: str) -> str | None:
    """A pattern of the shapes of the examples a description gives that hold letters and digits and say something of
    a value's shape (`_shape`): "PROJ-123" gives ^[A-Z][A-Z0-9_]*-\\d+$; "johndoe" none (any word fits it), nor
    "1000"."""
    found = _EXAMPLES.search(description)
    shapes = {"".join(r"[A-Z][A-Z0-9_]*" if run[0].isupper() else r"[a-z][a-z0-9_]*" if run[0].islower()
                      else r"\d+" if run[0].isdigit() else re.escape(run) for run in _RUN.findall(example))
              for example in _EXAMPLE.findall(found.group(1))
              if re.search(r"[A-Za-z]", example) and re.search(r"\d", example)} if found else set()
    kept = sorted(shape for shape in shapes if _shape(f"^{shape}$") is not None)
    return f"^(?:{'|'.join(kept)})$" if kept else None


def patterned_in(question: str, parameter: str, pattern: str, free: Callable[[tuple[int, int]], bool]
                 ) -> tuple[tuple[int, int], str] | None:
    """The span and value of the word the question writes in the parameter's pattern, where `free`: the first written
    right after the parameter's own words ("project PROJ" for `project_key`), else the first with a digit in it ("Link
    PROJ-1 to PROJ-2")."""
    beside, found = _in_pattern(question, parameter, pattern, free)
    # A word of letters alone ("PROJ" for a project key) only beside the parameter's words: "USD", "PDF" fit too.
    start, end, word = (beside or [f for f in found if re.search(r"\d", f[2])] or [(0, 0, "")])[0]
    return ((start, end), word) if word else None


def named_beside(question: str, parameter: str, pattern: str | None) -> bool:
    """Whether the question writes a word of the parameter's pattern right after the parameter's own words ("epic
    PROJ-100" for `epic_key`): such a parameter takes its word before another of the pattern takes it in order."""
    return bool(pattern) and bool(_in_pattern(question, parameter, str(pattern), lambda span: True)[0])


def _in_pattern(question: str, parameter: str, pattern: str, free: Callable[[tuple[int, int]], bool]
                ) -> tuple[list[tuple[int, int, str]], list[tuple[int, int, str]]]:
    """The words in the pattern written right after the parameter's own words, and all of them, where `free`."""
    shape = _shape(pattern)
    if shape is None:
        return [], []
    found = [(m.start(), m.start() + len(word), word) for m in _TOKEN.finditer(question)
             if (word := m.group(0).rstrip(".:")) and shape.search(word) and free((m.start(), m.start() + len(word)))]
    words = [w for w in words_of(parameter) if w not in ("key", "id", "ids", "keys")]
    return [f for f in found if words and re.search(rf"\b{re.escape(words[-1])}\s+$", question[:f[0]], re.I)], found
