"""``Engine`` over a remote OpenAI-compatible server (a vLLM fleet behind a Kubernetes Service,
or any server with vLLM's ``/v1/completions`` extensions), over httpx.

Prompts are built here as token ids with a local copy of the served model's tokenizer and sent
as token-id prompts, so both sides score exactly the same ids. Label and option-letter
logprobs come from ``logprob_token_ids`` (exact, never from a top-k); single-pass and span
reads from ``prompt_logprobs``; rationales from plain generation. A server that does not honour
``logprob_token_ids`` is refused at start: it would silently return a top-k instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, cast

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from service.config import OpenAIEngineSettings, Settings
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
from service.engine.judging import PROMPT_TOPK, fill_slots, judge_one, logsumexp, pair_logit
from service.errors import ContextTooLong, EngineFailure, NotServedByModel
from service.ops import spend
from service.scoring.prompts import token_variants
from service.scoring.tokenizer import Tokenizer, encode

logger = logging.getLogger(__name__)

RETRY_STATUSES = (429, 502, 503, 504)
MAX_RETRY_AFTER_S = 30.0
PROBE_TEXT = "Verdict: "


class RetryableStatus(Exception):
    """A status worth retrying (the server is busy or restarting)."""

    def __init__(self, status: int, text: str, retry_after: float | None) -> None:
        super().__init__(f"HTTP {status}: {text[:300]}")
        self.retry_after = retry_after


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return min(float(response.headers["retry-after"]), MAX_RETRY_AFTER_S)
    except (KeyError, ValueError):
        return None


def _wait(backoff: wait_exponential_jitter) -> Any:
    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        after = getattr(exc, "retry_after", None)
        return float(after) if after is not None else float(backoff(state))

    return wait


def _retryable(exc: BaseException) -> bool:
    # A read timeout is not retried: the call may be running, and the job has a deadline.
    if isinstance(exc, httpx.ReadTimeout | httpx.WriteTimeout):
        return False
    return isinstance(exc, RetryableStatus | httpx.TransportError)


def _usage(body: dict[str, Any]) -> TokenUsage:
    usage = body.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return TokenUsage(
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        generated_tokens=int(usage.get("completion_tokens") or 0),
        # Only when the server runs with --enable-prompt-tokens-details; else 0.
        cached_tokens=int(details.get("cached_tokens") or 0),
        engine_calls=1,
    )


def _choice(body: dict[str, Any]) -> dict[str, Any]:
    choices = body.get("choices")
    if not choices:
        raise EngineFailure("the remote engine returned no choices")
    choice: dict[str, Any] = choices[0]
    return choice


def _token_logprobs(choice: dict[str, Any]) -> dict[int, float]:
    """The requested ids' logprobs at the first generated position ("token_id:N" keys)."""
    table = (choice.get("logprobs") or {}).get("top_logprobs") or []
    if not table or not table[0]:
        raise EngineFailure("the remote engine returned no logprobs at the answer slot")
    out: dict[int, float] = {}
    for key, value in table[0].items():
        if isinstance(key, str) and key.startswith("token_id:"):
            out[int(key.removeprefix("token_id:"))] = float(value)
    return out


def _prompt_table(choice: dict[str, Any]) -> list[dict[int, float] | None]:
    rows = choice.get("prompt_logprobs")
    if rows is None:
        raise EngineFailure("the remote engine returned no prompt_logprobs")
    return [
        None if row is None else {int(k): float(v["logprob"]) for k, v in row.items()}
        for row in rows
    ]


def api_root(base_url: str) -> str:
    """``http://host:port`` from a base URL given with or without ``/v1``."""
    return base_url.rstrip("/").removesuffix("/v1")


