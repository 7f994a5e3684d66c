"""Load testing a running router: N concurrent clients for a duration or a number of requests.

    mcp-router loadtest --concurrency 16 --duration 30                  # http://127.0.0.1:8000
    mcp-router loadtest --url http://10.0.0.5:8000 --concurrency 64 --requests 5000 --mode hedged \\
        --questions questions.txt --json results.json --plot results.png
    mcp-router loadtest --protocol mcp --concurrency 4 --duration 10   # MCP: the universal_query tool
    mcp-router loadtest --api-key "$KEY" --concurrency 32 --duration 10  # as one principal (or $MCP_ROUTER_API_KEY)

HTTP workers send POST /v1/query one at a time each, over one shared httpx.AsyncClient. With
`--protocol mcp` each worker holds its own MCP session (POST URL/mcp/) and opens a new one after a
failure. A progress line goes to stderr about once a second. The summary reports latency
percentiles, throughput, errors by HTTP status and by cause (the `error.type` of the JSON error body,
or the exception class of a transport error), answers per backend, and the fallback rate: the share
of answers whose `routing.fallbacks_used` > 0 or that took more than one attempt (in `parallel` and
`consensus` modes every answer takes several). `--json` adds every request as a sample; `--plot`
draws latency over time and its histogram. Exit status 0 when at least one request succeeded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from mcp_router.cli.main import DEFAULT_URL, CommandError, api_key, positive

DEFAULT_QUESTIONS = (
    "What time is it in Tokyo?",
    "What is 12 times (3 + 4)?",
    "Convert 5 km to miles",
    "Echo back the message hello router",
)
MODES = ("fallback", "parallel", "hedged", "consensus")
# MCP tool errors read "<error.type>: <message>", after the SDK's "Error executing tool <name>: ".
_TOOL_ERROR = re.compile(r"(?:Error executing tool \S+: )?([a-z][a-z0-9_]*): ")


@dataclass(slots=True)
class Sample:
    t: float  # seconds from the start of the run to the start of the request
    latency_ms: float
    status: int | None  # HTTP status; None for a transport error and for MCP calls
    ok: bool
    cause: str | None = None  # for an error: error.type from the body, or the exception class
    backend: str | None = None
    fallback: bool = False


def _cause_of(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return type(exc).__name__


def _error_type(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    return error.get("type") if isinstance(error, dict) else None


def _tool_error_type(result: Any) -> str:
    text = next((c.text for c in result.content if isinstance(getattr(c, "text", None), str)), "")
    match = _TOOL_ERROR.match(text)
    return match.group(1) if match else "tool_error"


class _Run:
    def __init__(self, url: str, questions: list[str], *, concurrency: int, duration: float | None,
                 requests: int | None, mode: str | None, protocol: str, request_timeout: float,
                 progress: bool, api_key: str | None = None) -> None:
        if (duration is None) == (requests is None):
            raise ValueError("give exactly one of duration and requests")
        self.url, self.questions, self.mode, self.protocol = url.rstrip("/"), questions, mode, protocol
        self.concurrency, self.duration, self.requests = concurrency, duration, requests
        self.request_timeout, self.progress = request_timeout, progress
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.samples: list[Sample] = []
        self.errors = 0
        self._issued = 0
        self._start = self._end = 0.0

    def _claim(self) -> int | None:
        """The index of the next request, or None when the run is over."""
        if self.requests is not None and self._issued >= self.requests:
            return None
        if self.duration is not None and time.perf_counter() >= self._end:
            return None
        self._issued += 1
        return self._issued - 1

    def _payload(self, i: int) -> dict[str, Any]:
        question = self.questions[i % len(self.questions)]
        return {"question": question, "mode": self.mode} if self.mode else {"question": question}

    def _add(self, t0: float, *, ok: bool, status: int | None = None, body: Any = None,
             cause: str | None = None) -> None:
        latency_ms = (time.perf_counter() - t0) * 1000
        sample = Sample(t=t0 - self._start, latency_ms=latency_ms, status=status, ok=ok)
        if ok and isinstance(body, dict):
            routing = body.get("routing") or {}
            sample.backend = body.get("backend")
            attempts = routing.get("attempts") or ()
            sample.fallback = (routing.get("fallbacks_used") or 0) > 0 or len(attempts) > 1
        elif not ok:
            sample.cause = cause or _error_type(body) or f"http_{status}"
            self.errors += 1
        self.samples.append(sample)

    async def _http_worker(self, client: httpx.AsyncClient) -> None:
        while (i := self._claim()) is not None:
            t0 = time.perf_counter()
            try:
                resp = await client.post(f"{self.url}/v1/query", json=self._payload(i))
            except Exception as exc:  # a transport error is a failed request, not the end of the worker
                self._add(t0, ok=False, cause=_cause_of(exc))
                continue
            try:
                body = resp.json()
            except ValueError:
                body = None
            self._add(t0, ok=resp.is_success, status=resp.status_code, body=body)

    async def _mcp_worker(self) -> None:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        i = self._claim()
        while i is not None:
            t0 = time.perf_counter()  # a failed session setup counts as the request's latency
            try:
                async with httpx2.AsyncClient(headers=self.headers, timeout=self.request_timeout) as http, \
                        Client(streamable_http_client(f"{self.url}/mcp/", http_client=http),
                               read_timeout_seconds=self.request_timeout) as client:
                    while i is not None:
                        t0 = time.perf_counter()
                        result = await client.call_tool("universal_query", self._payload(i))
                        self._add(t0, ok=not result.is_error, body=result.structured_content,
                                  cause=_tool_error_type(result) if result.is_error else None)
                        i = self._claim()
            except Exception as exc:  # session setup, transport or protocol failure: count it, reconnect
                if i is not None:
                    self._add(t0, ok=False, cause=_cause_of(exc))
                    i = self._claim()

    async def _report_progress(self) -> None:
        last_n, last_t = 0, time.perf_counter()
        while True:
            await asyncio.sleep(1.0)
            now, n = time.perf_counter(), len(self.samples)
            print(f"[{now - self._start:6.1f} s] {n} done, {(n - last_n) / (now - last_t):.1f} req/s, "
                  f"{self.errors} errors", file=sys.stderr, flush=True)
            last_n, last_t = n, now

    async def run(self) -> float:
        """Run to the end; returns the elapsed seconds (requests still in flight at the deadline finish)."""
        self._start = time.perf_counter()
        self._end = self._start + (self.duration or 0.0)
        progress = asyncio.create_task(self._report_progress()) if self.progress else None
        try:
            if self.protocol == "mcp":
                await asyncio.gather(*(self._mcp_worker() for _ in range(self.concurrency)))
            else:
                n = self.concurrency
                limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
                async with httpx.AsyncClient(timeout=self.request_timeout, limits=limits,
                                             headers=self.headers) as client:
                    await asyncio.gather(*(self._http_worker(client) for _ in range(self.concurrency)))
        finally:
            if progress is not None:
                progress.cancel()
        return time.perf_counter() - self._start


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {"p50": float(p50), "p95": float(p95), "p99": float(p99), "max": float(max(values))}


def summarize(samples: list[Sample], elapsed: float, *, duration: float | None = None, **info: Any) -> dict[str, Any]:
    ok = [s for s in samples if s.ok]
    failed = [s for s in samples if not s.ok]
    fallbacks = sum(s.fallback for s in ok)
    # Until the requests ended, the slowest hundredth left out: one request timing out a minute after the
    # others made a steady 1,000 req/s read as 143.
    window = elapsed
    if samples:
        cutoff = float(np.percentile([s.latency_ms for s in samples], 99))
        ended = max(s.t + s.latency_ms / 1000 for s in samples if s.latency_ms <= cutoff)
        window = min(elapsed, ended) if ended > 0 else elapsed
    return {
        **info, "elapsed_s": elapsed, "requests": len(samples), "ok": len(ok), "errors": len(failed),
        "throughput_rps": len(samples) / window if window > 0 else 0.0,
        "latency_ms": _percentiles([s.latency_ms for s in samples]),
        "latency_ms_ok": _percentiles([s.latency_ms for s in ok]),
        "errors_by_status": dict(Counter(str(s.status) for s in failed if s.status).most_common()),
        "errors_by_cause": dict(Counter(s.cause or "?" for s in failed).most_common()),
        "backends": dict(Counter(s.backend or "?" for s in ok).most_common()),
        "fallbacks": fallbacks, "fallback_rate": fallbacks / len(ok) if ok else 0.0,
        "timeline": timeline(samples, duration), "finished_at": time.time(),
    }


def timeline(samples: list[Sample], duration: float | None = None) -> list[dict[str, float]]:
    """Per second of the run (by when each request started): requests/s, latency percentiles, errors; a second
    in which no request started is there too, with none (a stall is what a load test is run to see). A run of
    `duration` seconds ends in part of a second, whose rate is over that part (`s`: its length)."""
    seconds: dict[int, list[Sample]] = {}
    for sample in samples:
        seconds.setdefault(int(sample.t), []).append(sample)
    out: list[dict[str, float]] = []
    for second in range(max(seconds) + 1 if seconds else 0):
        group = seconds.get(second)
        if not group:
            out.append({"t": second + 1, "rps": 0.0, "errors": 0.0})
            continue
        p50, p95, p99 = np.percentile([s.latency_ms for s in group], [50, 95, 99])
        length = min(1.0, duration - second) if duration is not None and duration > second else 1.0
        out.append({"t": second + 1, "rps": round(len(group) / length, 2), "p50_ms": round(float(p50), 2),
                    "p95_ms": round(float(p95), 2), "p99_ms": round(float(p99), 2),
                    "errors": float(sum(not s.ok for s in group)), **({"s": round(length, 3)} if length < 1 else {})})
    return out


async def run_loadtest(url: str, questions: list[str] | None = None, *, concurrency: int = 8,
                       duration: float | None = None, requests: int | None = None, mode: str | None = None,
                       protocol: str = "http", request_timeout: float = 60.0, progress: bool = True,
                       api_key: str | None = None) -> tuple[dict[str, Any], list[Sample]]:
    """Drive the router at `url` (as the principal of `api_key`, if given); returns the summary and every
    request's sample."""
    run = _Run(url, list(questions or DEFAULT_QUESTIONS), concurrency=concurrency, duration=duration,
               requests=requests, mode=mode, protocol=protocol, request_timeout=request_timeout,
               progress=progress, api_key=api_key)
    elapsed = await run.run()
    info = {"url": run.url, "protocol": protocol, "mode": mode, "concurrency": concurrency}
    return summarize(run.samples, elapsed, duration=duration, **info), run.samples


