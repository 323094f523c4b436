"""The ``kemu`` console command: load the heavy libraries lean, then run ``kemu.cli``.

``kemu.cli`` imports structlog (and, through the broker, kio) at module level, so the lean
imports of ``kemu.protocol.startup`` must happen before ``kemu.cli`` is imported at all.
"""

from __future__ import annotations


def main() -> int:
    from kemu.protocol.startup import (
        import_kio_without_test_strategies,
        import_structlog_without_rich,
    )

    import_structlog_without_rich()
    import_kio_without_test_strategies()
    from kemu.cli import main as cli_main

    return cli_main()
