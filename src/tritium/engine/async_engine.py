"""The engine core driven by one background thread, for asyncio servers: each request gets its own stream.

    engine = AsyncLLMEngine(LLMEngine("model.gguf"), max_queue=256)
    engine.start()
    stream = engine.submit([("r1", prompt_ids, SamplingParams(max_tokens=32))])   # in a running event loop
    async for out in stream:           # RequestOutput of each step that advanced r1 (text_delta, new tokens)
        ...
    stream.abort()                     # or leave the loop early: the requests are aborted, pages freed
    engine.shutdown()

One thread owns the :class:`~tritium.engine.llm_engine.LLMEngine`: it applies the requests added and aborted
since the last step (so a new request joins the running batch at the next step: continuous batching,
chunked prefill), runs a step, and hands each output to the stream of its request on that stream's event
loop (one ``call_soon_threadsafe`` per loop and step). When nothing is left to do it sleeps until a request
comes. An abort takes effect at the next step boundary: the request's KV pages are freed then, before the
next step runs. The model's work runs in that thread; the event loop only moves outputs and bytes.

``max_queue`` bounds the requests that wait (queued for the engine thread or waiting in the scheduler) beyond
the running batch's free slots (``max_num_seqs`` less the running requests, as of the last step): requests that
will start at the next step do not count. :meth:`AsyncLLMEngine.submit` raises :class:`QueueFullError` past it
instead of letting the queue grow, and :class:`RequestTooLargeError` for a request of more sequences than
``max_num_seqs + max_queue``, which no wait would admit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from typing import Iterable

from tritium.engine.llm_engine import LLMEngine
from tritium.engine.sampling import SamplingParams
from tritium.engine.sequence import RequestOutput

log = logging.getLogger(__name__)


class QueueFullError(RuntimeError):
    """More requests wait than ``max_queue`` allows."""


class RequestTooLargeError(ValueError):
    """A request of more sequences than the engine runs and queues at once: never admitted, however long it waits."""


class EngineStoppedError(RuntimeError):
    """The engine shut down (or failed) before the request finished."""


@dataclasses.dataclass
class EngineStats:
    """A snapshot the engine thread takes after each step (read by metrics without locking)."""

    num_running: int = 0
    num_waiting: int = 0
    kv_cache_usage: float = 0.0
    num_draft_tokens: int = 0      # speculative decoding: draft tokens proposed and accepted so far
    num_accepted_tokens: int = 0
    lora_running: tuple[str, ...] = ()  # the LoRA adapters of running and of waiting requests (sorted names)
    lora_waiting: tuple[str, ...] = ()


_ABORTED = object()  # ends a stream's iteration after abort()


class RequestStream:
    """The outputs of one submission (one or more engine requests), in the order the engine made them.

    ``async for out in stream`` yields :class:`RequestOutput` objects until every request of the submission
    finished; leaving the loop early (a break, an exception, a cancelled task) aborts the unfinished ones.
    Raises :class:`EngineStoppedError` if the engine shuts down or fails first.
    """

    def __init__(self, engine: "AsyncLLMEngine", request_ids: list[str], loop: asyncio.AbstractEventLoop):
        self._engine = engine
        self.request_ids = request_ids
        self.loop = loop
        self._queue: asyncio.Queue = asyncio.Queue()
        self._unfinished = set(request_ids)
        self.aborted = False  # abort() stopped requests that had not finished

    def _put(self, item) -> None:  # on the stream's loop
        self._queue.put_nowait(item)

    @property
    def finished(self) -> bool:
        return not self._unfinished

    def abort(self) -> None:
        """Abort the requests of this stream that did not finish (their pages are freed before the next step);
        an iteration in progress ends. Call it on the stream's event loop."""
        if self._unfinished:
            self._engine.abort(list(self._unfinished))
            self._unfinished.clear()
            self.aborted = True
            self._queue.put_nowait(_ABORTED)

    def __aiter__(self):
        return self._iterate()

    async def _iterate(self):
        try:
            while self._unfinished:
                item = await self._queue.get()
                if item is _ABORTED:
                    return
                if isinstance(item, BaseException):
                    self._unfinished.clear()
                    raise item
                if item.finished:
                    self._unfinished.discard(item.request_id)
                yield item
        finally:
            self.abort()
            self._engine._forget(self)


