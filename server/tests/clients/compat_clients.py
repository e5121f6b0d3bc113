"""Drives stillweb's compatible endpoints with the real client libraries (tavily-python, exa-py,
the MCP Python SDK) and, for APIs without one, with requests copied from the APIs' documentation.

Usage: python compat_clients.py BASE_URL   (a stillweb server over the shared samples index)
Exits non-zero with a message on the first failed check.
"""
import asyncio
import json
import sys

import requests

BASE = sys.argv[1].rstrip("/")
# `scholar` when the server has a scholar collection (its tools and routes are then checked).
SCHOLAR = sys.argv[2:] == ["scholar"]
ANARCHISM = "https://en.wikipedia.org/wiki/Anarchism"
# In the corpus, but never in the results of the searches below: visiting it must be refused.
UNSEEN = "https://techbrief.example/2022/news-drekev-labs-program-update-0"
checks = 0


def check(condition, message):
    global checks
    if not condition:
        raise SystemExit(f"FAILED: {message}")
    checks += 1


def tavily():
    from tavily import TavilyClient
    from tavily.errors import BadRequestError

    client = TavilyClient(api_key="tvly-stillweb", api_base_url=f"{BASE}/tavily")
    found = client.search("Anarchism", max_results=3, session_id="tavily-1")
    check(found["results"][0]["url"] == ANARCHISM, f"tavily search: {found}")
    many = client.search("history of the Roman empire and its emperors", max_results=3)
    check(len(many["results"]) == 3, f"tavily max_results: {many}")
    scoped = client.search("Drekev Labs", include_domains=["techbrief.example"], session_id="tavily-1")
    check(scoped["results"] and all(r["url"].startswith("https://techbrief.example/") for r in scoped["results"]),
          f"tavily include_domains: {scoped}")
    extracted = client.extract([ANARCHISM, "https://newswire.example/never/shown"], session_id="tavily-2")
    check(not extracted["results"] and len(extracted["failed_results"]) == 2,
          f"tavily extract refuses URLs another session was shown: {extracted}")
    extracted = client.extract([ANARCHISM, UNSEEN.replace("techbrief", "cityledger")], session_id="tavily-1")
    check(len(extracted["results"]) == 1 and extracted["results"][0]["raw_content"].startswith("Anarchism"),
          f"tavily extract: {extracted['results'][:1]}")
    check(len(extracted["failed_results"]) == 1 and "not" in extracted["failed_results"][0]["error"],
          f"tavily extract failed_results: {extracted['failed_results']}")
    try:
        client.search("   ")
        check(False, "tavily: an empty query must raise")
    except BadRequestError:
        check(True, "")


def exa():
    from exa_py import Exa

    client = Exa(api_key="exa-stillweb", base_url=f"{BASE}/s/exa-1/exa")
    found = client.search("Anarchism", num_results=3, contents={"text": True})
    check(found.results[0].url == ANARCHISM, f"exa search: {found.results[:1]}")
    check(found.results[0].text, "exa search text")
    contents = client.get_contents([ANARCHISM, UNSEEN])
    statuses = {s.id: s for s in contents.statuses}
    check(statuses[ANARCHISM].status == "success", f"exa contents: {contents.statuses}")
    check(statuses[UNSEEN].status == "error" and statuses[UNSEEN].error.tag == "SOURCE_NOT_AVAILABLE"
          and statuses[UNSEEN].error.http_status_code == 403, f"exa unseen: {contents.statuses}")
    check(len(contents.results) == 1 and len(contents.results[0].text) > 20_000, "exa contents text")