def print_summary(s: dict[str, Any]) -> None:
    def ms(p: dict[str, float | None]) -> str:
        return "  ".join(f"{k} {v:.1f}" if v is not None else f"{k} -" for k, v in p.items())

    def tally(counts: dict[str, int]) -> str:
        return ", ".join(f"{k} x{v}" for k, v in counts.items()) or "none"

    print(f"{s['requests']} requests in {s['elapsed_s']:.2f} s ({s['throughput_rps']:.1f} req/s) "
          f"to {s['url']} over {s['protocol']}, concurrency {s['concurrency']}: "
          f"{s['ok']} ok, {s['errors']} errors")
    print(f"latency ms, all requests : {ms(s['latency_ms'])}")
    print(f"latency ms, successful   : {ms(s['latency_ms_ok'])}")
    print(f"errors by HTTP status    : {tally(s['errors_by_status'])}")
    print(f"errors by cause          : {tally(s['errors_by_cause'])}")
    print(f"answers by backend       : {tally(s['backends'])}")
    print(f"fallback rate            : {s['fallback_rate']:.1%} ({s['fallbacks']} of {s['ok']} answers)")


def write_json(path: Path, summary: dict[str, Any], samples: list[Sample]) -> None:
    rows = [asdict(x) | {"t": round(x.t, 4), "latency_ms": round(x.latency_ms, 3)} for x in samples]
    path.write_text(json.dumps({**summary, "samples": rows}, indent=1) + "\n", encoding="utf-8")


