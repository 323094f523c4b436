"""The cluster model and its foundations, shared by the coordinators and the brokers.

Topics, partitions and their leaders (``model``, ``partition``), the broker and topic
configuration (``config``, ``config_resources``, ``config_docs``) and the runtime a request
runs in (``context``). It sits above ``storage`` and below ``coordinator`` and ``broker``.
"""
