"""Code verification in the worker: test cases and ``/run_code`` runs through the sandbox pool.

Runs cost no engine tokens (``usage`` stays zero). Without a sandbox (code execution off)
every entry point refuses with a 422 that says how to turn it on.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from dataclasses import dataclass

from service.errors import CodeExecutionDisabled, InvalidRequest
from service.protocol import Usage
from service.protocol.code import (
    CaseResult,
    CodeCase,
    CodeResult,
    CodeTests,
    CommandRunResult,
    RunCodeRequest,
    RunCodeResponse,
)
from service.sandbox.runner import Program, RunResult, Sandbox
from service.scoring import code as checks

# ROLL's sandbox client sends the code fence's tag as the language.
LANGUAGE_ALIASES = {
    "python3": "python",
    "py": "python",
    "sh": "bash",
    "javascript": "nodejs",
    "js": "nodejs",
    "node": "nodejs",
}


@dataclass(frozen=True, slots=True)
class _Case:
    program: Program
    expected: str | None  # stdout of a stdin/stdout case
    marker: str | None  # of an assertion case


class CodeServing:
    def __init__(self, sandbox: Sandbox | None) -> None:
        self._sandbox = sandbox

    @property
    def enabled(self) -> bool:
        return self._sandbox is not None

    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            raise CodeExecutionDisabled()
        return self._sandbox

    def language(self, name: str) -> str:
        """The served language ``name`` stands for, or a 422 naming the served ones."""
        sandbox = self.sandbox()
        lang = LANGUAGE_ALIASES.get(name.lower(), name.lower())
        if lang not in sandbox.languages:
            served = ", ".join(sorted(sandbox.languages))
            raise InvalidRequest(f"language {name!r} is not run here; served: {served}")
        return lang

    def admit(self, tests: CodeTests) -> str:
        """The served language of ``tests``; refused before any work what cannot run: code
        off, a language not served, an assertion case in a language other than python."""
        lang = self.language(tests.language)
        if lang != "python" and any(c.assert_ is not None for c in tests.tests or ()):
            raise InvalidRequest("'assert' cases need language 'python'; send input/output cases")
        return lang

    async def verify(self, response: str, tests: CodeTests) -> CodeResult:
        """Run the response's code against every case (at most the pool's cap at once)."""
        sandbox = self.sandbox()
        lang = self.admit(tests)
        cases = tests.tests or []
        rule = tests.code_reward or sandbox.settings.reward
        code = checks.extract_code(response, lang)
        if code is None:
            reason = f"the response has no {lang} code block"
            failed = [CaseResult(status="error", time_ms=0.0, stderr_tail=reason)] * len(cases)
            return CodeResult(
                reward=0.0,
                passed=0,
                total=len(cases),
                reward_rule=rule,
                cases=failed,
                reason=reason,
            )
        limits = sandbox.limits(tests.test_timeout_s)
        built = [self._case(sandbox, lang, code, c) for c in cases]
        runs = await asyncio.gather(*(sandbox.run(c.program, limits) for c in built))
        results = [_judge(c, r) for c, r in zip(built, runs, strict=True)]
        outcomes = [r.status for r in results]
        return CodeResult(
            reward=checks.reward(outcomes, rule),
            passed=sum(o == "passed" for o in outcomes),
            total=len(results),
            reward_rule=rule,
            cases=results,
        )

    def _case(self, sandbox: Sandbox, lang: str, code: str, case: CodeCase) -> _Case:
        if case.assert_ is not None:
            prog = checks.assertion_program(code, case.assert_)
            files = {path: text.encode() for path, text in prog.files.items() if path != "main.py"}
            return _Case(
                sandbox.program(lang, prog.files["main.py"], files=files), None, prog.marker
            )
        return _Case(sandbox.program(lang, code, stdin=case.input or ""), case.output, None)

    async def run_code(self, req: RunCodeRequest) -> RunCodeResponse:
        """One run in SandboxFusion's shape: Success when it finished with exit code 0,
        Failed on another exit code or a timeout, SandboxError when the sandbox failed."""
        sandbox = self.sandbox()
        lang = self.language(req.language)
        if req.fetch_files:
            raise InvalidRequest(
                "fetch_files is not supported: a run's scratch directory ends with the run "
                "(print what you need to stdout)"
            )
        files = _decode_files(req.files)
        limits = sandbox.limits(req.run_timeout, req.memory_limit_MB)
        run = await sandbox.run(sandbox.program(lang, req.code, req.stdin, files), limits)
        return _sandbox_fusion(run)


def _judge(case: _Case, run: RunResult) -> CaseResult:
    err = checks.tail(run.stderr)
    if run.status in ("timeout", "error"):
        return CaseResult(status=run.status, time_ms=run.time_ms, stderr_tail=err)
    if run.status == "output_limit":
        return CaseResult(status="failed", time_ms=run.time_ms, stderr_tail="output over the cap")
    if case.marker is not None:
        ok = checks.assertion_passed(run.exit_code, run.stdout, case.marker)
    else:
        assert case.expected is not None
        ok = run.exit_code == 0 and checks.stdout_matches(run.stdout, case.expected)
    return CaseResult(status="passed" if ok else "failed", time_ms=run.time_ms, stderr_tail=err)


def _decode_files(files: dict[str, str | None]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for path, content in files.items():
        if content is None:  # SandboxFusion skips these
            continue
        parts = path.split("/")
        if path.startswith("/") or not path or any(p in ("", ".", "..") for p in parts):
            raise InvalidRequest(
                f"files: {path!r} must be a relative path inside the scratch directory"
            )
        try:
            out[path] = base64.b64decode(content, validate=True)
        except binascii.Error as exc:
            raise InvalidRequest(f"files: {path!r} is not base64: {exc}") from exc
    return out


def _sandbox_fusion(run: RunResult) -> RunCodeResponse:
    seconds = run.time_ms / 1000
    if run.status == "error":
        result = CommandRunResult(status="Error", execution_time=seconds, stderr=run.stderr)
        return RunCodeResponse(
            status="SandboxError", message=run.stderr, run_result=result, usage=Usage()
        )
    timed_out = run.status in ("timeout", "output_limit")
    result = CommandRunResult(
        status="TimeLimitExceeded" if run.status == "timeout" else "Finished",
        execution_time=seconds,
        return_code=None if timed_out else run.exit_code,
        stdout=run.stdout,
        stderr=run.stderr
        if run.status != "output_limit"
        else run.stderr + "\n[output over the cap]",
    )
    ok = run.status == "finished" and run.exit_code == 0
    return RunCodeResponse(status="Success" if ok else "Failed", run_result=result, usage=Usage())
