"""Prometheus metrics of one server (its own registry, so several servers can live in one process).

Gauges read the engine thread's latest snapshot when scraped: ``tritium:num_requests_running``,
``tritium:num_requests_waiting``, ``tritium:kv_cache_usage_perc`` (0..1). Counters: ``prompt_tokens_total``,
``generation_tokens_total``, ``request_success_total{finished_reason}``, ``request_rejected_total{reason}``,
``request_aborted_total`` (clients that disconnected), ``spec_decode_num_draft_tokens_total`` and
``spec_decode_num_accepted_tokens_total`` (speculative decoding: draft tokens proposed and accepted, from the
engine's snapshot). With LoRA adapters, ``lora_requests_info`` (vLLM's): value 1, labels
``running_lora_adapters`` and ``waiting_lora_adapters`` (comma-separated names) and ``max_lora``.
Histograms: ``time_to_first_token_seconds`` (request received to its first token out of the engine),
``inter_token_latency_seconds`` (between a request's tokens; a step that brings k tokens counts k gaps of
1/k of its wait) and ``e2e_request_latency_seconds``.
"""

from __future__ import annotations

import time

from tritium.engine import AsyncLLMEngine, RequestOutput

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
                    0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)


class _SpecDecodeCollector:
    """The engine's speculative-decoding totals as counters, read from its latest snapshot when scraped."""

    def __init__(self, engine: AsyncLLMEngine, labels: dict, family):
        self.engine, self.labels, self.family = engine, labels, family  # family: CounterMetricFamily

    def collect(self):
        stats = self.engine.stats
        for name, doc, value in (
                ("spec_decode_num_draft_tokens", "Draft tokens proposed (speculative decoding).",
                 stats.num_draft_tokens),
                ("spec_decode_num_accepted_tokens", "Draft tokens accepted (speculative decoding).",
                 stats.num_accepted_tokens)):
            family = self.family(f"tritium:{name}", doc, labels=list(self.labels))
            family.add_metric(list(self.labels.values()), value)
            yield family


class _LoRACollector:
    """Which LoRA adapters running and waiting requests use, as labels of a gauge (vLLM's ``lora_requests_info``)."""

    def __init__(self, engine: AsyncLLMEngine, labels: dict, family, max_loras: int):
        self.engine, self.labels, self.family, self.max_loras = engine, labels, family, max_loras

    def collect(self):
        stats = self.engine.stats
        names = [*self.labels, "running_lora_adapters", "waiting_lora_adapters", "max_lora"]
        family = self.family("tritium:lora_requests_info", "LoRA adapters of the running and waiting requests.",
                             labels=names)
        family.add_metric([*self.labels.values(), ",".join(stats.lora_running), ",".join(stats.lora_waiting),
                           str(self.max_loras)], 1.0)
        yield family


class Metrics:
    """The server's metrics; ``render()`` gives the Prometheus text format."""

    def __init__(self, engine: AsyncLLMEngine, model_name: str):
        import prometheus_client as prom

        self._prom = prom
        self.registry = registry = prom.CollectorRegistry()
        labels = {"model_name": model_name}

        def gauge(name, doc, read):
            g = prom.Gauge(f"tritium:{name}", doc, labelnames=list(labels), registry=registry).labels(**labels)
            g.set_function(read)

        gauge("num_requests_running", "Requests in the running batch.", lambda: engine.stats.num_running)
        gauge("num_requests_waiting", "Requests waiting to be scheduled.", lambda: engine.stats.num_waiting)
        gauge("kv_cache_usage_perc", "Fraction of KV-cache pages in use (0..1; with a window pool, the fuller pool's).",
              lambda: engine.stats.kv_cache_usage)
        registry.register(_SpecDecodeCollector(engine, labels, prom.metrics_core.CounterMetricFamily))
        if engine.engine.loras is not None:
            registry.register(_LoRACollector(engine, labels, prom.metrics_core.GaugeMetricFamily,
                                             engine.engine.config.max_loras))
        self.prompt_tokens = prom.Counter("tritium:prompt_tokens", "Prompt tokens of admitted requests.",
                                          labelnames=list(labels), registry=registry).labels(**labels)
        self.generation_tokens = prom.Counter("tritium:generation_tokens", "Generated tokens.",
                                              labelnames=list(labels), registry=registry).labels(**labels)
        self.success = prom.Counter("tritium:request_success", "Finished requests by finish reason.",
                                    labelnames=[*labels, "finished_reason"], registry=registry)
        self.aborted = prom.Counter("tritium:request_aborted", "Requests aborted because the client disconnected.",
                                    labelnames=list(labels), registry=registry).labels(**labels)
        self.rejected = prom.Counter("tritium:request_rejected", "Requests refused before running, by reason.",
                                     labelnames=[*labels, "reason"], registry=registry)
        self.ttft = prom.Histogram("tritium:time_to_first_token_seconds", "Time to the first token.",
                                   labelnames=list(labels), buckets=_LATENCY_BUCKETS, registry=registry).labels(**labels)
        self.itl = prom.Histogram("tritium:inter_token_latency_seconds", "Time between tokens of a request.",
                                  labelnames=list(labels), buckets=_LATENCY_BUCKETS, registry=registry).labels(**labels)
        self.e2e = prom.Histogram("tritium:e2e_request_latency_seconds", "Request latency, received to finished.",
                                  labelnames=list(labels), buckets=_LATENCY_BUCKETS, registry=registry).labels(**labels)
        self.labels = labels

    def render(self) -> tuple[bytes, str]:
        return self._prom.generate_latest(self.registry), self._prom.CONTENT_TYPE_LATEST

    def reject(self, reason: str) -> None:
        self.rejected.labels(**self.labels, reason=reason).inc()

    def tracker(self, prompt_tokens: int, arrival: float) -> "RequestTracker":
        self.prompt_tokens.inc(prompt_tokens)
        return RequestTracker(self, arrival)


class RequestTracker:
    """Per-request timing: call ``observe(out)`` for each engine output of one request group."""

    def __init__(self, metrics: Metrics, arrival: float):
        self.metrics = metrics
        self.arrival = arrival
        self.last: dict[str, float] = {}  # request id -> time of its last token

    def observe(self, out: RequestOutput) -> None:
        m, now, k = self.metrics, time.perf_counter(), len(out.new_token_ids)
        if k:
            m.generation_tokens.inc(k)
            last = self.last.get(out.request_id)
            if last is None:
                m.ttft.observe(now - self.arrival)
                gaps = k - 1
                gap = 0.0
            else:
                gaps = k
                gap = (now - last) / k
            for _ in range(gaps):
                m.itl.observe(gap)
            self.last[out.request_id] = now
        if out.finished:
            m.e2e.observe(now - self.arrival)
            m.success.labels(**m.labels, finished_reason=out.finish_reason or "unknown").inc()
