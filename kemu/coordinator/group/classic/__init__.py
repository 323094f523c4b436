"""Classic consumer groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup): the model, the rebalance
and join state machines, and the coordinator the service drives."""
