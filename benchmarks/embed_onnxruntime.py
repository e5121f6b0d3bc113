#!/usr/bin/env python3
"""Python onnxruntime embedding throughput, the peer of `stillweb-indexer bench-embed`: the same
model directory, texts, truncation (model.toml max_tokens), batching (calls of 1,024 texts,
sorted by token count, batches of 32), mean pooling and normalisation; one warm-up call; intra-op
threads as given. Prints JSON.

Usage: embed_onnxruntime.py MODEL_DIR TEXTS.jsonl THREADS
"""
import json
import sys
import time
import tomllib

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer


def main():
    model_dir, texts_path, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config = tomllib.load(open(f"{model_dir}/model.toml", "rb"))
    texts = []
    for line in open(texts_path):
        if line.strip():
            v = json.loads(line)
            texts.append(v if isinstance(v, str) else v["text"])
    tokenizer = Tokenizer.from_file(f"{model_dir}/{config.get('tokenizer', 'tokenizer.json')}")
    tokenizer.no_padding()
    tokenizer.enable_truncation(config["max_tokens"])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(f"{model_dir}/{config.get('onnx', 'model.onnx')}", options,
                                   providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}

    def embed(call):
        rows = [e.ids for e in tokenizer.encode_batch(call)]
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
        out = [None] * len(rows)
        for b in range(0, len(order), 32):
            batch = order[b:b + 32]
            width = max(len(rows[i]) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(batch):
                ids[r, :len(rows[i])] = rows[i]
                mask[r, :len(rows[i])] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in names:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = session.run(None, feed)[0]
            pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
            for r, i in enumerate(batch):
                out[i] = pooled[r]
        return out

    embed(texts[:64])
    tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts))
    started = time.perf_counter()
    for c in range(0, len(texts), 1024):
        embed(texts[c:c + 1024])
    seconds = time.perf_counter() - started
    print(json.dumps({"model": config["id"], "threads": threads, "texts": len(texts), "tokens": tokens,
                      "seconds": seconds, "texts_per_second": len(texts) / seconds,
                      "tokens_per_second": tokens / seconds}))


if __name__ == "__main__":
    main()
