"""Which `Host` (and `Origin`) the router answers: protection against DNS rebinding.

A page on `evil.example` whose name is then pointed at 127.0.0.1 sends its requests to the local router as
its own origin, so the browser lets it read the answers. Where authentication is off, every such request
runs as the local operator. The MCP SDK refuses these on `/mcp/` (`host_check`); `AnsweredHosts` refuses them
on every other path, by the same list:

    AnsweredHosts.for_server(settings.server)   # None where nothing needs checking
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings

from router.errors import Forbidden, MisdirectedRequest, RouterError
from router.settings import ServerSettings

_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_SDK_LOOPBACK = ("127.0.0.1", "localhost", "::1")  # the binds the MCP SDK checks hosts for by default


def host_check(allowed: list[str]) -> TransportSecuritySettings | None:
    """The DNS-rebinding protection for `server.allowed_hosts`: loopback names and the configured ones
    (a bare name at any port); None keeps the SDK's default (on for a loopback bind, off otherwise)."""
    if not allowed:
        return None
    if "*" in allowed:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = [h for name in (*_LOOPBACK, *allowed)
             for h in ((name,) if ":" in name.rsplit("]", 1)[-1] else (name, f"{name}:*"))]
    origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


class AnsweredHosts:
    """`host:port` names, `host:*` for any port of one."""

    def __init__(self, hosts: list[str]) -> None:
        self.exact = {h.lower() for h in hosts if not h.endswith(":*")}
        self.any_port = {h[:-2].lower() for h in hosts if h.endswith(":*")}

    @classmethod
    def for_server(cls, server: ServerSettings) -> AnsweredHosts | None:
        """Checked where authentication is off: with it on, a page cannot present a caller's credential. The
        list `/mcp/` answers by: `server.allowed_hosts` and loopback names, or loopback names alone for a
        loopback bind (the SDK's default)."""
        if server.auth.enabled:
            return None
        security = host_check(server.allowed_hosts)
        if security is None:  # the SDK's default: on for these binds only
            return cls([f"{name}:*" for name in _LOOPBACK]) if server.host in _SDK_LOOPBACK else None
        return cls(security.allowed_hosts) if security.enable_dns_rebinding_protection else None

    def answers(self, host: str) -> bool:
        host = host.lower()
        name = host.rsplit(":", 1)[0] if ":" in host.rsplit("]", 1)[-1] else host
        return host in self.exact or name in self.any_port or name in self.exact

    def refusal(self, headers: Mapping[str, str]) -> RouterError | None:
        host = headers.get("host", "")
        if not self.answers(host):
            return MisdirectedRequest(f"this router does not answer requests for host {host[:100]!r}: list it in "
                                      "server.allowed_hosts", setting="server.allowed_hosts")
        origin = headers.get("origin")
        if origin is not None and not self.answers(urlsplit(origin).netloc if "://" in origin else origin):
            return Forbidden(f"requests from pages of {origin[:100]!r} are not answered: list the page's host "
                             "in server.allowed_hosts", setting="server.allowed_hosts")
        return None