class OpenAIEngine:
    """``Engine`` on a remote server; every method is concurrent HTTP calls (the server
    batches them)."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        cfg: OpenAIEngineSettings,
        model: str,
        tokenizer: Tokenizer,
        info: ModelInfo,
    ) -> None:
        self._http = http
        self._cfg = cfg
        self._model = model
        self._tokenizer = tokenizer
        self._info = info
        self._pos_ids = _variants(tokenizer, "1")
        self._neg_ids = _variants(tokenizer, "0")
        self._backoff = wait_exponential_jitter(multiplier=0.25, max=4.0)

    @classmethod
    async def start(
        cls,
        settings: Settings,
        tokenizer_path: str,
        transport: httpx.AsyncBaseTransport | None = None,
        cfg: OpenAIEngineSettings | None = None,
        name: str | None = None,
        env: str = "VERIFIER_ENGINE__OPENAI",
    ) -> OpenAIEngine:
        """Connect, find the served model, load the tokenizer, prove logprob_token_ids work.

        ``cfg``, ``name`` and ``env``: another server than ``engine.openai`` (the audit's judge),
        the name it goes by ("": the server's model id) and its settings' prefix (for the
        errors). ``transport`` replaces the network."""
        cfg = cfg or settings.engine.openai
        headers = {"authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
        http = httpx.AsyncClient(
            base_url=api_root(cfg.base_url),
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(cfg.timeout_s, connect=cfg.connect_timeout_s),
            limits=httpx.Limits(
                max_connections=cfg.max_connections, max_keepalive_connections=cfg.max_connections
            ),
        )
        try:
            tokenizer = await asyncio.to_thread(_load_tokenizer, tokenizer_path)
            card = await _served_model(http, cfg, env)
            max_len = int(card.get("max_model_len") or settings.engine.max_model_len)
            info = ModelInfo(
                name=(settings.model_name if name is None else name) or str(card["id"]),
                path=f"{api_root(cfg.base_url)} ({card['id']})",
                max_model_len=min(max_len, settings.engine.max_model_len),
                device="remote",
                dtype="remote",
            )
            engine = cls(http, cfg, str(card["id"]), tokenizer, info)
            await engine.check_logprob_token_ids()
        except BaseException:
            await http.aclose()
            raise
        logger.info("remote engine %s, model %s", info.path, engine._model)
        return engine

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def model_info(self) -> ModelInfo:
        return self._info

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/completions with retries on 429/5xx-busy and connection errors."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._cfg.retries + 1),
            wait=_wait(self._backoff),
            retry=retry_if_exception(_retryable),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    response = await self._http.post("/v1/completions", json=body)
                    if response.status_code in RETRY_STATUSES:
                        raise RetryableStatus(
                            response.status_code, response.text, _retry_after(response)
                        )
        except (httpx.HTTPError, RetryableStatus) as exc:
            raise EngineFailure(f"remote engine call failed: {exc}") from exc
        except asyncio.CancelledError:
            # The dropped connection aborts the remote request; its prefill may have run.
            spend.record(len(body.get("prompt") or []))
            raise
        if not response.is_success:
            raise EngineFailure(
                f"remote engine answered {response.status_code}: {response.text[:500]}"
            )
        result: dict[str, Any] = response.json()
        usage = _usage(result)
        spend.record(usage.prompt_tokens, usage.generated_tokens)
        return result

    def _body(self, prompt_ids: Sequence[int], **fields: Any) -> dict[str, Any]:
        return {"model": self._model, "prompt": list(prompt_ids), **fields}

    def _check_fits(self, n_prompt: int, max_tokens: int) -> None:
        if n_prompt + max_tokens > self._info.max_model_len:
            raise ContextTooLong(
                f"prompt of {n_prompt} tokens plus {max_tokens} new tokens exceeds the model's "
                f"context of {self._info.max_model_len}; shorten the texts or lower "
                "reasoning_tokens"
            )

    async def _read_ids(self, prompt_ids: Sequence[int], wanted: list[int]) -> tuple[Any, Any]:
        """Exact logprobs of ``wanted`` as the next token after ``prompt_ids``."""
        self._check_fits(len(prompt_ids), 1)
        body = await self._post(
            self._body(
                prompt_ids,
                max_tokens=1,
                temperature=0.0,
                logprobs=len(wanted),  # required beside logprob_token_ids; they take precedence
                logprob_token_ids=wanted,
                return_tokens_as_token_ids=True,
            )
        )
        return _token_logprobs(_choice(body)), _usage(body)

    async def check_logprob_token_ids(self) -> None:
        """Refuse a server that ignores ``logprob_token_ids`` (it would answer a top-k).

        The probe asks for the labels and the last id of the vocabulary, which no top-k of a
        short prompt holds; all of them must come back.
        """
        wanted = [*self._pos_ids, *self._neg_ids, _last_id(self._tokenizer)]
        try:
            got, _ = await self._read_ids(encode(self._tokenizer, PROBE_TEXT), wanted)
        except EngineFailure as exc:
            raise EngineFailure(f"{_NO_TOKEN_IDS}: the probe failed: {exc}") from exc
        missing = [i for i in wanted if i not in got]
        if missing:
            raise EngineFailure(f"{_NO_TOKEN_IDS}: ids {missing} missing from the answer")

    async def _options_one(self, call: OptionCall) -> OptionResult:
        wanted = list(dict.fromkeys(i for ids in call.option_ids for i in ids))
        got, usage = await self._read_ids(call.prompt_ids, wanted)
        try:
            values = [logsumexp([got[i] for i in ids]) for ids in call.option_ids]
        except KeyError as exc:
            raise EngineFailure(f"token {exc} missing from the remote engine's logprobs") from exc
        return OptionResult(logprobs=values, usage=usage)

    async def option_logprobs(self, calls: Sequence[OptionCall]) -> list[OptionResult]:
        return list(await asyncio.gather(*(self._options_one(c) for c in calls)))

    async def _verdict(self, ids: Sequence[int]) -> tuple[float, TokenUsage]:
        read = await self._options_one(OptionCall(ids, [self._pos_ids, self._neg_ids]))
        pos, neg = read.logprobs
        return pos - neg, read.usage

    async def judge(self, calls: Sequence[JudgeCall]) -> list[JudgeResult]:
        return list(
            await asyncio.gather(
                *(judge_one(c, self._tokenizer, self._verdict, self._generate_one) for c in calls)
            )
        )

    async def _generate_one(self, call: GenerateCall) -> GenerateResult:
        self._check_fits(len(call.prompt_ids), call.max_tokens)
        fields: dict[str, Any] = {"max_tokens": call.max_tokens, "temperature": call.temperature}
        if call.seed is not None:
            fields["seed"] = call.seed
        if call.stop:
            fields["stop"] = list(call.stop)
        body = await self._post(self._body(call.prompt_ids, **fields))
        choice = _choice(body)
        stop = choice.get("stop_reason")
        return GenerateResult(
            text=str(choice.get("text") or ""),
            finish_reason=choice.get("finish_reason"),
            stop_reason=stop if isinstance(stop, str) else None,
            usage=_usage(body),
        )

    async def generate(self, calls: Sequence[GenerateCall]) -> list[GenerateResult]:
        return list(await asyncio.gather(*(self._generate_one(c) for c in calls)))

    async def _prompt_logprobs(
        self, prompt_ids: Sequence[int], top: int
    ) -> tuple[list[dict[int, float] | None], TokenUsage]:
        self._check_fits(len(prompt_ids), 1)
        body = await self._post(
            self._body(prompt_ids, max_tokens=1, temperature=0.0, prompt_logprobs=top)
        )
        return _prompt_table(_choice(body)), _usage(body)

    async def slot_logits(self, prompt_ids: Sequence[int], slots: Sequence[int]) -> SlotLogits:
        """As the in-process engine: one prefill with prompt logprobs; a slot whose other label
        is outside the top-k is re-scored exactly with ``logprob_token_ids``."""
        table, usage = await self._prompt_logprobs(prompt_ids, PROMPT_TOPK)
        logits: list[float | None] = [
            pair_logit(table[s] if s < len(table) else None, self._pos_ids, self._neg_ids)
            for s in slots
        ]
        return await fill_slots(logits, slots, prompt_ids, self._verdict, usage)

    async def _span_one(self, call: SpanCall) -> SpanResult:
        ids = list(call.prompt_ids)
        if not 0 < call.start < len(ids):
            raise EngineFailure(f"span start {call.start} outside the prompt of {len(ids)} tokens")
        table, usage = await self._prompt_logprobs(ids, 0)
        values = []
        for pos in range(call.start, len(ids)):
            entry = table[pos] if pos < len(table) else None
            if not entry or ids[pos] not in entry:
                raise EngineFailure(f"no prompt logprob for position {pos}")
            values.append(entry[ids[pos]])
        return SpanResult(sum(values) / len(values), len(values), usage)

    async def span_logprobs(self, calls: Sequence[SpanCall]) -> list[SpanResult]:
        return list(await asyncio.gather(*(self._span_one(c) for c in calls)))

    async def pool(self, calls: Sequence[PoolCall]) -> list[PoolResult]:
        raise NotServedByModel(
            "class logits need an in-process pooling reward model or PRM; the remote engine "
            "serves a generative judge"
        )

    async def abort(self, request_id: str) -> None:
        # A cancelled call closes its HTTP request, and the remote vLLM aborts on the drop;
        # request ids are the remote's own, so there is nothing to name here.
        return None

    async def check_health(self) -> None:
        try:
            response = await self._http.get("/health", timeout=self._cfg.connect_timeout_s)
        except httpx.HTTPError as exc:
            raise EngineFailure(f"remote engine unreachable: {exc}") from exc
        if response.status_code != 200:
            raise EngineFailure(f"remote engine unhealthy: HTTP {response.status_code}")

    async def shutdown(self) -> None:
        """Close the connections; the remote server is not ours to stop."""
        await self._http.aclose()


_NO_TOKEN_IDS = (
    "the remote engine does not honour `logprob_token_ids` on /v1/completions (vLLM >= 0.32 "
    "does); without it label probabilities would come from a top-k and scores would be "
    "wrong, so the service does not start"
)


def _variants(tokenizer: Tokenizer, label: str) -> list[int]:
    try:
        return token_variants(tokenizer, label)
    except ValueError as exc:
        raise EngineFailure(str(exc)) from exc


def _last_id(tokenizer: Tokenizer) -> int:
    return int(len(tokenizer)) - 1  # type: ignore[arg-type]


def _load_tokenizer(path: str) -> Tokenizer:
    from transformers import AutoTokenizer

    return cast(Tokenizer, AutoTokenizer.from_pretrained(path))


async def _served_model(
    http: httpx.AsyncClient, cfg: OpenAIEngineSettings, env: str
) -> dict[str, Any]:
    """The model card to use: the configured name, or the server's only model (``env``: the
    settings' prefix, named in the errors)."""
    try:
        response = await http.get("/v1/models", timeout=cfg.connect_timeout_s + 10)
        response.raise_for_status()
        cards: list[dict[str, Any]] = response.json().get("data") or []
    except (httpx.HTTPError, ValueError) as exc:
        raise EngineFailure(
            f"remote engine at {api_root(cfg.base_url)} did not list its models: {exc}; check "
            f"{env}__BASE_URL"
        ) from exc
    if cfg.model:
        for card in cards:
            if card.get("id") == cfg.model:
                return card
        names = [c.get("id") for c in cards]
        raise EngineFailure(f"remote engine does not serve {cfg.model!r}; it serves {names}")
    if len(cards) != 1:
        names = [c.get("id") for c in cards]
        raise EngineFailure(f"remote engine serves {names}; set {env}__MODEL to one of them")
    return cards[0]
