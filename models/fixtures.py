#!/usr/bin/env python3
"""Builds tiny random-weight reranker fixtures with the `onnx` package's graph helpers (no torch).

No trained cross-encoder or Qwen3-Reranker weights can be fetched here, so the tests run on models
that have the real architectures and real tokenizers but random weights. They prove the plumbing
(prompt template, tokenisation, padding side, batching, the yes/no read-out), never quality.

Writes, under OUT (default: the model cache's `fixtures/`):
  qwen3-reranker-tiny/  Qwen3 decoder (RMSNorm, q/k-norm, RoPE, grouped-query attention, SwiGLU,
                        tied embeddings) with the real 151,936-row vocabulary and a tiny hidden size,
                        read by the real Qwen3 tokenizer; output [no, yes] logits at every position,
                        the contract `models/export qwen3-reranker` also produces.
  cross-encoder-tiny/   BERT pair classifier (post-LayerNorm encoder, GELU, pooler, one logit) on
                        the real MiniLM (BERT uncased) vocabulary.
Each directory holds model.onnx, tokenizer.json, model.toml and reference.json: logits computed by
an independent NumPy forward pass for a few token sequences, which the Rust tests compare with ONNX
Runtime's output, so a wrong graph cannot pass as a plumbing success.

Usage: models/fixtures.py --models DIR [--out DIR]   (run through `models/make-fixtures`, which
provides numpy and onnx in a private virtual environment).
"""
import argparse
import json
import pathlib
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
SEED = 20261130

# Qwen3 shape, shrunk: the real model (Qwen3-0.6B) has hidden 1024, 16 query heads, 8 key/value
# heads of 128 dimensions, 3072 intermediate, 28 layers.
QWEN_VOCAB = 151_936
QWEN = dict(hidden=32, heads=4, kv_heads=2, head_dim=16, intermediate=64, layers=2, eps=1e-6, theta=1_000_000.0)
# The real Qwen3-Reranker-0.6B's shape, for measuring reranking speed on a GPU (benchmarks/gpu.sh).
QWEN_0_6B = dict(QWEN, hidden=1024, heads=16, kv_heads=8, head_dim=128, intermediate=3072, layers=28)
QWEN_NO, QWEN_YES = 2152, 9693  # token ids of "no" and "yes" in the Qwen3 tokenizer

BERT_VOCAB = 30_522
BERT = dict(hidden=32, heads=4, intermediate=64, layers=2, positions=512, types=2, eps=1e-12)
# The shape of cross-encoder/ms-marco-MiniLM-L6-v2, for measuring reranking speed on a CPU.
BERT_MINILM_L6 = dict(BERT, hidden=384, heads=12, intermediate=1536, layers=6)


class Graph:
    """A small builder over onnx.helper: unique names, initializers from NumPy arrays."""

    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, hint):
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, array, hint="c"):
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, *inputs, hint=None, **attrs):
        out = self.name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def matmul(self, x, w):
        return self.op("MatMul", x, self.const(w.astype(np.float32), "w"))


def rms_norm(g, x, weight, eps):
    variance = g.op("ReduceMean", g.op("Mul", x, x), axes=[-1], keepdims=1)
    inv = g.op("Reciprocal", g.op("Sqrt", g.op("Add", variance, g.const(np.float32(eps)))))
    return g.op("Mul", g.op("Mul", x, inv), g.const(weight.astype(np.float32), "norm"))


def layer_norm(g, x, weight, bias, eps):
    return g.op("LayerNormalization", x, g.const(weight.astype(np.float32)), g.const(bias.astype(np.float32)),
                axis=-1, epsilon=eps)


def rotate_half(g, x, half):
    first, second = g.name("x1"), g.name("x2")
    g.nodes.append(helper.make_node("Split", [x, g.const(np.array([half, half], dtype=np.int64))],
                                    [first, second], axis=-1))
    return g.op("Concat", g.op("Neg", second), first, axis=-1)


