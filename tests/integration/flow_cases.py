"""What the Flowise and Langflow backend tests share: keys, contexts, secret checks."""

from __future__ import annotations

import socket
from typing import Any

from router.errors import RouterError
from router.models import Parameters
from router.values import CallContext, Capability

FLOWISE_KEY = "fw-admin-SECRET-4d2c9e71"
FLOW_KEY = "fw-flow-SECRET-8b1f0355"
WRONG_KEY = "fw-wrong-SECRET-00000000"
LANGFLOW_KEY = "sk-lf-SECRET-77aa01bc"
SECRETS = (FLOWISE_KEY, FLOW_KEY, WRONG_KEY, LANGFLOW_KEY)
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
DOCS_ID = "0b6f1c2e-1d6a-4c39-9a0b-5c1f2e3d4a01"
SUPPORT_ID = "a1b2c3d4-0000-4000-8000-000000000001"


def ctx(session_id: str | None = "sess-42", **params: Any) -> CallContext:
    return CallContext(question="How do I install it?", intent="document-qa", session_id=session_id,
                       parameters=Parameters(**params) if params else None,
                       trace={"traceparent": TRACEPARENT})


def assert_no_secret(*objects: Any) -> None:
    for obj in objects:
        text = repr(obj) + str(obj)
        if isinstance(obj, RouterError):
            text += obj.message + str(obj.payload())
        for secret in SECRETS:
            assert secret not in text


def flow_cap(backend: str, name: str, target: str) -> Capability:
    return Capability(backend=backend, name=name, kind="flow", target=target)


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"
