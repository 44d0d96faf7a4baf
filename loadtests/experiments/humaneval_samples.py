"""Generated candidates for `verifier eval code --samples`: a chat model writes each HumanEval
task's function, several times per task, in HumanEval's sample format (``{"task_id",
"completion"}``, the completion a fenced answer the code eval reads after the task's prompt).

Runs vLLM offline on the model given (the stronger judge of docs/evaluations.md, say); for
measurement only, never in CI.

    python -m loadtests.experiments.humaneval_samples --model DIR --tasks 40 --n 4 \\
        --out out/humaneval_samples.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from service.config import Settings
from service.evals.data import load_humaneval

ASK = (
    "Complete the following Python function. Answer with the whole function, its imports "
    "included, in one ```python block.\n\n{prompt}"
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", required=True, help="A local HF folder of a chat model.")
    p.add_argument("--tasks", type=int, default=40)
    p.add_argument("--n", type=int, default=4, help="Samples per task.")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--max-tokens", type=int, default=384)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    from vllm import LLM, SamplingParams

    tasks = load_humaneval(Settings().data_dir / "humaneval" / "HumanEval.jsonl.gz", args.tasks)
    llm = LLM(model=args.model, enforce_eager=True, max_model_len=2048, seed=args.seed)
    # The engine's seed, not a per-request one: seeded requests fail on vLLM's CPU sampler.
    params = SamplingParams(n=args.n, temperature=args.temperature, max_tokens=args.max_tokens)
    chats: list[list[Any]] = [
        [{"role": "user", "content": ASK.format(prompt=t.prompt)}] for t in tasks
    ]
    outputs = llm.chat(chats, params)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for task, out in zip(tasks, outputs, strict=True):
            for sample in out.outputs:
                f.write(json.dumps({"task_id": task.task_id, "completion": sample.text}) + "\n")
    print(f"wrote {len(tasks) * args.n} samples of {len(tasks)} tasks to {args.out}")


if __name__ == "__main__":
    main()
