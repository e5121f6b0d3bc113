// The stillweb console: search (with explanations), page view, sessions and index, over the
// server's own API. Plain JavaScript, no build step, nothing fetched from elsewhere; every value
// from the server is put in the page as text (never as HTML).
"use strict";

const $ = (id) => document.getElementById(id);
const VIEWS = ["search", "page", "sessions", "index"];

// The console's own session: its searches unlock its page views, like an agent's.
function consoleSession() {
  let id = sessionStorage.getItem("stillweb-session");
  if (!id) {
    const bytes = new Uint8Array(8);
    crypto.getRandomValues(bytes);
    id = "ui-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    sessionStorage.setItem("stillweb-session", id);
  }
  return id;
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("data-") || key.startsWith("aria-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

async function api(method, path, body) {
  const headers = { accept: "application/json" };
  const key = sessionStorage.getItem("stillweb-key");
  if (key) headers.authorization = "Bearer " + key;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try {
    data = await response.json();
  } catch (_) {
    data = null;
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new Error(`${response.status} ${error.code || ""}: ${error.message || response.statusText}`);
  }
  return { data, timing: response.headers.get("server-timing") || "" };
}

function params() {
  return new URLSearchParams(location.search);
}

function navigate(url) {
  history.pushState(null, "", url);
  route();
}

function show(view) {
  for (const name of VIEWS) $("view-" + name).hidden = name !== view;
  for (const link of document.querySelectorAll("nav a")) {
    link.setAttribute("aria-current", link.dataset.view === view ? "page" : "false");
  }
}

// --- Search -------------------------------------------------------------------------------------

function fmt(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toFixed(4);
  return String(value);
}

function explanation(explain) {
  const rows = [
    ["BM25 rank", explain.bm25_rank],
    ["dense rank", explain.dense_rank],
    ["page BM25 (raw → normalised)", `${fmt(explain.doc_bm25)} → ${fmt(explain.doc_bm25_normalized)}`],
    ["best chunk BM25", `${fmt(explain.chunk_bm25)} → ${fmt(explain.chunk_bm25_normalized)}`],
    ["best chunk cosine", `${fmt(explain.chunk_cosine)} → ${fmt(explain.chunk_cosine_normalized)}`],
    ["chunk score", `${fmt(explain.chunk_score)} → ${fmt(explain.chunk_score_normalized)}`],
    ["fused score (rank)", `${fmt(explain.fused_score)} (${fmt(explain.fused_rank)})`],
    ["reranker score", explain.rerank_score],
  ];
  const table = el("table", { class: "explain" });
  for (const [name, value] of rows) {
    table.append(el("tr", {}, el("th", { scope: "row", text: name }), el("td", { text: fmt(value) })));
  }
  return el("details", { class: "why" }, el("summary", { text: "Why this rank?" }), table);
}

function timings(header) {
  return header
    .split(",")
    .map((part) => part.trim().match(/^(\w+);dur=([\d.]+)/))
    .filter(Boolean)
    .map((m) => `${m[1]} ${Number(m[2]).toFixed(1)} ms`)
    .join(" · ");
}

async function runSearch() {
  const p = params();
  const q = p.get("q") || "";
  $("q").value = q;
  $("mode").value = p.get("mode") || "";
  $("k").value = p.get("k") || "10";
  const list = $("results");
  list.replaceChildren();
  if (!q) {
    $("search-status").textContent = "";
    return;
  }
  $("search-status").textContent = "Searching…";
  const body = { query: q, k: Number($("k").value) || 10, session: consoleSession(), explain: true };
  if ($("mode").value) body.mode = $("mode").value;
  try {
    const { data, timing } = await api("POST", "/v1/search", body);
    const context = data.explain || {};
    const weights = context.weights
      ? ` · weights bm25_doc ${context.weights.bm25_doc}, bm25_chunk ${context.weights.bm25_chunk}, dense_chunk ${context.weights.dense_chunk}`
      : "";
    $("search-status").textContent =
      `${data.results.length} results${data.relaxed ? " (phrase relaxed)" : ""}${data.reranked ? " · reranked" : ""}` +
      ` · ${timings(timing)}${weights} · index ${data.index}`;
    const snippets = JSON.parse(sessionStorage.getItem("stillweb-snippets") || "{}");
    for (const result of data.results) {
      snippets[result.url] = result.snippet;
      const page = "/ui/?" + new URLSearchParams({ view: "page", url: result.url, q }).toString();
      list.append(
        el(
          "li",
          { class: "result" },
          el("a", { class: "title", href: page, text: result.title || result.url, "data-nav": "" }),
          el("div", { class: "url", text: result.url }),
          el("div", { class: "date", text: result.date }),
          el("p", { class: "snippet", text: result.snippet }),
          result.explain ? explanation(result.explain) : null,
        ),
      );
    }
    sessionStorage.setItem("stillweb-snippets", JSON.stringify(snippets));
  } catch (error) {
    $("search-status").textContent = "Search failed: " + error.message;
  }
}

// --- Page view ----------------------------------------------------------------------------------

async function runPage() {
  const p = params();
  const url = p.get("url") || "";
  $("back-to-results").href = "/ui/?" + new URLSearchParams({ q: p.get("q") || "" }).toString();
  $("page-title").textContent = "";
  $("page-text").replaceChildren();
  $("page-status").textContent = "Opening…";
  try {
    const { data } = await api("POST", "/v1/visit", { url, session: consoleSession(), chunks: true });
    $("page-status").textContent = "";
    $("page-title").textContent = data.title;
    $("page-url").textContent = data.url;
    $("page-url").href = data.url;
    $("page-date").textContent = data.date;
    const best = JSON.parse(sessionStorage.getItem("stillweb-snippets") || "{}")[url];
    const chars = Array.from(data.text);
    const spans = data.chunks || [];
    $("page-chunks").textContent = `${spans.length} chunks`;
    let at = 0;
    const article = $("page-text");
    spans.forEach(([start, end], i) => {
      if (start > at) article.append(el("span", { class: "gap", text: chars.slice(at, start).join("") }));
      const text = chars.slice(start, end).join("");
      const isBest = best !== undefined && text.trim() === best.trim();
      article.append(
        el("span", {
          class: "chunk" + (isBest ? " best" : ""),
          text,
          title: `chunk ${i + 1}${isBest ? " (best match of the last query)" : ""}`,
          "data-chunk": String(i + 1),
        }),
      );
      at = end;
    });
    if (at < chars.length) article.append(el("span", { class: "gap", text: chars.slice(at).join("") }));
    const bestChunk = article.querySelector(".best");
    if (bestChunk) bestChunk.scrollIntoView({ block: "center" });
  } catch (error) {
    $("page-status").textContent = "Cannot open the page: " + error.message;
  }
}

// --- Sessions -----------------------------------------------------------------------------------

async function runSessions() {
  const p = params();
  const list = $("sessions");
  list.replaceChildren();
  $("timeline").replaceChildren();
  $("sessions-status").textContent = "Loading…";
  try {
    const { data } = await api("GET", "/v1/sessions");
    $("sessions-status").textContent = `${data.sessions.length} active sessions`;
    // An operator key's listing holds every key's sessions, each with its key.
    for (const s of data.sessions) {
      const query = { view: "sessions", session: s.session };
      if (s.key) query.key = s.key;
      const href = "/ui/?" + new URLSearchParams(query).toString();
      list.append(
        el(
          "li",
          {},
          el("a", { href, text: s.session, "data-nav": "" }),
          s.key ? el("span", { class: "meta", text: ` (key ${s.key})` }) : null,
          el("span", { class: "date", text: " last used " + s.last_used }),
        ),
      );
    }
  } catch (error) {
    $("sessions-status").textContent = "Cannot list sessions: " + error.message;
  }
  const session = p.get("session");
  if (session) await timeline(session, p.get("key"));
}

function mark(labels, url) {
  const found = labels && labels.urls && labels.urls[url];
  if (!found) return null;
  return el(
    "span",
    { class: "labels" },
    ...found.map((l) => el("span", { class: "label " + (l.role === "gold" ? "gold" : "negative"), text: `${l.role} · ${l.item}` })),
  );
}

async function timeline(session, key) {
  const box = $("timeline");
  try {
    const of = key ? "?" + new URLSearchParams({ key }).toString() : "";
    const { data } = await api("GET", "/v1/sessions/" + encodeURIComponent(session) + of);
    const labels = data.labels;
    box.append(el("h2", { text: `Session ${data.session}` }), el("p", { class: "meta", text: `started ${data.started}` }));
    if (labels && labels.items.length) {
      const table = el("table", { class: "items" });
      table.append(
        el("tr", {}, ...["question", "gold first shown", "gold read", "negatives shown"].map((h) => el("th", { text: h }))),
      );
      for (const item of labels.items) {
        const step = item.gold_shown_at_step === "never" ? "never" : `step ${item.gold_shown_at_step}, rank ${item.gold_rank}`;
        table.append(
          el(
            "tr",
            { class: item.gold_shown_at_step === "never" ? "never" : "surfaced" },
            el("td", { text: item.question }),
            el("td", { class: "step", text: step }),
            el("td", { text: item.gold_visited ? "yes" : "no" }),
            el("td", { text: String(item.negatives_shown) }),
          ),
        );
      }
      box.append(table);
    }
    const list = el("ol", { class: "timeline" });
    let step = 0;
    for (const event of data.events) {
      if (event.type === "search") {
        step += 1;
        const urls = el("ol", { class: "shown" });
        for (const url of event.urls) urls.append(el("li", {}, el("span", { text: url }), mark(labels, url)));
        list.append(el("li", { class: "event search" }, el("div", { text: `search ${step}: “${event.query}”` }), el("div", { class: "date", text: event.at }), urls));
      } else {
        list.append(
          el(
            "li",
            { class: "event visit " + (event.outcome === "ok" ? "ok" : "refused") },
            el("div", { text: `visit ${event.url} → ${event.outcome}` }),
            mark(labels, event.url),
            el("div", { class: "date", text: event.at }),
          ),
        );
      }
    }
    if (data.dropped_events) box.append(el("p", { class: "meta", text: `${data.dropped_events} older events dropped` }));
    box.append(list);
  } catch (error) {
    box.append(el("p", { class: "status", text: "Cannot read the session: " + error.message }));
  }
}

// --- Index --------------------------------------------------------------------------------------

async function runIndex() {
  const facts = $("index-facts");
  facts.replaceChildren();
  $("index-status").textContent = "Loading…";
  try {
    const { data } = await api("GET", "/info");
    $("index-status").textContent = "";
    const index = data.index || {};
    const rows = [
      ["build id", index.build_id],
      ["corpus", index.corpus],
      ["documents", index.documents],
      ["chunks", index.chunks],
      ["shards", index.shards ? index.shards.length : "one index"],
      ["as of", index.as_of ? `${index.as_of} (relative date filters count back from it)` : "no dated pages"],
      ["preset", data.preset ? `${data.preset.name} (${data.preset.purpose})` : "none (flags as given)"],
      ["embedder", data.models && data.models.embedder],
      ["reranker", data.models && data.models.reranker],
      ["execution provider", data.models && data.models.execution_provider],
      ["mode", data.search && data.search.mode],
      ["sessions", data.sessions && data.sessions.store],
      ["gold labels", data.gold ? `${data.gold.items} questions` : "none"],
      ["limits", data.limits ? Object.entries(data.limits).map(([k, v]) => `${k} ${v}`).join(", ") : ""],
      ["version", data.version],
    ];
    for (const [name, value] of rows) facts.append(el("dt", { text: name }), el("dd", { text: fmt(value) }));
  } catch (error) {
    $("index-status").textContent = "Cannot read /info: " + error.message;
  }
}

// --- Routing ------------------------------------------------------------------------------------

function route() {
  const view = params().get("view") || "search";
  const known = VIEWS.includes(view) ? view : "search";
  show(known);
  ({ search: runSearch, page: runPage, sessions: runSessions, index: runIndex })[known]();
}

document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-nav]");
  if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  navigate(link.getAttribute("href"));
});

document.addEventListener("keydown", (event) => {
  if (event.key === "/" && document.activeElement.tagName !== "INPUT") {
    event.preventDefault();
    navigate("/ui/" + (params().get("q") ? "?" + new URLSearchParams({ q: params().get("q") }) : ""));
    $("q").focus();
  }
});

$("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const query = { q: $("q").value.trim(), k: $("k").value };
  if ($("mode").value) query.mode = $("mode").value;
  navigate("/ui/?" + new URLSearchParams(query).toString());
});

$("api-key").value = sessionStorage.getItem("stillweb-key") || "";
$("api-key").addEventListener("change", () => {
  sessionStorage.setItem("stillweb-key", $("api-key").value.trim());
  route();
});

window.addEventListener("popstate", route);
route();
