"""Wire models of code verification: test cases sent with a judgment, what each case did,
and ``POST /run_code`` in SandboxFusion's request and response shape (docs/api.md).

A test case is stdin/stdout (``{"input", "output"}``: the response's program reads ``input``
and must print ``output``) or assertion code (``{"assert": "assert f(2) == 4"}``, or the bare
string), run after the response's code in one interpreter.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.protocol.base import Metered, ServiceModel
from service.protocol.limits import Text

MAX_TESTS: Final = 64
CodeReward = Literal["all_pass", "fraction"]
CaseStatus = Literal["passed", "failed", "timeout", "error"]


class CodeCase(ServiceModel):
    """One test case: stdin/stdout, or assertion code."""

    # `assert` is a keyword: the field is assert_ and travels as "assert" both ways (the job
    # payload the worker reads back included).
    model_config = ConfigDict(
        **ServiceModel.model_config, validate_by_name=True, serialize_by_alias=True
    )

    input: Annotated[str | None, Text] = Field(
        default=None, description="stdin of the program (stdin/stdout cases)."
    )
    output: Annotated[str | None, Text] = Field(
        default=None,
        description="The expected stdout; compared line by line, trailing whitespace and "
        "trailing blank lines ignored.",
    )
    assert_: Annotated[str | None, Text] = Field(
        default=None,
        alias="assert",
        description="Python run after the response's code in the same namespace; the case "
        "passes if it runs to its end (e.g. `assert f(2) == 4`, or HumanEval's `check(f)`).",
    )

    @model_validator(mode="before")
    @classmethod
    def _bare(cls, data: Any) -> Any:
        return {"assert": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _one_kind(self) -> CodeCase:
        if (self.assert_ is None) == (self.output is None):
            raise ValueError(
                "a test case is either {'input', 'output'} (stdin/stdout) or {'assert': code}"
            )
        if self.assert_ is not None and self.input is not None:
            raise ValueError("an 'assert' case takes no 'input'")
        return self


class CodeTests(ServiceModel):
    """How a response's code is tested: the fields a judgment takes beside ``tests``."""

    tests: list[CodeCase] | None = Field(
        default=None,
        description="Test cases the response's code is run against in the sandbox (needs "
        "VERIFIER_CODE__ENABLED); the result is decided_by 'code'.",
    )
    language: str = Field(
        default="python",
        description="The language of the response's code (its last fenced block in that "
        "language, else its last untagged block, else the whole response when it has no "
        "fence). `python`; `bash` and `nodejs` where the host has them (/v1/models lists "
        "code_languages). Assertion cases need python.",
    )
    test_timeout_s: float | None = Field(
        default=None, gt=0, description="Wall time per case; default VERIFIER_CODE__RUN_TIMEOUT_S."
    )
    code_reward: CodeReward | None = Field(
        default=None,
        description="all_pass: 1 only if every case passes; fraction: the share that pass. "
        "Default VERIFIER_CODE__REWARD.",
    )

    @model_validator(mode="after")
    def _cases(self) -> CodeTests:
        if self.tests is not None and not 1 <= len(self.tests) <= MAX_TESTS:
            raise ValueError(f"tests has {len(self.tests)} cases; send 1 to {MAX_TESTS}")
        return self


class CaseResult(BaseModel):
    status: CaseStatus
    time_ms: float = Field(description="Wall time of the case's run, sandbox start included.")
    stderr_tail: str = Field(default="", description="The last 500 characters of stderr.")


class CodeResult(BaseModel):
    """What the tests said of one response."""

    reward: float = Field(description="1/0 for all_pass, the pass share for fraction.")
    passed: int
    total: int
    reward_rule: CodeReward
    cases: list[CaseResult]
    reason: str | None = Field(
        default=None, description="Why no case ran (e.g. no code block in the language)."
    )


# --- POST /run_code: SandboxFusion's shape -------------------------------------------------


class RunCodeRequest(ServiceModel):
    """SandboxFusion's ``RunCodeRequest`` (what verl's and ROLL's sandbox clients send)."""

    code: Annotated[str, Text]
    language: str = Field(
        description="python (python3 accepted), bash and nodejs (javascript) where present."
    )
    stdin: Annotated[str | None, Text] = None
    compile_timeout: float = Field(default=10.0, description="Unused: no compiled language.")
    run_timeout: float = Field(
        default=10.0, gt=0, description="Wall seconds; capped by VERIFIER_CODE__MAX_RUN_TIMEOUT_S."
    )
    memory_limit_MB: int = Field(
        default=-1, description="-1: the setting; lower than VERIFIER_CODE__MEMORY_MB applies."
    )
    files: dict[str, str | None] = Field(
        default_factory=dict,
        description="Path (relative to the scratch directory) -> base64 content, written first.",
    )
    fetch_files: list[str] = Field(
        default_factory=list,
        description="Not returned: the scratch directory is gone when the run ends. A request "
        "that names files gets a 422.",
    )


class CommandRunResult(BaseModel):
    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str = ""
    stderr: str = ""


class RunCodeResponse(Metered):
    """SandboxFusion's ``RunCodeResponse``; ``usage`` counts no engine tokens."""

    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
