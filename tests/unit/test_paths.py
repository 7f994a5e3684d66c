"""File-system paths a question writes (`router/stages/written.py`): which parameters take them, and in what
order."""

from __future__ import annotations

import pytest

from router.errors import ArgumentsRequired
from router.stages.arguments import derive_arguments, derive_with_leftovers
from router.values import Capability


@pytest.mark.parametrize(("question", "path"), [
    ("Read /tmp/files/notes.txt", "/tmp/files/notes.txt"), ("Open ~/docs/plan.md, please", "~/docs/plan.md"),
    ("Save it to /root/markdown/x.md.", "/root/markdown/x.md"), ("Load C:\\data\\a.csv now", "C:\\data\\a.csv"),
    ("Read '/home/me/My Documents/a.txt' now", "/home/me/My Documents/a.txt"),
    ("Show me docs/guide.md", "docs/guide.md"), ("List src/components/ please", "src/components/"),
    ("What is in notes.txt?", "notes.txt"),
    # A URL, an address, a fraction, a season and "and/or" are no path; nor is a word without an extension.
    ("Fetch https://example.com/a.txt", None), ("Mail bob@example.com", None), ("What is 3/4 of it", None),
    ("The 2024/25 season", None), ("Cats and/or dogs", None), ("Read my notes", None), ("Come w/ me", None),
])
def test_a_path_the_question_writes_goes_to_a_parameter_that_takes_one(question: str, path: str | None) -> None:
    read = Capability(backend="files", name="read_text_file", read_only=True,
                      input_schema={"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}})
    derived = derive_arguments(read, question)
    assert (derived[0] if isinstance(derived, tuple) else None) == ({"path": path} if path else None)


@pytest.mark.parametrize(("name", "description", "takes"), [
    ("path", "", True), ("repo_path", "", True), ("inputPath", "", True), ("fileName", "", True),
    ("output_filename", "", True), ("directory", "", True), ("source", "Source file path", True),
    ("path_audio", "Path to the audio file", True),
    # Names that only contain such a word, and roles not described as paths, take none.
    ("profile", "", False), ("file_type", "", False), ("file_id", "", False), ("dirty", "", False),
    ("direction", "", False), ("path_audio", "", False), ("source", "", False), ("target", "A branch", False),
    ("file_id", "ID of the file", False), ("file_type", "Type of file to create", False),
    ("to", "Recipient; files attached separately", False),
])
def test_a_parameter_takes_a_path_by_its_name_s_last_word_or_as_described(name: str, description: str,
                                                                           takes: bool) -> None:
    from router.stages.written import takes_path

    assert takes_path(name, {"type": "string", "description": description}) is takes


def test_paths_go_to_the_parameters_that_take_them_in_the_order_written() -> None:
    def reader(name: str, schema: dict) -> Capability:
        return Capability(backend="files", name=name, input_schema=schema, read_only=True)

    both = {"type": "string", "description": "A file path"}
    compare = reader("compare", {"type": "object", "required": ["source", "destination"],
                                 "properties": {"source": both, "destination": both}})
    assert derive_arguments(compare, "Compare /a/x.txt with /b/y.txt")[0] == {"source": "/a/x.txt",
                                                                               "destination": "/b/y.txt"}
    # A list of paths is not filled from one.
    many = reader("read_many", {"type": "object", "required": ["paths"],
                                "properties": {"paths": {"type": "array", "items": {"type": "string"}}}})
    assert isinstance(derive_arguments(many, "Read /a/x.txt"), ArgumentsRequired)
    # A second path the call has no place for is a value it leaves unused.
    read = reader("read", {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}})
    assert derive_with_leftovers(read, "Read /a/x.txt and /b/y.txt")[1] == ["/b/y.txt"]


def test_a_path_the_call_takes_or_the_fixed_one_itself_is_no_path_left_unused() -> None:
    from router.request import Request
    from router.stages.serving import LEFT, Arguments
    from router.values import fixed_digest

    def reader(fixed: str) -> Capability:  # its workspace fixed by the operator, a file of it asked for
        return Capability(backend="code", name="read", read_only=True, fixed=(("workspace_dir", fixed_digest(fixed)),),
                          input_schema={"type": "object", "required": ["file_path"],
                                        "properties": {"file_path": {"type": "string"}}})

    def doubt(question: str, fixed: str = "/srv/ws") -> str | None:
        return Arguments(Request(question=question)).unserved(reader(fixed))

    assert doubt("Read src/main.py") is None  # the call's own path
    assert doubt("Read src/main.py in /srv/ws/") is None  # the fixed one, written out
    assert doubt("Read src/main.py in /srv/other") == LEFT  # another workspace: not answered from this one
