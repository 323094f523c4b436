"""The control port's live dashboard in a real headless Chromium (Debian's chromium, driven by
Playwright): after a scenario with a share consumer holding records, a range released by the
control API and an open transaction, the page shows the topic, the group, SPSO/SPEO, the open
transaction, and a screenshot of the share partition's strip has the ACQUIRED colour over the
held half and the AVAILABLE colour over the released half."""

from __future__ import annotations

import io
import json
import shutil
import time
import uuid

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from kemu.control.dashboard import STATE_COLOURS
from kemu.testing.plugin import KemuProcess

pytestmark = pytest.mark.integration

TIMEOUT = 30.0
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
def test_dashboard_shows_the_record_strip(kemu_factory: type[KemuProcess]) -> None:
    playwright_api = pytest.importorskip("playwright.sync_api")
    image = pytest.importorskip("PIL.Image")
    kemu = kemu_factory(
        brokers=3,
        with_control=True,
        overrides=[
            "group.share.max.record.lock.duration.ms=3600000",
            "group.share.record.lock.duration.ms=600000",
        ],
    ).start()
    topic, group = f"d-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kemu.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": kemu.bootstrap})
    for index in range(20):
        producer.produce(topic, b"v%d" % index, partition=0)
    assert producer.flush(TIMEOUT) == 0
    consumer = ShareConsumer({"bootstrap.servers": kemu.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    try:
        got = 0
        deadline = time.monotonic() + TIMEOUT
        while got < 20 and time.monotonic() < deadline:
            got += len(consumer.poll(0.2))
        assert got == 20
        kemu.control.release(group, topic, 0, 10, 19)  # the right half back to AVAILABLE
        transactional = Producer(
            {"bootstrap.servers": kemu.bootstrap, "transactional.id": "dash-tx"}
        )
        transactional.init_transactions(TIMEOUT)
        transactional.begin_transaction()
        transactional.produce(f"{topic}", b"open", partition=0)
        assert transactional.flush(TIMEOUT) == 0

        with playwright_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            try:
                page = browser.new_page()
                page.goto(kemu.control_url + "/dashboard")
                page.wait_for_function("Number(document.body.dataset.updates || 0) >= 2")
                text = page.inner_text("body")
                assert topic in text and group in text and "dash-tx" in text
                assert "SPSO 0 SPEO 20 (20 in flight)" in " ".join(text.split())
                strip = page.locator(f'canvas.strip[data-key="{group}/{topic}/0"]')
                shot = image.open(io.BytesIO(strip.screenshot())).convert("RGB")
            finally:
                browser.close()
        width, height = shot.size
        middle = height // 2
        assert shot.getpixel((width // 4, middle)) == rgb(STATE_COLOURS["ACQUIRED"])
        assert shot.getpixel((3 * width // 4, middle)) == rgb(STATE_COLOURS["AVAILABLE"])
    finally:
        consumer.close()


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
def test_a_strip_of_10000_in_flight_records_stays_readable(
    kemu_factory: type[KemuProcess],
) -> None:
    """10,000 in-flight records in 10,000 one-record spans (the worst case) still make one strip
    of the page's width: each state's share of the window shows in its colour."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    image = pytest.importorskip("PIL.Image")
    kemu = kemu_factory(brokers=1, with_control=True).start()
    state = kemu.control.call("state")
    states = ["ACQUIRED"] * 5000 + ["AVAILABLE", "TX_PENDING"] * 2500  # left half, then mixed
    state["share_partitions"] = [
        {
            "group": "big",
            "topic": "t",
            "partition": 0,
            "start_offset": 1000,
            "end_offset": 11000,
            "spans": [[1000 + i, 1000 + i, name] for i, name in enumerate(states)],
        }
    ]
    body = json.dumps(state)
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page()
            page.route(
                "**/state",
                lambda route: route.fulfill(body=body, content_type="application/json"),
            )
            page.goto(kemu.control_url + "/dashboard")
            page.wait_for_function("Number(document.body.dataset.updates || 0) >= 1")
            assert "SPSO 1000 SPEO 11000 (10000 in flight)" in " ".join(
                page.inner_text("body").split()
            )
            strip = page.locator('canvas.strip[data-key="big/t/0"]')
            box = strip.bounding_box()
            assert box is not None and box["width"] <= 802  # one strip, the page's width
            shot = image.open(io.BytesIO(strip.screenshot())).convert("RGB")
        finally:
            browser.close()
    width, height = shot.size
    left = {shot.getpixel((x, height // 2)) for x in range(2, width // 2 - 2)}
    right = {shot.getpixel((x, height // 2)) for x in range(width // 2 + 2, width - 2)}
    assert left == {rgb(STATE_COLOURS["ACQUIRED"])}
    assert rgb(STATE_COLOURS["ACQUIRED"]) not in right
    assert right & {rgb(STATE_COLOURS["AVAILABLE"]), rgb(STATE_COLOURS["TX_PENDING"])}