class AsyncLLMEngine:
    """An :class:`LLMEngine` stepped by one background thread; see the module docstring.

    ``engine``: the engine (used only by that thread once :meth:`start` is called). ``max_queue``: most
    requests that may wait beyond the running batch's free slots (None: unbounded).
    """

    def __init__(self, engine: LLMEngine, *, max_queue: int | None = None):
        if max_queue is not None and (not isinstance(max_queue, int) or isinstance(max_queue, bool) or max_queue < 1):
            raise ValueError(f"max_queue must be an int >= 1 or None, got {max_queue!r}")
        self.engine = engine
        self.max_queue = max_queue
        self.stats = EngineStats()
        self.error: BaseException | None = None
        self._cond = threading.Condition()
        # (id, prompt ids, params, LoRA adapter or None, stream), guarded by _cond
        self._adds: list[tuple] = []
        self._applying = 0  # adds the engine thread has taken and not yet counted in self.stats
        self._live: set[RequestStream] = set()  # streams submitted and not yet ended, for stop(); guarded by _cond
        self._aborts: list[str] = []  # guarded by _cond
        self._calls: list[tuple] = []  # (fn, loop, future): run on the engine thread between steps; guarded by _cond
        self._stopping = False
        self._streams: dict[str, RequestStream] = {}  # engine thread only
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the engine loop is already started")
        self._thread = threading.Thread(target=self._run, name="tritium-engine", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopping

    def stop(self) -> None:
        """Ask the loop to stop after the step in flight (returns at once; safe in a signal handler's thread):
        unfinished requests end with :class:`EngineStoppedError` at once, not after that step (which can take
        seconds: a long prefill chunk on a CPU), new ones are refused."""
        with self._cond:
            self._stopping = True
            live, self._live = self._live, set()
            self._cond.notify()
        error = EngineStoppedError("the server is shutting down")
        for stream in live:  # the engine thread aborts their requests when the step in flight ends
            try:
                stream.loop.call_soon_threadsafe(stream._put, error)
            except RuntimeError:  # the loop closed: nobody listens
                pass

    def _forget(self, stream: RequestStream) -> None:
        """A stream whose iteration ended (finished, aborted or failed): stop() has nothing to tell it."""
        with self._cond:
            self._live.discard(stream)

    def shutdown(self, timeout: float = 30.0) -> None:
        """:meth:`stop`, then wait for the engine thread to end."""
        self.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- requests (any thread; submit from a running event loop) ------------------------------------------
    def submit(self, requests: Iterable[tuple]) -> RequestStream:
        """Queue requests ``(request_id, prompt token ids, params[, lora_request])`` together; they join the
        running batch at the next step. Raises :class:`QueueFullError` if they would take the requests waiting
        beyond the batch's free slots past ``max_queue`` (none is queued then), :class:`RequestTooLargeError` if
        they are more than ``max_num_seqs + max_queue`` (none could be), :class:`EngineStoppedError` if the loop is
        not running."""
        requests = list(requests)
        loop = asyncio.get_running_loop()
        stream = RequestStream(self, [r[0] for r in requests], loop)
        with self._cond:
            if self.error is not None or self._stopping or self._thread is None:
                raise EngineStoppedError("the engine is not running" + (f": {self.error}" if self.error else ""))
            if self.max_queue is not None:
                slots = self.engine.config.max_num_seqs
                if len(requests) > slots + self.max_queue:
                    raise RequestTooLargeError(
                        f"this request's {len(requests)} sequences (prompts x n) are more than the server runs and "
                        f"queues at once: {slots} running (--max-num-seqs) + {self.max_queue} waiting (--max-queue)")
                stats = self.stats
                waiting = len(self._adds) + self._applying + stats.num_waiting
                free = max(0, slots - stats.num_running)
                if waiting + len(requests) - free > self.max_queue:
                    raise QueueFullError(f"{waiting} requests are waiting for {free} free slots of the running batch "
                                         f"and the queue holds {self.max_queue} more (--max-queue); try again later")
            for rid, ids, params, *lora in requests:
                self._adds.append((rid, ids, params, lora[0] if lora else None, stream))
            self._live.add(stream)
            self._cond.notify()
        return stream

    async def call(self, fn):
        """``fn(engine)`` run on the engine thread between two steps (what must not race with a step: loading a
        LoRA adapter, say); its result, or the exception it raised. :class:`EngineStoppedError` if the loop is
        not running."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._cond:
            if self.error is not None or self._stopping or self._thread is None:
                raise EngineStoppedError("the engine is not running" + (f": {self.error}" if self.error else ""))
            self._calls.append((fn, loop, future))
            self._cond.notify()
        return await future

    def abort(self, request_ids: list[str]) -> None:
        """Abort requests (unknown or finished ids are ignored); their pages are freed before the next step."""
        with self._cond:
            self._aborts.extend(request_ids)
            self._cond.notify()

    # -- the engine thread ---------------------------------------------------------------------------------
    def _run(self) -> None:
        engine = self.engine
        try:
            while True:
                with self._cond:
                    while not (self._adds or self._aborts or self._calls or self._stopping or engine.has_unfinished()):
                        self._cond.wait()
                    adds, self._adds = self._adds, []
                    self._applying = len(adds)  # counted as waiting by submit until the snapshot has them
                    aborts, self._aborts = self._aborts, []
                    calls, self._calls = self._calls, []
                    stopping = self._stopping
                if stopping:
                    self._fail_all(EngineStoppedError("the server is shutting down"), adds, calls)
                    return
                for fn, loop, future in calls:
                    try:
                        _settle(loop, future, fn(engine), None)
                    except Exception as e:  # the caller's to report
                        _settle(loop, future, None, e)
                self._apply(adds, aborts)
                self._applying = 0
                if engine.has_unfinished():
                    self._dispatch(engine.step())
                self._snapshot()
        except BaseException as e:  # the engine broke: fail every request, refuse new ones
            log.exception("the engine loop failed")
            with self._cond:
                self.error = e
                adds, self._adds = self._adds, []
                calls, self._calls = self._calls, []
            self._fail_all(EngineStoppedError(f"the engine failed: {type(e).__name__}: {e}"), adds, calls)

    def _apply(self, adds, aborts) -> None:
        engine = self.engine
        aborted = set(aborts)
        for rid in aborts:
            self._streams.pop(rid, None)
            engine.abort(rid)
        for rid, ids, params, lora, stream in adds:
            if rid in aborted:
                continue
            try:
                engine.add_request(rid, ids, params, lora_request=lora)
            except Exception as e:  # a request the caller did not check (a duplicate id, say): it alone fails
                stream.loop.call_soon_threadsafe(stream._put, e)
                continue
            self._streams[rid] = stream
        if aborts or adds:
            self._snapshot()

    def _dispatch(self, outputs: list[RequestOutput]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for out in outputs:
            stream = self._streams.get(out.request_id)
            if stream is None:  # aborted
                continue
            if out.finished:
                del self._streams[out.request_id]
            by_loop.setdefault(stream.loop, []).append((stream, out))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_deliver, items)
            except RuntimeError:  # the loop closed (the server stopped): nobody listens
                pass

    def _snapshot(self) -> None:
        engine = self.engine
        lora_running, lora_waiting = engine.lora_requests()
        self.stats = EngineStats(num_running=engine.num_running, num_waiting=engine.num_waiting,
                                 kv_cache_usage=engine.kv_cache_usage, num_draft_tokens=engine.num_draft_tokens,
                                 num_accepted_tokens=engine.num_accepted_tokens, lora_running=lora_running,
                                 lora_waiting=lora_waiting)

    def _fail_all(self, error: BaseException, adds, calls=()) -> None:
        for _, loop, future in calls:
            _settle(loop, future, None, error)
        streams = {id(s): s for s in self._streams.values()}
        streams.update({id(a[-1]): a[-1] for a in adds})
        try:
            for rid in list(self._streams):
                self.engine.abort(rid)
            self._snapshot()
        except Exception:  # a broken engine: its state no longer matters
            log.debug("aborting after a failure", exc_info=True)
        self._streams.clear()
        for stream in streams.values():
            try:
                stream.loop.call_soon_threadsafe(stream._put, error)
            except RuntimeError:
                pass


def _deliver(items) -> None:
    for stream, out in items:
        stream._put(out)


def _settle(loop: asyncio.AbstractEventLoop, future: asyncio.Future, result, error: BaseException | None) -> None:
    """Give ``future`` (of ``loop``) its result or exception from another thread (nothing if it was cancelled or
    its loop closed)."""
    def settle():
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(result)
    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:
        pass
