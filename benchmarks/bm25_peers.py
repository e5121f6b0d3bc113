#!/usr/bin/env python3
"""bm25s beside stillweb and Lucene: indexes the same exported documents (contents = title and
text) with bm25s (Lucene-variant BM25, k1 1.2, b 0.75, English stop words, Snowball stemmer), times
each bag-of-words query on one thread after a warm-up pass, writes a TREC run, and prints JSON.
With --overlap it instead compares TREC runs: mean top-k overlap of each run with the first.

Usage: bm25_peers.py bm25s DOCS.jsonl QUERIES-bag.tsv K RUN
       bm25_peers.py overlap K REFERENCE_RUN RUN [RUN...]
"""
import json
import sys
import time


def bm25s_run(docs_path, queries_path, k, run_path):
    import bm25s
    import numpy as np
    import Stemmer

    ids, texts = [], []
    with open(docs_path) as f:
        for line in f:
            d = json.loads(line)
            ids.append(d["id"])
            texts.append(d["contents"])
    queries = [line.rstrip("\n").split("\t")[:2] for line in open(queries_path) if "\t" in line]
    stemmer = Stemmer.Stemmer("english")
    started = time.perf_counter()
    corpus_tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index(corpus_tokens, show_progress=False)
    index_seconds = time.perf_counter() - started

    def search(q):
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            return [], []
        docs, scores = retriever.retrieve(tokens, k=k, n_threads=1, show_progress=False)
        return docs[0], scores[0]

    for _, q in queries:
        search(q)
    micros, results = [], []
    started = time.perf_counter()
    for _, q in queries:
        t = time.perf_counter()
        results.append(search(q))
        micros.append((time.perf_counter() - t) * 1e6)
    seconds = time.perf_counter() - started
    with open(run_path, "w") as run:
        for (qid, _), (docs, scores) in zip(queries, results):
            for rank, (d, s) in enumerate(zip(docs, scores)):
                if s > 0:
                    run.write(f"{qid} Q0 {ids[int(d)]} {rank + 1} {float(s):.6f} bm25s\n")
    ms = np.sort(np.array(micros)) / 1000.0
    print(json.dumps({"engine": f"bm25s {bm25s.__version__}", "form": "bag", "queries": len(queries), "k": k,
                      "seconds": round(seconds, 4), "qps": round(len(queries) / seconds, 2),
                      "p50_ms": round(float(ms[round((len(ms) - 1) * 0.5)]), 4),
                      "p99_ms": round(float(ms[round((len(ms) - 1) * 0.99)]), 4),
                      "mean_ms": round(float(ms.mean()), 4), "index_seconds": round(index_seconds, 2)}))


def read_run(path, k):
    run = {}
    for line in open(path):
        qid, _, doc, rank, *_ = line.split()
        if int(rank) <= k:
            run.setdefault(qid, []).append(doc)
    return run


def overlap(k, reference, others):
    ref = read_run(reference, k)
    out = {}
    for path in others:
        run = read_run(path, k)
        shares = [len(set(docs) & set(run.get(qid, []))) / len(docs) for qid, docs in ref.items() if docs]
        out[path] = round(sum(shares) / len(shares), 4)
    print(json.dumps({"k": k, "reference": reference, "mean_top_k_overlap": out, "queries": len(ref)}))


if __name__ == "__main__":
    if sys.argv[1] == "bm25s":
        bm25s_run(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif sys.argv[1] == "overlap":
        overlap(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
    else:
        sys.exit(__doc__)
