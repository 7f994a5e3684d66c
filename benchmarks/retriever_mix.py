"""More realistic training material for the routing retriever: API-Bank's servers and multi-step requests.

Used by `benchmarks/retriever_data.py`. Two additions to the generated single-domain sources:

- API-Bank (real dialogues over 101 APIs grouped into 11 application areas): each area becomes a server
  with many tools, the way an MCP server lists several tools, so server documents are learnt from servers
  that look like the ones the router ranks. The query of an API call is what the user said before it.
- Multi-step requests: two or three requests of one source, from different servers/toolsets, joined the
  way people chain tasks ("... Then ..."). Each part keeps its own gold tools and server, and the other
  parts' toolsets are never used as its negatives.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import random
import re

APIBANK = {"repo": "AlibabaResearch/DAMO-ConvAI", "commit": "483554eae102996f5ec1f4feab4e78ef29c2a394",
           "licence": "Apache-2.0 (api-bank/LICENSE; the repository is MIT)", "role": "train"}
APIBANK_DIR = "api-bank/"
# The areas are named in Chinese in all_apis.csv; these are the server names and descriptions used instead.
APIBANK_AREAS = {
    "账户管理": ("Account Manager", "Manage user accounts: tokens, registration, passwords, deletion"),
    "日程安排和管理": ("Schedule Manager", "Reminders, meetings, agenda items and alarms: add, change, query, delete"),
    "财务管理": ("Finance", "Bank accounts, transfers, balances, exchange rates, trade details and stock prices"),
    "信息查询和处理": ("Information Tools", "Search, encyclopedia, dictionary, translation, summaries, speech and "
                                       "image understanding, messages and e-mail, calculator, parcel tracking"),
    "健康管理": ("Health", "Health data, symptoms, emergency knowledge and hospital appointments"),
    "智能家居控制": ("Smart Home", "Control home devices, scenes and timed switches"),
    "娱乐消遣": ("Entertainment", "Music, movies, song recognition and event tickets"),
    "旅游出行": ("Travel", "Navigation, places nearby, weather, hotels and train tickets"),
    "钉钉": ("DingTalk", "Work schedules and memos"),
    "学习科研相关": ("Study and Research", "Books, online courses, exam schedules and AI conferences"),
    "工作相关": ("Work", "Jobs, company reports, business scope and recruitment"),
}
SKIPPED_APIS = {"ToolSearcher", "GetUserToken"}  # a search over the API list; a log-in step nobody asks for
JOINERS = ("{a} Then {b}", "{a} After that, {b}", "{a} Also, {b}", "{a} Next, {b}", "{a} Once done, {b}")


def _description(api_info: str) -> str:
    m = re.search(r'description\s*=\s*"(.*?)"\s*\n', api_info, re.S)
    return m.group(1).strip() if m else ""


def _input_parameters(api_info: str) -> dict:
    m = re.search(r"input_parameters\s*=\s*(\{.*?\n\})", api_info, re.S)
    try:
        value = ast.literal_eval(m.group(1)) if m else {}
    except (ValueError, SyntaxError):
        return {}
    return value if isinstance(value, dict) else {}  # `{}` written as a set literal in a few rows


def load_api_bank(src, toolset_cls, example_cls, capability_cls, schema) -> tuple[dict, list]:
    """API-Bank level-1/2 dialogues; servers are the application areas of all_apis.csv."""
    toolsets: dict = {}
    area_of: dict[str, str] = {}
    for row in csv.DictReader(io.StringIO(src.read(APIBANK_DIR + "data/all_apis.csv"))):
        server, desc = APIBANK_AREAS[row["应用场景"]]
        ts = toolsets.setdefault(server, toolset_cls(server, desc))
        name = row["类名"]
        ts.tools[name] = capability_cls(backend=server, name=name, description=_description(row["api_info"]),
                                        input_schema=schema(_input_parameters(row["api_info"])))
        area_of[name] = server
    examples = []
    for path in src.list(APIBANK_DIR + "lv1-lv2-samples/"):
        said: list[str] = []
        for line in src.read(path).splitlines():
            turn = json.loads(line)
            if turn.get("role") == "User":
                said.append(turn.get("text", "").strip())
            elif turn.get("role") == "API" and turn.get("api_name") in area_of and said:
                api = turn["api_name"]
                if api not in SKIPPED_APIS:
                    examples.append(example_cls(" ".join(said), area_of[api], [api]))
    # One example per (query, toolset): merge the calls a dialogue makes into the same area.
    merged: dict[tuple[str, str], set[str]] = {}
    for ex in examples:
        merged.setdefault((ex.query, ex.toolset), set()).update(ex.gold)
    return toolsets, [example_cls(q, t, sorted(g)) for (q, t), g in merged.items()]


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text[-1:] in ".?!" else text + "."


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2].lower() != "i " else text


def compose_multistep(examples: list, count: int, rng: random.Random, example_cls) -> list:
    """`count` requests of 2-3 parts from different toolsets; each part becomes one example with `also` set."""
    by_query: dict[str, list] = {}
    for ex in examples:
        by_query.setdefault(ex.query, []).append(ex)
    queries = [q for q in by_query if len(q) < 400]
    out = []
    for _ in range(count):
        parts = rng.sample(queries, rng.choice((2, 2, 3)))
        toolsets = [ex.toolset for q in parts for ex in by_query[q]]
        if len(set(toolsets)) < len(toolsets):  # two parts in the same toolset: gold of one is wrong for other
            continue
        text = _sentence(parts[0])
        for q in parts[1:]:
            text = rng.choice(JOINERS).format(a=text, b=_lower_first(_sentence(q)))
        for q in parts:
            for ex in by_query[q]:
                out.append(example_cls(text, ex.toolset, ex.gold,
                                       also=tuple(t for t in toolsets if t != ex.toolset)))
    return out
