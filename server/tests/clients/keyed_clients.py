"""Drives a stillweb server started with --api-keys through the real client libraries
(tavily-python, exa-py, the MCP Python SDK) and documented requests: each client's own way of
sending its key is accepted, no key or a wrong one is 401 in the API's shape (raised as the
library's own error), sessions are apart per key, and a key over its rate gets 429.

Usage: python keyed_clients.py BASE_URL KEY_A KEY_B KEY_SLOW   (over the shared samples index;
KEY_SLOW has a rate of 1 request per second and a burst of 2)
Exits non-zero with a message on the first failed check.
"""
import asyncio
import sys

import requests

BASE = sys.argv[1].rstrip("/")
KEY_A, KEY_B, KEY_SLOW = sys.argv[2:5]
WRONG = "not-a-key-this-server-knows"
ANARCHISM = "https://en.wikipedia.org/wiki/Anarchism"
checks = 0


def check(condition, message):
    global checks
    if not condition:
        raise SystemExit(f"FAILED: {message[:500]}")
    checks += 1


def unauthorized(response, shape, what):
    check(response.status_code == 401 and response.headers.get("x-stillweb-error") == "unauthorized",
          f"{what}: {response.status_code} {response.text[:200]}")
    check(shape(response.json()), f"{what} shape: {response.text[:200]}")


def tavily():
    from tavily import TavilyClient
    from tavily.errors import InvalidAPIKeyError, UsageLimitExceededError

    a = TavilyClient(api_key=KEY_A, api_base_url=f"{BASE}/tavily")
    found = a.search("Anarchism", max_results=3, session_id="e1")
    check(found["results"][0]["url"] == ANARCHISM, f"tavily with key A: {found}")
    try:
        TavilyClient(api_key=WRONG, api_base_url=f"{BASE}/tavily").search("Anarchism")
        check(False, "tavily: a wrong key must raise")
    except InvalidAPIKeyError:
        check(True, "")
    # Older Tavily clients send the key in the body.
    in_body = requests.post(f"{BASE}/tavily/search", json={"query": "Anarchism", "api_key": KEY_A})
    check(in_body.status_code == 200, f"tavily api_key in the body: {in_body.text[:200]}")
    unauthorized(requests.post(f"{BASE}/tavily/search", json={"query": "Anarchism"}),
                 lambda b: "error" in b["detail"], "tavily without a key")

    # Key B's `e1` is another session: it was shown nothing, so it cannot extract what A's was.
    b = TavilyClient(api_key=KEY_B, api_base_url=f"{BASE}/tavily")
    refused = b.extract([ANARCHISM], session_id="e1")
    check(not refused["results"] and len(refused["failed_results"]) == 1,
          f"tavily: key B extracts what only key A's e1 was shown: {refused}")
    allowed = a.extract([ANARCHISM], session_id="e1")
    check(len(allowed["results"]) == 1, f"tavily: key A's e1 extracts what it was shown: {allowed}")

    slow = TavilyClient(api_key=KEY_SLOW, api_base_url=f"{BASE}/tavily")
    try:
        for _ in range(5):
            slow.search("Anarchism", max_results=1)
        check(False, "tavily: a key over its rate must raise")
    except UsageLimitExceededError:
        check(True, "")


def exa():
    from exa_py import Exa

    found = Exa(api_key=KEY_A, base_url=f"{BASE}/exa").search("Anarchism", num_results=2)
    check(found.results[0].url == ANARCHISM, f"exa with key A: {found.results[:1]}")
    try:
        Exa(api_key=WRONG, base_url=f"{BASE}/exa").search("Anarchism", num_results=2)
        check(False, "exa: a wrong key must raise")
    except Exception as e:  # exa-py raises a plain ValueError/Exception that names the status
        check("401" in str(e), f"exa wrong key: {e}")
    unauthorized(requests.post(f"{BASE}/exa/search", json={"query": "Anarchism"}),
                 lambda b: b["tag"] == "INVALID_API_KEY", "exa without a key")


