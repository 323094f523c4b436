"""What docs/control.md's examples name, made before the block that first names it (the page
says so): a topic ``orders`` with 40 records in partition 0; a share group ``sg`` (from
``earliest``) whose members ``Ws3xo+IFR7mHdNo0Jy+aPw`` and ``q1Lb7fYvTcqXlJ0bHk2mNw`` have joined,
the first holding the records it acquired; open transactions ``tx-1`` .. ``tx-4``. The clients
live on an event loop of their own, as a user's application beside ``kemu ctl`` would."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from kemu.client import Admin, ShareConsumer, TransactionalProducer

if TYPE_CHECKING:
    from tests.integration.tools.doc_blocks import Block, PageRun

MEMBERS = ("Ws3xo+IFR7mHdNo0Jy+aPw", "q1Lb7fYvTcqXlJ0bHk2mNw")
TRANSACTIONS = ("tx-1", "tx-2", "tx-3", "tx-4")
RECORDS = 40


class ControlScene:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.made: set[str] = set()
        self.clients: list[Any] = []

    def __call__(self, run: PageRun, block: Block) -> None:
        if "kemu serve" in block.source and self.made:
            self.close_clients()  # a new kemu: the examples that follow bring their own
            self.made.add("done")
        if run.kemu is None or "done" in self.made:
            return
        bootstrap = run.kemu.bootstrap
        if "orders" in block.source and "orders" not in self.made:
            self.call(self.fill_orders(bootstrap))
        if "share-groups/sg" in block.source and "sg" not in self.made:
            self.call(self.join_share_group(bootstrap))
        if "tx-1" in block.source and "tx" not in self.made:
            self.call(self.open_transactions(bootstrap))

    def call(self, work: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(work, self.loop).result(120)

    async def fill_orders(self, bootstrap: str) -> None:
        async with TransactionalProducer(bootstrap, "control-doc-writer") as writer:
            await writer.init_transactions()
            writer.begin_transaction()
            await writer.send_many(
                "orders", [(None, b"order-%d" % i) for i in range(RECORDS)], partition=0
            )
            await writer.commit_transaction()
        self.made.add("orders")

    async def join_share_group(self, bootstrap: str) -> None:
        async with Admin(bootstrap) as admin:
            await admin.set_group_configs("sg", {"share.auto.offset.reset": "earliest"})
        members = []
        for member_id in MEMBERS:
            member = ShareConsumer(bootstrap, "sg", acknowledgement_mode="explicit")
            member.member_id = member_id  # the page's ids (a client makes up its own)
            await member.subscribe(["orders"])
            members.append(member)
            self.clients.append(member)
        held: list[Any] = []
        while not held:
            held = await members[0].poll(timeout=1.0)
        self.made.add("sg")

    async def open_transactions(self, bootstrap: str) -> None:
        for transactional_id in TRANSACTIONS:
            producer = TransactionalProducer(
                bootstrap, transactional_id, transaction_timeout_ms=600_000
            )
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send("audit", transactional_id.encode())
            self.clients.append(producer)
        self.made.add("tx")

    def close_clients(self) -> None:
        async def close_all() -> None:
            for client in self.clients:
                # their kemu may be gone: nothing is left to keep
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.close(), 5)
            self.clients.clear()

        self.call(close_all())

    def close(self) -> None:
        self.close_clients()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
