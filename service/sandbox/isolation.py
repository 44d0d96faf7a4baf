"""The confinement of one run: bubblewrap namespaces, util-linux rlimits, a dropped uid.

A run is ``setpriv`` (drop to a uid of its own, no capabilities) exec'ing ``prlimit`` (hard
rlimits) exec'ing ``bwrap``: new user, PID, network, mount, IPC and UTS namespaces, an empty
environment, read-only system directories, a fresh size-capped tmpfs as its scratch directory
(``/sandbox``) and ``/tmp``, and ``--die-with-parent``, so killing the one outer process kills
the PID namespace and everything in it, daemons included. Nothing of the host's filesystem is
writable, so no run can leave anything for the next. The interpreter is the host's system
Python: the service's own virtual environment (and whatever keys sit near it) is never bound.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from service.config import CodeSettings

# Where a run's files live inside its namespace.
SCRATCH = "/sandbox"
# The host directories bound read-only: the interpreter and the shared libraries it loads.
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
# The whole environment a run sees.
RUN_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": SCRATCH,
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
}
# The interpreters tried when none is set: system ones, which any uid can read.
SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
# Bound on the start-time check (a sandbox that cannot print in this long is not usable).
PROBE_TIMEOUT_S = 20.0
MIB = 1 << 20


class SandboxUnavailable(RuntimeError):
    """The host cannot confine code the way the settings ask; the message says which part."""


@dataclass(frozen=True, slots=True)
class Tools:
    """The host programs a run is built from, resolved once."""

    bwrap: str
    setpriv: str
    prlimit: str
    python: str


@dataclass(frozen=True, slots=True)
class RunLimits:
    """What one run may use; every field comes from ``CodeSettings`` or a request under it."""

    wall_s: float
    memory_mb: int
    max_processes: int
    max_file_mb: int
    max_open_files: int
    scratch_mb: int

    @classmethod
    def of(cls, cfg: CodeSettings, wall_s: float, memory_mb: int | None = None) -> RunLimits:
        memory = cfg.memory_mb if memory_mb is None or memory_mb <= 0 else memory_mb
        return cls(
            wall_s=min(wall_s, cfg.max_run_timeout_s),
            memory_mb=min(memory, cfg.memory_mb),
            max_processes=cfg.max_processes,
            max_file_mb=cfg.max_file_mb,
            max_open_files=cfg.max_open_files,
            scratch_mb=cfg.scratch_mb,
        )

    @property
    def cpu_s(self) -> int:
        """The CPU-time cap: the wall limit rounded up, plus one (a run never needs more)."""
        return int(self.wall_s) + 1


def resolve_tools(cfg: CodeSettings) -> Tools:
    """The programs a run needs, or ``SandboxUnavailable`` naming every one that is missing."""
    found = {name: shutil.which(name) for name in ("bwrap", "setpriv", "prlimit")}
    python = _interpreter(cfg.python)
    missing = [name for name, path in found.items() if path is None]
    hints = {
        "bwrap": "bwrap (Debian/Ubuntu: apt-get install bubblewrap)",
        "setpriv": "setpriv (util-linux)",
        "prlimit": "prlimit (util-linux)",
    }
    problems = [f"{hints[name]} is not installed" for name in missing]
    if python is None:
        name = cfg.python or " or ".join(SYSTEM_PYTHONS)
        problems.append(f"the interpreter {name} (VERIFIER_CODE__PYTHON) is not found")
    if problems:
        raise SandboxUnavailable("; ".join(problems))
    assert python is not None
    return Tools(
        bwrap=str(found["bwrap"]),
        setpriv=str(found["setpriv"]),
        prlimit=str(found["prlimit"]),
        python=str(Path(python).resolve()),
    )


def _interpreter(setting: str) -> str | None:
    if setting:
        return shutil.which(setting)
    return next((p for p in SYSTEM_PYTHONS if os.access(p, os.X_OK)), None)


def uid_base(cfg: CodeSettings) -> int:
    """The first of this process's run uids: the setting, else one derived from the pid, so
    that two workers on one host do not share a process cap."""
    if cfg.uid_base is not None:
        return cfg.uid_base
    return 1_000_000 + (os.getpid() % 100_000) * 64


def command(
    tools: Tools, uid: int, limits: RunLimits, files: dict[str, int], argv: list[str]
) -> list[str]:
    """The argv of one run: ``files`` maps a path under the scratch directory to a readable fd
    (bwrap copies it in), ``argv`` runs with the scratch directory as its working directory."""
    cmd = [
        tools.setpriv,
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--",
        tools.prlimit,
        f"--nproc={limits.max_processes}",
        f"--as={limits.memory_mb * MIB}",
        f"--fsize={limits.max_file_mb * MIB}",
        f"--nofile={limits.max_open_files}",
        f"--cpu={limits.cpu_s}",
        "--core=0",
        "--",
        tools.bwrap,
        "--unshare-all",  # user, pid, net, ipc, uts, cgroup namespaces
        "--die-with-parent",
        # The program is its namespace's init: when it exits the kernel kills whatever it left
        # running, and no reaper of bwrap's is orphaned (a host init that reaps nothing keeps
        # orphans as zombies, and zombies count against the uid's process cap).
        "--as-pid-1",
        "--new-session",  # no TIOCSTI into a terminal it was started from
        "--clearenv",
    ]
    for key, value in RUN_ENV.items():
        cmd += ["--setenv", key, value]
    for d in SYSTEM_DIRS:
        if Path(d).exists():
            cmd += ["--ro-bind", d, d]
    interpreter_root = _outside_system(tools.python)
    if interpreter_root is not None:
        cmd += ["--ro-bind", interpreter_root, interpreter_root]
    size = str(limits.scratch_mb * MIB)
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    cmd += ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", SCRATCH]
    for path, fd in files.items():
        cmd += ["--file", str(fd), f"{SCRATCH}/{path}"]
    cmd += ["--chdir", SCRATCH, "--", *argv]
    return cmd


def _outside_system(python: str) -> str | None:
    """The install prefix of an interpreter outside the system directories (bound read-only so
    it can load its standard library), else None."""
    if any(python == d or python.startswith(d + "/") for d in SYSTEM_DIRS):
        return None
    return str(Path(python).parent.parent)


def check(cfg: CodeSettings) -> Tools:
    """Fail closed: the tools, the privileges and a real confined run, or ``SandboxUnavailable``
    saying which part is missing. Called before a process that runs code starts serving."""
    tools = resolve_tools(cfg)
    if os.geteuid() != 0:
        raise SandboxUnavailable(
            "the process cap and the dropped uid need the worker to start as root (in its own "
            "container): a run's uid must be one no other process uses, or a fork bomb's "
            "process cap counts the service's own threads"
        )
    limits = RunLimits.of(cfg, PROBE_TIMEOUT_S)
    argv = [tools.python, "-I", "-c", _PROBE]
    try:
        done = subprocess.run(  # noqa: S603 - a fixed argv
            command(tools, uid_base(cfg), limits, {}, argv),
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            env=dict(RUN_ENV),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise SandboxUnavailable(
            f"a confined probe run did not finish in {PROBE_TIMEOUT_S:.0f} s"
        ) from exc
    out = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0 or out != "confined":
        err = done.stderr.decode(errors="replace").strip()[-400:]
        raise SandboxUnavailable(
            f"a confined probe run failed (exit {done.returncode}): {err or out or 'no output'} "
            "(bubblewrap needs user namespaces: sysctl kernel.unprivileged_userns_clone=1 and "
            "user.max_user_namespaces > 0; in a container, a seccomp profile that allows them)"
        )
    return tools


# Runs inside the sandbox at start: it must see no environment of the service, no network
# interface but an unconfigured loopback, and not be root.
_PROBE = """
import os, socket
assert os.getuid() != 0, "runs as root"
assert "VERIFIER" not in " ".join(os.environ), "sees the service's environment"
assert sorted(n for _, n in socket.if_nameindex()) == ["lo"], "sees a network interface"
print("confined")
"""
