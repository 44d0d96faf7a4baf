"""Code verification: extraction and matching (pure), and test cases run in the real sandbox."""

from __future__ import annotations

import os
from typing import Any

import pytest
from pydantic import ValidationError

from service.config import CodeSettings
from service.errors import CodeExecutionDisabled, InvalidRequest
from service.protocol import OutcomeRequest, RerankRequest, ScoreRequest
from service.protocol.code import CodeTests, RunCodeRequest
from service.sandbox import isolation
from service.sandbox.isolation import SandboxUnavailable
from service.sandbox.runner import Sandbox
from service.scoring import code as checks
from service.serving.code import CodeServing
from service.serving.services import Services
from tests.support.apps import app_client
from tests.support.fakes import FakeEngine, by_last_marker, sigmoid

FENCED = """Here it is:
```python
def f(x):
    return x + 1
```
and a usage example:
```python
print(f(1))
```
"""


def test_the_last_block_in_the_language_is_the_code() -> None:
    assert checks.extract_code(FENCED, "python") == "print(f(1))\n"
    mixed = "```bash\nls\n```\n```py\nx = 1\n```\n```\nuntagged\n```\n"
    assert checks.extract_code(mixed, "python") == "x = 1\n"
    assert checks.extract_code(mixed, "bash") == "ls\n"


def test_an_untagged_block_then_the_bare_response_then_nothing() -> None:
    assert checks.extract_code("```\nprint(2)\n```", "python") == "print(2)\n"
    assert checks.extract_code("print(3)", "python") == "print(3)"
    assert checks.extract_code("```js\nconsole.log(1)\n```", "python") is None
    assert checks.extract_code("   ", "python") is None


def test_stdout_matches_line_by_line_ignoring_trailing_space_and_blank_lines() -> None:
    assert checks.stdout_matches("1 2 \n3\n\n", "1 2\n3")
    assert checks.stdout_matches("a\r\nb\r\n", "a\nb\n")
    assert not checks.stdout_matches("1  2\n3", "1 2\n3")
    assert not checks.stdout_matches("3\n", "3\n4\n")


def test_the_reward_rules() -> None:
    outcomes: list[checks.Outcome] = ["passed", "failed", "passed", "timeout"]
    assert checks.reward(outcomes, "fraction") == 0.5
    assert checks.reward(outcomes, "all_pass") == 0.0
    assert checks.reward(["passed", "passed"], "all_pass") == 1.0
    assert checks.reward([], "fraction") == 0.0


def test_ranking_by_tests_then_the_model_and_ties_only_within_one_pass_rate() -> None:
    finals: list[float | None] = [0.5, 1.0, None, 1.0, 0.5]
    tiebreak = [0.9, 0.3, 0.99, 0.3, 0.9]
    ranking = checks.rank_with_tiebreak(finals, tiebreak)
    assert ranking == [1, 3, 0, 4, 2]
    # the model cannot tell 1 from 3, nor 0 from 4; 3 and 0 differ in their tests
    model_ties = [[1, 3], [0, 4]]
    assert checks.split_ties([[1, 3, 0, 4]], finals) == model_ties


def test_a_case_is_stdin_stdout_or_assertion_code() -> None:
    tests = CodeTests.model_validate(
        {"tests": ["assert f(1) == 2", {"assert": "check(f)"}, {"input": "1", "output": "2"}]}
    )
    assert tests.tests is not None
    assert [c.assert_ for c in tests.tests] == ["assert f(1) == 2", "check(f)", None]
    for bad in ({"input": "1"}, {"assert": "x", "output": "2"}, {"assert": "x", "input": "1"}):
        with pytest.raises(ValueError, match="either|no 'input'"):
            CodeTests.model_validate({"tests": [bad]})


def _serving(sandbox: Sandbox) -> CodeServing:
    return CodeServing(sandbox)


