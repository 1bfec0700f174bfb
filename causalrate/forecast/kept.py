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

# a kept worker's start: the environment it was given is read before any import (libraries add variables: OpenMP's)
SERVE = "import os, sys; env = dict(os.environ); import causalrate.forecast.kept as k; k.serve(sys.argv[1:], env)"
START_SECONDS = 60.0  # for a new kept worker to listen (its imports: numpy, causalrate's worker)


@dataclass(frozen=True)
class Hello:
    """What a run says first: who it is (`identity`: a kept worker serves only a run that would have started the
    same worker), how long the worker is to wait for the next run, and its share of the cores."""

    identity: tuple
    idle: float
    cores: int


def identity(env: dict[str, str]) -> tuple:
    """What a worker started now would be: this Python, its installed packages (their folders' mtimes: an install
    or upgrade changes them), causalrate's code (each module's size and mtime), the working folder and the
    environment it would inherit (compared in memory, never written anywhere)."""
    package = Path(causalrate.__file__).parent
    code = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        info = path.stat()
        code.update(f"{path.relative_to(package)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    installed = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    packages = tuple((folder, os.stat(folder).st_mtime_ns) for folder in installed if os.path.isdir(folder))
    return sys.executable, sys.version, packages, code.hexdigest(), os.getcwd(), tuple(sorted(env.items()))


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
    lock = open(at / f"{name}.lock", "a")  # noqa: SIM115 (held for the run: Kept closes it)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        log.info("kept %s serves another run; this run starts a worker of its own", name)
        return None
    address, secret, env = at / f"{name}.sock", key(at), worker_env()
    hello = Hello(identity(env), idle, cores)
    conn = _connect(address, secret)
    if conn is not None:
        conn.send(hello)
        answer, pid = conn.recv()
        if answer == "ready":
            return Kept(pid, lock, results, conn=conn)
        conn.close()  # "stale": it serves another code or environment, and ends now
        _gone(pid)
    started = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(address), str(idle)],
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
        conn.recv()  # ("ready", its pid)
        return conn

    return Kept(started.pid, lock, results, started=started, dial=dial)


def listed() -> list[tuple[str, bool]]:
    """The kept workers listening here: (name, whether a run is using it)."""
    out = []
    for address in sorted(folder().glob("*.sock")):
        with open(address.with_suffix(".lock"), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                out.append((address.stem, True))
                continue
        out.append((address.stem, False))
    return out


def stop() -> tuple[int, int]:
    """End every kept worker no run is using (told so over its socket: a hello it does not recognise); (how many
    ended, how many are in use and left running)."""
    at, ended, busy = folder(), 0, 0
    for address in sorted(at.glob("*.sock")):
        with open(address.with_suffix(".lock"), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                busy += 1
                continue
            conn = _connect(address, key(at))
            if conn is None:  # a socket left by a worker that was killed
                address.unlink(missing_ok=True)
                continue
            with conn:
                conn.send(Hello((), 0.0, 0))
                _, pid = conn.recv()
            _gone(pid)
            ended += 1
    return ended, busy


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
    """End the kept worker: its socket removed, then its process group (what its systems started too)."""
    with suppress(FileNotFoundError):
        address.unlink()
    os.killpg(os.getpgrp(), signal.SIGKILL)


def serve(argv: list[str], env: dict[str, str]) -> None:
    """A kept worker's life (argv: its socket's path, its idle seconds; env: the environment it was started with):
    listen, serve one run at a time, keep the systems each run used."""
    from threadpoolctl import threadpool_limits

    address, idle, own, code = Path(argv[0]), float(argv[1]), identity(env), UserCode()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threadpool_limits(1)
    with suppress(FileNotFoundError):
        address.unlink()  # a dead worker's socket (the run starting this one holds the lock and found none answer)
    watch = _Watch(address, idle)
    with Listener(str(address), family="AF_UNIX", authkey=key(address.parent)) as listener:
        while True:
            try:
                conn = listener.accept()  # the peer proved it holds the key before anything is unpickled
            except Exception:  # a wrong key (AuthenticationError), a peer that went away mid-handshake
                continue
            watch.attached = True
            with conn:
                hello = conn.recv()
                if not isinstance(hello, Hello) or hello.identity != own or code.changed():
                    conn.send(("stale", os.getpid()))
                    end(address)
                conn.send(("ready", os.getpid()))
                watch.idle = hello.idle
                _session(conn, hello.cores, watch, code)
            watch.attached = False
            watch.free()


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
