"""The client's models cannot drift from the server's, and neither package leans on the other."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from service.app import create_app
from service.config import Settings
from service.errors import ServiceError

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python" / "verifier_client"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_client_models", ROOT / "scripts/gen_client_models.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_client_models_match_the_served_openapi_document() -> None:
    """Regenerate the models from what GET /openapi.json serves; any difference is drift."""
    transport = httpx.ASGITransport(app=create_app(Settings()))
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
        document = (await http.get("/openapi.json")).json()
    gen = _generator()
    assert gen.generate(document) == gen.MODELS.read_text(), (
        "verifier_client/models.py drifted from the server: run scripts/gen_client_models.py"
    )


def test_every_request_model_of_the_client_has_an_endpoint() -> None:
    from verifier_client import _base

    def shape(path: str) -> str:  # a path parameter's name is the client's own
        return re.sub(r"\{[^}]+\}", "{}", path)

    endpoints = [v for v in vars(_base).values() if isinstance(v, _base.Endpoint)]
    paths = {shape(e.path) for e in endpoints}
    served = {shape(p) for p in create_app(Settings()).openapi()["paths"]}
    assert paths <= served, paths - served
    judged = {"/v1/judge/outcome", "/v1/judge/process", "/v1/judge/compare", "/v1/split"}
    judged |= {"/v1/score", "/v1/rerank"}
    families = {p for p in served if p.startswith(("/v1/mcq/", "/v1/calibrations"))}
    assert judged | families <= paths, (judged | families) - paths


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_client_imports_only_httpx_pydantic_tenacity_and_the_stdlib() -> None:
    allowed = {"httpx", "pydantic", "tenacity", "typing_extensions", "verifier_client"}
    for path in CLIENT.rglob("*.py"):
        third_party = {n for n in _imports(path) if n not in sys.stdlib_module_names}
        assert third_party <= allowed, f"{path.name} imports {third_party - allowed}"


def test_only_the_eval_harnesses_of_the_server_import_the_client() -> None:
    service = ROOT / "service"
    for path in service.rglob("*.py"):
        if "verifier_client" in _imports(path):
            assert path.parent == service / "evals", f"{path} imports the client"


def test_the_serving_path_does_not_load_the_client() -> None:
    code = (
        "import sys, service.app, service.cli, service.engine.openai_engine;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('verifier_client', 'vllm')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _service_errors() -> list[type[ServiceError]]:
    seen: list[type[ServiceError]] = [ServiceError]
    for cls in seen:  # grows as it walks: every subclass, at any depth
        seen.extend(cls.__subclasses__())
    return seen


# The two server names the client spells the way httpx and OpenAI's client do.
_CLIENT_NAME = {"ServiceError": "InternalServerError", "Unauthorized": "AuthenticationError"}


@pytest.mark.parametrize("server", _service_errors(), ids=lambda c: c.__name__)
def test_every_server_error_type_has_its_client_class(server: type[ServiceError]) -> None:
    """Same type, a class named after the server's, under the class of the server's status."""
    from verifier_client import errors

    client = errors._BY_TYPE.get(server.type)
    assert client is not None, f"the client has no class for {server.type!r}"
    assert client.__name__ == _CLIENT_NAME.get(server.__name__, server.__name__ + "Error")
    assert issubclass(client, errors._BY_STATUS[server.status]), (client, server.status)
    assert client.__name__ in errors.__all__
    exc = errors.error_from_response(
        httpx.Response(server.status, json={"error": {"type": server.type, "message": "m"}})
    )
    assert type(exc) is client


def test_the_client_knows_no_type_the_server_does_not_send() -> None:
    from verifier_client import errors

    sent = {cls.type for cls in _service_errors()}
    assert set(errors._BY_TYPE) == sent, set(errors._BY_TYPE) ^ sent
    assert set(errors._BY_STATUS) == {cls.status for cls in _service_errors()}