async def test_stdin_stdout_cases_pass_and_fail_by_output(code_sandbox: Sandbox) -> None:
    tests = CodeTests.model_validate(
        {
            "tests": [
                {"input": "2\n", "output": "4\n"},
                {"input": "5", "output": "10"},
                {"input": "3", "output": "7"},
            ],
            "code_reward": "fraction",
        }
    )
    res = await _serving(code_sandbox).verify("```python\nprint(int(input()) * 2)\n```", tests)
    assert [c.status for c in res.cases] == ["passed", "passed", "failed"]
    assert (res.passed, res.total, res.reward_rule) == (2, 3, "fraction")
    assert res.reward == pytest.approx(2 / 3)


async def test_assertion_cases_run_after_the_code_in_one_namespace(code_sandbox: Sandbox) -> None:
    tests = CodeTests.model_validate(
        {"tests": ["assert add(2, 2) == 4", "assert add(1, 1) == 3", "raise ValueError('x')"]}
    )
    res = await _serving(code_sandbox).verify("def add(a, b):\n    return a + b\n", tests)
    assert [c.status for c in res.cases] == ["passed", "failed", "failed"]
    assert "AssertionError" in res.cases[1].stderr_tail
    assert "ValueError" in res.cases[2].stderr_tail
    assert (res.reward, res.reward_rule) == (0.0, "all_pass")


@pytest.mark.parametrize(
    "escape",
    ["import sys\nsys.exit(0)", "import os\nos._exit(0)", "exit()", "raise SystemExit"],
)
async def test_a_program_that_exits_before_its_tests_fails(
    code_sandbox: Sandbox, escape: str
) -> None:
    """A reward hack RL finds: leave with status 0 before the assertions run."""
    code = f"def add(a, b):\n    return 0\n{escape}\n"
    tests = CodeTests.model_validate({"tests": ["assert add(2, 2) == 4"]})
    res = await _serving(code_sandbox).verify(code, tests)
    assert [c.status for c in res.cases] == ["failed"]


async def test_a_case_over_its_time_limit_times_out(code_sandbox: Sandbox) -> None:
    tests = CodeTests.model_validate(
        {
            "tests": ["while True: pass", "assert True"],
            "test_timeout_s": 1,
            "code_reward": "fraction",
        }
    )
    res = await _serving(code_sandbox).verify("x = 1", tests)
    assert [c.status for c in res.cases] == ["timeout", "passed"]
    assert 900 < res.cases[0].time_ms < 5000
    assert res.reward == 0.5


async def test_no_code_block_in_the_language_is_an_error_per_case(code_sandbox: Sandbox) -> None:
    tests = CodeTests.model_validate({"tests": ["assert True"]})
    res = await _serving(code_sandbox).verify("```js\nlet x = 1\n```", tests)
    assert res.reward == 0.0
    assert res.reason == "the response has no python code block"
    assert [c.status for c in res.cases] == ["error"]


async def test_run_code_answers_in_sandbox_fusion_shape(code_sandbox: Sandbox) -> None:
    serving = _serving(code_sandbox)
    ok = await serving.run_code(
        RunCodeRequest(code="print(input()[::-1])", language="python3", stdin="abc")
    )
    assert ok.status == "Success"
    assert ok.run_result is not None
    assert (ok.run_result.status, ok.run_result.return_code) == ("Finished", 0)
    assert ok.run_result.stdout == "cba\n"
    bad = await serving.run_code(RunCodeRequest(code="import sys; sys.exit(3)", language="python"))
    assert bad.status == "Failed"
    assert bad.run_result is not None
    assert bad.run_result.return_code == 3
    slow = await serving.run_code(
        RunCodeRequest(code="import time; time.sleep(9)", language="python", run_timeout=0.5)
    )
    assert slow.status == "Failed"
    assert slow.run_result is not None
    assert (slow.run_result.status, slow.run_result.return_code) == ("TimeLimitExceeded", None)


