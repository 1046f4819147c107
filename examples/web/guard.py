"""What keeps another site's page from using the service: the service runs commands.

The service listens on loopback, but the user's browser is on loopback too, and any
page it shows can make it send requests there. Three kinds of request would reach the
routes otherwise, and each is refused here:

- a cross-site HTML form (``enctype="text/plain"``) or a ``no-cors`` ``fetch``, which
  browsers send without asking the service first (no CORS preflight): refused because
  ``POST`` and ``DELETE`` must be ``Content-Type: application/json`` (which a browser
  sends cross-site only after a preflight this service never grants), and because their
  ``Origin`` names another site;
- a page of a name that its DNS now points at 127.0.0.1 (DNS rebinding), whose requests
  are same-origin to the browser: refused by the ``Host`` allow-list
  (Starlette's ``TrustedHostMiddleware``, set up in :func:`guarded`);
- a client that is not on this machine: refused unless it sends the bearer token the
  service was started with (``ASYNCTORCHX_WEB_TOKEN``), and refused always when none was.
"""

from __future__ import annotations

import hmac
import ipaddress
import os

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from .jobs import error

#: the environment variable listing the host names the service answers to (commas)
HOSTS_VARIABLE = "ASYNCTORCHX_WEB_HOSTS"
#: the host names it answers to by default: this machine's loopback names
DEFAULT_HOSTS = ("127.0.0.1", "localhost")
#: the environment variable holding the bearer token clients beyond loopback must send
TOKEN_VARIABLE = "ASYNCTORCHX_WEB_TOKEN"
#: the methods that change something, which must be JSON and same-origin
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _is_loopback(scope: Scope) -> bool:
    """Whether the request's client is on this machine (127.0.0.0/8, ``::1``).

    A client without an address (a Unix socket, where a reverse proxy may forward
    anyone) is not.
    """
    client = scope.get("client")
    if not client:
        return False
    try:
        return ipaddress.ip_address(client[0]).is_loopback
    except ValueError:  # a name, not an address
        return False


def _refusal(scope: Scope, headers: Headers, token: str | None) -> tuple[int, str] | None:
    """Why the request is refused (its status and message), or ``None`` if it may pass."""
    if not _is_loopback(scope):
        if token is None:
            return 403, (
                f"this service answers clients on this machine only; start it with "
                f"{TOKEN_VARIABLE} set and send 'Authorization: Bearer <token>' from elsewhere"
            )
        sent = headers.get("authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return 401, f"send 'Authorization: Bearer <token>' with the token of {TOKEN_VARIABLE}"
    if scope["method"] not in STATE_CHANGING:
        return None
    origin = headers.get("origin")
    own = f"{scope['scheme']}://{headers.get('host', '')}"
    if origin is not None and origin != own:
        return 403, f"cross-origin request refused: Origin {origin!r} is not this service ({own!r})"
    content_type = headers.get("content-type", "").partition(";")[0].strip().lower()
    if content_type != "application/json":
        return 415, (
            f"{scope['method']} needs 'Content-Type: application/json', "
            f"got {headers.get('content-type')!r}"
        )
    return None


class RequestGuard:
    """ASGI middleware refusing what another site's page, or another machine, can send.

    In order: a client not on loopback without the bearer token (401, or 403 when the
    service has no token); a state-changing request (``POST``, ``PUT``, ``PATCH``,
    ``DELETE``) whose ``Origin`` is not the service's own ``scheme://Host`` (403), or
    whose ``Content-Type`` is not ``application/json`` (415). A request without
    ``Origin`` (not from a browser: curl, httpx) is judged by the other two. Starlette
    has no such middleware; its ``CORSMiddleware`` grants cross-origin access, the
    opposite of what this service wants.

    Args:
        app: the application it guards.
        token: the bearer token clients beyond loopback must send, or ``None``: they
            are refused.
    """

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request, or answer its refusal as ``{"error": ...}``.

        Args:
            scope: the request's ASGI scope.
            receive: the ASGI receive channel.
            send: the ASGI send channel.
        """
        if scope["type"] == "http":
            refusal = _refusal(scope, Headers(scope=scope), self.token)
            if refusal is not None:
                await error(*refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def guarded(hosts: list[str] | None = None, token: str | None = None) -> list[Middleware]:
    """The service's middleware: the ``Host`` allow-list, then :class:`RequestGuard`.

    Args:
        hosts: the host names the service answers to (``Host`` without its port; a
            ``*.example.com`` pattern matches subdomains); ``None``: those of
            ``ASYNCTORCHX_WEB_HOSTS`` (comma-separated), else 127.0.0.1 and localhost.
            A request naming another host is answered 400 (``Invalid host header``).
        token: the bearer token of clients beyond loopback; ``None``: that of
            ``ASYNCTORCHX_WEB_TOKEN``, if set and not empty.
    """
    if hosts is None:
        listed = os.environ.get(HOSTS_VARIABLE, "")
        hosts = [h.strip() for h in listed.split(",") if h.strip()] or list(DEFAULT_HOSTS)
    if token is None:
        token = os.environ.get(TOKEN_VARIABLE) or None
    return [
        Middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False),
        Middleware(RequestGuard, token=token),
    ]
