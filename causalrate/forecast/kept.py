"""Workers kept between runs (`assess --keep-loaded SECONDS`).

A worker's start-up for a foundation model (a fresh interpreter, torch and the model's library imported, the
device initialised, the model loaded) takes seconds; a small run on a GPU spends most of its time there. With
--keep-loaded, each of the local executor's workers is a kept worker (`worker-0`, `worker-1`, …; a device's
batches go to its home slot's): it outlives the run, detached, holding the models that run used, and the next
run on this machine sends its batches to it instead of starting a worker and loading them again. It ends after
SECONDS without a run, when a run is interrupted while it holds a batch, or when it hangs.

Safety: it listens on a Unix socket in a folder only its user can open (`folder()`, mode 700) and speaks only to
a peer that proves it holds the folder's key (multiprocessing's HMAC challenge, before any message is
unpickled). It serves one run at a time (a lock file; a run that finds it busy starts its own worker), and only a
run of the same code, Python, folder and environment (`Hello.identity`), while no file of the code it imported
from outside installed packages changed (a model's neighbour module, a plugin, a local package: `UserCode`): any
difference and it ends, and the run starts a fresh one, so a kept worker never runs what a new worker would not.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import queue
import secrets
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import IO, Any

import causalrate
from causalrate.errors import UserError
from causalrate.forecast.jobs import GRACE_SECONDS
from causalrate.forecast.worker import BLAS_THREADS, answer, forget, system_key
from causalrate.paths import cache_root

log = logging.getLogger(__name__)

# A kept worker's start: the environment it was given is read before any import (libraries add variables: OpenMP's),
# and its sys.path is the run's, as a spawned worker's (`-c` would put the working folder first: a module of that
# name there would shadow a model's neighbour).
SERVE = (
    "import os, sys, json; env = dict(os.environ); sys.path[:] = json.loads(sys.argv[3]); "
    "import causalrate.forecast.kept as k; k.serve(sys.argv[1:], env)"
)
START_SECONDS = 60.0  # for a new kept worker to listen (its imports: numpy, causalrate's worker)


# Variables a shell changes on its own (`cd` sets OLDPWD and PWD, every command `_`): no difference to a model
SHELL_NOISE = frozenset({"_", "OLDPWD", "PWD", "SHLVL"})


@dataclass(frozen=True)
class Identity:
    """What a worker started now would be. A kept worker serves a run only if all of it is the same."""

    python: tuple[str, str]  # the interpreter and its version
    path: tuple[str, ...]  # sys.path, as a spawned worker inherits it
    folders: tuple[tuple[str, int], ...]  # each sys.path folder's mtime: an install or upgrade there changes it
    code: str  # causalrate's modules: each one's size and mtime
    cwd: str
    env: tuple[tuple[str, str], ...]  # compared in memory, never written anywhere; SHELL_NOISE left out

    def differs(self, other: Identity) -> list[str]:
        """What differs, in words naming no value (a variable's value may be a secret)."""
        said = {
            "python": "Python",
            "path": "sys.path",
            "folders": "installed packages",
            "code": "causalrate's code",
            "cwd": "the working folder",
        }
        out = [words for name, words in said.items() if getattr(self, name) != getattr(other, name)]
        if self.env != other.env:
            names = sorted({k for k, _ in set(self.env) ^ set(other.env)})
            out.append(f"environment variables ({', '.join(names[:5])}{', …' if len(names) > 5 else ''})")
        return out


def identity(env: dict[str, str], path: list[str]) -> Identity:
    """The identity of a worker started now with this environment and sys.path."""
    package = Path(causalrate.__file__).parent
    code = hashlib.sha256()
    for file in sorted(package.rglob("*.py")):
        info = file.stat()
        code.update(f"{file.relative_to(package)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    folders = tuple((entry, os.stat(entry).st_mtime_ns) for entry in path if entry and os.path.isdir(entry))
    return Identity(
        python=(sys.executable, sys.version),
        path=tuple(path),
        folders=folders,
        code=code.hexdigest(),
        cwd=os.getcwd(),
        env=tuple(sorted((k, v) for k, v in env.items() if k not in SHELL_NOISE)),
    )


@dataclass(frozen=True)
class Hello:
    """What a run says first: who it is (`identity`: a kept worker serves only a run that would have started the
    same worker), how long the worker is to wait for the next run, and its share of the cores."""

    identity: Identity | None  # None: end now (causalrate workers --stop)
    idle: float
    cores: int


def folder() -> Path:
    """The kept workers' folder: one per user and cache folder, in the temporary folder (a Unix socket's path is
    short), created mode 700; a UserError if it exists and is not a folder of this user's that only they open."""
    digest = hashlib.sha256(str(cache_root().resolve()).encode()).hexdigest()[:8]
    path = Path(tempfile.gettempdir()) / f"causalrate-{os.getuid()}-{digest}"
    with suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) != 0o700:
        raise UserError(
            f"{path}: the kept workers' folder must be a folder of yours that only you can open (mode 700); it is "
            f"not (mode {stat.S_IMODE(info.st_mode):o}, owner uid {info.st_uid}): remove it, or leave --keep-loaded out"
        )
    return path


def key(at: Path) -> bytes:
    """The folder's key (32 random bytes, mode 600), made once: written aside and linked into place, so a reader
    never sees a part of it."""
    path = at / "key"
    if not path.exists():
        fd, aside = tempfile.mkstemp(dir=at)  # mode 600
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(32))
        with suppress(FileExistsError):
            os.link(aside, path)
        os.unlink(aside)
    return path.read_bytes()