@pytest.mark.skipif(not os.access("/usr/bin/node", os.X_OK), reason="no Node.js on this host")
async def test_javascript_runs_under_the_name_roll_sends(code_sandbox: Sandbox) -> None:
    resp = await _serving(code_sandbox).run_code(
        RunCodeRequest(
            code="console.log([1, 2, 3].map(x => x * 2).join(' '))", language="javascript"
        )
    )
    assert resp.status == "Success", resp
    assert resp.run_result is not None
    assert (resp.run_result.stdout, resp.run_result.stderr) == ("2 4 6\n", "")


async def test_run_code_writes_the_files_it_is_sent(code_sandbox: Sandbox) -> None:
    req = RunCodeRequest.model_validate(
        {
            "code": "print(open('data/in.txt').read())",
            "language": "python",
            "files": {"data/in.txt": "aGVsbG8=", "skipped.txt": None},
        }
    )
    resp = await _serving(code_sandbox).run_code(req)
    assert resp.run_result is not None
    assert resp.run_result.stdout == "hello\n", resp.run_result.stderr


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ({"/etc/x": "aGk="}, "relative path"),
        ({"../x": "aGk="}, "relative path"),
        ({"x": "not base64!"}, "not base64"),
    ],
)
async def test_run_code_refuses_files_outside_or_unreadable(
    code_sandbox: Sandbox, files: dict[str, str], says: str
) -> None:
    req = RunCodeRequest.model_validate({"code": "1", "language": "python", "files": files})
    with pytest.raises(InvalidRequest, match=says):
        await _serving(code_sandbox).run_code(req)


async def test_a_language_not_served_is_named_with_the_served_ones(code_sandbox: Sandbox) -> None:
    with pytest.raises(InvalidRequest, match="'cobol' is not run here; served: bash, .*python"):
        await _serving(code_sandbox).run_code(RunCodeRequest(code="x", language="cobol"))
    tests = CodeTests.model_validate({"tests": ["true"], "language": "bash"})
    with pytest.raises(InvalidRequest, match="'assert' cases need language 'python'"):
        _serving(code_sandbox).admit(tests)


async def test_without_a_sandbox_every_entry_says_how_to_turn_it_on() -> None:
    serving = CodeServing(None)
    tests = CodeTests.model_validate({"tests": ["assert True"]})
    for call in (
        serving.verify("x", tests),
        serving.run_code(RunCodeRequest(code="1", language="python")),
    ):
        with pytest.raises(CodeExecutionDisabled, match="VERIFIER_CODE__ENABLED=true"):
            await call


def test_the_start_check_names_a_missing_tool(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable, match="bwrap .*apt-get install bubblewrap"):
        isolation.check(CodeSettings(enabled=True))


def test_the_start_check_names_a_missing_interpreter() -> None:
    with pytest.raises(SandboxUnavailable, match="/nonexistent/python"):
        isolation.check(CodeSettings(enabled=True, python="/nonexistent/python"))


def test_the_start_check_refuses_a_process_that_cannot_drop_to_its_own_uid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(isolation.os, "geteuid", lambda: 1000)
    with pytest.raises(SandboxUnavailable, match="start as root"):
        isolation.check(CodeSettings(enabled=True))


# --- tests in outcome, score and rerank (a scripted engine, the real sandbox) -----------------

DOUBLE = "print(int(input()) * 2)"
PLUS_TWO = "print(int(input()) + 2)"  # passes the case 2 -> 4 only
TIMES_THREE = "print(int(input()) * 3)"  # passes none
CASES = [{"input": "2", "output": "4"}, {"input": "5", "output": "10"}]


def _services(tokenizer: Any, sandbox: Sandbox, verdicts: dict[str, float]) -> Services:
    engine = FakeEngine(tokenizer, verdicts=by_last_marker(verdicts))
    return Services.build(engine, "fake-model", sandbox=sandbox)


async def test_an_outcome_with_tests_is_decided_by_them_without_the_engine(
    tokenizer: Any, code_sandbox: Sandbox
) -> None:
    s = _services(tokenizer, code_sandbox, {DOUBLE: -3.0})
    for verifier in (None, "rule", "hybrid"):
        resp = await s.outcome.judge(
            OutcomeRequest.model_validate(
                {"question": "Double n.", "response": DOUBLE, "tests": CASES, "verifier": verifier}
            )
        )
        assert (resp.score, resp.verdict, resp.decided_by, resp.logit) == (1.0, 1, "code", None)
        assert resp.code is not None
        assert resp.code.passed == 2
        assert resp.usage.engine_calls == 0
    assert s.engine.requests == []  # type: ignore[attr-defined]


