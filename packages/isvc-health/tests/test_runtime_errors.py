"""A sustained rate of the runtime's own 5xx (issue 42): said once from the meter's counts the probes carry, not
for a blip, again after a quiet window; a probe reads the meter's header; the schedule wakes the pass when more
5xx were counted."""

from __future__ import annotations

import http.server
import threading
from typing import Any

from isvc_health import METER_HEADER, Prober, ProbeSchedule, ProbeTarget, RuntimeErrors, TemplateResolver

KEY = ("team-a", "chat")


def test_a_sustained_rate_is_said_once_and_again_after_a_quiet_window() -> None:
    watch = RuntimeErrors(window=300, min_errors=5, min_share=0.05)
    for t, answered, errors in ((0, 100, 0), (30, 140, 4), (60, 180, 9)):
        watch.observe(KEY, ("chat-0", answered, errors), t)
    news = watch.news(KEY, 60)
    assert news is not None and "answered 9 of 80 requests with HTTP 5xx in the last 5 minutes" in news
    assert "chat-0" in news
    assert watch.news(KEY, 90) is None  # said once for the episode
    watch.observe(KEY, ("chat-0", 400, 9), 500)  # a window without a new one
    assert watch.news(KEY, 500) is None
    for t, answered, errors in ((530, 440, 15), (560, 480, 21)):
        watch.observe(KEY, ("chat-0", answered, errors), t)
    assert watch.news(KEY, 560) is not None  # a new episode


def test_a_blip_or_a_small_share_is_not_a_rate() -> None:
    watch = RuntimeErrors(window=300, min_errors=5, min_share=0.05)
    watch.observe(KEY, ("chat-0", 0, 0), 0)
    watch.observe(KEY, ("chat-0", 10, 3), 30)
    assert watch.news(KEY, 30) is None  # 3 errors: fewer than 5
    watch.observe(KEY, ("chat-1", 0, 0), 0)
    watch.observe(KEY, ("chat-1", 10_000, 6), 30)  # 9 of 10,010: under 5 %
    assert watch.news(KEY, 30) is None


def test_a_restarted_replica_starts_its_counts_anew() -> None:
    watch = RuntimeErrors()
    watch.observe(KEY, ("chat-0", 500, 40), 0)
    watch.observe(KEY, ("chat-0", 3, 0), 30)  # the meter started again
    assert watch.rate(KEY, 30) == (0, 0, [])


class Runtime(http.server.BaseHTTPRequestHandler):
    counts = (0, 0)

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = b'{"data": [{"id": "m"}]}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header(METER_HEADER, f"chat-0 {self.counts[0]} {self.counts[1]}")
        self.end_headers()
        self.wfile.write(body)


def test_a_probe_reads_the_meter_and_the_schedule_wakes_on_more_5xx() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Runtime)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    prober = Prober(TemplateResolver(f"http://127.0.0.1:{port}"))
    woken: list[tuple[str, str]] = []
    schedule = ProbeSchedule(prober, period=1, workers=1)
    schedule.on_change(lambda ns, name: woken.append((ns, name)))
    try:
        Runtime.counts = (10, 0)
        first = prober.probe("team-a", "chat", service="chat", port=port, token=None, model="m")
        assert first.ok and first.meter == ("chat-0", 10, 0)
        target = ProbeTarget("team-a", "chat", "chat", port, None, "m")
        schedule.watch(target, first)
        schedule.start()
        Runtime.counts = (20, 0)
        threading.Event().wait(2.5)
        assert woken == []  # more answers, no more 5xx: nothing to judge
        Runtime.counts = (30, 6)
        threading.Event().wait(2.5)
        assert woken and woken[0] == KEY
    finally:
        schedule.stop()
        prober.close()
        server.shutdown()
        server.server_close()
