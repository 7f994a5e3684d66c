"""The bounds every caller's input is held to before anything of it is used: tool arguments (size, depth,
numbers and text JSON can carry) and conversations (roles, content parts), at the HTTP and MCP edges, in the
gateway and on an LLM's tool calls alike. Each refusal is a `ValueError` naming the field."""

from __future__ import annotations

import json
from typing import Any

# JSON may escape half of a UTF-16 pair alone ("\ud800"), which Python's reader keeps (pydantic refuses it in a
# `str` field, not inside `Any`): such a string has no UTF-8 form, so no tokenizer, MCP session or HTTP body can
# carry it (a stdio backend's session failed as a whole on one).
LONE_SURROGATE = "a lone UTF-16 surrogate in {} (an escape such as \\ud800 without its pair) is not text"


def is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


MAX_ARGUMENT_BYTES = 64 * 1024
MAX_ARGUMENT_DEPTH = 12


def bounded_arguments(value: dict[str, Any] | None, what: str = "arguments") -> dict[str, Any] | None:
    """`value` if a backend can be sent it: JSON within the size and depth bounds (`what` names it in errors)."""
    if value is None:
        return value
    size = json_size(value, what)
    if size > MAX_ARGUMENT_BYTES:
        raise ValueError(f"{what} are {size} bytes as JSON; the limit is {MAX_ARGUMENT_BYTES}")
    return value


def json_size(value: Any, what: str) -> int:
    """The UTF-8 bytes of `value` as JSON, once it is known to be JSON anyone can be sent: nested at most
    MAX_ARGUMENT_DEPTH levels (checked first, before anything walks it deeper), text, and finite numbers."""
    if _depth(value) > MAX_ARGUMENT_DEPTH:
        raise ValueError(f"{what} are nested deeper than {MAX_ARGUMENT_DEPTH} levels")
    try:
        return len(json.dumps(value, default=str, allow_nan=False, ensure_ascii=False).encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(LONE_SURROGATE.format(what)) from None
    except ValueError:  # Python's JSON reads NaN, Infinity and 1e999; no backend can be sent them as JSON
        raise ValueError(f"{what} hold a number JSON cannot carry (NaN or an infinity)") from None


def json_nests_deeper(text: str, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether JSON text nests arrays and objects deeper than `limit`, found by one pass over it, before any
    parser sees it: parsing thousands of levels takes the interpreter to its recursion limit, where even a
    garbage collection's finalizer that runs meanwhile fails."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_ARGUMENT_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


# An OpenAI-style conversation, all of it (never truncated), up to a bound.
MAX_MESSAGES = 500


def check_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i, m in enumerate(messages):
        if m.get("role") not in ("system", "user", "assistant", "tool", "developer"):
            raise ValueError(f"messages[{i}].role must be system, user, assistant, tool or developer")
        content = m.get("content")
        # Every field of a message goes on to a model's API as JSON, not only its content: the same bounds as a
        # tool's arguments (depth first, before anything walks it; text; numbers JSON can carry).
        json_size(m, f"messages[{i}]")
        if not isinstance(content, str | list) and (content is not None or m["role"] != "assistant"):
            raise ValueError(f"messages[{i}].content must be a string or a list of parts"
                             + (" (null only for an assistant's tool calls)" if content is None else ""))
        if m["role"] == "tool" and not isinstance(m.get("tool_call_id"), str):
            raise ValueError(f"messages[{i}] is a tool result without a string tool_call_id")
        # Text parts are joined into the text retrieval embeds; anything but a string there is a caller's error.
        for j, part in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):  # a model's API refuses it
                raise ValueError(f"messages[{i}].content[{j}] must be an object with a string type")
            if "text" in part and not isinstance(part["text"], str):
                raise ValueError(f"messages[{i}].content[{j}].text must be a string")
    return messages