def write_plot(path: Path, samples: list[Sample], title: str = "mcp-router load test") -> None:
    """Two panels: latency over time (every request, with p50/p95 per second) and the latency histogram."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install 'mcp-router[plots]'") from None

    fig = Figure(figsize=(12, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    over_time, histogram = fig.subplots(1, 2)
    for ok, colour, label in ((True, "tab:blue", "ok"), (False, "tab:red", "error")):
        points = [x for x in samples if x.ok is ok]
        if points:
            over_time.scatter([x.t for x in points], [x.latency_ms for x in points], s=6, alpha=0.5,
                              color=colour, label=label)
    if samples:
        t = np.array([x.t for x in samples])
        latency = np.array([x.latency_ms for x in samples])
        seconds = np.unique(np.floor(t))
        for q, style in ((50, "-"), (95, "--")):
            per_second = [np.percentile(latency[np.floor(t) == sec], q) for sec in seconds]
            over_time.plot(seconds + 0.5, per_second, style, color="black", label=f"p{q} per second")
        histogram.hist(latency, bins=min(50, max(10, len(latency) // 5)), color="tab:blue")
    over_time.set(title="Latency over time", xlabel="seconds since start", ylabel="latency (ms)")
    over_time.legend(loc="upper right")
    histogram.set(title="Latency histogram", xlabel="latency (ms)", ylabel="requests")
    fig.suptitle(title)
    fig.savefig(path, dpi=100)


def load_questions(path: Path | None) -> list[str]:
    if path is None:
        return list(DEFAULT_QUESTIONS)
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    questions = [line for line in lines if line and not line.startswith("#")]
    if not questions:
        raise ValueError(f"{path}: no questions (one per line)")
    return questions


def add_loadtest_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("loadtest", help="drive a running router with concurrent requests",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=DEFAULT_URL, help=f"the router (default {DEFAULT_URL})")
    p.add_argument("--concurrency", type=positive(int), default=8, metavar="N", help="concurrent workers")
    bound = p.add_mutually_exclusive_group(required=True)
    bound.add_argument("--duration", type=positive(float), metavar="S", help="run for S seconds")
    bound.add_argument("--requests", type=positive(int), metavar="N", help="send N requests in all")
    p.add_argument("--mode", choices=MODES, help="the resilience mode sent with every query")
    p.add_argument("--questions", type=Path, metavar="FILE", help="one question per line (default: built-in)")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the summary and every sample as JSON")
    p.add_argument("--plot", type=Path, metavar="OUT.png", help="write latency over time and its histogram")
    p.add_argument("--protocol", choices=("http", "mcp"), default="http")
    p.add_argument("--timeout", type=positive(float), default=60.0, metavar="S", help="per request")
    p.add_argument("--api-key", help="authenticate as this key's principal (default: $MCP_ROUTER_API_KEY)")
    p.add_argument("--no-report", action="store_true",
                   help="do not send the summary to the router (its console shows the last one it was sent)")
    return p


def send_report(url: str, summary: dict[str, Any], api_key: str | None) -> str:
    """The summary to the router, for its console's load test view (`POST /v1/loadtest`, operators)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.post(f"{url.rstrip('/')}/v1/loadtest", json=summary, headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        return f"the report was not sent to the router: {type(exc).__name__}"
    if r.status_code == 200:
        return f"sent the report to {url.rstrip('/')}/ui/#loadtest"
    return f"the router did not keep the report ({r.status_code}): {r.text[:200]}"


