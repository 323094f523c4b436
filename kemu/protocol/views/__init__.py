"""Typed request views, one module per API key: ``kemu.protocol.codegen_views``."""