def qwen_weights(rng, c=QWEN):
    h, d = c["hidden"], c["head_dim"]
    w = {"embed": rng.normal(0, 0.5, (QWEN_VOCAB, h)).astype(np.float32), "layers": []}
    for _ in range(c["layers"]):
        w["layers"].append({
            "input_norm": 1 + rng.normal(0, 0.1, h),
            "q": rng.normal(0, h ** -0.5, (h, c["heads"] * d)),
            "k": rng.normal(0, h ** -0.5, (h, c["kv_heads"] * d)),
            "v": rng.normal(0, h ** -0.5, (h, c["kv_heads"] * d)),
            "q_norm": 1 + rng.normal(0, 0.1, d),
            "k_norm": 1 + rng.normal(0, 0.1, d),
            "o": rng.normal(0, (c["heads"] * d) ** -0.5, (c["heads"] * d, h)),
            "post_norm": 1 + rng.normal(0, 0.1, h),
            "gate": rng.normal(0, h ** -0.5, (h, c["intermediate"])),
            "up": rng.normal(0, h ** -0.5, (h, c["intermediate"])),
            "down": rng.normal(0, c["intermediate"] ** -0.5, (c["intermediate"], h)),
        })
    w["final_norm"] = 1 + rng.normal(0, 0.1, h)
    return w


def qwen_graph(w, c=QWEN):
    """inputs input_ids, attention_mask, position_ids (int64 [batch, tokens]) -> no_yes_logits."""
    g = Graph()
    heads, kv_heads, d = c["heads"], c["kv_heads"], c["head_dim"]
    embed = g.const(w["embed"], "embed_tokens")
    x = g.op("Gather", embed, "input_ids", axis=0)

    # Additive attention bias [batch, 1, tokens, tokens]: 0 where a query may see a key (causal and
    # not padding), -1e9 elsewhere. Finite, so fully masked padding rows stay finite too.
    steps = g.op("Range", g.const(np.int64(0)),
                 g.op("Gather", g.op("Shape", "input_ids"), g.const(np.int64(1)), axis=0), g.const(np.int64(1)))
    causal = g.op("Cast", g.op("LessOrEqual", g.op("Unsqueeze", steps, g.const(np.array([0], dtype=np.int64))),
                               g.op("Unsqueeze", steps, g.const(np.array([1], dtype=np.int64)))),
                  to=TensorProto.FLOAT)
    keys = g.op("Unsqueeze", g.op("Cast", "attention_mask", to=TensorProto.FLOAT), g.const(np.array([1, 2], dtype=np.int64)))
    allowed = g.op("Mul", causal, keys)
    bias = g.op("Mul", g.op("Sub", allowed, g.const(np.float32(1))), g.const(np.float32(1e9)))

    # Rotary embedding from the explicit positions (so left padding does not shift them).
    inv_freq = (1.0 / c["theta"] ** (np.arange(0, d, 2, dtype=np.float64) / d)).astype(np.float32)
    freqs = g.op("Mul", g.op("Unsqueeze", g.op("Cast", "position_ids", to=TensorProto.FLOAT),
                             g.const(np.array([2], dtype=np.int64))), g.const(inv_freq))
    angles = g.op("Unsqueeze", g.op("Concat", freqs, freqs, axis=-1), g.const(np.array([1], dtype=np.int64)))
    cos, sin = g.op("Cos", angles), g.op("Sin", angles)

    def rope(t):
        return g.op("Add", g.op("Mul", t, cos), g.op("Mul", rotate_half(g, t, d // 2), sin))

    def heads_of(t, n, norm):
        t = g.op("Reshape", t, g.const(np.array([0, 0, n, d], dtype=np.int64)))
        if norm is not None:
            t = rms_norm(g, t, norm, c["eps"])
        return g.op("Transpose", t, perm=[0, 2, 1, 3])

    kv_of_head = g.const(np.array([h // (heads // kv_heads) for h in range(heads)], dtype=np.int64))
    for layer in w["layers"]:
        h = rms_norm(g, x, layer["input_norm"], c["eps"])
        q = rope(heads_of(g.matmul(h, layer["q"]), heads, layer["q_norm"]))
        k = rope(heads_of(g.matmul(h, layer["k"]), kv_heads, layer["k_norm"]))
        v = heads_of(g.matmul(h, layer["v"]), kv_heads, None)
        k = g.op("Gather", k, kv_of_head, axis=1)  # grouped-query attention: share each kv head
        v = g.op("Gather", v, kv_of_head, axis=1)
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])),
                                  g.const(np.float32(d ** -0.5))), bias)
        attended = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        merged = g.op("Reshape", g.op("Transpose", attended, perm=[0, 2, 1, 3]),
                      g.const(np.array([0, 0, heads * d], dtype=np.int64)))
        x = g.op("Add", x, g.matmul(merged, layer["o"]))
        h = rms_norm(g, x, layer["post_norm"], c["eps"])
        gate = g.matmul(h, layer["gate"])
        swiglu = g.op("Mul", g.op("Mul", gate, g.op("Sigmoid", gate)), g.matmul(h, layer["up"]))
        x = g.op("Add", x, g.matmul(swiglu, layer["down"]))
    x = rms_norm(g, x, w["final_norm"], c["eps"])
    # Tied embeddings: the LM head's rows for "no" and "yes" are those tokens' embeddings.
    head = g.op("Gather", embed, g.const(np.array([QWEN_NO, QWEN_YES], dtype=np.int64)), axis=0)
    g.nodes.append(helper.make_node("MatMul", [x, g.op("Transpose", head, perm=[1, 0])], ["no_yes_logits"]))
    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
            for n in ("input_ids", "attention_mask", "position_ids")]
    out = [helper.make_tensor_value_info("no_yes_logits", TensorProto.FLOAT, ["batch", "tokens", 2])]
    return helper.make_graph(g.nodes, "qwen3_reranker_tiny", ints, out, g.inits)


