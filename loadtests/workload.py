"""The workloads several benchmarks share: GSM8K judgment pairs, closed- and open-loop drivers,
the raw-engine baseline. Benchmarks import these from here, never from each other."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from service.config import Settings
from service.engine.device import resolve_dtype
from service.engine.judging import PROMPT_TOPK
from service.engine.vllm_engine import CPU_BLOCK_SIZE
from service.scoring import prompts

Pair = tuple[str, str]
T = TypeVar("T")
_SOLVERS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")


def load_pairs(settings: Settings, questions: int, offset: int = 0) -> list[Pair]:
    """(question, solution) pairs: ``questions`` GSM8K questions from ``offset``, 4 each."""
    path = settings.data_dir / "gsm8k" / "example_model_solutions.jsonl"
    pairs: list[Pair] = []
    with path.open() as fh:
        for i, line in enumerate(fh):
            if i < offset:
                continue
            if i >= offset + questions:
                break
            row = json.loads(line)
            pairs.extend((row["question"], row[s]["solution"]) for s in _SOLVERS)
    return pairs


async def drive(items: list[T], concurrency: int, one: Callable[[T], Awaitable[Any]]) -> float:
    """Run every item through ``one`` with ``concurrency`` clients; return items/s."""
    queue: asyncio.Queue[T] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)

    async def client() -> None:
        while not queue.empty():
            await one(queue.get_nowait())

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return len(items) / (time.perf_counter() - start)


async def open_loop(
    rate: float,
    seconds: float,
    send: Callable[[float], Coroutine[Any, Any, None]],
    halfway: Callable[[], Awaitable[None]],
) -> int:
    """Call ``send(scheduled)`` ``rate`` times a second for ``seconds``, each at its scheduled
    time whatever the earlier ones are doing, and ``halfway()`` once in the middle; returns the
    number sent once every send has finished."""
    tasks = []
    start = time.monotonic()
    fired = False
    for k in range(int(rate * seconds)):
        delay = start + k / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if not fired and time.monotonic() - start >= seconds / 2:
            await halfway()
            fired = True
        tasks.append(asyncio.create_task(send(time.monotonic())))
    await asyncio.gather(*tasks)
    return len(tasks)


_COUNTER = iter(range(10**9))


def judgment_body() -> dict[str, Any]:
    """A direct judgment no earlier call sent (distinct text, judgment cache skipped)."""
    i = next(_COUNTER)
    a, b = 100 + i % 900, 7 + i % 13
    return {
        "question": f"What is {a} + {b}? (item {i})",
        "response": f"{a} + {b} = {a + b}. The answer is {a + b}.",
        "cache": False,
    }


def direct_ids(tokenizer: Any, pair: Pair) -> list[int]:
    return prompts.direct_prompt_ids(prompts.outcome_prompt(tokenizer, pair[0], pair[1], False))


def block_size(settings: Settings) -> int:
    """The service's KV block size on this (CPU) machine, so every mode uses the same."""
    return settings.engine.block_size or CPU_BLOCK_SIZE


def pretokenize(tokenizer: Any, pairs: list[Pair]) -> dict[Pair, list[int]]:
    """Raw modes get their prompt ids ready before the clock starts (the service tokenizes
    inside the measured run, so this favours the baselines)."""
    return {p: direct_ids(tokenizer, p) for p in pairs}


def raw_engine(settings: Settings, model: str) -> Any:
    """A bare AsyncLLM with the service's engine settings (the baseline of every benchmark)."""
    from vllm import AsyncEngineArgs, AsyncLLMEngine

    cfg = settings.engine
    return AsyncLLMEngine.from_engine_args(
        AsyncEngineArgs(
            model=model,
            # resolve_dtype returns one of vLLM's dtype names as a plain str
            dtype=resolve_dtype(cfg.dtype, "cpu"),  # type: ignore[arg-type]
            max_model_len=cfg.max_model_len,
            enforce_eager=cfg.enforce_eager,
            enable_prefix_caching=True,
            block_size=block_size(settings),
            max_num_seqs=cfg.max_num_seqs,
            max_logprobs=PROMPT_TOPK,
            seed=cfg.seed,
        )
    )


def completion(solution: str, attempt: int) -> str:
    """The solution with an ``Attempt k:`` line in front (attempt 0: as it is); the line
    changes no answer."""
    return solution if attempt == 0 else f"Attempt {attempt}:\n{solution}"


def distinct(solution: str, seen: set[str]) -> tuple[str, int]:
    """The first of ``solution``, ``Attempt 2:`` + it, ``Attempt 3:`` + it ... not in
    ``seen`` (added to it), and its attempt number (0 for the solution as it is)."""
    attempt = 0
    while (text := completion(solution, attempt)) in seen:
        attempt = max(2, attempt + 1)
    seen.add(text)
    return text, attempt


def chat_renderer(model: str) -> tuple[Callable[[str], str], str]:
    """The model's chat template as a prompt renderer, and its end-of-turn text."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)

    def render(question: str) -> str:
        text = tok.apply_chat_template(
            [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
        )
        return str(text)

    return render, str(tok.eos_token or "")