def test_tests_with_the_model_alone_or_compare_are_refused() -> None:
    base = {"question": "q", "response": "r", "tests": CASES}
    with pytest.raises(ValidationError, match="verifier='model' takes no tests"):
        OutcomeRequest.model_validate({**base, "verifier": "model"})
    with pytest.raises(ValidationError, match="tests with method='compare'"):
        ScoreRequest.model_validate(
            {"question": "q", "responses": ["a", "b"], "tests": CASES, "method": "compare"}
        )


async def test_rerank_orders_by_pass_rate_then_the_model_breaks_ties(
    tokenizer: Any, code_sandbox: Sandbox
) -> None:
    # Two documents pass everything; the model prefers the second. One passes half.
    first, second = DOUBLE, "n = int(input())\nprint(n + n)"
    s = _services(
        tokenizer, code_sandbox, {first: -1.0, second: 2.0, PLUS_TWO: 4.0, TIMES_THREE: 5.0}
    )
    req = RerankRequest.model_validate(
        {
            "query": "Read n, print 2n.",
            "documents": [PLUS_TWO, first, TIMES_THREE, second],
            "tests": CASES,
            "code_reward": "fraction",
            "method": "outcome",
        }
    )
    resp = await s.score.rerank(req)
    assert [r.index for r in resp.results] == [3, 1, 0, 2]
    assert [r.relevance_score for r in resp.results] == [1.0, 1.0, 0.5, 0.0]
    assert all(r.decided_by == "code" for r in resp.results)
    assert resp.results[0].tiebreak == pytest.approx(sigmoid(2.0))
    assert resp.ties == []
    assert resp.usage.engine_calls == 4  # one tiebreak read per document


async def test_rule_with_tests_ranks_by_tests_alone_and_reports_their_ties(
    tokenizer: Any, code_sandbox: Sandbox
) -> None:
    s = _services(tokenizer, code_sandbox, {})
    req = ScoreRequest.model_validate(
        {
            "question": "Read n, print 2n.",
            "responses": [TIMES_THREE, DOUBLE, DOUBLE],
            "tests": CASES,
            "verifier": "rule",
            "method": "outcome",
        }
    )
    resp = await s.score.score(req)
    assert resp.ranking == [1, 2, 0]
    assert resp.ties == [[1, 2]]
    assert [r.tiebreak for r in resp.results] == [None, None, None]
    assert resp.usage.engine_calls == 0


# --- code execution off: every entry point says how to turn it on ------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/run_code", {"code": "print(1)", "language": "python"}),
        ("/v1/judge/outcome", {"question": "q", "response": "print(4)", "tests": CASES}),
        ("/v1/rerank", {"query": "q", "documents": ["print(4)"], "tests": CASES}),
        (
            "/v1/rewards",
            {
                "items": [
                    {"prompt": "q", "response": "x", "verifier": {"type": "code", "tests": CASES}}
                ]
            },
        ),
        (
            "/get_reward",
            {"query": ["q x"], "prompts": ["q"], "labels": [{"type": "code", "tests": CASES}]},
        ),
    ],
)
async def test_with_code_execution_off_code_fields_are_a_422_saying_how_to_enable_it(
    tokenizer: Any, path: str, body: dict[str, Any]
) -> None:
    engine = FakeEngine(tokenizer)
    async with app_client(engine) as client:
        r = await client.post(path, json=body)
        models = (await client.get("/v1/models")).json()["data"][0]
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["type"] == "code_execution_disabled"
    assert "VERIFIER_CODE__ENABLED=true" in error["message"]
    assert engine.requests == []
    assert (models["code_execution"], models["code_languages"]) == (False, None)
