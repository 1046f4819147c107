"""A STAND-IN for the cluster's DNS server on the node of ``scripts/kube-cluster.sh``.

A cluster resolves a pod's name through CoreDNS's ``kubernetes`` plugin: for a headless
Service, ``{hostname}.{service}.{namespace}.svc.{domain}`` is the address of the Endpoints
entry with that hostname (the endpoints controller writes one for each pod whose
``subdomain`` is the Service's name), and ``{service}.{namespace}.svc.{domain}`` all of
them (https://github.com/kubernetes/dns/blob/master/docs/specification.md, 2.4 and 2.5).
CoreDNS is not packaged by Debian and no image can be pulled, so :class:`ClusterDns` does
that part only: it answers ``A`` queries for those two forms from the Endpoints the real
controller wrote, on the address the kubelet names as its cluster DNS (its ``/configz``:
``clusterDNS`` and ``clusterDomain``; the kubelet writes them into each pod's
``resolv.conf``). Anything else is refused: nothing is forwarded off the machine.

Only what crosses the pod network is stood in for: the kubelet, the endpoints controller,
the Service and the pods' resolver are real.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import struct
from collections.abc import AsyncIterator
from typing import NamedTuple

import anyio
import anyio.abc
import httpx2

#: Linux's ``IP_FREEBIND``: bind the cluster DNS address before CNI put it on the bridge.
_IP_FREEBIND = 15
_A, _AAAA, _IN = 1, 28, 1
_NOERROR, _NXDOMAIN, _REFUSED = 0, 3, 5


class NodeDns(NamedTuple):
    """The kubelet's cluster DNS settings.

    Attributes:
        address: the IPv4 address pods send their queries to (``clusterDNS[0]``).
        domain: the cluster domain (``clusterDomain``), e.g. ``cluster.local``.
    """

    address: str
    domain: str


async def node_dns(http: httpx2.AsyncClient, node: str) -> NodeDns | None:
    """The kubelet's cluster DNS, read from its ``/configz`` through the API server, or
    ``None`` when it has none (a node started without ``--cluster-dns``)."""
    response = await http.get(f"/api/v1/nodes/{node}/proxy/configz")
    response.raise_for_status()
    config = response.json()["kubeletconfig"]
    if not config.get("clusterDNS") or not config.get("clusterDomain"):
        return None
    return NodeDns(config["clusterDNS"][0], config["clusterDomain"])


class _Question(NamedTuple):
    name: str  # lower case, no trailing dot
    qtype: int
    end: int  # the offset after the question section's first question


def _question(query: bytes) -> _Question:
    labels, offset = [], 12
    while (length := query[offset]) != 0:
        labels.append(query[offset + 1 : offset + 1 + length].decode("ascii").lower())
        offset += 1 + length
    qtype, _ = struct.unpack("!HH", query[offset + 1 : offset + 5])
    return _Question(".".join(labels), qtype, offset + 5)


def _answer(query: bytes, question: _Question, rcode: int, addresses: list[str]) -> bytes:
    """The response to ``query``: its id and question, ``rcode``, an ``A`` record per address."""
    flags = 0x8400 | (0x0100 & struct.unpack("!H", query[2:4])[0]) | rcode  # QR, AA, RD as asked
    header = struct.pack(
        "!HHHHHH", struct.unpack("!H", query[:2])[0], flags, 1, len(addresses), 0, 0
    )
    records = b"".join(
        struct.pack("!HHHIH", 0xC00C, _A, _IN, 5, 4) + ipaddress.IPv4Address(address).packed
        for address in addresses
    )
    return header + query[12 : question.end] + records


class ClusterDns:
    """The DNS stand-in (see the module): one UDP socket on the node's cluster DNS address.

    Args:
        http: a client to the API server (admin credentials), to read Endpoints.
        dns: the kubelet's cluster DNS settings.
    """

    def __init__(self, http: httpx2.AsyncClient, dns: NodeDns) -> None:
        self.http = http
        self.dns = dns
        #: every name asked, in order (a failing test shows what the pods looked up)
        self.asked: list[str] = []

    async def _addresses(self, name: str) -> list[str] | None:
        """The addresses of ``name``, or ``None`` when no such name is in the cluster."""
        suffix = f".svc.{self.dns.domain}"
        if not name.endswith(suffix):
            return None
        parts = name.removesuffix(suffix).split(".")
        if len(parts) not in (2, 3):
            return None
        *host, service, namespace = parts
        response = await self.http.get(f"/api/v1/namespaces/{namespace}/endpoints/{service}")
        if response.status_code == 404:
            return None
        response.raise_for_status()
        found = [
            address["ip"]
            for subset in response.json().get("subsets") or []
            for address in [*subset.get("addresses", []), *subset.get("notReadyAddresses", [])]
            if not host or address.get("hostname") == host[0]
        ]
        return found or None

    async def _respond(self, query: bytes) -> bytes:
        question = _question(query)
        self.asked.append(question.name)
        if not question.name.endswith(f".{self.dns.domain}"):
            return _answer(query, question, _REFUSED, [])  # CoreDNS would forward it
        addresses = await self._addresses(question.name)
        if addresses is None:
            return _answer(query, question, _NXDOMAIN, [])
        return _answer(query, question, _NOERROR, addresses if question.qtype == _A else [])

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[ClusterDns]:
        """Answer queries on ``dns.address`` port 53 until the block ends."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_IP, _IP_FREEBIND, 1)
        sock.bind((self.dns.address, 53))
        async with (
            await anyio.abc.UDPSocket.from_socket(sock) as udp,
            anyio.create_task_group() as task_group,
        ):

            async def serve() -> None:
                async for query, peer in udp:
                    with contextlib.suppress(IndexError, struct.error, UnicodeDecodeError):
                        await udp.sendto(await self._respond(query), *peer)

            task_group.start_soon(serve)
            try:
                yield self
            finally:
                task_group.cancel_scope.cancel()