def qwen_reference(w, ids):
    """The same model as plain NumPy for one unpadded sequence: [no, yes] logits at the last token."""
    c = QWEN
    heads, kv_heads, d, eps = c["heads"], c["kv_heads"], c["head_dim"], c["eps"]
    n = len(ids)

    def rms(t, weight):
        return t / np.sqrt((t * t).mean(-1, keepdims=True) + eps) * weight

    inv_freq = 1.0 / c["theta"] ** (np.arange(0, d, 2) / d)
    angles = np.arange(n)[:, None] * inv_freq[None, :]
    cos, sin = np.cos(np.concatenate([angles, angles], -1)), np.sin(np.concatenate([angles, angles], -1))

    def rope(t):  # t: [heads, n, d]
        rotated = np.concatenate([-t[..., d // 2:], t[..., : d // 2]], -1)
        return t * cos + rotated * sin

    x = w["embed"][ids].astype(np.float64)
    for layer in w["layers"]:
        h = rms(x, layer["input_norm"])
        q = rope(rms((h @ layer["q"]).reshape(n, heads, d), layer["q_norm"]).transpose(1, 0, 2))
        k = rope(rms((h @ layer["k"]).reshape(n, kv_heads, d), layer["k_norm"]).transpose(1, 0, 2))
        v = (h @ layer["v"]).reshape(n, kv_heads, d).transpose(1, 0, 2)
        out = np.zeros((heads, n, d))
        for head in range(heads):
            kv = head // (heads // kv_heads)
            for i in range(n):
                s = np.array([q[head, i] @ k[kv, j] / np.sqrt(d) for j in range(i + 1)])
                p = np.exp(s - s.max())
                out[head, i] = (p / p.sum()) @ v[kv, : i + 1]
        x = x + out.transpose(1, 0, 2).reshape(n, heads * d) @ layer["o"]
        h = rms(x, layer["post_norm"])
        gate = h @ layer["gate"]
        x = x + (gate / (1 + np.exp(-gate)) * (h @ layer["up"])) @ layer["down"]
    last = rms(x, w["final_norm"])[-1]
    return [float(last @ w["embed"][QWEN_NO]), float(last @ w["embed"][QWEN_YES])]


def bert_weights(rng, c=BERT):
    h, i = c["hidden"], c["intermediate"]
    w = {
        "word": rng.normal(0, 0.5, (BERT_VOCAB, h)),
        "position": rng.normal(0, 0.5, (c["positions"], h)),
        "type": rng.normal(0, 0.5, (c["types"], h)),
        "emb_ln": (1 + rng.normal(0, 0.1, h), rng.normal(0, 0.1, h)),
        "layers": [],
        "pooler": (rng.normal(0, h ** -0.5, (h, h)), rng.normal(0, 0.1, h)),
        "classifier": (rng.normal(0, h ** -0.5, (h, 1)), rng.normal(0, 0.1, 1)),
    }
    for _ in range(c["layers"]):
        w["layers"].append({
            name: (rng.normal(0, shape[0] ** -0.5, shape), rng.normal(0, 0.1, shape[1]))
            for name, shape in (("q", (h, h)), ("k", (h, h)), ("v", (h, h)), ("o", (h, h)), ("in", (h, i)), ("out", (i, h)))
        } | {"ln1": (1 + rng.normal(0, 0.1, h), rng.normal(0, 0.1, h)),
             "ln2": (1 + rng.normal(0, 0.1, h), rng.normal(0, 0.1, h))})
    return w


def bert_layout(t, layers, prefix=""):
    """Published BERT tensors (torch names under `prefix`, [out, in] products) in this file's
    weight layout ([in, out]) for bert_reference; a task model's pooler and classifier too."""
    linear = lambda n: (t[n + ".weight"].T, t[n + ".bias"])  # noqa: E731
    norm = lambda n: (t[n + ".weight"], t[n + ".bias"])  # noqa: E731
    p = prefix
    w = {"word": t[p + "embeddings.word_embeddings.weight"], "position": t[p + "embeddings.position_embeddings.weight"],
         "type": t[p + "embeddings.token_type_embeddings.weight"], "emb_ln": norm(p + "embeddings.LayerNorm"),
         "layers": []}
    for i in range(layers):
        n = f"{p}encoder.layer.{i}."
        w["layers"].append({
            "q": linear(n + "attention.self.query"), "k": linear(n + "attention.self.key"),
            "v": linear(n + "attention.self.value"), "o": linear(n + "attention.output.dense"),
            "in": linear(n + "intermediate.dense"), "out": linear(n + "output.dense"),
            "ln1": norm(n + "attention.output.LayerNorm"), "ln2": norm(n + "output.LayerNorm")})
    if p + "pooler.dense.weight" in t and "classifier.weight" in t:
        w["pooler"] = linear(p + "pooler.dense")
        w["classifier"] = linear("classifier")
    return w


def bert_graph(w, c=BERT, head="classifier"):
    """inputs input_ids, attention_mask, token_type_ids (int64 [batch, tokens]) -> logits [batch, 1],
    or with head="hidden" the encoder's output last_hidden_state [batch, tokens, hidden]."""
    g = Graph()
    heads, d = c["heads"], c["hidden"] // c["heads"]
    f32 = lambda a: a.astype(np.float32)  # noqa: E731

    def dense(x, wb):
        return g.op("Add", g.matmul(x, wb[0]), g.const(f32(wb[1]), "b"))

    steps = g.op("Range", g.const(np.int64(0)),
                 g.op("Gather", g.op("Shape", "input_ids"), g.const(np.int64(1)), axis=0), g.const(np.int64(1)))
    x = g.op("Add", g.op("Add", g.op("Gather", g.const(f32(w["word"])), "input_ids", axis=0),
                         g.op("Gather", g.const(f32(w["type"])), "token_type_ids", axis=0)),
             g.op("Gather", g.const(f32(w["position"])), steps, axis=0))
    x = layer_norm(g, x, *w["emb_ln"], c["eps"])
    keys = g.op("Unsqueeze", g.op("Cast", "attention_mask", to=TensorProto.FLOAT), g.const(np.array([1, 2], dtype=np.int64)))
    bias = g.op("Mul", g.op("Sub", keys, g.const(np.float32(1))), g.const(np.float32(1e9)))

    def split(t):
        return g.op("Transpose", g.op("Reshape", t, g.const(np.array([0, 0, heads, d], dtype=np.int64))), perm=[0, 2, 1, 3])

    for layer in w["layers"]:
        q, k, v = (split(dense(x, layer[n])) for n in ("q", "k", "v"))
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])),
                                  g.const(np.float32(d ** -0.5))), bias)
        attended = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        merged = g.op("Reshape", g.op("Transpose", attended, perm=[0, 2, 1, 3]),
                      g.const(np.array([0, 0, heads * d], dtype=np.int64)))
        x = layer_norm(g, g.op("Add", x, dense(merged, layer["o"])), *layer["ln1"], c["eps"])
        inner = dense(x, layer["in"])
        gelu = g.op("Mul", g.op("Mul", inner, g.const(np.float32(0.5))),
                    g.op("Add", g.op("Erf", g.op("Mul", inner, g.const(np.float32(2 ** -0.5)))), g.const(np.float32(1))))
        x = layer_norm(g, g.op("Add", x, dense(gelu, layer["out"])), *layer["ln2"], c["eps"])
    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
            for n in ("input_ids", "attention_mask", "token_type_ids")]
    if head == "hidden":
        g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
        out = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", c["hidden"]])]
        return helper.make_graph(g.nodes, "bert_encoder", ints, out, g.inits)
    cls = g.op("Squeeze", g.op("Slice", x, g.const(np.array([0], dtype=np.int64)), g.const(np.array([1], dtype=np.int64)),
                               g.const(np.array([1], dtype=np.int64))), g.const(np.array([1], dtype=np.int64)))
    pooled = g.op("Tanh", dense(cls, w["pooler"]))
    g.nodes.append(helper.make_node("Add", [g.matmul(pooled, w["classifier"][0]),
                                            g.const(f32(w["classifier"][1]), "b")], ["logits"]))
    out = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])]
    return helper.make_graph(g.nodes, "cross_encoder_tiny", ints, out, g.inits)


