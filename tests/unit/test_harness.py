"""loadtests/harness.py with small real processes: readiness from the probe, a dead process
reported at once with its log, and the stop's checks (clean exit, nothing left of the group)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
import redis

from loadtests.harness import RedisProcess, ServerProcess, free_port, group_members

PY = sys.executable


def http_server(port: int) -> list[str]:
    return [PY, "-m", "http.server", str(port), "--bind", "127.0.0.1"]


def test_ready_from_the_probe_and_stopped_with_its_group(tmp_path: Path) -> None:
    port = free_port()
    with ServerProcess(
        http_server(port), log=tmp_path / "http.log", probe=f"http://127.0.0.1:{port}/"
    ) as proc:
        assert proc.alive()
        pid = proc.pid
    assert not proc.alive()
    assert proc.popen.returncode == -signal.SIGTERM
    assert group_members(pid) == []


def test_a_process_that_dies_fails_at_once_with_its_log(tmp_path: Path) -> None:
    script = "print('model not found', flush=True); raise SystemExit(3)"
    proc = ServerProcess(
        [PY, "-c", script],
        log=tmp_path / "dies.log",
        probe=f"http://127.0.0.1:{free_port()}/ready",
        ready_timeout_s=300,
    )
    with pytest.raises(RuntimeError, match=r"dies exited \(3\):\nmodel not found"), proc:
        pass  # not reached: the error comes from the wait, not after 300 s


def test_a_child_left_in_the_group_is_killed_and_reported(tmp_path: Path) -> None:
    port = free_port()
    # The shell leaves a sleeping child behind, as an engine process outliving its server would.
    argv = ["sh", "-c", f"sleep 300 & exec {PY} -m http.server {port} --bind 127.0.0.1"]
    proc = ServerProcess(
        argv, log=tmp_path / "leaky.log", probe=f"http://127.0.0.1:{port}/", group_grace_s=0.5
    )
    with pytest.raises(AssertionError, match="outlived leaky"), proc:
        assert len(group_members(proc.pid)) == 2
    assert group_members(proc.pid) == []


def test_a_process_that_ignores_sigterm_fails_the_stop(tmp_path: Path) -> None:
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(300)"
    )
    log = tmp_path / "stubborn.log"
    proc = ServerProcess(
        [PY, "-c", script], log=log, probe=lambda: "up" in log.read_text(), stop_timeout_s=0.5
    )
    with pytest.raises(AssertionError, match="ignored SIGTERM"), proc:
        pass
    assert proc.popen.returncode == -signal.SIGKILL
    assert group_members(proc.pid) == []


def test_a_process_killed_before_the_stop_needs_no_clean_exit(tmp_path: Path) -> None:
    port = free_port()
    with ServerProcess(
        http_server(port), log=tmp_path / "http.log", probe=f"http://127.0.0.1:{port}/"
    ) as proc:
        os.kill(proc.pid, signal.SIGKILL)  # a fault test's kill -9
        proc.popen.wait()
    assert proc.stop() == -signal.SIGKILL


@pytest.mark.parametrize(("aof", "kept"), [(True, b"1"), (False, None)])
def test_redis_kill_and_restart_keeps_what_the_append_only_file_kept(
    tmp_path: Path, aof: bool, kept: bytes | None
) -> None:
    with RedisProcess(aof=aof, data_dir=tmp_path) as server:
        with redis.Redis(port=server.port) as client:
            client.set("k", "1")
        server.kill()
        assert not server.alive()
        server.start()
        with redis.Redis(port=server.port) as client:
            assert client.get("k") == kept
    assert not server.alive()
