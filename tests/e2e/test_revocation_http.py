"""Revocation by trying: two API processes (no engine) on a private Redis; a revoked key is
refused by both on its very next request."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from loadtests.harness import ROOT, free_port
from tests.support.cluster import Cluster, auth, create_key, wait_api


@pytest.fixture
def two_apis(tmp_path: Path) -> Iterator[Cluster]:
    port = free_port()
    env = {
        **os.environ,
        "VERIFIER_REDIS_URL": f"redis://127.0.0.1:{port}/0",
        "VERIFIER_REDIS__PREFIX": f"t{uuid.uuid4().hex[:8]}:",
        "VERIFIER_AUTH__ENABLED": "true",
    }
    c = Cluster(tmp=tmp_path, env=env, redis_port=port)
    c.start_redis()
    try:
        for i in range(2):
            p = free_port()
            c.apis.append(c.spawn(["serve", "--no-worker", "--port", str(p)], f"api{i}", p, {}))
        for api in c.apis:
            wait_api(api)
        yield c
    finally:
        c.close()


def test_revocation_takes_effect_on_the_next_request_everywhere(two_apis: Cluster) -> None:
    key, other = create_key(two_apis, "alpha"), create_key(two_apis, "alpha")
    urls = [f"http://127.0.0.1:{api.port}" for api in two_apis.apis]
    for url in urls:  # both processes accept the key (and have seen it: nothing to cache)
        assert httpx.get(url + "/v1/models", headers=auth(key), timeout=10).status_code == 200
    subprocess.run(
        [sys.executable, "-m", "service.cli", "keys", "revoke", key],
        cwd=ROOT,
        env=two_apis.env,
        check=True,
        capture_output=True,
    )
    for url in urls:
        r = httpx.get(url + "/v1/models", headers=auth(key), timeout=10)
        assert r.status_code == 401
        assert r.json()["error"]["type"] == "unauthorized"
        # The tenant's other key is untouched.
        assert httpx.get(url + "/v1/models", headers=auth(other), timeout=10).status_code == 200
