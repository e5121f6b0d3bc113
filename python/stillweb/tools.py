"""The tools an agent harness registers (``web_search`` and ``visit_web``, as JSON-schema
function-calling specs) and an adapter that turns the model's tool call into a request and the
answer into the observation text the model reads."""

from __future__ import annotations

import json
from typing import Any, Optional, Union

from .client import AsyncClient, Client, StillwebError

WEB_SEARCH = {
    "name": "web_search",
    "description": (
        "Search the web. Supports \"exact phrases\", site:host, -word and OR. Returns ranked "
        "results with title, URL, date and a snippet."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for."},
            "k": {"type": "integer", "minimum": 1, "maximum": 20,
                  "description": "Number of results (default 10)."},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
}

VISIT_WEB = {
    "name": "visit_web",
    "description": "Read the full text of a page that an earlier web_search returned.",
    "parameters": {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "A URL from a search result."}},
        "required": ["url"],
        "additionalProperties": False,
    },
}


def tool_specs(style: str = "openai") -> list:
    """The two tools' specs: ``openai`` (``{"type": "function", "function": {...}}``, as OpenAI,
    vLLM and most chat templates take them) or ``plain`` (name, description, parameters)."""
    if style == "plain":
        return [dict(WEB_SEARCH), dict(VISIT_WEB)]
    if style == "openai":
        return [{"type": "function", "function": dict(spec)} for spec in (WEB_SEARCH, VISIT_WEB)]
    raise ValueError(f"unknown style {style!r}: openai or plain")


def _arguments(arguments: Union[str, dict, None]) -> dict:
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as e:
            raise ValueError(f"the tool call's arguments are not JSON: {e}") from None
    if not isinstance(arguments, dict):
        raise ValueError("the tool call's arguments must be a JSON object")
    return arguments


def search_observation(response: dict) -> str:
    """A search response as the text the model reads: numbered results with URL, date, snippet."""
    lines = []
    for r in response["results"]:
        lines.append(f"{r['rank']}. {r['title']}\nURL: {r['url']}\nDate: {r['date']}\n{r['snippet']}\n")
    return "\n".join(lines) if lines else "No results."


def page_observation(page: dict) -> str:
    """A visited page as the text the model reads."""
    return f"Title: {page['title']}\nURL: {page['url']}\nDate: {page['date']}\n\n{page['text']}"


def _request(name: str, arguments: dict) -> tuple:
    if name == "web_search":
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ValueError("web_search needs a non-empty `query` string")
        return "search", {"query": query, "k": arguments.get("k")}
    if name == "visit_web":
        url = arguments.get("url")
        if not isinstance(url, str) or not url:
            raise ValueError("visit_web needs a `url` string")
        return "visit", {"url": url}
    raise ValueError(f"unknown tool {name!r}: web_search or visit_web")


class ToolAdapter:
    """Runs one episode's tool calls: ``ToolAdapter(client, session="episode-7")``, then
    ``adapter.call(name, arguments)`` gives the observation text. A refused call (a page the
    episode was not shown, a bad argument) is an observation too, starting ``Error:``, so the
    model can correct itself; an unreachable server raises."""

    def __init__(self, client: Client, session: str, collection: Optional[str] = None):
        self.client, self.session, self.collection = client, session, collection

    def call(self, name: str, arguments: Union[str, dict, None]) -> str:
        try:
            kind, request = _request(name, _arguments(arguments))
            if kind == "search":
                return search_observation(self.client.search(
                    request["query"], k=request["k"], session=self.session,
                    collection=self.collection))
            return page_observation(
                self.client.visit(request["url"], session=self.session, collection=self.collection))
        except (StillwebError, ValueError) as e:
            return f"Error: {e}"


class AsyncToolAdapter:
    """``ToolAdapter`` over an ``AsyncClient``: ``await adapter.call(name, arguments)``."""

    def __init__(self, client: AsyncClient, session: str, collection: Optional[str] = None):
        self.client, self.session, self.collection = client, session, collection

    async def call(self, name: str, arguments: Union[str, dict, None]) -> str:
        try:
            kind, request = _request(name, _arguments(arguments))
            if kind == "search":
                return search_observation(await self.client.search(
                    request["query"], k=request["k"], session=self.session,
                    collection=self.collection))
            return page_observation(await self.client.visit(
                request["url"], session=self.session, collection=self.collection))
        except (StillwebError, ValueError) as e:
            return f"Error: {e}"
