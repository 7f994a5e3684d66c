"""Model files shipped with the router (tokenizers, fine-tuned ONNX models), found by name.

    from mcp_router.models import model_dir
    tokenizer = model_dir("all-MiniLM-L6-v2") / "tokenizer.json"
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def model_dir(name: str) -> Path:
    """The folder of a shipped model; a clear error names the ones that exist."""
    path = _HERE / name
    if not path.is_dir():
        known = sorted(p.name for p in _HERE.iterdir() if p.is_dir() and not p.name.startswith("_"))
        raise FileNotFoundError(f"no shipped model {name!r}; available: {', '.join(known)}")
    return path


__all__ = ["model_dir"]