def cmd_loadtest(args: argparse.Namespace) -> int:
    try:
        questions = load_questions(args.questions)
        key = api_key(args)
        for out, flag in ((args.json, "--json"), (args.plot, "--plot")):  # known before the run, not after it
            if out is not None and not out.resolve().parent.is_dir():
                raise CommandError(f"{flag} {out}: the folder {out.resolve().parent} does not exist")
            if out is not None and out.is_dir():
                raise CommandError(f"{flag} {out}: is a folder; name the file to write")
    except (OSError, ValueError, CommandError) as exc:
        print(f"mcp-router loadtest: {exc}", file=sys.stderr)
        return 2
    summary, samples = asyncio.run(run_loadtest(
        args.url, questions, concurrency=args.concurrency, duration=args.duration, requests=args.requests,
        mode=args.mode, protocol=args.protocol, request_timeout=args.timeout, api_key=key))
    print_summary(summary)
    if not args.no_report:
        print(send_report(args.url, summary, key))
    if args.json:
        write_json(args.json, summary, samples)
        print(f"wrote {args.json}")
    if args.plot:
        write_plot(args.plot, samples, title=f"mcp-router load test: {summary['url']}, "
                                             f"concurrency {args.concurrency}")
        print(f"wrote {args.plot}")
    return 0 if summary["ok"] else 1
