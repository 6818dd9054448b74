"""A Hub that cannot be reached, said in one line: ``headtrace revisions`` and ``audit`` ask the Hub
(huggingface_hub over httpx or requests); when there is no network, or ``HF_HUB_OFFLINE`` is set,
their error is a long traceback. :func:`unreachable` tells such a failure from any other by the
exception chain, without importing the network clients."""
from __future__ import annotations

import socket

_NETWORK_MODULES = ("httpx", "httpcore", "requests", "urllib3", "huggingface_hub", "aiohttp")
_NETWORK_WORDS = ("Connect", "Timeout", "Network", "Offline", "Proxy", "Resolve", "SSL")


def is_network_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a failure to reach a server: no connection, no name
    resolution, a timeout, a proxy, or the Hub's offline mode."""
    for e in _chain(exc):
        if isinstance(e, (ConnectionError, TimeoutError, socket.gaierror, socket.timeout)):
            return True
        module, name = type(e).__module__ or "", type(e).__name__
        if module.split(".")[0].rstrip("0123456789") in _NETWORK_MODULES and any(w in name for w in _NETWORK_WORDS):
            return True
    return False


def unreachable(command: str, offline: str) -> str:
    """The one line said instead of the traceback; ``offline``: what the command can do without the Hub."""
    return (f"headtrace {command}: the Hugging Face Hub is unreachable (no network, or HF_HUB_OFFLINE is set). "
            f"Offline: {offline}")


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
