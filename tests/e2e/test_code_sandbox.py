"""Hostile code against the session's real server (code execution on): one test per attack,
each proving the attack failed and the service kept answering; then nothing of any run is
left running. Runs go through ``POST /run_code`` (the queue, the worker, the sandbox pool)."""

from __future__ import annotations

import ast
import os
import time
from typing import Any

import httpx
import pytest

from loadtests.harness import ROOT
from service.sandbox.isolation import RUN_ENV

pytestmark = pytest.mark.timeout(120)

# Every run's uid is 1,000,000 or more (service/sandbox/isolation.py: uid_base): no other
# process of this machine runs under one.
RUN_UIDS = 1_000_000


def run(server: Any, code: str, timeout: float = 2, **extra: Any) -> dict[str, Any]:
    body = {"code": code, "language": "python", "run_timeout": timeout, **extra}
    r = httpx.post(server.url + "/run_code", json=body, timeout=60)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def still_answers(server: Any) -> None:
    """The service survived: a fresh run prints, the API answers, and no run is left."""
    out = run(server, "print(6 * 7)")
    assert (out["status"], out["run_result"]["stdout"]) == ("Success", "42\n"), out
    assert httpx.get(server.url + "/ready", timeout=10).status_code == 200
    assert run_processes() == [], "a run left processes behind"


def run_processes() -> list[str]:
    """Processes running under a run's uid, with their command lines (none between runs)."""
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid >= RUN_UIDS:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                left.append(f"{pid}: {cmd}")
        except OSError:  # ended while listed
            continue
    return left


def test_an_infinite_loop_is_stopped_at_its_time_limit(server: Any) -> None:
    start = time.monotonic()
    out = run(server, "while True: pass", timeout=1)
    assert out["status"] == "Failed"
    assert out["run_result"]["status"] == "TimeLimitExceeded"
    assert time.monotonic() - start < 8
    still_answers(server)


def test_sleeping_past_the_deadline_is_stopped(server: Any) -> None:
    start = time.monotonic()
    out = run(server, "import time\ntime.sleep(600)", timeout=1)
    assert out["run_result"]["status"] == "TimeLimitExceeded"
    assert out["run_result"]["return_code"] is None
    assert time.monotonic() - start < 8
    still_answers(server)


def test_a_fork_bomb_hits_the_process_cap_and_dies_with_its_run(server: Any) -> None:
    bomb = (
        "import os\n"
        "n = 0\n"
        "while True:\n"
        "    try:\n"
        "        os.fork(); n += 1\n"
        "    except OSError:\n"
        "        print('capped', flush=True); break\n"
        "while True: pass\n"
    )
    out = run(server, bomb, timeout=2)
    assert out["run_result"]["status"] == "TimeLimitExceeded"
    assert "capped" in out["run_result"]["stdout"]
    still_answers(server)


def test_a_10_gb_allocation_fails_inside_the_run(server: Any) -> None:
    out = run(server, "x = bytearray(10 * 1024**3)\nprint('allocated')")
    assert out["status"] == "Failed"
    assert "MemoryError" in out["run_result"]["stderr"]
    assert "allocated" not in out["run_result"]["stdout"]
    still_answers(server)


def test_a_huge_file_stops_at_the_file_size_cap(server: Any) -> None:
    code = (
        "chunk = b'x' * (1 << 20)\n"
        "with open('big', 'wb') as f:\n"
        "    for _ in range(1 << 10):\n"
        "        f.write(chunk)\n"
        "print('wrote')\n"
    )
    out = run(server, code, timeout=10)
    assert out["status"] == "Failed"
    assert (
        "File too large" in out["run_result"]["stderr"] or "No space" in out["run_result"]["stderr"]
    )
    assert "wrote" not in out["run_result"]["stdout"]
    still_answers(server)


def test_printing_a_gigabyte_is_cut_at_the_output_cap(server: Any) -> None:
    start = time.monotonic()
    code = "import sys\nfor _ in range(1 << 14):\n    sys.stdout.write('x' * (1 << 16))"
    r = httpx.post(
        server.url + "/run_code",
        json={"code": code, "language": "python", "run_timeout": 10},
        timeout=60,
    )
    assert r.status_code == 200
    out = r.json()
    assert out["status"] == "Failed"
    assert len(out["run_result"]["stdout"]) <= 1024 * 1024  # VERIFIER_CODE__MAX_OUTPUT_KB
    assert "output over the cap" in out["run_result"]["stderr"]
    assert len(r.content) < 3 * 1024 * 1024
    assert time.monotonic() - start < 10
    still_answers(server)


