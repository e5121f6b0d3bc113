"""Clients for stillweb's native API (``/v1/search``, ``/v1/search/batch``, ``/v1/visit``,
``/v1/sessions/{id}``): ``Client`` blocks, ``AsyncClient`` awaits; both raise
``StillwebError`` with the API's stable error code and message."""

from __future__ import annotations

from typing import Any, Optional

import httpx


class StillwebError(Exception):
    """An error answer: ``status`` (HTTP), ``code`` (``url_not_seen``, ``invalid_request``...)
    and the server's ``message``, which says what to do."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


def _search_body(query: str, k: Optional[int], session: Optional[str], options: dict) -> dict:
    body: dict[str, Any] = {"query": query}
    if k is not None:
        body["k"] = k
    if session is not None:
        body["session"] = session
    body.update({name: value for name, value in options.items() if value is not None})
    return body


def _batch_body(queries: list, session: Optional[str], collection: Optional[str]) -> dict:
    body: dict[str, Any] = {"queries": [q if isinstance(q, dict) else {"query": q} for q in queries]}
    if session is not None:
        body["session"] = session
    if collection is not None:
        body["collection"] = collection
    return body


def _visit_body(url: str, session: str, collection: Optional[str]) -> dict:
    body = {"url": url, "session": session}
    if collection is not None:
        body["collection"] = collection
    return body


def _answer(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        raise StillwebError(response.status_code, "invalid_response", response.text[:500]) from None
    if response.status_code >= 400:
        error = body.get("error", {}) if isinstance(body, dict) else {}
        raise StillwebError(
            response.status_code, error.get("code", "unknown"), error.get("message", str(body))
        )
    return body


def _headers(api_key: Optional[str]) -> dict:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class Client:
    """A blocking client: ``Client("http://127.0.0.1:8080", api_key=None)``."""

    def __init__(self, base_url: str, api_key: Optional[str] = None, timeout: float = 60.0):
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=_headers(api_key), timeout=timeout
        )

    def search(self, query: str, k: Optional[int] = None, session: Optional[str] = None,
               **options: Any) -> dict:
        """One search (``options``: ``mode``, ``rerank``, ``rerank_pool``, ``explain``,
        ``collection``); the native response, ``results`` ranked."""
        return _answer(self._http.post("/v1/search", json=_search_body(query, k, session, options)))

    def batch(self, queries: list, session: Optional[str] = None,
              collection: Optional[str] = None) -> list:
        """Many searches in order: each query a string or a dict (``query``, ``k``, ...); one
        response or error body per query."""
        body = _batch_body(queries, session, collection)
        return _answer(self._http.post("/v1/search/batch", json=body))["responses"]

    def visit(self, url: str, session: str, collection: Optional[str] = None) -> dict:
        """The page at ``url``, which a search of ``session`` showed: title, url, date, text."""
        return _answer(self._http.post("/v1/visit", json=_visit_body(url, session, collection)))

    def transcript(self, session: str) -> dict:
        """The session's searches and visits, in order."""
        return _answer(self._http.get(f"/v1/sessions/{session}"))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


class AsyncClient:
    """``Client``'s calls, awaited: ``async with AsyncClient(base_url) as c: await c.search(...)``."""

    def __init__(self, base_url: str, api_key: Optional[str] = None, timeout: float = 60.0):
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=_headers(api_key), timeout=timeout
        )

    async def search(self, query: str, k: Optional[int] = None, session: Optional[str] = None,
                     **options: Any) -> dict:
        return _answer(
            await self._http.post("/v1/search", json=_search_body(query, k, session, options))
        )

    async def batch(self, queries: list, session: Optional[str] = None,
                    collection: Optional[str] = None) -> list:
        body = _batch_body(queries, session, collection)
        return _answer(await self._http.post("/v1/search/batch", json=body))["responses"]

    async def visit(self, url: str, session: str, collection: Optional[str] = None) -> dict:
        return _answer(
            await self._http.post("/v1/visit", json=_visit_body(url, session, collection))
        )

    async def transcript(self, session: str) -> dict:
        return _answer(await self._http.get(f"/v1/sessions/{session}"))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.aclose()
