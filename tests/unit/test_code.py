"""Code verification: extraction and matching (pure), and test cases run in the real sandbox."""

from __future__ import annotations

import pytest

from service.config import CodeSettings
from service.errors import CodeExecutionDisabled, InvalidRequest
from service.protocol.code import CodeTests, RunCodeRequest
from service.sandbox import isolation
from service.sandbox.isolation import SandboxUnavailable
from service.sandbox.runner import Sandbox
from service.scoring import code as checks
from service.serving.code import CodeServing

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
    with pytest.raises(InvalidRequest, match="'cobol' is not run here; served: bash, python"):
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