async def mcp_client():
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(f"{BASE}/mcp") as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            expected = {"web_search", "visit_web", "search", "get_document"} | ({"scholar_search"} if SCHOLAR else set())
            check(tools == expected, f"mcp tools: {tools}")
            found = await session.call_tool("web_search", {"query": "Anarchism", "k": 3})
            check(not found.isError and ANARCHISM in found.content[0].text, f"mcp search: {found}")
            page = await session.call_tool("visit_web", {"url": ANARCHISM})
            check(not page.isError and "Title: Anarchism" in page.content[0].text, "mcp visit")
            refused = await session.call_tool("visit_web", {"url": UNSEEN})
            check(refused.isError and "url_not_seen" in refused.content[0].text, f"mcp unseen: {refused}")
            # BrowseComp-Plus's tools: a docid from search reads its document back.
            docs = await session.call_tool("search", {"query": "Aristotle"})
            results = docs.structuredContent["results"]
            check(not docs.isError and len(results) == 5
                  and all({"docid", "score", "snippet"} <= set(r) for r in results), f"mcp search: {docs}")
            document = await session.call_tool("get_document", {"docid": results[0]["docid"]})
            check(not document.isError and document.structuredContent["docid"] == results[0]["docid"]
                  and len(document.structuredContent["text"]) > 1000, f"mcp get_document: {document}")
            refused = await session.call_tool("get_document", {"docid": UNSEEN})
            check(refused.isError and "url_not_seen" in refused.content[0].text, f"mcp get_document unseen: {refused}")
            if not SCHOLAR:
                return
            # The scholar collection (the server's second): its papers are read from it alone.
            papers = await session.call_tool("scholar_search", {"query": "Plato", "k": 2})
            paper = papers.structuredContent["results"][0]["url"] if not papers.isError else None
            check(paper is not None, f"mcp scholar_search: {papers}")
            read = await session.call_tool("visit_web", {"url": paper, "collection": "scholar"})
            check(not read.isError and "Title:" in read.content[0].text, f"mcp scholar paper: {read}")
            unknown = await session.call_tool("visit_web", {"url": paper, "collection": "nope"})
            check(unknown.isError and "collection_not_found" in unknown.content[0].text, f"mcp unknown collection: {unknown}")


def documented_requests():
    # Serper Scholar, from its documentation: POST https://google.serper.dev/scholar.
    response = requests.post(f"{BASE}/serper/scholar", headers={"X-API-KEY": "serper-key"},
                             json={"q": "Aristotle"})
    body = response.json()
    if SCHOLAR:
        check(body["searchParameters"]["type"] == "scholar" and body["organic"], f"serper scholar: {body}")
        check(all({"title", "link", "publicationInfo", "snippet", "year", "citedBy", "position"} <= set(o)
                  for o in body["organic"]), f"serper scholar fields: {body}")
    else:
        check(response.status_code == 404 and "--scholar-collection" in body["message"], f"no scholar: {body}")
    # Serper, from its documentation: POST https://google.serper.dev/search with X-API-KEY.
    response = requests.request("POST", f"{BASE}/serper/search",
                                headers={"X-API-KEY": "serper-key", "Content-Type": "application/json"},
                                data=json.dumps({"q": "Anarchism"}))
    body = response.json()
    check(response.status_code == 200 and body["organic"][0]["link"] == ANARCHISM, f"serper: {body}")
    check(body["organic"][0]["position"] == 1 and body["searchParameters"]["q"] == "Anarchism", "serper shape")
    page2 = requests.post(f"{BASE}/serper/search",
                          json={"q": "history of the Roman empire and its emperors", "num": 5, "page": 2}).json()
    check([o["position"] for o in page2["organic"]] == [6, 7, 8, 9, 10], f"serper page 2: {page2}")

    # Brave, from its documentation: GET /res/v1/web/search?q=... with X-Subscription-Token.
    response = requests.get(f"{BASE}/brave/res/v1/web/search", params={"q": "Anarchism", "count": 5},
                            headers={"Accept": "application/json", "Accept-Encoding": "gzip",
                                     "X-Subscription-Token": "brave-key"})
    body = response.json()
    check(response.status_code == 200 and body["type"] == "search", f"brave: {body}")
    first = body["web"]["results"][0]
    check(first["url"] == ANARCHISM and first["meta_url"]["hostname"] == "en.wikipedia.org", f"brave result: {first}")
    missing = requests.get(f"{BASE}/brave/res/v1/web/search")
    check(missing.status_code == 422 and missing.json()["type"] == "ErrorResponse", "brave error shape")

    # Search-R1's retriever, as its agent loop calls it.
    response = requests.post(f"{BASE}/retrieve", json={"queries": ["Anarchism", "Roman empire emperors"],
                                                      "topk": 3, "return_scores": True})
    body = response.json()
    check(len(body["result"]) == 2 and len(body["result"][1]) == 3, f"search-r1: {body}")
    doc = body["result"][0][0]["document"]
    check(doc["contents"].split("\n")[0] == '"Anarchism"' and "score" in body["result"][0][0], f"search-r1 doc: {doc}")
    plain = requests.post(f"{BASE}/search-r1/retrieve", json={"queries": ["Anarchism"], "topk": 1}).json()
    check("contents" in plain["result"][0][0], f"search-r1 without scores: {plain}")

    # Jina Reader, from its documentation: GET https://r.jina.ai/<url>; here with the session.
    requests.post(f"{BASE}/v1/search", json={"query": "Anarchism", "session": "jina-1"})
    response = requests.get(f"{BASE}/jina/{ANARCHISM}", headers={"X-Session-Id": "jina-1"})
    check(response.status_code == 200 and response.text.startswith("Title: Anarchism\n\nURL Source: "
                                                                   f"{ANARCHISM}\n\n"), response.text[:200])
    check("Markdown Content:\n" in response.text, "jina markdown marker")
    as_json = requests.get(f"{BASE}/s/jina-1/jina/{ANARCHISM}", headers={"Accept": "application/json"}).json()
    check(as_json["data"]["url"] == ANARCHISM and as_json["code"] == 200, f"jina json: {str(as_json)[:200]}")
    refused = requests.get(f"{BASE}/jina/{UNSEEN}", headers={"X-Session-Id": "jina-1"})
    check(refused.status_code == 403 and refused.json()["name"] == "SecurityCompromiseError", refused.text[:200])


