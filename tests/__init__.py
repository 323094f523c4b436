"""kemu's own tests (docs/testing.md). A package, so that every test module has a unique dotted
name (``tests.unit.broker.handlers.test_share_fetch``) and helpers are imported from the repository
root the same way from any directory (``from tests.unit.share_helpers import acquire``)."""

from pathlib import Path

# the checkout's root: docs/, bench/, conformance/ and tests/java/ are found from here, whatever
# the depth of the module that asks
REPO_ROOT = Path(__file__).resolve().parents[1]
