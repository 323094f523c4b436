"""The unit tier: no subprocess, no socket (docs/testing.md)."""
