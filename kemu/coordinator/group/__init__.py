"""The group coordinator: the group namespace every group type shares, classic consumer groups
(JoinGroup/SyncGroup), KIP-848 consumer groups, share groups (KIP-932), committed offsets and
their ``__consumer_offsets`` records, group configs (resource type GROUP) and where coordinators
live (FindCoordinator).

kemu runs one group coordinator for the whole process; FindCoordinator still names the broker
that leads the ``__consumer_offsets`` partition Kafka would pick, and every broker accepts group
requests, so clients that cache the coordinator and clients that do not both work.
"""
