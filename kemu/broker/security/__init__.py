"""Listener security: TLS (``tls``, ``acceptor``), SASL (``session``, ``mechanisms``) and the
credential store (``credentials``). ``docs/security.md`` shows each protocol at work."""
