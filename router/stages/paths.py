"""File-system paths as a question writes them, and the parameters that take one.

    PATH.finditer("Read /srv/notes.txt")          # "/srv/notes.txt"
    names_a_path("repo_path", "")                  # True; "file_type", "profile": False
"""

from __future__ import annotations

import re

# Absolute ("/root/notes.md", "~/notes.md", "C:\\data\\a.csv"), relative ("./a.csv", "docs/guide.md", "reports/"),
# or a file name with a common extension ("notes.txt"); in quotes, whole ("'/home/me/My Documents/a.txt'"). A URL
# is none, nor a trailing full stop, "3/4", "and/or", "w/".
_EXTENSIONS = ("txt|md|markdown|json|jsonl|csv|tsv|yaml|yml|toml|ini|cfg|conf|xml|html?|css|js|ts|py|rb|go|rs|java|"
               "c|h|cpp|sh|sql|log|pdf|docx?|xlsx?|pptx?|odt|rtf|png|jpe?g|gif|svg|webp|mp3|wav|flac|mp4|mov|zip|tar|"
               "gz|tgz|ipynb|env|lock")
PATH = re.compile(rf"(?<=['\"`])(?:~?/|\.{{1,2}}/|[A-Za-z]:\\)[^'\"`\n]+(?=['\"`])|"  # quoted, spaces and all
                  rf"(?<![\w:/.~\\@-])(?:~?/[^\s'\"`,;()]+|\.{{1,2}}/[^\s'\"`,;()]+|[A-Za-z]:\\[^\s'\"`,;()]*|"
                  rf"(?:[\w-]+/)+[\w-][\w.-]*\.(?:{_EXTENSIONS})|(?:[\w-]{{2,}}/)+|[\w-][\w.-]*\.(?:{_EXTENSIONS}))"
                  r"(?<![.!?:])(?![\w/:@])", re.I)
_WORDS = frozenset({"path", "file", "filename", "filepath", "pathname", "dir", "dirname", "directory", "folder"})
_DESCRIBED = re.compile(r"\b(?:path|directory|folder)\b", re.I)
_ROLES = frozenset({"source", "destination", "src", "dst", "dest", "input", "output"})


def names_a_path(name: str, description: str) -> bool:
    """Whether a parameter is for a path: its name ends with a word for one (`path`, `repo_path`, `inputPath`, not
    `file_type`, `file_id` or `profile`), or names one (`path_audio`) or a role (`source`) and its description says
    it is a path, a directory or a folder."""
    words = [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)]
    described = bool(_DESCRIBED.search(description))
    return bool(words) and (words[-1] in _WORDS or "".join(words[-2:]) in _WORDS or (described and (
        words[0] in _WORDS or name.lower() in _ROLES)))
