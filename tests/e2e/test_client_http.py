"""The blocking client against the session's real ``verifier serve`` process (uvicorn, the
in-process engine): every endpoint, typed answers equal to plain HTTP, typed errors."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import verifier_client as vc

QUESTION = "What is 12 + 30?"
DOCS = ["12 + 30 = 42. The answer is 42.", "12 + 30 = 52. The answer is 52."]
ITEMS = [
    {"question": "2 + 2 = ?", "options": ["3", "4", "5"]},
    {"question": "Capital of France?", "options": ["Paris", "Rome"]},
]


@pytest.fixture(scope="module")
def client(server: Any) -> Any:
    with vc.Client(server.url) as c:
        yield c


def test_judging_endpoints_answer_typed_models_equal_to_plain_http(
    server: Any, client: vc.Client
) -> None:
    out = client.outcome(question=QUESTION, response=DOCS[0])
    plain = httpx.post(
        server.url + "/v1/judge/outcome", json={"question": QUESTION, "response": DOCS[0]}
    ).json()
    assert isinstance(out, vc.models.OutcomeResponse)
    assert out.model_dump(mode="json", exclude_none=True)["logit"] == plain["logit"]  # cached
    proc = client.process(vc.models.ProcessRequest(question=QUESTION, steps=["12 + 30 = 42."]))
    assert len(proc.step_logits) == 1
    split = client.split(response="Step 1: a.\n\nStep 2: b.")
    assert split.steps == ["Step 1: a.", "Step 2: b."]
    score = client.score(question=QUESTION, responses=DOCS, method="outcome")
    rerank = client.rerank(query=QUESTION, documents=DOCS, method="outcome", return_documents=True)
    assert rerank.results[0].index == score.ranking[0]
    assert {r.document.text for r in rerank.results if r.document} == set(DOCS)
    compared = client.compare(question=QUESTION, responses=DOCS, return_reads=True)
    assert isinstance(compared, vc.models.CompareResponse)
    assert sorted(compared.ranking) == [0, 1]
    assert compared.passes == 2  # both orders of the one pair
    assert compared.reads is not None
    assert sorted(r.order for r in compared.reads) == [[0, 1], [1, 0]]
    p01, p10 = compared.preferences[0][1], compared.preferences[1][0]
    assert p01 is not None
    assert p10 is not None
    assert p01 + p10 == pytest.approx(1.0)


def test_mcq_and_calibrations(client: vc.Client) -> None:
    answer = client.mcq_answer(**ITEMS[0])
    assert answer.answer_letter in "ABC"
    batch = client.mcq_answer_batch(items=ITEMS)
    assert [len(r.probs) for r in batch.results] == [3, 2]
    made = client.create_calibration(method="pride", items=[ITEMS[0]] * 2, name="client-test")
    assert client.get_calibration(made.id).name == "client-test"
    assert made.id in {c.id for c in client.list_calibrations().data}
    client.delete_calibration(made.id)
    with pytest.raises(vc.NotFoundError):
        client.get_calibration(made.id)


PAIRS = [
    {"question": f"What is {a} + {b}?", "responses": [f"{a + b}.", f"{a + b + 1}."], "preferred": 0}
    for a, b in ((2, 3), (4, 4), (7, 1), (6, 5), (9, 2), (3, 8), (5, 5), (1, 9), (8, 8), (2, 6))
]


async def test_probability_calibrations_sync_and_async(server: Any, client: vc.Client) -> None:
    made = client.fit_probability_calibration(target="compare", examples=PAIRS, name="client-pairs")
    assert isinstance(made, vc.models.ProbabilityCalibrationResponse)
    assert (made.target, made.method, made.examples) == ("compare", "temperature", 10)
    assert client.get_probability_calibration(made.id).name == "client-pairs"
    assert made.id in {c.id for c in client.list_probability_calibrations().data}
    assert client.set_calibration_default("compare", made.id).defaults == {"compare": made.id}
    pair = PAIRS[0]
    answer = client.compare(question=pair["question"], responses=pair["responses"])
    assert answer.calibration is not None
    assert answer.calibration.id == made.id
    async with vc.AsyncClient(server.url) as aclient:
        assert (await aclient.calibration_defaults()).defaults == {"compare": made.id}
        await aclient.clear_calibration_default("compare")
        assert (await aclient.get_probability_calibration(made.id)).default is False
        await aclient.delete_probability_calibration(made.id)
    assert client.calibration_defaults().defaults == {}
    with pytest.raises(vc.NotFoundError):
        client.get_probability_calibration(made.id)


def test_service_endpoints_and_results(server: Any, client: vc.Client) -> None:
    assert client.ready().status == "ready"
    assert client.models().data[0].id
    r = httpx.post(server.url + "/v1/split", json={"response": "a\n\nb"})
    assert client.result(r.headers["x-job-id"]) == r.json()


def test_errors_arrive_as_the_typed_tree(client: vc.Client) -> None:
    with pytest.raises(vc.InvalidRequestError) as info:
        client.outcome(question="", response="x")
    assert (info.value.status, info.value.type) == (422, "invalid_request")
    assert "question" in info.value.message
    with pytest.raises(vc.PayloadTooLargeError):
        client.outcome(question="q", response="x" * 40_000)
    with pytest.raises(vc.BudgetTooSmallError):
        client.outcome(question="q", response="r", max_eval_tokens=1)
    with pytest.raises(vc.NotFoundError):
        client.result("0" * 32)


def test_a_retried_request_is_run_and_charged_once(server: Any, client: vc.Client) -> None:
    """The same idempotency key twice (as a retry sends it): one job, the replay is marked."""
    key = "client-e2e-replay"
    body = {"question": "What is 5 + 5?", "response": "10", "cache": False}
    first = httpx.post(
        server.url + "/v1/judge/outcome", json=body, headers={"Idempotency-Key": key}
    )
    again = client.outcome(
        question=body["question"], response="10", cache=False, idempotency_key=key
    )
    assert again.logit == first.json()["logit"]
    replay = httpx.post(
        server.url + "/v1/judge/outcome", json=body, headers={"Idempotency-Key": key}
    )
    assert replay.headers.get("idempotent-replayed") == "true"
    assert replay.json()["logit"] == first.json()["logit"]