def bert_reference(w, ids, types, c=BERT, head="classifier"):
    heads, d, eps = c["heads"], c["hidden"] // c["heads"], c["eps"]
    n = len(ids)

    def ln(t, wb):
        mean = t.mean(-1, keepdims=True)
        return (t - mean) / np.sqrt(((t - mean) ** 2).mean(-1, keepdims=True) + eps) * wb[0] + wb[1]

    x = ln(w["word"][ids] + w["type"][types] + w["position"][:n], w["emb_ln"])
    for layer in w["layers"]:
        q, k, v = (((x @ layer[m][0]) + layer[m][1]).reshape(n, heads, d).transpose(1, 0, 2) for m in ("q", "k", "v"))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(d)
        p = np.exp(s - s.max(-1, keepdims=True))
        out = ((p / p.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(n, heads * d)
        x = ln(x + out @ layer["o"][0] + layer["o"][1], layer["ln1"])
        inner = x @ layer["in"][0] + layer["in"][1]
        erf = np.vectorize(__import__("math").erf)
        x = ln(x + (0.5 * inner * (1 + erf(inner / np.sqrt(2)))) @ layer["out"][0] + layer["out"][1], layer["ln2"])
    if head == "hidden":
        return x
    pooled = np.tanh(x[0] @ w["pooler"][0] + w["pooler"][1])
    return [float((pooled @ w["classifier"][0] + w["classifier"][1])[0])]


def save(graph, directory, config, reference, tokenizer, external=False):
    """external: weights in model.onnx.data beside the graph (past protobuf's 2 GB limit)."""
    directory.mkdir(parents=True, exist_ok=True)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="stillweb fixtures")
    model.ir_version = 8
    if external:
        onnx.save(model, str(directory / "model.onnx"), save_as_external_data=True,
                  all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=1024)
        onnx.checker.check_model(str(directory / "model.onnx"))
    else:
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, str(directory / "model.onnx"))
    shutil.copyfile(tokenizer, directory / "tokenizer.json")
    (directory / "model.toml").write_text(config)
    (directory / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", required=True, type=pathlib.Path, help="the model cache models/fetch filled")
    parser.add_argument("--out", type=pathlib.Path, help="default: MODELS/fixtures")
    parser.add_argument("--speed", action="store_true",
                        help="also write cross-encoder-minilm-l6-shape/: random weights in the real "
                             "MiniLM-L6 cross-encoder's shape, to measure reranking cost (not used by tests)")
    parser.add_argument("--qwen3-0.6b-shape", dest="qwen_full", action="store_true",
                        help="write only qwen3-reranker-0.6b-shape/: random weights in the real "
                             "Qwen3-Reranker-0.6B's shape (2.4 GB, fp32), for benchmarks/gpu.sh")
    args = parser.parse_args()
    if args.qwen_full:
        out = args.out or args.models / "fixtures"
        weights = qwen_weights(np.random.default_rng(SEED), QWEN_0_6B)
        save(qwen_graph(weights, QWEN_0_6B), out / "qwen3-reranker-0.6b-shape", f'''# Random weights in the shape of Qwen3-Reranker-0.6B (fp32): for speed measurements only.
id = "stillweb/qwen3-reranker-0.6b-shape-random"
kind = "qwen3-reranker"
onnx = "model.onnx"
tokenizer = "tokenizer.json"
max_tokens = 512
no_token_id = {QWEN_NO}
yes_token_id = {QWEN_YES}
quantization = "fp32"
''', [], args.models / "qwen3-tokenizer" / "tokenizer.json", external=True)
        print(out)
        return
    out = args.out or args.models / "fixtures"
    rng = np.random.default_rng(SEED)

    weights = qwen_weights(rng)
    sequences = [rng.integers(0, 151_669, size=n).tolist() for n in (1, 7, 23)]
    save(qwen_graph(weights), out / "qwen3-reranker-tiny", f'''# Random weights: proves plumbing, not quality. Built by models/fixtures.py (seed {SEED}).
id = "stillweb/qwen3-reranker-tiny-random"
kind = "qwen3-reranker"
onnx = "model.onnx"
tokenizer = "tokenizer.json"
max_tokens = 512
no_token_id = {QWEN_NO}
yes_token_id = {QWEN_YES}
quantization = "fp32"
''', [{"input_ids": s, "no_yes_logits": qwen_reference(weights, s)} for s in sequences],
         args.models / "qwen3-tokenizer" / "tokenizer.json")

    weights = bert_weights(rng)
    pairs = []
    for n, m in ((3, 2), (9, 14)):
        ids = [101] + rng.integers(1000, BERT_VOCAB, size=n).tolist() + [102] + rng.integers(1000, BERT_VOCAB, size=m).tolist() + [102]
        types = [0] * (n + 2) + [1] * (m + 1)
        pairs.append({"input_ids": ids, "token_type_ids": types, "logits": bert_reference(weights, np.array(ids), np.array(types))})
    save(bert_graph(weights), out / "cross-encoder-tiny", f'''# Random weights: proves plumbing, not quality. Built by models/fixtures.py (seed {SEED}).
id = "stillweb/cross-encoder-tiny-random"
kind = "cross-encoder"
onnx = "model.onnx"
tokenizer = "tokenizer.json"
max_tokens = 512
quantization = "fp32"
''', pairs, args.models / "all-minilm-l6-v2" / "tokenizer.json")
    if args.speed:
        weights = bert_weights(rng, BERT_MINILM_L6)
        save(bert_graph(weights, BERT_MINILM_L6), out / "cross-encoder-minilm-l6-shape", f'''# Random weights in the shape of a MiniLM-L6 cross-encoder: for speed measurements only.
id = "stillweb/cross-encoder-minilm-l6-shape-random"
kind = "cross-encoder"
onnx = "model.onnx"
tokenizer = "tokenizer.json"
max_tokens = 512
quantization = "fp32"
''', [], args.models / "all-minilm-l6-v2" / "tokenizer.json")
    print(out)


if __name__ == "__main__":
    main()
