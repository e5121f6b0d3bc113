#!/usr/bin/env python3
"""The ANN peers of `stillweb-bench ann`: faiss-cpu HNSW and hnswlib over the same files
(base.f32, queries.f32, truth.u32, meta.json from `stillweb-bench ann-data`), with stillweb's graph
settings (M = 16, ef_construction = 128, inner product); built from THREADS threads, searched one
query per call on one thread at each ef. Prints a JSON list shaped like `stillweb-bench ann`'s.

Usage: ann_peers.py DATA_DIR THREADS EF[,EF...]
"""
import json
import os
import sys
import tempfile
import time

import faiss
import hnswlib
import numpy as np

K = 10
M = 16
EF_CONSTRUCTION = 128


def load(data):
    meta = json.load(open(os.path.join(data, "meta.json")))
    d = meta["dimension"]
    base = np.fromfile(os.path.join(data, "base.f32"), dtype="<f4").reshape(-1, d)
    queries = np.fromfile(os.path.join(data, "queries.f32"), dtype="<f4").reshape(-1, d)
    truth = np.fromfile(os.path.join(data, "truth.u32"), dtype="<u4").reshape(-1, K)
    assert len(base) == meta["base"] and len(queries) == meta["queries"], "files disagree with meta.json"
    return base, queries, truth


def timed_searches(search, queries, truth, efs, set_ef):
    out = []
    for ef in efs:
        set_ef(ef)
        latencies, found = [], 0
        started = time.perf_counter()
        for q, expected in zip(queries, truth):
            t = time.perf_counter()
            keys = search(q)
            latencies.append((time.perf_counter() - t) * 1e6)
            found += len(set(int(k) for k in keys) & set(int(e) for e in expected))
        seconds = time.perf_counter() - started
        latencies.sort()
        pick = lambda p: latencies[round((len(latencies) - 1) * p)]
        out.append({"ef": ef, "recall_at_10": found / (len(queries) * K), "qps": len(queries) / seconds,
                    "p50_us": pick(0.50), "p99_us": pick(0.99)})
    return out


def run_faiss(base, queries, truth, threads, efs):
    d = base.shape[1]
    index = faiss.IndexHNSWFlat(d, M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = EF_CONSTRUCTION
    faiss.omp_set_num_threads(threads)
    started = time.perf_counter()
    index.add(base)
    build = time.perf_counter() - started
    faiss.omp_set_num_threads(1)
    size = len(faiss.serialize_index(index))

    def set_ef(ef):
        index.hnsw.efSearch = ef

    def search(q):
        return index.search(q.reshape(1, -1), K)[1][0]

    return {"engine": f"faiss-cpu {faiss.__version__} IndexHNSWFlat", "base": len(base),
            "build_threads": threads, "build_seconds": build, "bytes_per_vector": size / len(base),
            "searches": timed_searches(search, queries, truth, efs, set_ef)}


def run_hnswlib(base, queries, truth, threads, efs):
    d = base.shape[1]
    index = hnswlib.Index(space="ip", dim=d)
    index.init_index(max_elements=len(base), M=M, ef_construction=EF_CONSTRUCTION, random_seed=1)
    started = time.perf_counter()
    index.add_items(base, np.arange(len(base)), num_threads=threads)
    build = time.perf_counter() - started
    index.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "index.bin")
        index.save_index(path)
        size = os.path.getsize(path)

    def search(q):
        return index.knn_query(q, k=K, num_threads=1)[0][0]

    return {"engine": "hnswlib 0.8.0", "base": len(base), "build_threads": threads,
            "build_seconds": build, "bytes_per_vector": size / len(base),
            "searches": timed_searches(search, queries, truth, efs, index.set_ef)}


def main():
    data, threads, efs = sys.argv[1], int(sys.argv[2]), [int(e) for e in sys.argv[3].split(",")]
    base, queries, truth = load(data)
    print(json.dumps([run_faiss(base, queries, truth, threads, efs),
                      run_hnswlib(base, queries, truth, threads, efs)], indent=2))


if __name__ == "__main__":
    main()
