"""Settings, read once from the environment (prefix ``VERIFIER_``, nested groups with ``__``).

Example: ``VERIFIER_ENGINE__MODEL=/models/qwen VERIFIER_LIMITS__MAX_SAMPLES=8 verifier serve``.
No other module reads ``os.environ``.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.kinds import JobKind

# The project's own data/ beside the package, found from this file rather than the working
# directory, so every command and test reads the same files wherever it is started.
PROJECT_DATA = Path(__file__).resolve().parent.parent / "data"

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"


def _default_cache() -> Path:
    return Path.home() / ".cache" / "verifier-service"


class SettingsGroup(BaseModel):
    """A nested settings group: an unknown name is refused, naming the group's valid ones.

    A typo such as ``VERIFIER_QUEUE__MAX_QUEUE_DEPHT`` would otherwise be dropped in silence
    and the default used. ``_renamed`` maps an old name to the setting that replaced it.
    """

    model_config = ConfigDict(extra="forbid")

    _renamed: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _known_names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name in data:
            key = str(name)
            if key in cls.model_fields:
                continue
            new = cls._renamed.get(key.lower())
            if new is not None:
                raise ValueError(f"{key} was renamed: set {new} instead")
            valid = sorted(cls.model_fields)
            close = difflib.get_close_matches(key.lower(), valid, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(f"unknown setting {key!r}; {hint}valid names: {', '.join(valid)}")
        return data


class RedisSettings(SettingsGroup):
    """Every Redis client of the service: queue, keys and quotas, judgment cache, calibrations.

    The server itself is ``VERIFIER_REDIS_URL`` (top level: setting it switches Redis on).
    """

    prefix: str = Field(
        default="verifier:",
        description="Prefix of every Redis key (service/stores/keys.py); one per deployment "
        "sharing a Redis.",
    )
    timeout_s: float = Field(
        default=2.0, gt=0, description="Connect and socket timeout of every Redis call."
    )


class OpenAIEngineSettings(SettingsGroup):
    """A remote OpenAI-compatible server (``engine.backend=openai``), e.g. a vLLM fleet."""

    base_url: str = Field(
        default="http://127.0.0.1:8001",
        description="The server's root (a trailing /v1 is accepted).",
    )
    api_key: str = Field(default="", description="Sent as a bearer token when set.")
    model: str = Field(
        default="", description="The model name the server serves; empty = its only model."
    )
    tokenizer: str = Field(
        default="",
        description="Local HF folder or hub id of the served model's tokenizer; empty = "
        "engine.model, else the embedded default (prompts are built here as token ids).",
    )
    timeout_s: float = Field(default=300.0, gt=0, description="Read timeout per call.")
    connect_timeout_s: float = Field(default=5.0, gt=0, description="Connect timeout per call.")
    retries: int = Field(
        default=4, ge=0, description="Retries on 429, 502-504 and connection errors (backoff)."
    )
    max_connections: int = Field(default=256, ge=1, description="Concurrent calls to it.")


EngineKind = Literal["auto", "generative", "reward", "process_reward"]


class EngineSettings(SettingsGroup):
    """How the engine is built. An empty ``model`` means the embedded default."""

    backend: Literal["vllm", "openai"] = Field(
        default="vllm",
        description="vllm: in-process engine; openai: a remote OpenAI-compatible server "
        "(settings under engine.openai; no local vLLM needed).",
    )
    openai: OpenAIEngineSettings = Field(default_factory=OpenAIEngineSettings)
    model: str = Field(
        default="",
        description="Local HF folder or hub id; empty = the embedded SmolLM2-135M-Instruct.",
    )
    served_model_name: str = Field(default="", description="Name shown in /v1/models.")
    dtype: str = Field(
        default="auto",
        description="'auto': bfloat16 on a CPU with native bf16 (AVX512-BF16 or AMX), float32 "
        "on other CPUs (bf16 is emulated there, ~5x slower), the model's own on GPU.",
    )
    head_dtype: Literal["model", "float32"] = Field(
        default="model",
        description="float32: the lm_head (verdict logits) in float32 over a bf16 body, "
        "vLLM's hf_overrides head_dtype (docs/methods.md I.5).",
    )
    max_model_len: int = Field(default=4096, ge=256, description="Context length in tokens.")
    enforce_eager: bool = Field(
        default=True, description="Eager starts in ~18 s; compiled in ~98 s but runs ~25% faster."
    )
    enable_prefix_caching: bool = Field(
        default=True, description="vLLM prefix caching (process steps share their prefix)."
    )
    block_size: int | None = Field(
        default=None,
        ge=1,
        description="KV block size = prefix-cache granularity. Unset: 32 on CPU (vLLM's CPU "
        "default of 128 made multi-step process scoring recompute ~1.5x a full pass instead "
        "of ~1.03x, and run 30% slower), vLLM's own default on GPU.",
    )
    max_num_seqs: int = Field(default=256, ge=1, description="vLLM's cap on sequences per batch.")
    seed: int = Field(default=0, description="vLLM's seed.")
    one_call_reasoning: bool = Field(
        default=True,
        description="Read a reasoning judgment's verdict inside its rationale's own request "
        "(see one_call_mode); off: a second request reads it. Scores are the same either way.",
    )
    one_call_mode: Literal["session", "forced"] = Field(
        default="session",
        description="How one request reads the verdict. session: the request is a vLLM "
        "streaming-input session whose second chunk, queued with the first, prefills the "
        "verdict line where the rationale stopped; forced: a logits processor forces the line "
        "token by token, one decode step each.",
    )
    kind: EngineKind = Field(
        default="auto",
        description="auto: from the model's architecture (*ForSequenceClassification and "
        "*ForRewardModel: reward; *ForProcessRewardModel: process_reward; else generative). "
        "reward and process_reward run vLLM's pooling runner (docs/methods.md G).",
    )
    step_tag: str | None = Field(
        default=None,
        description="process_reward: the token that ends each step, read where it stands. "
        "Unset: the architecture's own (Qwen2ForProcessRewardModel: <extra_0>).",
    )
    returned_token_ids: list[int] | None = Field(
        default=None,
        description="process_reward (STEP pooling): the columns of the head's output kept at "
        "each step tag, vLLM's returned_token_ids (e.g. the ids of '+' and '-' for a PRM read "
        "from an LM head); positive_class then indexes these.",
    )
    positive_class: int = Field(
        default=1,
        ge=0,
        description="Pooling models with two or more classes: the class that means 'good' "
        "(its probability is the score). A one-logit head is its own reward.",
    )
    reward_system_prompt: str | None = Field(
        default=None,
        description="Pooling models: a system message put before the question, for RMs and "
        "PRMs trained with one (Qwen2.5-Math-PRM: 'Please reason step by step, and put your "
        "final answer within \\boxed{}.').",
    )
    lora_adapters: dict[str, str] = Field(
        default_factory=dict,
        description="LoRA adapters of the served generative model, name -> local PEFT folder "
        '(JSON, e.g. \'{"terse": "/adapters/terse"}\'); a request names one with '
        '`model: "<served name>:<adapter>"` (docs/api.md, "Models and adapters").',
    )
    max_lora_rank: int = Field(
        default=16, ge=1, description="The largest adapter rank the engine accepts (vLLM)."
    )
    max_loras: int = Field(
        default=4, ge=1, description="Adapters one engine batch may hold at once (vLLM)."
    )
    # CPU-only knobs (ignored by GPU builds of vLLM).
    cpu_kvcache_gib: int = Field(default=2, ge=1, description="VLLM_CPU_KVCACHE_SPACE in GiB.")
    cpu_threads_bind: str = Field(
        default="all",
        description="'all' binds every core (vLLM's 'auto' left one of two idle), or a list '0-1'.",
    )
    gpu_memory_utilization: float = Field(
        default=0.85, gt=0, le=1, description="GPU only: share of GPU memory vLLM may take."
    )
    tensor_parallel_size: int = Field(default=1, ge=1, description="GPUs per engine.")


# A model's name becomes part of Redis key names and of '<name>:<adapter>' ids.
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class ModelEntry(SettingsGroup):
    """One named model of ``VERIFIER_MODELS``: the engine group's settings, with this entry's
    ``model``, ``kind`` and ``engine`` in their place."""

    name: str = Field(
        pattern=MODEL_NAME_PATTERN,
        description="What requests put in `model` and /v1/models lists (letters, digits, "
        "'.', '_', '-').",
    )
    model: str = Field(
        default="",
        description="Local HF folder or hub id; empty = the embedded SmolLM2-135M-Instruct.",
    )
    kind: EngineKind = Field(default="auto", description="As engine.kind, for this model.")
    engine: dict[str, Any] = Field(
        default_factory=dict,
        description="Other engine settings of this model, named as in the engine group "
        '(e.g. {"dtype": "float32", "lora_adapters": {...}}); unset ones are the group\'s.',
    )

    @model_validator(mode="after")
    def _own_fields(self) -> ModelEntry:
        named = sorted(set(self.engine) & {"model", "kind", "served_model_name"})
        if named:
            raise ValueError(
                f"models[{self.name!r}].engine sets {', '.join(named)}: set the entry's own "
                "model and kind; its name is the served name"
            )
        return self


class AuditSettings(SettingsGroup):
    """The choices-only audit (docs/methods.md C): an optional remote judge of its traces."""

    remote_judge: bool = Field(
        default=False,
        description="Start a remote OpenAI-compatible judge (settings under audit.judge) that "
        "an audit may name to predict its traces' letters (trace_judge: remote), so a "
        "stronger model can judge a weaker one's traces.",
    )
    judge: OpenAIEngineSettings = Field(
        default_factory=OpenAIEngineSettings,
        description="The remote judge; its tokenizer (judge.tokenizer) defaults to the served "
        "model's, right only when both share one.",
    )


class RankingSettings(SettingsGroup):
    """How /v1/score and /v1/rerank report scores closer than the engine can tell apart."""

    tie_tolerance: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Scores (probabilities) closer than this are reported as tied (`ties`); "
        "unset: from the engine dtype, bf16 2^-8, fp16 2^-11, fp32 2^-14 (docs/methods.md I.3); "
        "0 reports no ties.",
    )


class LimitSettings(SettingsGroup):
    """Request limits; violations are 422 (fields) or 413 (sizes), never 500."""

    max_text_chars: int = Field(
        default=32_000,
        ge=1,
        description="Per text field; over = 413 (a reference or criteria: 422).",
    )
    max_body_bytes: int = Field(default=8_000_000, ge=1024, description="Whole body; over = 413.")
    max_samples: int = Field(default=16, ge=1, description="Sampled rationales per judgment.")
    max_reasoning_tokens: int = Field(
        default=1024, ge=1, description="Rationale budget per sample (reasoning_tokens)."
    )
    max_steps: int = Field(default=128, ge=1, description="Steps per response.")
    max_documents: int = Field(default=512, ge=1, description="Responses per score/rerank.")
    request_timeout_s: float = Field(
        default=300.0, gt=0, description="Per-request deadline; over = 504, the job is cancelled."
    )


class QueueSettings(SettingsGroup):
    """Batching and delivery (local queue, or Redis Streams when VERIFIER_REDIS_URL is set)."""

    max_batch_jobs: int = Field(default=32, ge=1, description="Jobs per pull.")
    max_batch_tokens: int = Field(default=65_536, ge=1, description="Estimated tokens per pull.")
    max_inflight_jobs: int = Field(
        default=64, ge=1, description="A worker pulls more only while it runs fewer jobs."
    )
    max_inflight_tokens: int = Field(
        default=131_072,
        ge=1,
        description="... and while their estimated tokens are below this (soft by one job).",
    )
    batch_wait_ms: int = Field(default=5, ge=0, description="Wait for more jobs after the first.")
    max_queue_depth: int = Field(default=1024, ge=1, description="Above it: 429 + Retry-After.")
    result_ttl_s: int = Field(
        default=600, ge=1, description="How long results and idempotency records are kept."
    )
    claim_idle_ms: int = Field(default=30_000, ge=100, description="Reclaim jobs idle this long.")
    max_deliveries: int = Field(default=3, ge=1, description="Then the job is dead-lettered.")
    worker_metrics_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="`verifier worker`'s /metrics port. None: the first free port from 9101 "
        "(several workers per host); 0: off; a port: that one, or a one-line error if taken.",
    )
    stuck_grace_s: float = Field(
        default=30.0,
        gt=0,
        description="A job still running this long after its deadline, or a worker loop "
        "silent this long, takes the worker out of service (its process exits 1).",
    )
    worker_stall_s: float = Field(
        default=120.0,
        ge=0,
        description="A worker whose event loop is blocked this long dumps stacks and exits; 0=off.",
    )
    engine_health_s: float = Field(
        default=2.0,
        ge=0,
        description="How often a process that runs an engine checks that it is alive; a dead "
        "engine turns /ready 503, stops the worker and exits the process 1. 0=off.",
    )
    engine_dead_exit_s: float = Field(
        default=3.0,
        ge=0,
        le=600,
        description="`verifier serve` with its engine dead: how long /ready answers 503 (and "
        "requests in flight get their 503) before the process exits 1. Raise it to match a "
        "readiness probe's period.",
    )
    fault_crash_kind: JobKind | None = Field(
        default=None,
        description="Fault injection for tests: a worker exits at once on a job of this kind.",
    )

    # Redis settings moved to their own group (every Redis client reads them, not only the
    # queue's); an old name would otherwise leave every process on the default prefix.
    _renamed: ClassVar[dict[str, str]] = {
        "key_prefix": "VERIFIER_REDIS__PREFIX (redis.prefix)",
        "redis_prefix": "VERIFIER_REDIS__PREFIX (redis.prefix)",
        "redis_timeout_s": "VERIFIER_REDIS__TIMEOUT_S (redis.timeout_s)",
    }


class CacheSettings(SettingsGroup):
    """The judgment cache (Redis when VERIFIER_REDIS_URL is set, else in the worker's memory)."""

    enabled: bool = Field(default=True, description="Answer identical judgments once.")
    ttl_s: int = Field(default=3600, ge=1, description="How long a judgment is kept.")
    max_entries: int = Field(default=100_000, ge=1, description="Oldest evicted beyond this.")


class AuthSettings(SettingsGroup):
    """API-key authentication (``VERIFIER_AUTH__ENABLED=true``)."""

    enabled: bool = Field(
        default=False, description="Bearer API keys on every route but /health and /ready."
    )
    default_window_s: int = Field(default=3600, ge=1, description="Quota window of new keys.")


class RewardSettings(SettingsGroup):
    """The reward routes: ``POST /get_reward`` (OpenRLHF's remote reward model) and the cap
    on every reward route's work in flight."""

    separator: str = Field(
        default="",
        description="Text after which the response starts in a query (last occurrence); empty "
        "= the chat template's assistant marker. A query that starts with its prompt is cut "
        "there first.",
    )
    mode: Literal["direct", "reasoning"] = Field(
        default="direct", description="How each query is judged."
    )
    reasoning_tokens: int = Field(
        default=256, ge=1, description="Rationale budget in reasoning mode."
    )
    max_concurrent_items: int = Field(
        default=4096,
        ge=0,
        description="Reward items (samples) one tenant may have in flight at once, over every "
        "API process (/v1/rewards, /get_reward, slime, /verify); a call past it is a 429 "
        "concurrency_limited. 0 = no cap.",
    )


class RuleSettings(SettingsGroup):
    """The rule verifier (docs/methods.md E): answers compared with a reference, off the loop."""

    workers: int = Field(
        default=2, ge=1, description="Rule-check processes per worker (started at first use)."
    )
    timeout_s: float = Field(
        default=2.0, gt=0, description="Per-check deadline; over it the check is undecided."
    )


class CodeSettings(SettingsGroup):
    """Code execution (docs/reliability.md, "The code sandbox"): off unless enabled, and a
    process that would run code refuses to start when the host cannot confine it."""

    enabled: bool = Field(
        default=False,
        description="Run code sent with requests (/run_code, `tests`, code specs) in the "
        "sandbox: bubblewrap namespaces, rlimits, a dropped uid; needs root and bwrap.",
    )
    python: str = Field(
        default="",
        description="The interpreter runs use; empty: the host's system Python "
        "(/usr/bin/python3, else /usr/local/bin/python3), never the service's own environment.",
    )
    max_concurrency: int = Field(
        default=2, ge=1, le=64, description="Runs at once per worker; more wait their turn."
    )
    run_timeout_s: float = Field(
        default=10.0, gt=0, description="Wall time of one run (one test case) unless asked less."
    )
    max_run_timeout_s: float = Field(
        default=30.0, gt=0, description="The most wall time a request may ask for one run."
    )
    memory_mb: int = Field(
        default=1024, ge=64, description="Address-space cap of a run (RLIMIT_AS), MiB."
    )
    max_processes: int = Field(
        default=32, ge=4, description="Processes and threads of a run's uid (RLIMIT_NPROC)."
    )
    max_file_mb: int = Field(default=16, ge=1, description="Largest file a run may write, MiB.")
    scratch_mb: int = Field(
        default=64, ge=1, description="Size of a run's scratch directory and of its /tmp, MiB."
    )
    max_open_files: int = Field(default=64, ge=16, description="Open files of a run.")
    max_output_kb: int = Field(
        default=1024, ge=1, description="stdout and stderr kept per run, KiB; more ends the run."
    )
    reward: Literal["all_pass", "fraction"] = Field(
        default="all_pass",
        description="A tested response's reward: 1 only if every case passes, or the share "
        "of cases that pass (a request's `code_reward` overrides it).",
    )
    uid_base: int | None = Field(
        default=None,
        ge=1000,
        description="First uid of a worker's runs (one per concurrent run); unset: derived "
        "from the pid, so workers on one host get their own.",
    )


class Settings(BaseSettings):
    """Every setting of the service; docs/configuration.md is generated from it."""

    model_config = SettingsConfigDict(
        env_prefix="VERIFIER_",
        env_nested_delimiter="__",
        env_ignore_empty=True,
        extra="ignore",
    )

    host: str = Field(default="127.0.0.1", description="Bind address.")
    port: int = Field(default=8000, ge=0, le=65535, description="HTTP port.")
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Log level."
    )
    model_cache: Path = Field(
        default_factory=_default_cache,
        description="Prepared models (models/) and vLLM's compile cache (vllm/).",
    )
    data_dir: Path = Field(
        default=PROJECT_DATA,
        description="Public data sets of the evals, benchmarks and tests (data/SOURCES.md).",
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis: queue (Streams), keys, quotas, calibrations, judgment cache; "
        "unset = the local queue in one process.",
    )
    redis: RedisSettings = Field(default_factory=RedisSettings)
    engine: EngineSettings = Field(default_factory=EngineSettings)
    models: list[ModelEntry] = Field(
        default_factory=list,
        description="Several named models behind one API, a JSON list of {name, model, kind, "
        'engine} (docs/api.md, "Models and adapters"); the first answers requests that name '
        "none. Empty: the one model of the engine group, served as engine.served_model_name.",
    )
    limits: LimitSettings = Field(default_factory=LimitSettings)
    ranking: RankingSettings = Field(default_factory=RankingSettings)
    queue: QueueSettings = Field(default_factory=QueueSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    reward: RewardSettings = Field(default_factory=RewardSettings)
    rules: RuleSettings = Field(default_factory=RuleSettings)
    code: CodeSettings = Field(default_factory=CodeSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.auth.enabled and not self.redis_url:
            raise ValueError("VERIFIER_AUTH__ENABLED needs VERIFIER_REDIS_URL (keys live in Redis)")
        names = [entry.name for entry in self.models]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"models: each name must be unique; repeated: {', '.join(repeated)}")
        for entry in self.models:
            try:
                engine = self.engine_of(entry)
            except ValueError as exc:
                raise ValueError(f"models[{entry.name!r}].engine: {exc}") from exc
            self._check_engine(engine, f"models[{entry.name!r}]: ")
        if not self.models:
            self._check_engine(self.engine, "")
        return self

    def _check_engine(self, engine: EngineSettings, where: str) -> None:
        """Checks of one model's engine settings; ``where`` names the entry in messages."""
        if self.limits.max_reasoning_tokens >= engine.max_model_len:
            raise ValueError(
                f"{where}limits.max_reasoning_tokens must be below engine.max_model_len; lower "
                "VERIFIER_LIMITS__MAX_REASONING_TOKENS or raise VERIFIER_ENGINE__MAX_MODEL_LEN"
            )
        for name in engine.lora_adapters:
            if not name or ":" in name or "/" in name:
                raise ValueError(
                    f"{where}engine.lora_adapters: the adapter name {name!r} must be non-empty, "
                    "without ':' or '/' (a request names it as '<served name>:<adapter>')"
                )
        if engine.lora_adapters and engine.backend != "vllm":
            raise ValueError(
                f"{where}engine.lora_adapters needs the in-process engine (engine.backend=vllm); "
                "a remote server serves its own adapters"
            )

    def engine_of(self, entry: ModelEntry) -> EngineSettings:
        """The engine settings of one entry of ``models``."""
        data = self.engine.model_dump()
        data.update(entry.engine)
        data.update(model=entry.model, kind=entry.kind, served_model_name=entry.name)
        return EngineSettings.model_validate(data)

    def for_model(self, name: str) -> Settings:
        """These settings as one entry of ``models`` sees them: its engine, and only it in
        ``models`` (so its name is ``model_name`` and its queue is its own)."""
        for entry in self.models:
            if entry.name == name:
                return self.model_copy(update={"engine": self.engine_of(entry), "models": [entry]})
        served = ", ".join(self.model_names) or self.model_name
        raise KeyError(f"no model {name!r} in VERIFIER_MODELS; served: {served}")

    def by_model(self) -> dict[str, Settings]:
        """Each served model's name and settings (:meth:`for_model`), the default first."""
        if not self.models:
            return {self.model_name: self}
        return {entry.name: self.for_model(entry.name) for entry in self.models}

    @property
    def model_names(self) -> list[str]:
        """The names of the served models, the default first."""
        return [entry.name for entry in self.models] or [self.model_name]

    @property
    def queue_name(self) -> str:
        """The model whose Redis stream this process's queue reads: '' (the unnamed stream)
        without ``models``; a process serving several models has one queue each (for_model)."""
        return self.models[0].name if self.models else ""

    @property
    def model_name(self) -> str:
        """Name reported to clients (the default model's, with ``models``)."""
        if self.models:
            return self.models[0].name
        if self.engine.served_model_name:
            return self.engine.served_model_name
        if not self.engine.model:
            return DEFAULT_MODEL_NAME
        return Path(self.engine.model).name or self.engine.model

    @property
    def vllm_cache_dir(self) -> Path:
        return self.model_cache / "vllm"


def get_settings() -> Settings:
    """Build settings from the environment (called by the CLI and the app factory)."""
    return Settings()
