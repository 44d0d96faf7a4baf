"""The verdict-read logits processor's own cost per decode step (engine/verdict_read.py).

``VerdictReadProcessor.apply`` runs on every decode step of every batch that holds a
one-request reasoning judgment, before vLLM samples. This times it alone on random logits of
the real vocabulary sizes (SmolLM2's 49,152, Qwen2.5's 151,936) and batches of 8-32 rows, in
three states of the batch: every row still writing its rationale, greedy (the state where it
checks whether EOS is the next token), the same rows sampled (nothing to check), and every row
being forced. Beside it, for scale: one argmax over the whole batch (what vLLM's greedy sampler
does once per step anyway). Each figure is the median over ``--reps`` calls, microseconds.

    python -m loadtests.experiments.verdict_apply            # 8, 16, 32 rows; both vocabularies
    python -m loadtests.experiments.verdict_apply --smoke    # one small case
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from loadtests import bench
from service.engine.verdict_read import VerdictReadProcessor, _Read

VOCABS = (49_152, 151_936)
ROWS = (8, 16, 32)
STATES = ("writing_greedy", "writing_sampled", "forcing")
END = 2
TRIGGER = (198, 5_000, 25)
AFTER = (*TRIGGER, 220)


def _processor(rows: int, state: str) -> VerdictReadProcessor:
    proc = VerdictReadProcessor(None, torch.device("cpu"), False)  # type: ignore[arg-type]
    reads: dict[int, _Read] = {}
    for i in range(rows):
        read = _Read(
            out=[7] * 40,  # a rationale under way: no trigger at its end, under the budget
            trigger=TRIGGER,
            after=AFTER,
            budget=10_000,
            end=END,
            greedy=state != "writing_sampled",
        )
        if state == "forcing":
            read.forced, read.base = (*AFTER, END), 40
        reads[i] = read
    proc._reads = reads
    return proc


def _time_us(fn: Callable[[], Any], reps: int) -> float:
    times: list[float] = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return bench.median(times) * 1e6


def measure(vocab: int, rows: int, reps: int) -> dict[str, float]:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(rows, vocab, generator=gen)
    logits[:, END] = -1e4  # EOS never the argmax: the check runs and finds nothing to force
    out: dict[str, float] = {}
    for state in STATES:
        proc = _processor(rows, state)
        out[state] = _time_us(lambda p=proc: p.apply(logits), reps)  # type: ignore[misc]
    out["batch_argmax"] = _time_us(lambda: logits.argmax(dim=1), reps)
    return out


def main() -> None:
    ap = bench.parser("verdict_apply", __doc__, smoke={"vocabs": [1024], "rows": [4], "reps": 5})
    ap.add_argument("--vocabs", type=int, nargs="+", default=list(VOCABS))
    ap.add_argument("--rows", type=int, nargs="+", default=list(ROWS))
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse()
    rec = bench.record(
        "verdict_apply",
        args,
        {"vocabs": args.vocabs, "rows": args.rows, "reps": args.reps},
    )
    rec.config["torch_threads"] = torch.get_num_threads()
    cases = []
    print(f"{'vocab':>7} {'rows':>4} " + " ".join(f"{s:>16}" for s in (*STATES, "batch_argmax")))
    for vocab in args.vocabs:
        for rows in args.rows:
            figures = measure(vocab, rows, args.reps)
            cases.append({"vocab": vocab, "rows": rows, "us": figures})
            print(f"{vocab:>7} {rows:>4} " + " ".join(f"{v:>16.1f}" for v in figures.values()))
    rec.results = {"cases": cases}
    bench.write(rec, args)


if __name__ == "__main__":
    main()
