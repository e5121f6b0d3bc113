#!/usr/bin/env python3
"""This machine's matrix-multiply ceiling, measured with ONNX Runtime's own CPU kernels (the ones
the embedder runs on): one-node graphs of MatMul (fp32) and MatMulInteger (uint8 activations x
int8 weights, what quantize_dynamic emits) at MiniLM's shapes, with a whole batch of tokens as M.
Reports the best sustained rate in GFLOP/s (fp32) and GOP/s (int8) over the shapes; NumPy's sgemm
is listed as a cross-check of the fp32 figure.

Usage: gemm.py THREADS   (prints JSON)
"""
import json
import sys
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

SHAPES = [(4096, 384, 1536), (4096, 1536, 384), (4096, 384, 384)]


def session(model, threads):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def rate(run, ops, seconds=2.0):
    run()
    n, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        run()
        n += 1
    return ops * n / (time.perf_counter() - started) / 1e9


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    rng = np.random.default_rng(0)
    out = {"threads": threads, "fp32": {}, "int8": {}, "numpy_sgemm": {}}
    for m, k, n in SHAPES:
        ops = 2 * m * k * n
        name = f"{m}x{k}x{n}"
        w = rng.standard_normal((k, n)).astype(np.float32)
        x = rng.standard_normal((m, k)).astype(np.float32)
        graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "fp32",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                                  [numpy_helper.from_array(w, "w")])
        s = session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), threads)
        out["fp32"][name] = round(rate(lambda: s.run(None, {"x": x}), ops), 1)
        wq = rng.integers(-127, 128, (k, n), dtype=np.int8)
        xq = rng.integers(0, 256, (m, k), dtype=np.uint8)
        graph = helper.make_graph([helper.make_node("MatMulInteger", ["x", "w"], ["y"])], "int8",
                                  [helper.make_tensor_value_info("x", TensorProto.UINT8, [m, k])],
                                  [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])],
                                  [numpy_helper.from_array(wq, "w")])
        s = session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), threads)
        out["int8"][name] = round(rate(lambda: s.run(None, {"x": xq}), ops), 1)
        out["numpy_sgemm"][name] = round(rate(lambda: x @ w, ops), 1)
    out["fp32_ceiling_gflops"] = max(out["fp32"].values())
    out["int8_ceiling_gops"] = max(out["int8"].values())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
