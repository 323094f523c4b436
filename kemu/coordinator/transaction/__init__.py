"""The transaction coordinator: transactional ids, producer epochs, transaction states and their
``__transaction_state`` records (``coordinator``, sans-IO; ``records``), and the asyncio side that
persists them, writes COMMIT/ABORT markers and completes transactional offset commits
(``service``)."""
