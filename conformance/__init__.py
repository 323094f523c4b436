"""Third-party client test suites run against kemu (see docs/conformance.md)."""
