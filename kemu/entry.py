"""The ``kemu`` console command: ``kemu.cli``.

``kemu.cli`` imports no heavy library at module level: its ``main`` reads the arguments first,
then loads structlog and kio lean (``kemu.protocol.startup``) for the commands that need them.
`kemu ctl` needs neither, nor the broker.
"""

from __future__ import annotations


def main() -> int:
    from kemu.cli import main as cli_main

    return cli_main()
