"""The Ray executor: batches as Ray tasks on a local Ray or a cluster, joined with clear errors."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any

from causalrate.errors import UserError
from causalrate.forecast.dispatch import Breaker, Feed, Progress
from causalrate.forecast.jobs import GRACE_SECONDS, BatchResult, Job, OnDone
from causalrate.forecast.worker import run_job


class RayExecutor:
    """Batches as Ray tasks on a local Ray (num_cpus = workers) or the cluster at `address`."""

    def __init__(self, workers: int, *, address: str | None = None, retries: int = 1) -> None:
        try:
            import ray
        except ImportError:
            raise UserError("--executor ray needs Ray: pip install 'causalrate[ray]'") from None
        self.ray = ray
        self.workers = workers
        self.retries = retries
        if not ray.is_initialized():
            if address:
                _join(ray, address)
            else:
                ray.init(  # "local": a Ray of our own, even when another cluster runs here (or left its file behind)
                    address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False,
                    configure_logging=False,
                )  # fmt: skip

    def run(
        self,
        jobs: Iterable[Job],
        on_done: OnDone,
        *,
        expected: Callable[[], int] | None = None,
        label: str = "forecasting",
    ) -> None:
        """As LocalExecutor.run, with at most 2 × workers batches submitted at a time."""
        ray = self.ray
        remote = ray.remote(max_retries=self.retries, num_cpus=1)(_ray_job)
        on_gpu = remote.options(num_gpus=1)  # Ray places accelerator batches on a worker that holds a device
        limit = max(2 * self.workers, 1)  # few in flight: submission time ≈ start time
        feed = Feed(jobs, ahead=limit, expected=expected)
        running: dict[Any, tuple[int, float]] = {}
        breaker = Breaker(on_done)
        with Progress(feed.expected, label, breaker) as done:
            try:
                while True:
                    feed.fill()
                    if not (feed.unfinished or running):
                        break
                    breaker.stop(feed, done)
                    while feed.pending and len(running) < limit:
                        index = feed.pending.pop()
                        feed.attempts[index] += 1
                        task = on_gpu if feed.jobs[index].accelerator else remote
                        running[task.remote(feed.jobs[index])] = (index, time.monotonic())
                    ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
                    for ref in ready:
                        index, _ = running.pop(ref)
                        try:
                            result = ray.get(ref)
                        except Exception as exc:  # a worker that died after its retries
                            if len(feed.jobs[index].parts) > 1:
                                feed.split(index)
                                continue
                            result = BatchResult.failed(feed.jobs[index], f"Ray task failed: {type(exc).__name__}", 0.0)
                        done(feed.settle(index), result)
                    for ref, (index, started) in list(running.items()):
                        elapsed = time.monotonic() - started
                        if elapsed <= feed.jobs[index].timeout * 2 + GRACE_SECONDS:  # queued time counts: be lenient
                            continue
                        ray.cancel(ref, force=True)
                        del running[ref]
                        if len(feed.jobs[index].parts) > 1:
                            feed.split(index)
                        elif feed.attempts[index] <= self.retries:
                            feed.pending.append(index)
                        else:
                            why = f"Ray worker hung and was killed after {elapsed:.0f} s"
                            job = feed.settle(index)
                            done(job, BatchResult.failed(job, why, elapsed))
            finally:  # after Ctrl-C or an error, nothing keeps running for this run
                for ref in running:
                    ray.cancel(ref, force=True)


CONNECT_SECONDS = 5.0  # to reach a Ray cluster's address before Ray's own retries (minutes, silent) begin


def _join(ray: Any, address: str) -> None:
    """ray.init at a cluster's address; a refused connection or a cluster that wants a token is a UserError.

    Ray's C++ core logs each failed attempt on fd 2 (about 20 "InvalidAuthToken" lines for a cluster with
    token authentication, then a bare ConnectionError): those lines are caught, read for the cause, and shown
    only when they are not explained by the message.
    """
    reachable(address)
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as logs:
        os.dup2(logs.fileno(), 2)
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
            failure = None
        except Exception as exc:
            failure = exc
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        logs.seek(0)
        said = logs.read().decode(errors="replace")
    if failure is None:
        sys.stderr.write(said)
        return
    if isinstance(failure, ray.exceptions.AuthenticationError) or _wants_token(said + str(failure)):
        raise UserError(
            f"--address {address}: the Ray cluster uses token authentication; set RAY_AUTH_MODE=token and give its "
            "token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token; `ray get-auth-token` on the head "
            "node prints it)"
        ) from None
    sys.stderr.write(said)
    raise UserError(f"--address {address}: cannot join the Ray cluster ({type(failure).__name__}: {failure})") from None


def reachable(address: str) -> None:
    """UserError unless a Ray cluster answers at `address` ("host:port") within CONNECT_SECONDS in all.

    Two steps, each bounded: a TCP connection (refused, or no answer: nothing listens), then Ray's own
    handshake — the cluster's id asked of its GCS — in a child process killed at the deadline. Ray's
    ray.init retries that handshake 20 times, and a port that accepts but never answers (another service, a
    firewall that holds connections) costs it about 40 s a try: minutes of silence. "ray://host:port" (Ray
    Client) is checked for a listener only; "auto" and "local" are Ray's to resolve.
    """
    scheme, _, rest = address.rpartition("://")
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local": Ray finds the cluster itself
    started = time.monotonic()
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise UserError(
            f"--address {address}: no Ray cluster answers there within {CONNECT_SECONDS:g} s ({exc}); start one "
            "with `ray start --head` and give the address it prints, or leave --address out for a local Ray"
        ) from None
    if scheme:
        return  # Ray Client speaks its own protocol; ray.init reports what it finds
    answer = _handshake(rest, CONNECT_SECONDS - (time.monotonic() - started))
    if answer is None:
        raise UserError(
            f"--address {address}: something accepts connections there, but no Ray cluster answered within "
            f"{CONNECT_SECONDS:g} s; give the address `ray start --head` prints (the GCS port, 6379 by default), "
            "or leave --address out for a local Ray"
        )
    if answer != "answered" and not _wants_token(answer):  # a token: ray.init loads and sends it
        raise UserError(
            f"--address {address}: what answers there is not a Ray cluster ({answer[:300]}); give the address "
            "`ray start --head` prints, or leave --address out for a local Ray"
        )


HANDSHAKE = """
import sys
from ray._raylet import GcsClient
print("asking", flush=True)
try:
    GcsClient(address=sys.argv[1])
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}")
else:
    print("answered")
"""  # run in a child process, so an unanswered try is killed at the deadline (Ray's own lasts 40 s, logging)


def _handshake(address: str, seconds: float) -> str | None:
    """Ask the GCS at `address` for its cluster id, once: "answered", the error it answered with
    ("RpcError: …"), or None when nothing answered within `seconds` (from the ask, after the child's imports)."""
    child = subprocess.Popen(
        [sys.executable, "-c", HANDSHAKE, address], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert child.stdout is not None
    try:
        if child.stdout.readline().strip() != "asking":  # Ray's module failed to load: ray.init will say why
            return "answered"
        said, _ = child.communicate(timeout=max(seconds, 0.1))
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        return None
    finally:
        child.stdout.close()
    return said.strip() or "answered"


def _wants_token(text: str) -> bool:
    return "InvalidAuthToken" in text


def _ray_job(job: Job) -> BatchResult:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return run_job(job)