def callers_in_normal_operation():
    """Request shapes that training loops and wrappers send, read as they read them."""
    # An RL step in which no rollout searched, one with an empty search, and a non-positive topk:
    # the loop reads `result` without looking at the status.
    check(requests.post(f"{BASE}/retrieve", json={"queries": [], "topk": 3, "return_scores": True}).json()["result"] == [],
          "search-r1 empty batch")
    result = requests.post(f"{BASE}/retrieve", json={"queries": ["", "Roman empire emperors"], "topk": 0}).json()["result"]
    check(result[0] == [] and len(result[1]) == 3, f"search-r1 empty query and topk 0: {result}")
    # Serper wrappers: parameters in the query string, with an empty POST body or as a GET.
    params = {"q": "Roman empire emperors", "gl": "us", "hl": "en", "num": 5, "page": 1, "api_key": "serper-key"}
    body = requests.post(f"{BASE}/serper/search", params=params).json()
    check(body["searchParameters"]["q"] == "Roman empire emperors" and len(body["organic"]) == 5, f"serper query string: {body}")
    body = requests.get(f"{BASE}/serper/search", params={"q": "Anarchism", "api_key": "serper-key"}).json()
    check(body["organic"][0]["link"] == ANARCHISM, f"serper GET: {body}")
    # Wrong methods and unknown paths answer JSON in each API's shape (`response.json()` works).
    check("detail" in requests.get(f"{BASE}/retrieve").json(), "search-r1 405 shape")
    check(requests.put(f"{BASE}/serper/search").json()["statusCode"] == 405, "serper 405 shape")
    check(requests.get(f"{BASE}/tavily/nowhere").json()["detail"]["error"], "tavily 404 shape")
    # LangChain's Tavily tool has no session argument: the session rides in the base URL.
    from tavily import TavilyClient
    client = TavilyClient(api_key="tvly-stillweb", api_base_url=f"{BASE}/s/langchain-1/tavily")
    client.search("Anarchism", max_results=3)
    extracted = client.extract([ANARCHISM])
    check(len(extracted["results"]) == 1, f"tavily with the session in the base URL: {extracted}")

    # The async Exa client names its base URL `api_base`.
    async def async_exa():
        from exa_py import AsyncExa
        found = await AsyncExa(api_key="exa-stillweb", api_base=f"{BASE}/exa").search("Anarchism", num_results=2)
        check(found.results[0].url == ANARCHISM, f"async exa: {found.results[:1]}")
    asyncio.run(async_exa())


def main():
    tavily()
    exa()
    asyncio.run(mcp_client())
    documented_requests()
    callers_in_normal_operation()
    print(f"compatible endpoints: {checks} checks passed")


if __name__ == "__main__":
    main()
