"""KIP-932 share groups (ShareGroupHeartbeat): the coordinator, its ``__consumer_offsets``
records and the loader of the JSON file older kemu versions wrote."""
