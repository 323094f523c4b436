"""The control port's live dashboard in a real headless Chromium (Debian's chromium, driven by
Playwright), checked by the pixels of its screenshots.

The scenario is a user's: 600 records in ``orders``; a classic consumer group that committed
offset 400; a share consumer (kemu.client, explicit acknowledgement) that polled records 0-99
(and, as Java's consumer does, fetched 100-199 ahead), accepted 0-39, acknowledged 40-59 inside a
KIP-1289 transaction left open, and got 80-99 released by the control API. ``/`` leads to the
page; the share partition's bar shows the done records, TX_PENDING, ACQUIRED and AVAILABLE
records and the backlog in their colours at the offsets the page says it drew them; the lag
agrees with DescribeShareGroupOffsets; the tooltip names the transaction; the width follows the
window.

``KEMU_DASHBOARD_SCREENSHOTS=DIR`` also saves the pictures the docs show (docs/img).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kemu.client import (
    AcknowledgeType,
    Admin,
    ShareConsumer,
    ShareRecord,
    TransactionalProducer,
)
from kemu.control.dashboard import REGION_COLOURS, STATE_COLOURS
from kemu.testing.inprocess import InProcessKemu

pytestmark = pytest.mark.integration

TIMEOUT = 30.0
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SAVE = os.environ.get("KEMU_DASHBOARD_SCREENSHOTS")
T = TypeVar("T")
DASH = "\u2013"  # the page writes offset ranges with an en dash


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


class Loop:
    """An asyncio loop on its own thread, so kemu.client's heartbeats go on while the test
    drives the (synchronous) browser."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(TIMEOUT * 2)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(TIMEOUT)
        self.loop.close()


@pytest.fixture
def loop() -> Iterator[Loop]:
    running = Loop()
    yield running
    running.close()


def save(name: str, png: bytes) -> None:
    """Keep a picture for the docs, in 256 colours (a third of the bytes, the same look)."""
    if SAVE:
        image = pytest.importorskip("PIL.Image")
        Path(SAVE).mkdir(parents=True, exist_ok=True)
        picture = image.open(io.BytesIO(png)).convert("RGB").quantize(256)
        picture.save(Path(SAVE) / name, optimize=True)


async def hold_records(
    bootstrap: str, topic: str, group: str
) -> tuple[ShareConsumer, list[ShareRecord]]:
    """Acquire records 0-99 and accept 0-39."""
    async with Admin(bootstrap) as admin:
        await admin.set_group_configs(group, {"share.auto.offset.reset": "earliest"})
    consumer = ShareConsumer(
        bootstrap,
        group,
        acknowledgement_mode="explicit",
        max_poll_records=100,
        acquire_mode="record_limit",
        client_id="worker-1",
    )
    await consumer.subscribe([topic])
    records: list[ShareRecord] = []
    deadline = time.monotonic() + TIMEOUT
    while len(records) < 100 and time.monotonic() < deadline:
        records += await consumer.poll(timeout=1.0)
    assert [r.offset for r in records] == list(range(100))
    for record in records[:40]:
        consumer.acknowledge(record, AcknowledgeType.ACCEPT)
    assert all(error is None for error in (await consumer.commit()).values())
    return consumer, records


async def stage_in_transaction(
    bootstrap: str, consumer: ShareConsumer, records: list[ShareRecord], topic: str
) -> TransactionalProducer:
    """Acknowledge ``records`` in a transaction of ``shipper`` left open (TX_PENDING)."""
    producer = TransactionalProducer(bootstrap, "shipper")
    await producer.init_transactions()
    producer.begin_transaction()
    for record in records:
        await producer.send(f"{topic}-shipped", record.value)
        consumer.acknowledge(record, AcknowledgeType.ACCEPT)
    await producer.send_share_acknowledgements_to_transaction(
        consumer.acknowledgements_for_transaction(), consumer.share_group_metadata()
    )
    return producer


async def share_lag(bootstrap: str, group: str, topic: str) -> int:
    async with Admin(bootstrap) as admin:
        return await admin.share_group_lag(group, topic)


