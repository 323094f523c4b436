"""The client, process and parity tiers: real clients against a kemu (docs/testing.md)."""
