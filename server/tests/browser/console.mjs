// Drives the console (/ui/) in Debian's headless Chromium through playwright-core, against a real
// stillweb server started with --gold over the shared samples: search with the keyboard, see the
// results, open an explanation, open a page view (chunks, the best one highlighted), run an
// agent-style episode through the API and see its timeline with the gold URL marked, read the
// index page, and stay usable at a phone's width. Screenshots go to OUT_DIR.
//
// Usage: node console.mjs BASE_URL OUT_DIR PLAYWRIGHT_DIR QUESTION GOLD_URL
// Prints one JSON line of what it measured; exits non-zero with a message on the first failure.
import { createRequire } from "node:module";
import path from "node:path";

const [base, out, playwrightDir, question, goldUrl] = process.argv.slice(2);
const require = createRequire(path.join(playwrightDir, "node_modules", "x.js"));
const { chromium } = require("playwright-core");

function check(condition, message) {
  if (!condition) {
    console.error("FAILED: " + message);
    process.exit(1);
  }
}

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const measured = {};
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push("console error: " + m.text());
  });

  // A shared link opens with its search done.
  const started = Date.now();
  const response = await page.goto(`${base}/ui/?q=Anarchism`);
  const csp = response.headers()["content-security-policy"] || "";
  check(csp.includes("default-src 'none'") && csp.includes("script-src 'self'"), "CSP header: " + csp);
  await page.locator(".result").first().waitFor();
  measured.search_link_ms = Date.now() - started;
  const first = await page.locator(".result .title").first().textContent();
  check(first === "Anarchism", "first result of ?q=Anarchism: " + first);
  check((await page.locator("#search-status").textContent()).includes("ms"), "stage timings shown");
  await page.screenshot({ path: path.join(out, "search.png") });

  // The keyboard: "/" focuses the search box; typing and Enter searches, and the URL says so.
  await page.keyboard.press("/");
  await page.keyboard.press("Control+A");
  await page.keyboard.type("Roman empire emperors");
  await page.keyboard.press("Enter");
  await page.waitForURL(/q=Roman\+empire\+emperors/);
  await page.locator(".result").first().waitFor();
  check((await page.locator(".result").count()) >= 3, "typed search results");

  // Back to the first search; open the first result's explanation.
  await page.goto(`${base}/ui/?q=Anarchism&k=5`);
  await page.locator(".result").first().waitFor();
  await page.locator(".why summary").first().click();
  const explanation = await page.locator(".why table").first().textContent();
  check(explanation.includes("fused score") && explanation.includes("page BM25"), "explanation: " + explanation);
  await page.screenshot({ path: path.join(out, "explain.png") });

  // The page view: the text with its chunks, the last query's best chunk highlighted.
  await page.locator(".result .title").first().click();
  await page.locator("#page-text .chunk").first().waitFor();
  const chunks = await page.locator("#page-text .chunk").count();
  check(chunks > 1, "page view chunks: " + chunks);
  check((await page.locator("#page-text .chunk.best").count()) === 1, "one best chunk highlighted");
  check((await page.locator("#page-title").textContent()) === "Anarchism", "page title");
  measured.page_chunks = chunks;
  await page.screenshot({ path: path.join(out, "page.png") });

  // A page the console's session was never shown is refused, as for any agent (the browser
  // logs the refused request; nothing else may be logged).
  check(problems.length === 0, "browser errors: " + problems.join("; "));
  await page.goto(`${base}/ui/?view=page&url=${encodeURIComponent(goldUrl)}`);
  await page.locator("#page-status").filter({ hasText: "url_not_seen" }).waitFor();
  const refusal = problems.findIndex((p) => p.includes("status of 403"));
  check(refusal >= 0, "the refused visit was requested: " + problems.join("; "));
  problems.splice(refusal, 1);

  // An agent-style episode through the API, then its timeline in the sessions view.
  const post = (p, body) =>
    fetch(base + p, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  check((await post("/v1/search", { query: question, session: "episode-gold" })).ok, "episode search");
  check((await post("/v1/visit", { url: goldUrl, session: "episode-gold" })).ok, "episode visit");
  check((await post("/v1/search", { query: "history of the Roman empire", session: "episode-plain" })).ok, "plain episode");
  await page.goto(`${base}/ui/?view=sessions`);
  await page.locator("#sessions a", { hasText: "episode-gold" }).click();
  await page.locator("#timeline .label.gold").first().waitFor();
  const step = await page.locator("#timeline .items tr.surfaced .step").first().textContent();
  check(step.startsWith("step 1"), "the gold surfaced at step 1: " + step);
  check((await page.locator("#timeline .event.visit.ok").count()) === 1, "the visit in the timeline");
  measured.gold_step = step;
  await page.screenshot({ path: path.join(out, "sessions.png"), fullPage: true });

  // The index page.
  await page.goto(`${base}/ui/?view=index`);
  await page.locator("#index-facts dd").first().waitFor();
  const facts = await page.locator("#index-facts").textContent();
  check(facts.includes("build id") && facts.includes("samples"), "index facts: " + facts);
  await page.screenshot({ path: path.join(out, "index.png") });

  // A phone's width: nothing wider than the screen.
  await page.setViewportSize({ width: 375, height: 800 });
  await page.goto(`${base}/ui/?q=Anarchism`);
  await page.locator(".result").first().waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 1, "horizontal overflow at 375 px: " + overflow);
  await page.screenshot({ path: path.join(out, "narrow.png") });

  check(problems.length === 0, "browser errors: " + problems.join("; "));
} finally {
  await browser.close();
}
console.log(JSON.stringify({ ok: true, ...measured }));