def committed_consumer(bootstrap: str, topic: str, group: str) -> Consumer:
    """A classic group member that owns the partition and committed offset 400."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "billing-1",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    consumer.commit(offsets=[TopicPartition(topic, 0, 400)], asynchronous=False)
    return consumer


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
def test_dashboard_shows_a_share_partition_from_log_start_to_high_watermark(
    kemu_inprocess_factory: type[InProcessKemu], loop: Loop
) -> None:
    playwright_api = pytest.importorskip("playwright.sync_api")
    image = pytest.importorskip("PIL.Image")
    kemu = kemu_inprocess_factory(
        brokers=1,
        with_control=True,
        overrides=[
            "kemu.kip1289.enable=true",
            "group.share.max.record.lock.duration.ms=3600000",
            "group.share.record.lock.duration.ms=600000",
        ],
    ).start()
    topic, group, billing = "orders", "workers", "billing"
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})

    def produce(offsets: range) -> None:
        for index in offsets:
            producer.produce(topic, b"order-%d" % index, partition=0)
        assert producer.flush(TIMEOUT) == 0

    for first in range(0, 600, 100):
        produce(range(first, first + 100))  # batches of 100: the window ends at a multiple
    share_consumer, held = loop.run(hold_records(kemu.bootstrap, topic, group))
    # As Java's, the consumer fetches the next 100 (100-199) while the application works
    deadline = time.monotonic() + TIMEOUT
    while kemu.control.share_state(group, topic, 0)["end_offset"] < 200:
        assert time.monotonic() < deadline, "the consumer's next fetch never came"
        time.sleep(0.05)
    assert kemu.control.share_state(group, topic, 0)["end_offset"] == 200
    consumer = committed_consumer(kemu.bootstrap, topic, billing)
    transaction = loop.run(stage_in_transaction(kemu.bootstrap, share_consumer, held[40:60], topic))
    try:
        kemu.control.release(group, topic, 0, 80, 99)
        assert loop.run(share_lag(kemu.bootstrap, group, topic)) == 560  # 600 - SPSO 40
        key = f"{group}/{topic}/0"
        with playwright_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
            )
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(kemu.control_url + "/")
                assert page.url == kemu.control_url + "/dashboard"
                page.wait_for_function("Number(document.body.dataset.updates || 0) >= 2")
                text = " ".join(page.inner_text("body").split())
                assert "lag 560" in text and "in flight 160" in text and "backlog 400" in text
                assert f"Records 0{DASH}39 are done (SPSO 40)." in text
                assert (
                    f"160 records in flight, 40{DASH}199: "
                    "20 TX_PENDING, 120 ACQUIRED, 20 AVAILABLE."
                ) in text
                assert "400 in the backlog from SPEO 200 to the high watermark 600." in text
                assert "Assigned to worker-1" in text  # the member, by its client id
                assert "billing-1" in text and "→ orders-0" in text  # members with partitions
                assert (
                    "shipper" in text and f"20 (workers orders-0 40{DASH}59)" in text
                )  # in records
                lag_row = page.locator("#consumer-lag tbody tr").first.inner_text().split()
                assert lag_row == ["billing", "orders-0", "400", "600", "200"]
                strip = page.locator(f'canvas.strip[data-key="{key}"]')
                shot = image.open(io.BytesIO(strip.screenshot())).convert("RGB")

                def pixel(offset: int, row: str) -> tuple[int, int, int]:
                    point = page.evaluate(
                        "([key, offset, row]) => window.kemu.point(key, offset, row)",
                        [key, offset, row],
                    )
                    colour: tuple[int, int, int] = shot.getpixel((int(point["x"]), int(point["y"])))
                    return colour

                assert pixel(20, "overview") == rgb(REGION_COLOURS["DONE"])
                backlog = {rgb(REGION_COLOURS["BACKLOG"]), rgb(REGION_COLOURS["BACKLOG_STRIPE"])}
                assert {pixel(o, "overview") for o in range(250, 600, 7)} == backlog
                for offset, state in [
                    (45, "TX_PENDING"),
                    (70, "ACQUIRED"),
                    (90, "AVAILABLE"),
                    (150, "ACQUIRED"),
                ]:
                    assert pixel(offset, "window") == rgb(STATE_COLOURS[state]), state
                box = strip.bounding_box()
                assert box is not None and box["width"] > 1200  # the window's width
                save("dashboard.png", page.screenshot(full_page=True))

                tx = page.evaluate(f"window.kemu.point({json.dumps(key)}, 50, 'window')")
                page.mouse.move(box["x"] + tx["x"], box["y"] + tx["y"] + 6)
                tip = " ".join(page.inner_text("#tip").split())
                assert f"offsets 40{DASH}59 · 20 records" in tip and "TX_PENDING" in tip, tip
                assert "delivery count 1" in tip and "transaction shipper" in tip, tip
                assert "its commit makes them ACKNOWLEDGED" in tip, tip
                save("dashboard-tooltip.png", strip_with_tip(page, box))

                page.set_viewport_size({"width": 700, "height": 900})
                page.wait_for_function("document.querySelector('canvas.strip').clientWidth < 700")
                narrow = strip.bounding_box()
                assert narrow is not None and narrow["width"] < 700
                shot = image.open(io.BytesIO(strip.screenshot())).convert("RGB")
                assert shot.size[0] == round(narrow["width"])
                assert pixel(45, "window") == rgb(STATE_COLOURS["TX_PENDING"])
                assert pixel(20, "overview") == rgb(REGION_COLOURS["DONE"])
            finally:
                browser.close()
    finally:
        loop.run(transaction.close())
        loop.run(share_consumer.close())
        consumer.close()


def strip_with_tip(page: Any, box: dict[str, float]) -> bytes:
    shot: bytes = page.screenshot(
        clip={"x": 0, "y": max(0, box["y"] - 60), "width": 1280, "height": box["height"] + 200}
    )
    return shot


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
def test_a_strip_of_10000_in_flight_records_stays_readable(
    kemu_inprocess_factory: type[InProcessKemu],
) -> None:
    """10,000 in-flight records in 10,000 one-record spans (the worst case) still make one strip
    of the page's width: each state's share of the window shows in its colour. A partition
    whose records are all done is drawn done from end to end."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    image = pytest.importorskip("PIL.Image")
    kemu = kemu_inprocess_factory(brokers=1, with_control=True).start()
    state = kemu.control.call("state")
    states = ["ACQUIRED"] * 5000 + ["AVAILABLE", "TX_PENDING"] * 2500  # left half, then mixed
    state["share_partitions"] = [
        {
            "group": "big",
            "topic": "t",
            "partition": 0,
            "log_start_offset": 1000,
            "high_watermark": 11000,
            "start_offset": 1000,
            "end_offset": 11000,
            "lag": 10000,
            "backlog": 0,
            "spans": [
                [1000 + i, 1000 + i, name, 1, None, None, None] for i, name in enumerate(states)
            ],
        },
        {
            "group": "big",
            "topic": "t",
            "partition": 1,
            "log_start_offset": 0,
            "high_watermark": 600,
            "start_offset": 600,
            "end_offset": 600,
            "lag": 0,
            "backlog": 0,
            "spans": [],
        },
    ]
    body = json.dumps(state)
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 700})
            page.route(
                "**/state",
                lambda route: route.fulfill(body=body, content_type="application/json"),
            )
            page.goto(kemu.control_url + "/dashboard")
            page.wait_for_function("Number(document.body.dataset.updates || 0) >= 1")
            text = " ".join(page.inner_text("body").split())
            assert f"10,000 records in flight, 1,000{DASH}10,999" in text
            assert f"Records 0{DASH}599 are done (SPSO 600)." in text
            assert "No backlog: SPEO 600 is the high watermark." in text
            done = page.locator('canvas.strip[data-key="big/t/1"]')
            done_shot = image.open(io.BytesIO(done.screenshot())).convert("RGB")
            done_at = [
                page.evaluate(f"window.kemu.point('big/t/1', {offset}, 'overview')")
                for offset in (5, 300, 595)
            ]
            strip = page.locator('canvas.strip[data-key="big/t/0"]')
            box = strip.bounding_box()
            assert box is not None and 900 < box["width"] < 1000  # one strip, the page's width
            shot = image.open(io.BytesIO(strip.screenshot())).convert("RGB")
            bar = page.evaluate("window.kemu.point('big/t/0', 1000, 'window')")["y"]
        finally:
            browser.close()
    width = shot.size[0]
    left = {shot.getpixel((x, bar)) for x in range(3, width // 2 - 3)}
    right = {shot.getpixel((x, bar)) for x in range(width // 2 + 3, width - 3)}
    assert left == {rgb(STATE_COLOURS["ACQUIRED"])}
    assert rgb(STATE_COLOURS["ACQUIRED"]) not in right
    assert right & {rgb(STATE_COLOURS["AVAILABLE"]), rgb(STATE_COLOURS["TX_PENDING"])}
    for point in done_at:
        colour = done_shot.getpixel((int(point["x"]), int(point["y"])))
        assert colour == rgb(REGION_COLOURS["DONE"])
