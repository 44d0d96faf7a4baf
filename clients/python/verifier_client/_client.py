"""``Client`` and ``AsyncClient``: the same methods, one per endpoint; only the I/O differs.

Each call validates its body against the generated request model, sends it with an
idempotency key that stays the same across retries, and returns the typed response.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from pydantic import BaseModel
from tenacity import AsyncRetrying, Retrying

from verifier_client import _base as b
from verifier_client import models as m
from verifier_client._retry import RetryPolicy, tenacity_kwargs

Resp = TypeVar("Resp", bound=BaseModel)


class _Options:
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout: httpx.Timeout | float,
        retry: RetryPolicy | None,
        headers: dict[str, str] | None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.retry = retry or RetryPolicy()
        self.headers = b.default_headers(api_key, headers)


class Client:
    """Blocking client. ``Client(base_url, api_key=..., timeout=..., retry=RetryPolicy(...))``;
    ``transport`` is injectable (e.g. ``httpx.MockTransport``, or a WSGI/ASGI bridge)."""

    def __init__(
        self,
        base_url: str = b.DEFAULT_BASE_URL,
        *,
        api_key: str | None = None,
        timeout: httpx.Timeout | float = b.DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        opts = _Options(base_url, api_key, timeout, retry, headers)
        self._retry = opts.retry
        self._http = httpx.Client(
            base_url=opts.base_url, timeout=opts.timeout, headers=opts.headers, transport=transport
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(
        self,
        endpoint: b.Endpoint[Any, Resp],
        request: BaseModel | None = None,
        fields: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        path_id: str | None = None,
    ) -> Resp | None:
        prep = b.build_request(
            endpoint, request, fields or {}, idempotency_key=idempotency_key, path_id=path_id
        )
        for attempt in Retrying(**tenacity_kwargs(self._retry)):
            with attempt:
                try:
                    response = self._http.request(
                        prep.method, prep.path, json=prep.json, headers=prep.headers
                    )
                except httpx.TransportError as exc:
                    raise b.transport_error(exc) from exc
                return b.parse_response(endpoint, response)
        raise AssertionError("unreachable: tenacity re-raises the last error")

    def _must(self, endpoint: b.Endpoint[Any, Resp], *args: Any, **kw: Any) -> Resp:
        out = self._call(endpoint, *args, **kw)
        assert out is not None
        return out

    # --- judging ---------------------------------------------------------------------------
    def outcome(
        self,
        request: m.OutcomeRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.OutcomeResponse:
        """POST /v1/judge/outcome: P(correct) of one response to one question."""
        return self._must(b.OUTCOME, request, fields, idempotency_key=idempotency_key)

    def process(
        self,
        request: m.ProcessRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.ProcessResponse:
        """POST /v1/judge/process: a score per step, aggregated; the first error."""
        return self._must(b.PROCESS, request, fields, idempotency_key=idempotency_key)

    def split(
        self,
        request: m.SplitRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.SplitResponse:
        """POST /v1/split: a response cut into steps."""
        return self._must(b.SPLIT, request, fields, idempotency_key=idempotency_key)

    def score(
        self,
        request: m.ScoreRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.ScoreResponse:
        """POST /v1/score: outcome, process and fused scores of many responses."""
        return self._must(b.SCORE, request, fields, idempotency_key=idempotency_key)

    def rerank(
        self,
        request: m.RerankRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.RerankResponse:
        """POST /v1/rerank: Best-of-N, best first."""
        return self._must(b.RERANK, request, fields, idempotency_key=idempotency_key)

    def compare(
        self,
        request: m.CompareRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.CompareResponse:
        """POST /v1/judge/compare: responses compared together (pairwise or listwise), position
        bias removed; rewards, ranking and the preference matrix."""
        return self._must(b.COMPARE, request, fields, idempotency_key=idempotency_key)

    def rewards(
        self,
        request: m.RewardsRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.RewardsResponse:
        """POST /v1/rewards: a mixed RL batch, each item verified by its own spec (math, choice,
        string, model, rubric, reward_model, code) or named components; with deadline_s,
        answered on time with what was not decided flagged."""
        return self._must(b.REWARDS, request, fields, idempotency_key=idempotency_key)

    def decide(
        self,
        request: m.DecisionRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.DecisionResponse:
        """POST /v1/decisions (OpenAI's Decisions API shape): typed answers (predicate, choice,
        score) about one input, from exact label probabilities."""
        return self._must(b.DECIDE, request, fields, idempotency_key=idempotency_key)

    def result(self, job_id: str) -> dict[str, Any]:
        """GET /v1/results/{job_id}: a stored result (the body of the original answer)."""
        for attempt in Retrying(**tenacity_kwargs(self._retry)):
            with attempt:
                try:
                    response = self._http.get(f"/v1/results/{job_id}")
                except httpx.TransportError as exc:
                    raise b.transport_error(exc) from exc
                return b.parse_json_object(response)
        raise AssertionError("unreachable: tenacity re-raises the last error")

    # --- multiple choice --------------------------------------------------------------------
    def mcq_answer(
        self,
        request: m.MCQAnswerRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.MCQAnswerResponse:
        """POST /v1/mcq/answer: the option the model believes, raw and debiased."""
        return self._must(b.MCQ_ANSWER, request, fields, idempotency_key=idempotency_key)

    def mcq_answer_batch(
        self,
        request: m.MCQBatchRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.MCQBatchResponse:
        """POST /v1/mcq/answer/batch: many items, one request."""
        return self._must(b.MCQ_BATCH, request, fields, idempotency_key=idempotency_key)

    def create_calibration(
        self,
        request: m.CalibrationRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.CalibrationResponse:
        """POST /v1/mcq/calibrations: fit and store a debiasing calibration."""
        return self._must(b.CALIBRATE, request, fields, idempotency_key=idempotency_key)

    def mcq_audit(
        self,
        request: m.AuditRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.AuditResponse:
        """POST /v1/mcq/audit: full vs choices-only x base vs reason, per item and summed up."""
        return self._must(b.MCQ_AUDIT, request, fields, idempotency_key=idempotency_key)

    def popmcq(
        self,
        request: m.PopMCQRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.PopMCQResponse:
        """POST /v1/mcq/popmcq: S1-S6 from candidate pools, metrics per debiasing method."""
        return self._must(b.POPMCQ, request, fields, idempotency_key=idempotency_key)

    def list_calibrations(self) -> m.CalibrationList:
        return self._must(b.CALIBRATIONS)

    def get_calibration(self, calibration_id: str) -> m.Calibration:
        return self._must(b.CALIBRATION, path_id=calibration_id)

    def delete_calibration(self, calibration_id: str) -> None:
        self._call(b.DELETE_CALIBRATION, path_id=calibration_id)

    # --- probability calibrations ------------------------------------------------------------
    def fit_probability_calibration(
        self,
        request: m.ProbabilityCalibrationRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.ProbabilityCalibrationResponse:
        """POST /v1/calibrations: fit and store a probability calibration on labelled
        examples (target outcome or compare)."""
        return self._must(b.FIT_PROBABILITY, request, fields, idempotency_key=idempotency_key)

    def list_probability_calibrations(self) -> m.ProbabilityCalibrationList:
        return self._must(b.PROBABILITY_CALIBRATIONS)

    def get_probability_calibration(self, calibration_id: str) -> m.ProbabilityCalibration:
        return self._must(b.PROBABILITY_CALIBRATION, path_id=calibration_id)

    def delete_probability_calibration(self, calibration_id: str) -> None:
        self._call(b.DELETE_PROBABILITY_CALIBRATION, path_id=calibration_id)

    def calibration_defaults(self) -> m.CalibrationDefaults:
        """This tenant's default probability calibration per target."""
        return self._must(b.CALIBRATION_DEFAULTS)

    def set_calibration_default(self, target: str, calibration_id: str) -> m.CalibrationDefaults:
        return self._must(
            b.SET_CALIBRATION_DEFAULT, None, {"calibration_id": calibration_id}, path_id=target
        )

    def clear_calibration_default(self, target: str) -> None:
        self._call(b.CLEAR_CALIBRATION_DEFAULT, path_id=target)

    # --- service ----------------------------------------------------------------------------
    def models(self) -> m.ModelList:
        return self._must(b.MODELS)

    def ready(self) -> m.Readiness:
        """GET /ready; while the engine starts this retries (503), then raises."""
        return self._must(b.READY)