class UserCode:
    """The code a kept worker imported from outside installed packages, the standard library and causalrate (a
    model file's neighbour modules, plugin files, a local package): each file's sha256 when first seen. Python
    imports a module once per process, so if one of these files changes, this worker would run the old code where
    a new worker runs the new (and the run's cache keys, made from the files, say new): it must end."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}
        self.looked: set[str] = set()  # every module file looked at (most are installed: not digested)
        paths = sysconfig.get_paths()
        self.skip = [Path(paths[k]).resolve() for k in ("stdlib", "platstdlib", "purelib", "platlib")]
        self.skip.append(Path(causalrate.__file__).resolve().parent)  # its files are in the identity

    def note(self) -> None:
        """Digest the files of the modules imported since the last note (a set lookup per module otherwise)."""
        for module in list(sys.modules.values()):
            file = getattr(module, "__file__", None)
            if not isinstance(file, str) or file in self.looked:
                continue
            self.looked.add(file)
            path = Path(file).resolve()
            installed = {"site-packages", "dist-packages"} & set(path.parts)
            if file.endswith(".py") and not installed and not any(path.is_relative_to(s) for s in self.skip):
                self.seen[file] = _sha256(path)

    def changed(self) -> list[str]:
        """The files seen whose content is no longer what was imported (or that are gone)."""
        return [file for file, digest in self.seen.items() if _sha256(Path(file)) != digest]


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "gone"


def worker_env() -> dict[str, str]:
    """The environment of a kept worker: this one, every BLAS on one thread (as a pool worker: local.py)."""
    return {**os.environ, **dict.fromkeys(BLAS_THREADS, "1")}


class Kept:
    """A kept worker, as the pool sees one of its workers: its process (pid, is_alive, kill, join, exitcode) and
    its task queue (put). Two threads move the jobs onto its socket (as a Queue's feeder does: `put` never waits
    while it is busy) and its answers onto the pool's results queue; one just started is connected to by the
    first (`dial`), so that a run starting several does not wait for each in turn. `detach()` ends the run's use
    of it and leaves it running."""

    def __init__(
        self,
        pid: int,
        lock: IO,
        results: Any,
        *,
        conn: Connection | None = None,
        started: subprocess.Popen | None = None,
        dial: Callable[[], Connection | None] | None = None,
    ) -> None:
        self.pid, self._conn, self._lock, self._started = pid, conn, lock, started
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read, args=(results,), daemon=True)
        self._sender = threading.Thread(target=self._send, args=(dial,), daemon=True)
        self._sender.start()

    def _send(self, dial: Callable[[], Connection | None] | None) -> None:
        if dial is not None:
            self._conn = dial()
        conn = self._conn
        if conn is None:
            self.kill()  # it never listened: the pool sees a dead worker and starts one of this run's
            return
        self._reader.start()
        while True:
            item = self._outbox.get()
            try:
                conn.send(item)
            except OSError:  # it died (the pool sees a dead worker), or this run let it go
                return
            if item is None:
                return

    def _read(self, results: Any) -> None:
        assert self._conn is not None
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):  # it ended, or it closed the connection after detach()
                return
            results.put(message)

    def put(self, item: Any) -> None:
        self._outbox.put(item)

    def is_alive(self) -> bool:
        return self._started.poll() is None if self._started is not None else alive(self.pid)

    @property
    def exitcode(self) -> int | None:
        return None if self._started is None else self._started.returncode

    def kill(self) -> None:
        with suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def join(self, timeout: float | None = None) -> None:
        until = time.monotonic() + (1e9 if timeout is None else timeout)
        while self.is_alive() and time.monotonic() < until:
            time.sleep(0.01)
        self._release()

    def detach(self) -> None:
        """Tell it this run is done (it keeps the models this run used and waits for the next) and let it go."""
        self.put(None)
        self._sender.join(timeout=START_SECONDS)
        if self._reader.is_alive():
            self._reader.join(timeout=5.0)  # it closes the connection on reading None
        self._release()

    def _release(self) -> None:
        self._outbox.put(None)  # the sender's end, if it still waits
        if self._conn is not None:
            self._conn.close()
        self._lock.close()  # the lock goes with the file


def attach(name: str, *, idle: float, cores: int, results: Any) -> Kept | None:
    """The kept worker `name`, started if none serves this identity (connected to once it listens, by the Kept's
    sender); None when another run is using it: this run then starts a worker of its own."""
    at = folder()
    lock = _lock(at / f"{name}.lock")  # held for the run: Kept closes it
    if lock is None:
        log.info("kept %s serves another run; this run starts a worker of its own", name)
        return None
    address, secret, env = at / f"{name}.sock", key(at), worker_env()
    hello = Hello(identity(env, sys.path), idle, cores)
    conn = _connect(address, secret)
    if conn is not None:
        conn.send(hello)
        answer, pid, why = conn.recv()
        if answer == "ready":
            return Kept(pid, lock, results, conn=conn)
        conn.close()  # "stale": it would not run what a new worker runs, and ends now
        log.info("kept %s is replaced: %s", name, why)
        _gone(pid)
    started = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(address), str(idle), json.dumps(sys.path)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own session and process group: the terminal's Ctrl-C is the run's, not its
    )

    def dial() -> Connection | None:
        until = time.monotonic() + START_SECONDS
        while (conn := _connect(address, secret)) is None:
            if started.poll() is not None or time.monotonic() > until:
                log.warning("kept %s did not start (exit code %s)", name, started.poll())
                return None
            time.sleep(0.02)
        conn.send(hello)
        answer, _, why = conn.recv()
        if answer != "ready":  # it cannot serve the run that started it (its sys.path or variables moved)
            log.warning("kept %s did not start: %s", name, why)
            conn.close()
            return None
        return conn

    return Kept(started.pid, lock, results, started=started, dial=dial)


def listed() -> list[tuple[str, int, bool]]:
    """The kept workers alive here: (name, pid, whether a run is using it). What a killed one left (its socket,
    its pid file) is removed."""
    out = []
    for address in sorted(folder().glob("*.sock")):
        pid = _pid(address)
        if pid is None:
            continue
        lock = _lock(address.with_suffix(".lock"))
        out.append((address.stem, pid, lock is None))
        if lock is not None:
            lock.close()
    return out


def stop() -> tuple[int, int]:
    """End every kept worker no run is using (told so over its socket); (how many ended, how many are in use and
    left running)."""
    at, ended, busy = folder(), 0, 0
    for address in sorted(at.glob("*.sock")):
        if _pid(address) is None:
            continue
        lock = _lock(address.with_suffix(".lock"))
        if lock is None:
            busy += 1
            continue
        with lock:
            conn = _connect(address, key(at))
            if conn is None:
                continue
            with conn:
                conn.send(Hello(None, 0.0, 0))
                _, pid, _ = conn.recv()
            _gone(pid)
            ended += 1
    return ended, busy


def _lock(path: Path) -> IO | None:
    """The kept worker's lock file, locked (a run uses it while it holds this); None if another holds it."""
    lock = open(path, "a")  # noqa: SIM115 (the caller holds it, then closes it)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


