"""Code verification over HTTP on the session's real server: the bodies verl's and ROLL's
sandbox clients send to ``/run_code``, code specs in ``/v1/rewards``, and ``/v1/models``."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.timeout(120)

SOLUTION = "```python\nn = int(input())\nprint(n * 2)\n```"
WRONG = "```python\nn = int(input())\nprint(n + 2)\n```"


def test_models_says_code_execution_is_on(server: Any) -> None:
    card = httpx.get(server.url + "/v1/models", timeout=10).json()["data"][0]
    assert card["code_execution"] is True
    assert "python" in card["code_languages"]


def test_verl_sandbox_fusion_body_is_answered_as_sandbox_fusion_does(server: Any) -> None:
    # verl/utils/reward_score/sandbox_fusion/utils.py: call_sandbox_api's payload and headers.
    payload = json.dumps(
        {
            "compile_timeout": 10,
            "run_timeout": 10,
            "code": "n = int(input())\nprint(n * 2)",
            "stdin": "21\n",
            "memory_limit_MB": 1024,
            "language": "python",
            "files": {},
            "fetch_files": [],
        }
    )
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    r = httpx.post(server.url + "/run_code", content=payload, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["status"], out["message"], out["compile_result"]) == ("Success", "", None)
    run = out["run_result"]
    assert (run["status"], run["return_code"], run["stdout"], run["stderr"]) == (
        "Finished",
        0,
        "42\n",
        "",
    )
    assert isinstance(run["execution_time"], float)
    # verl's pass test: stdout.rstrip("\n") == expected.rstrip("\n")
    assert run["stdout"].rstrip("\n") == "42"


def test_roll_sandbox_body_with_its_extra_field_and_fence_language(server: Any) -> None:
    # roll/pipeline/rlvr/rewards/code_sandbox_reward_worker.py: format_sandbox_test's body; the
    # language is the fence's tag ("python3"), expected_stdout an extra field.
    body = {
        "compile_timeout": 30,
        "run_timeout": 30,
        "code": "print(sum(map(int, input().split())))",
        "language": "python3",
        "stdin": "1 2 3",
        "expected_stdout": "6",
    }
    r = httpx.post(
        server.url + "/run_code", json=body, headers={"eagleeye-traceid": "t-1"}, timeout=60
    )
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["status"] == "Success"
    assert out["run_result"]["stdout"].strip() == "6"
    failed = httpx.post(
        server.url + "/run_code", json={**body, "code": "raise KeyError(1)"}, timeout=60
    ).json()
    assert failed["status"] == "Failed"
    # ROLL reads the exception name from stderr's last line
    assert failed["run_result"]["stderr"].strip().splitlines()[-1].split(":")[0] == "KeyError"


def test_an_unknown_language_is_a_422_naming_the_served_ones(server: Any) -> None:
    r = httpx.post(server.url + "/run_code", json={"code": "x", "language": "cobol"}, timeout=60)
    assert r.status_code == 422
    assert re.search(r"served: bash, (nodejs, )?python$", r.json()["error"]["message"])


def test_code_specs_in_a_mixed_rewards_batch(server: Any) -> None:
    tests = [{"input": "2", "output": "4"}, {"input": "10", "output": "20"}]
    body = {
        "items": [
            {
                "prompt": "Double n.",
                "response": SOLUTION,
                "verifier": {"type": "code", "tests": tests},
            },
            {
                "prompt": "Double n.",
                "response": WRONG,
                "verifier": {"type": "code", "tests": tests},
            },
            {
                "prompt": "Double n.",
                "response": WRONG,
                "verifier": {"type": "code", "tests": tests, "code_reward": "fraction"},
            },
            {
                "prompt": "Write add.",
                "response": "def add(a, b):\n    return a + b",
                "components": {
                    "tests": {"type": "code", "tests": ["assert add(1, 2) == 3"]},
                    "named": {"type": "string", "operation": "contains", "reference": "def add"},
                },
            },
            {"prompt": "q", "response": "4", "verifier": {"type": "math", "reference": "4"}},
        ]
    }
    r = httpx.post(server.url + "/v1/rewards", json=body, timeout=120)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["reward"] for x in results[:3]] == [1.0, 0.0, 0.5]
    assert [x["decided_by"] for x in results[:3]] == ["code"] * 3
    assert [c["status"] for c in results[2]["code"]["cases"]] == ["passed", "failed"]
    assert results[3]["reward_components"] == {"tests": 1.0, "named": 1.0}
    assert results[3]["components"]["tests"]["code"]["passed"] == 1
    assert results[4]["decided_by"] == "rule"
    assert r.json()["usage"]["total_tokens"] == 0  # rule checks and runs cost no engine token


def test_outcome_and_rerank_take_tests_where_a_reference_goes(server: Any) -> None:
    tests = [{"input": "2", "output": "4"}, {"input": "10", "output": "20"}]
    out = httpx.post(
        server.url + "/v1/judge/outcome",
        json={"question": "Read n, print 2n.", "response": SOLUTION, "tests": tests},
        timeout=60,
    ).json()
    assert (out["score"], out["decided_by"], out["usage"]["engine_calls"]) == (1.0, "code", 0)
    assert [c["status"] for c in out["code"]["cases"]] == ["passed", "passed"]
    ranked = httpx.post(
        server.url + "/v1/rerank",
        json={
            "query": "Read n, print 2n.",
            "documents": [WRONG, SOLUTION, "```python\nn = int(input())\nprint(n + n)\n```"],
            "tests": tests,
            "method": "outcome",
        },
        timeout=120,
    ).json()
    results = ranked["results"]
    assert [r["relevance_score"] for r in results] == [1.0, 1.0, 0.0]
    assert {r["index"] for r in results[:2]} == {1, 2}
    first, second = results[0]["tiebreak"], results[1]["tiebreak"]
    assert first >= second  # the model orders the two that pass
    assert ranked["usage"]["engine_calls"] == 3  # one tiebreak read per document
