"""Answers from outside (OCM, PD, Prometheus, a recommender) read up to a bound.

Every httpx client of an outside API is built on BoundedTransport: a body over its limit (by
Content-Length, or counted while it streams) raises AnswerTooLarge, an httpx.ReadError, which
each client already turns into its "unavailable" error. So a 5 MB answer is a failed call
with a clear reason, never a 5 MB activity result that the server refuses (2 MiB limit) or a
history that carries it. Texts quoted from an answer into an error are cut with `quoted`.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import AsyncIterator, Iterator

import httpx

from scaling.text import shorten

MAX_ANSWER_BYTES = 4 * 1024 * 1024  # an OCM search page of 100 clusters is about 1 MB
# PD, Prometheus and a recommender: what they answer becomes an activity result nearly whole,
# so it stays well under the server's 2 MiB payload limit.
MAX_RESULT_ANSWER_BYTES = 1024 * 1024
MAX_QUOTED_CHARS = 500  # of an answer quoted into an error message


class AnswerTooLarge(httpx.ReadError):
    """The answer's body is over the client's limit: refused unread beyond it."""


@functools.cache
def verified_context() -> ssl.SSLContext:
    """httpx's default TLS context (the CA bundle of SSL_CERT_FILE, SSL_CERT_DIR or certifi), made
    once and shared: loading the bundle costs ~40 ms of CPU, which every client made for one
    call (a recommender's answer, an OCM request) paid again. A context is safe to share."""
    return httpx.create_ssl_context()


def quoted(text: object) -> str:
    """An outside answer's text, cut to MAX_QUOTED_CHARS for an error message or a status."""
    return shorten(str(text), MAX_QUOTED_CHARS)


def _refusal(request: httpx.Request, limit: int) -> AnswerTooLarge:
    return AnswerTooLarge(f"the answer of {request.url.host} is over {limit} bytes: refused", request=request)


def _declared_too_large(response: httpx.Response, limit: int) -> bool:
    length = response.headers.get("content-length", "")
    return length.isdigit() and int(length) > limit


class _Bounded(httpx.SyncByteStream):
    def __init__(self, stream: httpx.SyncByteStream, request: httpx.Request, limit: int) -> None:
        self.stream, self.request, self.limit = stream, request, limit

    def __iter__(self) -> Iterator[bytes]:
        read = 0
        for chunk in self.stream:
            read += len(chunk)
            if read > self.limit:
                raise _refusal(self.request, self.limit)
            yield chunk

    def close(self) -> None:
        self.stream.close()


class _AsyncBounded(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, request: httpx.Request, limit: int) -> None:
        self.stream, self.request, self.limit = stream, request, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self.stream:
            read += len(chunk)
            if read > self.limit:
                raise _refusal(self.request, self.limit)
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


class BoundedTransport(httpx.BaseTransport):
    """`inner` (default: httpx's own, with `verify`) whose answers are read up to `limit` bytes."""

    def __init__(
        self,
        inner: httpx.BaseTransport | None = None,
        limit: int = MAX_ANSWER_BYTES,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.inner = inner or httpx.HTTPTransport(verify=verified_context() if verify is True else verify)
        self.limit = limit

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if _declared_too_large(response, self.limit):
            response.close()
            raise _refusal(request, self.limit)
        response.stream = _Bounded(response.stream, request, self.limit)  # type: ignore[arg-type]
        return response

    def close(self) -> None:
        self.inner.close()


class AsyncBoundedTransport(httpx.AsyncBaseTransport):
    """The async counterpart of BoundedTransport."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None, limit: int = MAX_ANSWER_BYTES) -> None:
        self.inner = inner or httpx.AsyncHTTPTransport(verify=verified_context())
        self.limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if _declared_too_large(response, self.limit):
            await response.aclose()
            raise _refusal(request, self.limit)
        response.stream = _AsyncBounded(response.stream, request, self.limit)  # type: ignore[arg-type]
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