def _pid(address: Path) -> int | None:
    """The pid of the kept worker listening at `address`, None (and its files removed) if it is not alive."""
    try:
        pid = int(address.with_suffix(".pid").read_text())
    except (OSError, ValueError):
        pid = None
    if pid is None or not alive(pid):
        address.unlink(missing_ok=True)
        address.with_suffix(".pid").unlink(missing_ok=True)
        return None
    return pid


def _connect(address: Path, secret: bytes) -> Connection | None:
    try:
        return Client(str(address), family="AF_UNIX", authkey=secret)
    except (FileNotFoundError, ConnectionRefusedError, EOFError, ConnectionResetError):
        return None


def alive(pid: int) -> bool:
    """Whether the process runs: not ended, nor ended and not yet reaped by the process that started it."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except ProcessLookupError:
        return False
    except OSError:  # no /proc: alive as far as we can tell
        return True
    return state != "Z"


def _gone(pid: int, seconds: float = 10.0) -> None:
    until = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < until:
        time.sleep(0.02)


class _Watch:
    """The kept worker's own clock: it ends after `idle` seconds with no run attached, or when what it is doing
    outlives its time limit (a hang in C code, which the worker's alarm cannot stop, with no run left to see it)."""

    def __init__(self, address: Path, idle: float) -> None:
        self.address, self.idle = address, idle
        self.attached, self.since, self.until = False, time.monotonic(), float("inf")
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while True:
            time.sleep(0.2)
            now = time.monotonic()
            if now > self.until or (not self.attached and now - self.since > self.idle):
                end(self.address)

    def busy(self, seconds: float) -> None:
        self.until = time.monotonic() + seconds + GRACE_SECONDS

    def free(self) -> None:
        self.until, self.since = float("inf"), time.monotonic()


def end(address: Path) -> None:
    """End the kept worker: its socket and pid file removed, then its process group (what its systems started)."""
    address.unlink(missing_ok=True)
    address.with_suffix(".pid").unlink(missing_ok=True)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def serve(argv: list[str], env: dict[str, str]) -> None:
    """A kept worker's life (argv: its socket's path, its idle seconds; env: the environment it was started with):
    listen, serve one run at a time, keep the systems each run used."""
    from threadpoolctl import threadpool_limits

    address, idle, own, code = Path(argv[0]), float(argv[1]), identity(env, sys.path), UserCode()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threadpool_limits(1)
    address.unlink(missing_ok=True)  # a dead worker's socket (the run starting this one holds the lock: none answered)
    watch = _Watch(address, idle)
    with Listener(str(address), family="AF_UNIX", authkey=key(address.parent)) as listener:
        pid_file = address.with_suffix(".pid")
        pid_file.with_suffix(".pid-new").write_text(str(os.getpid()))
        pid_file.with_suffix(".pid-new").replace(pid_file)
        while True:
            try:
                conn = listener.accept()  # the peer proved it holds the key before anything is unpickled
            except Exception:  # a wrong key (AuthenticationError), a peer that went away mid-handshake
                continue
            watch.attached = True
            with conn, suppress(EOFError, OSError):  # a peer that goes away before its hello
                hello = conn.recv()
                why = stale(hello, own, code)
                conn.send(("stale" if why else "ready", os.getpid(), why))
                if why:
                    end(address)
                watch.idle = hello.idle
                _session(conn, hello.cores, watch, code)
            watch.attached = False
            watch.free()


def stale(hello: object, own: Identity, code: UserCode) -> str:
    """Why this worker must not serve the run that said `hello` ("" if it may)."""
    if not isinstance(hello, Hello) or hello.identity is None:
        return "told to end"
    changed = code.changed()
    why = [*hello.identity.differs(own), *([f"imported code changed ({Path(changed[0]).name})"] if changed else [])]
    return "; ".join(why)


def _session(conn: Connection, cores: int, watch: _Watch, code: UserCode) -> None:
    """Answer one run until it says it is done (None) or goes away; then forget the systems it did not use."""
    used = set()
    with suppress(EOFError, OSError):  # the run went away (it ended, or was killed)
        while (item := conn.recv()) is not None:
            used.add(system_key(item[1]))
            watch.busy(item[1].timeout)
            answer(item, conn.send, cores)
            watch.free()
            code.note()
    forget(used)
