"""Where the CPU goes: a sampling profile of the service under load, split by layer.

Reads py-spy's raw output (collapsed stacks, ``--format raw``; py-spy is a tool of the person
profiling, not a dependency of the project) of a `verifier serve` recorded with
``--subprocesses``, and prints the CPU share of each layer:

- ``engine: model`` / ``engine: core``: vLLM's worker process (the forward pass) and its
  engine-core process (scheduler, sampler and the rest);
- in the serving process, by the innermost frame that names a layer: ``tokenization``
  (tokenizers, the chat template, our prompt building), ``engine client`` (vLLM's frontend in
  our process: output handler, detokenizer, input processing), ``queue`` (the queue and Redis),
  ``worker`` (job handling, serving and scoring code), ``response`` (encoding the response
  body), ``API`` (HTTP and validation: uvicorn, starlette, FastAPI, pydantic, our routes),
  else ``other`` (mostly the event loop itself).

    py-spy record --subprocesses --format raw -o out/bench/profile.txt -- \\
        python -m loadtests.mixed_load --servers ours --runs 1
    verifier bench profile-split out/bench/profile.txt

Stacks of processes that are neither the service nor its engine (the load generator) are left
out of the shares.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Final

# Innermost first: the first layer whose pattern a frame matches, scanning from the leaf.
LAYERS: Final = (
    ("tokenization", re.compile(r"tokenizers|tokenization_utils|chat_template|jinja2|"
                                r"service/scoring/(prompts|tokenizer)\.py")),
    ("engine client", re.compile(r"/vllm/")),
    ("queue", re.compile(r"/redis/|service/queue/(redis_streams|local|base)\.py")),
    ("worker", re.compile(r"service/(queue/worker|serving|scoring|engine)/?")),
    ("response", re.compile(r"^(serialize_response|jsonable_encoder|_prepare_response_content|"
                            r"render) ")),
    ("API", re.compile(r"uvicorn|starlette|fastapi|pydantic|h11|httptools|service/api/|"
                       r"service/app\.py|service/protocol/")),
)  # fmt: skip
ENGINE_PROCESSES: Final = (("engine: model", "VLLM::Worker"), ("engine: core", "EngineCore"))
SERVICE_PROCESS: Final = re.compile(r"\b(serve|worker)\b")
CLIENT: Final = "client"


def _frame_file(frame: str) -> str:
    """py-spy's frame is ``function (path:line)``: both name the layer."""
    return frame


def layer_of(stack: str) -> str:
    """The layer one collapsed stack (root first, ``;``-separated) is charged to."""
    frames = stack.split(";")
    root = frames[0]
    for name, marker in ENGINE_PROCESSES:
        if marker in root:
            return name
    if root.startswith("process ") and not SERVICE_PROCESS.search(root):
        return CLIENT  # the load generator, when py-spy recorded it with the service
    for frame in reversed(frames):
        where = _frame_file(frame)
        for name, pattern in LAYERS:
            if pattern.search(where):
                return name
    return "other"


def split(lines: Iterable[str]) -> Counter[str]:
    """Samples per layer from py-spy's raw lines (``stack count``)."""
    out: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if stack and count.isdigit():
            out[layer_of(stack)] += int(count)
    return out


def report(samples: Counter[str]) -> list[dict[str, object]]:
    """Shares of the service's samples (the load generator's are left out)."""
    mine = Counter({k: v for k, v in samples.items() if k != CLIENT})
    total = sum(mine.values()) or 1
    return [{"layer": name, "samples": n, "share": n / total} for name, n in mine.most_common()]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("profile", type=Path, help="py-spy record --format raw output")
    ap.add_argument("--json", type=Path, default=None, help="also write the table here")
    args = ap.parse_args()
    rows = report(split(args.profile.read_text().splitlines()))
    print(f"  {'layer':<16} {'samples':>8} {'share':>7}")
    for row in rows:
        print(f"  {row['layer']:<16} {row['samples']:>8} {row['share']:>7.1%}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
