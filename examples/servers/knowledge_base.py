"""Knowledge-base MCP server: searches the Markdown documents in a folder (stdio or streamable HTTP).

    python examples/servers/knowledge_base.py --docs examples/docs              # stdio
    python examples/servers/knowledge_base.py --docs examples/docs --port 8765  # http://127.0.0.1:8765/mcp

Documents are split at their headings; passages are ranked with the router's own BM25 index.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from router.index import HybridIndex


def load_passages(folder: Path) -> list[tuple[str, str, str]]:
    """(source, heading, text) for each section of each Markdown or text file."""
    passages = []
    for path in sorted(folder.glob("*.md")) + sorted(folder.glob("*.txt")):
        heading, lines = path.stem, []
        for line in path.read_text(encoding="utf-8").splitlines() + ["# "]:
            m = re.match(r"#+\s+(.*)", line)
            if m:
                text = "\n".join(lines).strip()
                if text:
                    passages.append((path.name, heading, text))
                heading, lines = m.group(1).strip() or heading, []
            else:
                lines.append(line)
    return passages


def build_server(folder: Path) -> MCPServer:
    passages = load_passages(folder)
    index = HybridIndex([f"{h}\n{t}" for _, h, t in passages])
    server = MCPServer(
        "knowledge-base",
        instructions="Documentation and knowledge base of the mcp-router project: how routing, resilience, "
                     "configuration and deployment work. Answers questions from the documents.",
    )

    @server.tool()
    def search_docs(query: str, k: int = 3) -> str:
        """Search the project documentation and knowledge base for passages that answer a question."""
        hits = [h for h in index.search(query, None, max(1, min(k, 10))) if h.bm25 > 0]
        if not hits:
            raise ToolError(f"nothing in the knowledge base matches {query!r}")
        return "\n\n".join(f"[{passages[h.doc][0]} > {passages[h.doc][1]}]\n{passages[h.doc][2]}" for h in hits)

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", default=str(Path(__file__).resolve().parents[1] / "docs"))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, help="serve streamable HTTP on this port instead of stdio")
    args = parser.parse_args()
    server = build_server(Path(args.docs))
    if args.port is None:
        server.run()
        return
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