def test_no_socket_reaches_redis_or_the_api_on_the_loopback(server: Any) -> None:
    port = int(server.url.rsplit(":", 1)[1])
    code = (
        "import socket\n"
        f"for port in (6379, {port}):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', port), timeout=1)\n"
        "        print('CONNECTED', port)\n"
        "    except OSError as e:\n"
        "        print('refused', port, type(e).__name__)\n"
        "print(sorted(n for _, n in socket.if_nameindex()))\n"
    )
    out = run(server, code)
    stdout = out["run_result"]["stdout"]
    assert "CONNECTED" not in stdout
    assert stdout.count("refused") == 2
    assert "['lo']" in stdout
    still_answers(server)


def test_the_service_environment_is_not_readable(server: Any) -> None:
    code = (
        "import os\n"
        "print(dict(os.environ))\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit():\n"
        "        try:\n"
        "            print(pid, open(f'/proc/{pid}/environ', 'rb').read())\n"
        "        except OSError as e:\n"
        "            print(pid, type(e).__name__)\n"
    )
    out = run(server, code)
    stdout = out["run_result"]["stdout"]
    assert out["status"] == "Success", out
    assert "VERIFIER" not in stdout  # the server runs with VERIFIER_CODE__ENABLED and more
    assert "REDIS" not in stdout
    # bwrap sets PWD to the scratch directory; nothing else but the run's own environment
    leaked = [k for k in os.environ if k not in {*RUN_ENV, "PWD"} and f"'{k}'" in stdout]
    assert leaked == []
    still_answers(server)


def test_files_outside_the_scratch_directory_are_not_there(server: Any) -> None:
    targets = ["/etc/passwd", "/etc/hostname", str(ROOT / "README.md"), "/root/.bashrc"]
    code = (
        f"for path in {targets!r}:\n"
        "    try:\n"
        "        print('OPENED', path, len(open(path).read()))\n"
        "    except OSError as e:\n"
        "        print('denied', path, type(e).__name__)\n"
        "import os\n"
        "print(sorted(os.listdir('/')))\n"
    )
    out = run(server, code)
    stdout = out["run_result"]["stdout"]
    assert "OPENED" not in stdout, stdout
    assert stdout.count("denied") == len(targets)
    seen = set(ast.literal_eval(stdout.splitlines()[-1]))  # the listing of /
    assert seen <= {"bin", "dev", "lib", "lib32", "lib64", "proc", "sandbox", "sbin", "tmp", "usr"}
    still_answers(server)


def test_signalling_the_parent_or_every_process_reaches_nothing_outside(server: Any) -> None:
    code = (
        "import os, signal\n"
        "print('ppid', os.getppid())\n"
        "for target in (os.getppid(), -1):\n"
        "    try:\n"
        "        os.kill(target, signal.SIGKILL)\n"
        "    except OSError as e:\n"
        "        print(type(e).__name__)\n"
    )
    out = run(server, code)
    assert "ppid 0" in out["run_result"]["stdout"]  # its parent is outside its PID namespace
    still_answers(server)


def test_a_double_forked_daemon_dies_with_its_run(server: Any) -> None:
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
        "print('parent exits')\n"
    )
    out = run(server, code)
    assert out["status"] == "Success"
    deadline = time.monotonic() + 3
    while run_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert run_processes() == []
    still_answers(server)


def test_files_left_by_one_run_are_gone_for_the_next(server: Any) -> None:
    leave = "for p in ('left.txt', '/tmp/left.txt'):\n    open(p, 'w').write('secret')\nprint('ok')"
    assert run(server, leave)["run_result"]["stdout"] == "ok\n"
    look = (
        "import os\n"
        "print(sorted(os.listdir('.')), sorted(os.listdir('/tmp')))\n"
        "try:\n"
        "    open('/usr/left.txt', 'w')\n"
        "except OSError as e:\n"
        "    print(type(e).__name__)\n"
    )
    out = run(server, look)["run_result"]["stdout"]
    assert out.startswith("['main.py'] []"), out
    assert "OSError" in out or "PermissionError" in out or "Read-only" in out
    still_answers(server)


def test_a_hung_run_does_not_delay_a_judgment(server: Any) -> None:
    """Runs hold a pool slot, never the event loop: a judgment sent while two runs sleep is
    answered long before they end."""
    import concurrent.futures

    body = {"code": "import time\ntime.sleep(600)", "language": "python", "run_timeout": 8}
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        hung = [
            pool.submit(httpx.post, server.url + "/run_code", json=body, timeout=60)
            for _ in range(2)
        ]
        time.sleep(0.5)
        start = time.monotonic()
        r = httpx.post(
            server.url + "/v1/judge/outcome",
            json={"question": "What is 2 + 2?", "response": "4", "cache": False},
            timeout=60,
        )
        judged_in = time.monotonic() - start
        assert r.status_code == 200, r.text
        assert not any(f.done() for f in hung)
        assert judged_in < 6
        assert all(f.result().json()["run_result"]["status"] == "TimeLimitExceeded" for f in hung)
    still_answers(server)