class AsyncClient:
    """The asyncio twin of ``Client``: same arguments, same methods, awaited."""

    def __init__(
        self,
        base_url: str = b.DEFAULT_BASE_URL,
        *,
        api_key: str | None = None,
        timeout: httpx.Timeout | float = b.DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        limits: httpx.Limits | None = None,
    ) -> None:
        opts = _Options(base_url, api_key, timeout, retry, headers)
        self._retry = opts.retry
        self._http = httpx.AsyncClient(
            base_url=opts.base_url,
            timeout=opts.timeout,
            headers=opts.headers,
            transport=transport,
            limits=limits or httpx.Limits(max_connections=100, max_keepalive_connections=20),
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(
        self,
        endpoint: b.Endpoint[Any, Resp],
        request: BaseModel | None = None,
        fields: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        path_id: str | None = None,
    ) -> Resp | None:
        prep = b.build_request(
            endpoint, request, fields or {}, idempotency_key=idempotency_key, path_id=path_id
        )
        async for attempt in AsyncRetrying(**tenacity_kwargs(self._retry)):
            with attempt:
                try:
                    response = await self._http.request(
                        prep.method, prep.path, json=prep.json, headers=prep.headers
                    )
                except httpx.TransportError as exc:
                    raise b.transport_error(exc) from exc
                return b.parse_response(endpoint, response)
        raise AssertionError("unreachable: tenacity re-raises the last error")

    async def _must(self, endpoint: b.Endpoint[Any, Resp], *args: Any, **kw: Any) -> Resp:
        out = await self._call(endpoint, *args, **kw)
        assert out is not None
        return out

    # --- judging ---------------------------------------------------------------------------
    async def outcome(
        self,
        request: m.OutcomeRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.OutcomeResponse:
        """POST /v1/judge/outcome: P(correct) of one response to one question."""
        return await self._must(b.OUTCOME, request, fields, idempotency_key=idempotency_key)

    async def process(
        self,
        request: m.ProcessRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.ProcessResponse:
        """POST /v1/judge/process: a score per step, aggregated; the first error."""
        return await self._must(b.PROCESS, request, fields, idempotency_key=idempotency_key)

    async def split(
        self,
        request: m.SplitRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.SplitResponse:
        """POST /v1/split: a response cut into steps."""
        return await self._must(b.SPLIT, request, fields, idempotency_key=idempotency_key)

    async def score(
        self,
        request: m.ScoreRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.ScoreResponse:
        """POST /v1/score: outcome, process and fused scores of many responses."""
        return await self._must(b.SCORE, request, fields, idempotency_key=idempotency_key)

    async def rerank(
        self,
        request: m.RerankRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.RerankResponse:
        """POST /v1/rerank: Best-of-N, best first."""
        return await self._must(b.RERANK, request, fields, idempotency_key=idempotency_key)

    async def compare(
        self,
        request: m.CompareRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.CompareResponse:
        """POST /v1/judge/compare: responses compared together (pairwise or listwise), position
        bias removed; rewards, ranking and the preference matrix."""
        return await self._must(b.COMPARE, request, fields, idempotency_key=idempotency_key)

    async def rewards(
        self,
        request: m.RewardsRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.RewardsResponse:
        """POST /v1/rewards: a mixed RL batch, each item verified by its own spec (math, choice,
        string, model, rubric, reward_model, code) or named components; with deadline_s,
        answered on time with what was not decided flagged."""
        return await self._must(b.REWARDS, request, fields, idempotency_key=idempotency_key)

    async def decide(
        self,
        request: m.DecisionRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.DecisionResponse:
        """POST /v1/decisions (OpenAI's Decisions API shape): typed answers (predicate, choice,
        score) about one input, from exact label probabilities."""
        return await self._must(b.DECIDE, request, fields, idempotency_key=idempotency_key)

    async def result(self, job_id: str) -> dict[str, Any]:
        """GET /v1/results/{job_id}: a stored result (the body of the original answer)."""
        async for attempt in AsyncRetrying(**tenacity_kwargs(self._retry)):
            with attempt:
                try:
                    response = await self._http.get(f"/v1/results/{job_id}")
                except httpx.TransportError as exc:
                    raise b.transport_error(exc) from exc
                return b.parse_json_object(response)
        raise AssertionError("unreachable: tenacity re-raises the last error")

    # --- multiple choice --------------------------------------------------------------------
    async def mcq_answer(
        self,
        request: m.MCQAnswerRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.MCQAnswerResponse:
        """POST /v1/mcq/answer: the option the model believes, raw and debiased."""
        return await self._must(b.MCQ_ANSWER, request, fields, idempotency_key=idempotency_key)

    async def mcq_answer_batch(
        self,
        request: m.MCQBatchRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.MCQBatchResponse:
        """POST /v1/mcq/answer/batch: many items, one request."""
        return await self._must(b.MCQ_BATCH, request, fields, idempotency_key=idempotency_key)

    async def create_calibration(
        self,
        request: m.CalibrationRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.CalibrationResponse:
        """POST /v1/mcq/calibrations: fit and store a debiasing calibration."""
        return await self._must(b.CALIBRATE, request, fields, idempotency_key=idempotency_key)

    async def mcq_audit(
        self,
        request: m.AuditRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.AuditResponse:
        """POST /v1/mcq/audit: full vs choices-only x base vs reason, per item and summed up."""
        return await self._must(b.MCQ_AUDIT, request, fields, idempotency_key=idempotency_key)

    async def popmcq(
        self,
        request: m.PopMCQRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.PopMCQResponse:
        """POST /v1/mcq/popmcq: S1-S6 from candidate pools, metrics per debiasing method."""
        return await self._must(b.POPMCQ, request, fields, idempotency_key=idempotency_key)

    async def list_calibrations(self) -> m.CalibrationList:
        return await self._must(b.CALIBRATIONS)

    async def get_calibration(self, calibration_id: str) -> m.Calibration:
        return await self._must(b.CALIBRATION, path_id=calibration_id)

    async def delete_calibration(self, calibration_id: str) -> None:
        await self._call(b.DELETE_CALIBRATION, path_id=calibration_id)

    # --- probability calibrations ------------------------------------------------------------
    async def fit_probability_calibration(
        self,
        request: m.ProbabilityCalibrationRequest | None = None,
        /,
        *,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.ProbabilityCalibrationResponse:
        """POST /v1/calibrations: fit and store a probability calibration on labelled
        examples (target outcome or compare)."""
        return await self._must(b.FIT_PROBABILITY, request, fields, idempotency_key=idempotency_key)

    async def list_probability_calibrations(self) -> m.ProbabilityCalibrationList:
        return await self._must(b.PROBABILITY_CALIBRATIONS)

    async def get_probability_calibration(self, calibration_id: str) -> m.ProbabilityCalibration:
        return await self._must(b.PROBABILITY_CALIBRATION, path_id=calibration_id)

    async def delete_probability_calibration(self, calibration_id: str) -> None:
        await self._call(b.DELETE_PROBABILITY_CALIBRATION, path_id=calibration_id)

    async def calibration_defaults(self) -> m.CalibrationDefaults:
        """This tenant's default probability calibration per target."""
        return await self._must(b.CALIBRATION_DEFAULTS)

    async def set_calibration_default(
        self, target: str, calibration_id: str
    ) -> m.CalibrationDefaults:
        return await self._must(
            b.SET_CALIBRATION_DEFAULT, None, {"calibration_id": calibration_id}, path_id=target
        )

    async def clear_calibration_default(self, target: str) -> None:
        await self._call(b.CLEAR_CALIBRATION_DEFAULT, path_id=target)

    # --- service ----------------------------------------------------------------------------
    async def models(self) -> m.ModelList:
        return await self._must(b.MODELS)

    async def ready(self) -> m.Readiness:
        """GET /ready; while the engine starts this retries (503), then raises."""
        return await self._must(b.READY)
