# SPDX-License-Identifier: Apache-2.0
"""Proof test for fix `rank-exception-fatal`.

An RPC that raises on a worker rank which is not the RPC's output rank must
end that worker (so the executor's worker monitor shuts the engine down)
instead of being logged and swallowed, which leaves the ranks out of step.
The output rank must keep reporting the failure to the executor.

Built on CPU with WorkerProc.__new__, as vLLM's own
tests/v1/executor/test_multiproc_executor.py does.
"""

import logging
import multiprocessing
import signal
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from vllm.v1.executor.multiproc_executor import MultiprocExecutor, WorkerProc


class _StopLoop(BaseException):
    """Raised by the fake queue to end the busy loop in the test."""


class _no_raise:
    """Context manager that turns the test's _StopLoop into a failure."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is _StopLoop:
            pytest.fail("worker kept looping after the failed RPC")
        return False


def _fail():
    raise RuntimeError("boom on this rank")


class _FakeBroadcastMQ:
    """Yields a failing RPC (reply from rank 0 only), then a marker RPC."""

    def __init__(self, output_rank: int | None = 0) -> None:
        self.requests = [
            ("fail", (), {}, output_rank),
            ("next_step", (), {}, output_rank),
        ]
        self.dequeue_count = 0

    def dequeue(self, *, indefinite: bool):
        assert indefinite
        self.dequeue_count += 1
        if self.requests:
            return self.requests.pop(0)
        raise _StopLoop

    def wait_until_ready(self):
        pass

    def shutdown(self):
        pass


class _FakeResponseMQ:
    def __init__(self) -> None:
        self.enqueued: list[Any] = []

    def enqueue(self, item):
        self.enqueued.append(item)

    def export_handle(self):
        return "handle"

    def wait_until_ready(self):
        pass

    def shutdown(self):
        pass


def _worker_proc(rank: int, mq: _FakeBroadcastMQ | None = None):
    """A WorkerProc with just what the RPC loop and output path use."""
    steps: list[str] = []
    proc: Any = WorkerProc.__new__(WorkerProc)
    proc.rank = rank
    proc.worker = SimpleNamespace(
        fail=_fail, next_step=lambda: steps.append("next_step") or "ok"
    )
    proc.use_async_scheduling = False
    proc.worker_response_mq = _FakeResponseMQ()
    proc.rpc_broadcast_mq = mq
    proc.peer_response_handles = []
    return proc, steps


def test_non_output_rank_exception_is_not_swallowed():
    proc, _ = _worker_proc(rank=1)
    # Upstream logs the error and returns normally, so rank 1 carries on.
    with pytest.raises(RuntimeError, match="boom on this rank"):
        proc._execute_worker_rpc(("fail", (), {}, 0))
    # A non-output rank still sends nothing back to the executor.
    assert proc.worker_response_mq.enqueued == []


def test_non_output_rank_busy_loop_ends():
    mq = _FakeBroadcastMQ(output_rank=0)
    proc, steps = _worker_proc(rank=1, mq=mq)
    # Upstream keeps looping: it runs the next RPC out of step with the
    # output rank (and here reaches _StopLoop instead of RuntimeError).
    with pytest.raises(RuntimeError, match="boom on this rank"):
        proc.worker_busy_loop()
    assert steps == []
    assert mq.dequeue_count == 1


def test_non_output_rank_worker_main_exits(monkeypatch):
    """worker_main (the worker process's target) returns after shutting the
    worker down, so the process ends and the executor's monitor fires."""
    mq = _FakeBroadcastMQ(output_rank=0)
    proc, steps = _worker_proc(rank=1, mq=mq)
    shutdowns: list[int] = []

    def fake_init(self, *args, **kwargs):
        self.__dict__.update(proc.__dict__)

    monkeypatch.setattr(WorkerProc, "__init__", fake_init)
    monkeypatch.setattr(WorkerProc, "shutdown", lambda self: shutdowns.append(1))

    records: list[logging.LogRecord] = []
    handler = logging.Handler(level=logging.ERROR)
    handler.emit = records.append  # type: ignore[method-assign]
    log = logging.getLogger("vllm.v1.executor.multiproc_executor")
    log.addHandler(handler)
    old_term = signal.getsignal(signal.SIGTERM)
    old_int = signal.getsignal(signal.SIGINT)
    ready = SimpleNamespace(sent=[], send=None, close=lambda: None)
    ready.send = ready.sent.append
    config = SimpleNamespace(
        parallel_config=SimpleNamespace(assigned_physical_gpu_ids=None, numa_bind=False),
        # 0.33.0's worker_main starts a watchdog from this; off unless dump_dir is set
        watchdog_config=SimpleNamespace(dump_dir=""),
    )
    try:
        with _no_raise():
            WorkerProc.worker_main(
                vllm_config=config,
                local_rank=1,
                rank=1,
                ready_pipe=ready,
                death_pipe=None,
            )
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)
        log.removeHandler(handler)

    assert ready.sent and ready.sent[0]["status"] == WorkerProc.READY_STR
    # Upstream ran the next RPC after the failure (out of step with the
    # output rank); it only got out of the loop here through _StopLoop.
    assert steps == []
    assert mq.dequeue_count == 1
    assert shutdowns == [1]
    assert any(r.getMessage() == "WorkerProc failed." for r in records)


