// Times the console in headless Chromium: for each query, from navigating to /ui/?q=QUERY until
// its first result is on screen (a fresh page each time: HTML, script, style and the search).
// Usage: node benchmarks/console.mjs BASE_URL PLAYWRIGHT_DIR QUERIES.txt [N=20]
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const [base, playwrightDir, queriesFile, n = "20"] = process.argv.slice(2);
const require = createRequire(path.join(playwrightDir, "node_modules", "x.js"));
const { chromium } = require("playwright-core");
const queries = readFileSync(queriesFile, "utf8").split("\n").filter(Boolean).slice(0, Number(n));
const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
const times = [];
try {
  for (const query of queries) {
    const page = await browser.newPage();
    const started = performance.now();
    await page.goto(`${base}/ui/?` + new URLSearchParams({ q: query }));
    await page.locator(".result, #search-status:has-text('0 results')").first().waitFor();
    times.push(performance.now() - started);
    await page.close();
  }
} finally {
  await browser.close();
}
times.sort((a, b) => a - b);
const median = times[Math.floor(times.length / 2)];
console.log(JSON.stringify({ pages: times.length, median_ms: Math.round(median), max_ms: Math.round(times.at(-1)) }));
