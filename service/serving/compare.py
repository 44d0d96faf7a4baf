"""POST /v1/judge/compare: responses to one question read together, position bias removed.

Every order a comparison reads (docs/methods.md H.2) is one prompt ending at the answer slot;
the shown letters are read exactly with ``option_logprobs``. The first read goes alone so that
it prefills the question (and reference) every other read shares; the rest follow in one
batch and find it in vLLM's prefix cache. With ``reasoning_tokens`` each read follows a
written comparison within that budget (``samples`` of them per order).
"""

from __future__ import annotations

from collections.abc import Sequence

from service.engine.adapters import served_id
from service.engine.base import Engine, GenerateCall, OptionCall, TokenUsage
from service.errors import InvalidRequest
from service.protocol import Usage
from service.protocol.compare import CompareRead, CompareRequest, CompareResponse, CompareResult
from service.scoring import compare as scoring
from service.scoring.decisions import THOUGHT_TAIL, after_thought_ids
from service.scoring.fusion import rank
from service.scoring.prompts import ANSWER_PREFIX, token_variants
from service.serving.context import tenant_calibration
from service.stores.calibrations import CalibrationStore


class CompareServing:
    """Serves /v1/judge/compare (and ``method: "compare"`` of score, rerank, /get_reward)."""

    def __init__(self, engine: Engine, model_name: str, calibrations: CalibrationStore) -> None:
        self._engine = engine
        self._model = model_name
        self._calibrations = calibrations
        self._letters: dict[int, list[list[int]]] = {}

    async def compare(self, req: CompareRequest) -> CompareResponse:
        n = len(req.responses)
        debias = req.resolved_debias()
        aggregation = req.resolved_aggregation()
        prior = await self._prior(req, n)
        orders = scoring.read_orders(n, req.mode, debias, req.permutations or n)
        samples = req.samples if req.reasoning else 1
        plan = [(order, s) for order in orders for s in range(samples)]
        prompts = [self._prompt(req, order) for order, _ in plan]
        self._check_fits(prompts, plan, req)
        usage = TokenUsage()
        thoughts: list[str | None] = [None] * len(plan)
        if req.reasoning:
            prompts, thoughts = await self._think(prompts, plan, req, usage)
        calls = [
            OptionCall(ids, self._letter_ids(len(order)))
            for ids, (order, _) in zip(prompts, plan, strict=True)
        ]
        # The first read prefills the shared question alone: read together, every read would
        # prefill it again (vLLM caches a block only once it has been computed).
        results = await self._engine.option_logprobs(calls[:1])
        if len(calls) > 1:
            results += await self._engine.option_logprobs(calls[1:])
        raw = []
        for r, (order, _) in zip(results, plan, strict=True):
            usage.add(r.usage)
            raw.append(scoring.read_of(order, r.logprobs))
        reads = scoring.unbias_all(raw, prior)
        rewards, matrix = scoring.aggregate(n, req.mode, aggregation, reads)
        return CompareResponse(
            mode=req.mode,
            aggregation=aggregation,
            debias=debias,
            model=served_id(self._model),
            results=[
                CompareResult(index=i, reward=rw, score=sc)
                for i, (rw, sc) in enumerate(zip(rewards.rewards, rewards.scores, strict=True))
            ],
            ranking=rank(rewards.scores),
            preferences=matrix,
            position_consistency=scoring.position_consistency(n, reads),
            first_position_rate=scoring.first_position_rate(raw),
            passes=len(plan),
            reads=[
                CompareRead(
                    order=list(read.order), probabilities=list(read.probs), sample=s, reasoning=t
                )
                for read, (_, s), t in zip(reads, plan, thoughts, strict=True)
            ]
            if req.return_reads
            else None,
            usage=Usage.of(usage),
        )

    def _prompt(self, req: CompareRequest, order: Sequence[int]) -> list[int]:
        return scoring.compare_prompt_ids(
            self._engine.tokenizer,
            req.question,
            [req.responses[i] for i in order],
            req.reference,
            req.criteria,
            req.reasoning,
        )

    def _check_fits(
        self,
        prompts: Sequence[list[int]],
        plan: Sequence[tuple[tuple[int, ...], int]],
        req: CompareRequest,
    ) -> None:
        """A read that does not fit the model is a 422 naming its responses, before any call."""
        room = self._engine.model_info().max_model_len - (
            (req.reasoning_tokens or 0) + THOUGHT_TAIL if req.reasoning else 1
        )
        for ids, (order, _) in zip(prompts, plan, strict=True):
            if len(ids) > room:
                shown = ", ".join(f"responses[{i}]" for i in order)
                raise InvalidRequest(
                    f"the comparison of {shown} is {len(ids)} prompt tokens, over the "
                    f"{room} this model has room for; shorten the texts"
                    + (", lower reasoning_tokens" if req.reasoning else "")
                    + (" or use mode='pairwise'" if req.mode == "listwise" else "")
                )

    async def _think(
        self,
        prompts: list[list[int]],
        plan: Sequence[tuple[tuple[int, ...], int]],
        req: CompareRequest,
        usage: TokenUsage,
    ) -> tuple[list[list[int]], list[str | None]]:
        """Per read, its prompt + written comparison + ``Answer:``, and the comparison."""
        assert req.reasoning_tokens is not None  # only called in reasoning mode
        temperature = req.resolved_temperature()
        calls = [
            GenerateCall(
                prompt_ids=ids,
                max_tokens=req.reasoning_tokens,
                temperature=temperature,
                seed=None if req.seed is None else req.seed + s,
                stop=(ANSWER_PREFIX,),
            )
            for ids, (_, s) in zip(prompts, plan, strict=True)
        ]
        results = await self._engine.generate(calls[:1])
        if len(calls) > 1:
            results += await self._engine.generate(calls[1:])
        tokenizer = self._engine.tokenizer
        out: list[list[int]] = []
        thoughts: list[str | None] = []
        for ids, r in zip(prompts, results, strict=True):
            usage.add(r.usage)
            out.append([*ids, *after_thought_ids(tokenizer, r.text)])
            thoughts.append(r.text.strip())
        return out, thoughts

    async def _prior(self, req: CompareRequest, n: int) -> list[float] | None:
        """The stored PriDe letter prior for ``debias='pride'`` (422 if it does not fit)."""
        if req.resolved_debias() != "pride":
            return None
        cal = await tenant_calibration(
            self._calibrations, req.calibration_id, "pride", [n], served_id(self._model)
        )
        assert cal is not None  # the request model requires calibration_id with pride
        return list(cal.params["prior"])

    def _letter_ids(self, k: int) -> list[list[int]]:
        if k not in self._letters:
            tokenizer = self._engine.tokenizer
            self._letters[k] = [token_variants(tokenizer, label) for label in scoring.LABELS[:k]]
        return self._letters[k]