@pytest.mark.parametrize(
    "rank,output_rank", [(0, 0), (2, 2), (1, None)], ids=["rank0", "rank2", "all"]
)
def test_output_rank_still_reports_failure(rank, output_rank):
    proc, _ = _worker_proc(rank=rank)
    proc._execute_worker_rpc(("fail", (), {}, output_rank))  # no raise
    assert proc.worker_response_mq.enqueued == [
        (WorkerProc.ResponseStatus.FAILURE, "boom on this rank")
    ]


def test_output_rank_busy_loop_continues():
    mq = _FakeBroadcastMQ(output_rank=0)
    proc, steps = _worker_proc(rank=0, mq=mq)
    with pytest.raises(_StopLoop):
        proc.worker_busy_loop()
    assert steps == ["next_step"]
    assert proc.worker_response_mq.enqueued == [
        (WorkerProc.ResponseStatus.FAILURE, "boom on this rank"),
        (WorkerProc.ResponseStatus.SUCCESS, "ok"),
    ]


def test_non_output_rank_success_unchanged():
    proc, steps = _worker_proc(rank=1)
    proc._execute_worker_rpc(("next_step", (), {}, 0))
    assert steps == ["next_step"]
    assert proc.worker_response_mq.enqueued == []


class _BlockingBroadcastMQ(_FakeBroadcastMQ):
    """Like a real MessageQueue: once the failing RPC is consumed, the next
    dequeue waits for work that the executor never sends."""

    def dequeue(self, *, indefinite: bool):
        assert indefinite
        self.dequeue_count += 1
        if self.dequeue_count == 1:
            return self.requests.pop(0)
        time.sleep(3600)


def _child_worker_main(rank: int) -> None:
    proc, _ = _worker_proc(rank=rank, mq=_BlockingBroadcastMQ(output_rank=0))

    def fake_init(self, *args, **kwargs):
        self.__dict__.update(proc.__dict__)

    WorkerProc.__init__ = fake_init  # type: ignore[method-assign]
    WorkerProc.shutdown = lambda self: None  # type: ignore[method-assign]
    ready = SimpleNamespace(send=lambda msg: None, close=lambda: None)
    config = SimpleNamespace(
        parallel_config=SimpleNamespace(assigned_physical_gpu_ids=None, numa_bind=False),
        # 0.33.0's worker_main starts a watchdog from this; off unless dump_dir is set
        watchdog_config=SimpleNamespace(dump_dir=""),
    )
    WorkerProc.worker_main(
        vllm_config=config, local_rank=rank, rank=rank, ready_pipe=ready,
        death_pipe=None,
    )


def test_executor_monitor_shuts_down_on_non_output_rank_error():
    """End to end across a real process: the non-output rank's failure makes
    its process exit, and MultiprocExecutor's worker monitor then shuts the
    executor down and reports the failure to the engine."""
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_child_worker_main, args=(1,), daemon=True)
    child.start()
    try:
        executor: Any = MultiprocExecutor.__new__(MultiprocExecutor)
        executor.workers = [SimpleNamespace(proc=child)]
        executor.is_failed = False
        executor.shutting_down = False
        executor.failure_callback = None
        shut_down = threading.Event()
        failed = threading.Event()
        executor.shutdown = shut_down.set
        executor.register_failure_callback(failed.set)
        executor.start_worker_monitor()
        # Upstream: the worker swallows the error and waits for the next RPC,
        # so the engine is never told (it would hang on the next collective).
        assert failed.wait(timeout=15), "worker still running after RPC error"
        assert shut_down.is_set()
        assert executor.is_failed
    finally:
        if child.is_alive():
            child.kill()
        child.join(timeout=10)