async def mcp_client():
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    headers = {"Authorization": f"Bearer {KEY_A}"}
    async with streamablehttp_client(f"{BASE}/mcp", headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            found = await session.call_tool("web_search", {"query": "Anarchism", "k": 3})
            check(not found.isError and ANARCHISM in found.content[0].text, f"mcp with key A: {found}")
            page = await session.call_tool("visit_web", {"url": ANARCHISM})
            check(not page.isError, "mcp visit with key A")
    try:
        async with streamablehttp_client(f"{BASE}/mcp") as (read, write, _):
            async with ClientSession(read, write) as session:
                await asyncio.wait_for(session.initialize(), 10)
        check(False, "mcp: no key must fail")
    except Exception as e:  # an HTTP 401 from httpx, possibly inside an exception group
        check("401" in repr(e) or "Unauthorized" in repr(e) or isinstance(e, BaseExceptionGroup), f"mcp: {e!r}")
    unauthorized(requests.post(f"{BASE}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}),
                 lambda b: b["jsonrpc"] == "2.0" and "error" in b, "mcp without a key")


def documented_requests():
    # Serper: X-API-KEY, or api_key in the query string.
    ok = requests.post(f"{BASE}/serper/search", headers={"X-API-KEY": KEY_A}, json={"q": "Anarchism"})
    check(ok.status_code == 200 and ok.json()["organic"][0]["link"] == ANARCHISM, f"serper: {ok.text[:200]}")
    ok = requests.get(f"{BASE}/serper/search", params={"q": "Anarchism", "api_key": KEY_A})
    check(ok.status_code == 200, f"serper api_key param: {ok.text[:200]}")
    unauthorized(requests.post(f"{BASE}/serper/search", headers={"X-API-KEY": WRONG}, json={"q": "x"}),
                 lambda b: b["statusCode"] == 401 and b["message"], "serper with a wrong key")
    # Brave: X-Subscription-Token.
    ok = requests.get(f"{BASE}/brave/res/v1/web/search", params={"q": "Anarchism"},
                      headers={"X-Subscription-Token": KEY_A})
    check(ok.status_code == 200 and ok.json()["type"] == "search", f"brave: {ok.text[:200]}")
    unauthorized(requests.get(f"{BASE}/brave/res/v1/web/search", params={"q": "Anarchism"}),
                 lambda b: b["type"] == "ErrorResponse" and b["error"]["code"] == "SUBSCRIPTION_TOKEN_INVALID",
                 "brave without a key")
    # Search-R1 and Jina: a bearer token.
    bearer = {"Authorization": f"Bearer {KEY_A}"}
    ok = requests.post(f"{BASE}/retrieve", json={"queries": ["Anarchism"], "topk": 1}, headers=bearer)
    check(ok.status_code == 200 and len(ok.json()["result"]) == 1, f"search-r1: {ok.text[:200]}")
    unauthorized(requests.post(f"{BASE}/retrieve", json={"queries": ["Anarchism"], "topk": 1}),
                 lambda b: "detail" in b, "search-r1 without a key")
    requests.post(f"{BASE}/v1/search", json={"query": "Anarchism", "session": "jina-1"}, headers=bearer)
    ok = requests.get(f"{BASE}/s/jina-1/jina/{ANARCHISM}", headers=bearer)
    check(ok.status_code == 200 and ok.text.startswith("Title: Anarchism"), f"jina: {ok.text[:200]}")
    unauthorized(requests.get(f"{BASE}/s/jina-1/jina/{ANARCHISM}", headers={"Authorization": f"Bearer {WRONG}"}),
                 lambda b: b["name"] == "AuthenticationRequiredError", "jina with a wrong key")
    # Health checks carry no key.
    check(requests.get(f"{BASE}/readyz").status_code == 200, "readyz without a key")


def main():
    tavily()
    exa()
    asyncio.run(mcp_client())
    documented_requests()
    print(f"keyed clients: {checks} checks passed")


if __name__ == "__main__":
    main()
