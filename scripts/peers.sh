#!/usr/bin/env bash
# Peer load generators and servers for side-by-side benchmarks, each in its own venv under
# .venv-peers/ so their pins never constrain testbed's. One function per peer; each is
# idempotent: a stamp file records the exact install, so a second call does no network work.
# torch is installed first and alone at the pinned CPU version: an unpinned torch pulled in by
# a peer would fetch gigabytes of CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
PEERS=.venv-peers
TORCH="torch==2.13.0"

# make_venv DIR STAMP_TEXT: creates DIR with a fresh pip; returns 1 when the stamp says it is done.
make_venv() {
  local dir="$1" stamp_text="$2"
  if [[ -f "$dir/.stamp" && "$(cat "$dir/.stamp")" == "$stamp_text" ]]; then
    echo "peers: $dir is up to date ($stamp_text)"
    return 1
  fi
  test -x "$dir/bin/python" || "$PYTHON" -m venv "$dir"
  "$dir/bin/pip" install -q --upgrade pip
  return 0
}

# guidellm: the load generator and its mock server (`guidellm mock-server`).
peer_guidellm() {
  local dir="$PEERS/guidellm" spec="guidellm[recommended]==0.8.1"
  make_venv "$dir" "$TORCH $spec" || return 0
  "$dir/bin/pip" install -q "$TORCH"
  "$dir/bin/pip" install -q "$TORCH" "$spec"
  echo "$TORCH $spec" >"$dir/.stamp"
  echo "peers: installed $spec into $dir"
}

# aiperf: NVIDIA's load generator. It cannot load a local tokenizer folder with HF_HUB_OFFLINE=1,
# so callers leave that variable unset for it.
# It needs no torch (transformers only for tokenizers).
peer_aiperf() {
  local dir="$PEERS/aiperf" spec="aiperf==0.13.0"
  make_venv "$dir" "$spec" || return 0
  "$dir/bin/pip" install -q "$spec"
  echo "$spec" >"$dir/.stamp"
  echo "peers: installed $spec into $dir"
}

# inference-perf: every release needs Python >= 3.12 (pyenv's 3.12 where it exists); no torch.
peer_inference_perf() {
  local dir="$PEERS/inference-perf" spec="inference-perf==0.7.0"
  local py312="${PYTHON312:-$HOME/.pyenv/versions/3.12.1/bin/python}"
  if [[ ! -x "$py312" ]]; then
    echo "peers: no Python 3.12 at $py312 (set PYTHON312); skipping inference-perf"
    return 0
  fi
  PYTHON="$py312" make_venv "$dir" "$spec" || return 0
  "$dir/bin/pip" install -q "$spec"
  echo "$spec" >"$dir/.stamp"
  echo "peers: installed $spec into $dir"
}

main() {
  mkdir -p "$PEERS"
  local peers=("$@")
  ((${#peers[@]})) || peers=(guidellm)
  for peer in "${peers[@]}"; do
    "peer_$peer"
  done
}

main "$@"
