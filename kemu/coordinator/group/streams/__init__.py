"""KIP-1071 streams groups (StreamsGroupHeartbeat): the model, topology, assignor, records and
the coordinator with the service wrapper that persists it."""
