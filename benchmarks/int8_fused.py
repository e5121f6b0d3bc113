"""How far ONNX Runtime's own fusions take MiniLM int8 toward the int8 GEMM ceiling.

Builds, from the fp32 MiniLM that `models/fetch` makes, ONNX Runtime's transformer-fused graph
(attention, skip layer norm, GELU fused by `onnxruntime.transformers.optimizer`) and a fully
quantised copy of it (dynamic int8, per-channel weights, every MatMul including the feed-forward
outputs that stillweb's default model keeps in fp32 for quality), then times all four models on
one batch: 32 rows of 86 random token ids (the shared samples' mean chunk length), 2 intra-op
threads, best of three runs of 8 calls. Speed only: the fused, fully quantised model's quality is
not measured here. Prints JSON.

Usage: python int8_fused.py FP32_MODEL INT8_MODEL WORK_DIR
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.transformers import optimizer

# Weight products of MiniLM-L6's encoder per token (6 layers x 1.77 M weights x 2), as in
# BENCHMARKS.md's model table.
OPS_PER_TOKEN = 21.2e6
BATCH, TOKENS = 32, 86


def chunks_per_second(path: Path) -> float:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {}
    for spec in session.get_inputs():
        if "mask" in spec.name:
            feed[spec.name] = np.ones((BATCH, TOKENS), np.int64)
        elif "type" in spec.name:
            feed[spec.name] = np.zeros((BATCH, TOKENS), np.int64)
        else:
            feed[spec.name] = rng.integers(1000, 20000, (BATCH, TOKENS), dtype=np.int64)
    session.run(None, feed)
    best = 0.0
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(8):
            session.run(None, feed)
        best = max(best, BATCH * 8 / (time.perf_counter() - started))
    return best


def main() -> None:
    fp32, int8, work = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    fused = work / "minilm-fused.onnx"
    fused_int8 = work / "minilm-fused-int8.onnx"
    model = optimizer.optimize_model(
        str(fp32), model_type="bert", num_heads=12, hidden_size=384, opt_level=0
    )
    fusions = {k: v for k, v in model.get_fused_operator_statistics().items() if v}
    model.save_model_to_file(str(fused))
    quantize_dynamic(
        str(fused),
        str(fused_int8),
        per_channel=True,
        weight_type=QuantType.QInt8,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    rows = []
    for name, path in [
        ("stillweb int8 (default; feed-forward outputs fp32)", int8),
        ("fp32", fp32),
        ("ONNX Runtime fused, fp32", fused),
        ("ONNX Runtime fused, fully int8", fused_int8),
    ]:
        rate = chunks_per_second(path)
        rows.append(
            {
                "model": name,
                "chunks_per_s": round(rate, 1),
                "gop_per_s": round(rate * TOKENS * OPS_PER_TOKEN / 1e9, 1),
            }
        )
    print(json.dumps({"batch": BATCH, "tokens": TOKENS, "threads": 2, "fusions": fusions,
                      "models": rows}, indent=1))


if __name__ == "__main__":
    main()
