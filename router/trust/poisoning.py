"""A simple detector of tool descriptions that address the model instead of describing the tool.

    flags = suspicious_phrases(description)      # -> ("override", "exfiltration"), empty when clean

Tool descriptions come from servers the router does not control and end up in an LLM's context, so a
description can carry instructions ("tool poisoning"). Each rule is one documented pattern; a text is
flagged when any rule matches. The rules look for what a description of a tool has no reason to say:

- `override`: telling the model to ignore or replace its instructions ("ignore previous instructions").
- `conceal`: asking to keep something from the user ("do not tell the user", "without informing the user").
- `sensitive_files`: naming secrets or credential files (~/.ssh, id_rsa, .env, mcp.json, /etc/passwd).
- `exfiltration`: asking to send or pass along conversation data, secrets or file contents.
- `hidden_markup`: markup meant for the model, not the reader (<IMPORTANT>, <system>, HTML comments).
- `hidden_text`: invisible characters (zero-width, bidirectional controls, Unicode tag characters).
- `tool_shadowing`: instructions about how to use *other* tools ("instead of the send_email tool").

It is a tripwire, not a proof: a determined author can phrase around it, and a flagged description is
reported for a person to read (`/v1/backends`), held out of routing only when
`security.quarantine_suspicious` is on. The rules were checked against the 527 real tool descriptions
of the LiveMCPBench catalog (see docs/security.md for the false-positive count).
"""

from __future__ import annotations

import re

from router.trust.untrusted import invisible_characters

_WORD_GAP = r"(?:\W+\w+){0,3}?\W+"
RULES: dict[str, re.Pattern[str]] = {
    "override": re.compile(
        r"\b(?:ignore|disregard|forget|override|bypass)\b" + _WORD_GAP
        + r"(?:previous|prior|above|earlier|preceding|system|other|your|all)\b" + r"(?:\W+\w+){0,2}?\W+"
        + r"(?:instructions?|prompts?|rules|guidelines|directions|messages)\b"
        r"|\bnew instructions?\s*:|\byou are now\b|\bact as (?:an? )?(?:system|admin|root)\b", re.I),
    "conceal": re.compile(
        r"\b(?:do not|don't|never|must not)\s+(?:tell|inform|mention|reveal|show|alert|notify)\b(?:\W+\w+){0,3}?"
        r"\W+(?:the\s+)?user\b"
        r"|\bwithout\s+(?:telling|informing|notifying|alerting|asking)\s+(?:the\s+)?user\b"
        r"|\b(?:do not|don't|never)\s+(?:mention|reveal|disclose)\s+(?:that|this step|these instructions)\b"
        r"|\b(?:the\s+)?user\s+(?:must|should)\s+(?:not|never)\s+(?:know|see|notice|be told)\b", re.I),
    "sensitive_files": re.compile(
        r"(?:~|\$HOME|/home/\w+|/root)/\.(?:ssh|aws|gnupg|kube|cursor|config)\b|\bid_(?:rsa|ed25519|ecdsa)\b"
        r"|/etc/(?:passwd|shadow)\b|\bmcp\.json\b|\.aws/credentials\b"
        r"|\b(?:read|send|pass|include|upload|attach)\b(?:\W+\w+){0,4}?\W+"
        r"(?:the\s+)?(?:\.env|private keys?)(?![\w.]\w)", re.I),
    "exfiltration": re.compile(
        r"\b(?:send|post|forward|upload|transmit|exfiltrate|leak|pass|include|attach)\b(?:\W+\w+){0,4}?\W+"
        r"(?:the\s+)?(?:entire\s+|whole\s+|full\s+)?(?:conversation|chat history|previous messages|system prompt"
        r"|user'?s? messages)\b"
        r"|\b(?:send|post|forward|upload|transmit|exfiltrate|leak)\b(?:\W+\w+){0,4}?\W+(?:(?:all|any|the|your)\s+)?"
        r"(?:api[ _-]?keys?|secrets?|passwords?|credentials|access tokens?|session tokens?|private keys?)\b", re.I),
    "hidden_markup": re.compile(
        r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|assistant)\s*>|<!--|\[//\]:\s*#", re.I),
    "tool_shadowing": re.compile(
        r"\b(?:instead of|rather than|before)\s+(?:using|calling|invoking)\s+(?:the|any)\s+(?:other\s+)?\S+\s+tools?\b"
        r"|\bwhen(?:ever)?\s+(?:the|any)\s+\S+\s+tool\s+is\s+(?:used|called|invoked)\b"
        r"|\b(?:do not|never|don't)\s+use\s+(?:any\s+)?other\s+tools?\b", re.I),
}


def suspicious_phrases(text: str) -> tuple[str, ...]:
    """The names of the rules `text` trips, in rule order; empty for a description that only describes."""
    if not text:
        return ()
    flags = [name for name, pattern in RULES.items() if pattern.search(text)]
    if invisible_characters(text):
        flags.append("hidden_text")
    return tuple(flags)
