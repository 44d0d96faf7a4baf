"""Where the CPU goes: a sampling profile of the service under load, split by layer.

Reads py-spy's raw output (collapsed stacks, ``--format raw``; py-spy is a tool of the person
profiling, not a dependency of the project) of a `verifier serve` recorded with
``--subprocesses``, and prints the CPU share of each layer:

- ``engine: model`` / ``engine: core``: vLLM's worker process (model runner: the forward
  pass and the sampler) and its engine-core process (scheduler, output batching);
- in the serving process, by the innermost frame that names a layer: ``tokenization``
  (tokenizers, the chat template, our prompt building), ``engine client`` (vLLM's frontend in
  our process: output handler, detokenizer, input processing), ``queue`` (the queue and Redis),
  ``worker`` (job handling, serving and scoring code), ``response`` (encoding the response
  body), ``API`` (HTTP and validation: uvicorn, starlette, FastAPI, pydantic, our routes),
  else ``other``. Samples of threads blocked waiting (a lock, a queue, a socket) are left out;
  ``engine: spin-wait`` is vLLM's processes spinning on their shared-memory queues.

    py-spy record --subprocesses --nonblocking --rate 25 --format raw \\
        -o out/bench/profile.txt -- \\
        python -m loadtests.mixed_load --servers ours --runs 1
    python -m loadtests.experiments.profile_split out/bench/profile.txt

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
    ("engine client", re.compile(r"[(/]vllm/")),
    ("queue", re.compile(r"[(/]redis/|service/queue/(redis_streams|local|base)\.py")),
    ("worker", re.compile(r"service/(queue/worker|serving|scoring|engine)/?")),
    ("response", re.compile(r"^(serialize_response|jsonable_encoder|_prepare_response_content|"
                            r"render) ")),
    ("API", re.compile(r"uvicorn|starlette|fastapi|pydantic|h11|httptools|service/api/|"
                       r"service/app\.py|service/protocol/")),
)  # fmt: skip
ENGINE_PROCESS: Final = re.compile(r"VLLM::|spawn_main")
# A thread blocked in one of these is waiting, not working (py-spy samples it all the same).
IDLE_LEAF: Final = re.compile(
    r"^(Condition\.wait|Queue\.get|_worker|Event\.wait|Connection\._recv|Poller\.poll|"
    r"\S*select|\S*poll|epoll\S*|sleep|_recv_into|recv|accept) "
)
# vLLM's shared-memory queues between its processes spin (os.sched_yield) for a second after
# each message before they sleep: CPU spent waiting.
SPIN_LEAF: Final = re.compile(r"^sched_yield ")
IDLE: Final = "idle"
MODEL_FRAME: Final = re.compile(r"vllm/v1/worker/|WorkerProc")
SERVICE_PROCESS: Final = re.compile(r"service\.cli (serve|worker)|verifier (serve|worker)|reaper")
CLIENT: Final = "client"


def layer_of(stack: str) -> str:
    """The layer one collapsed stack is charged to. With ``--subprocesses`` py-spy nests each
    process under its parents (``process PID:"cmdline"`` frames); the innermost one is the
    process the stack was sampled in."""
    frames = stack.split(";")
    starts = [i for i, f in enumerate(frames) if f.startswith("process ")]
    process = frames[starts[-1]] if starts else ""
    frames = frames[starts[-1] + 1 :] if starts else frames
    if frames and IDLE_LEAF.search(frames[-1]):
        return IDLE
    if frames and SPIN_LEAF.search(frames[-1]):
        return "engine: spin-wait"
    if ENGINE_PROCESS.search(process):
        # vLLM's spawned processes show spawn_main's command line; the stack says which.
        return "engine: model" if any(MODEL_FRAME.search(f) for f in frames) else "engine: core"
    if process and not SERVICE_PROCESS.search(process):
        return CLIENT  # the load generator, when py-spy recorded it with the service
    for frame in reversed(frames):
        for name, pattern in LAYERS:
            if pattern.search(frame):
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
    """Shares of the service's busy samples (the load generator's and idle ones left out)."""
    mine = Counter({k: v for k, v in samples.items() if k not in (CLIENT, IDLE)})
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
