"""The group coordinator: the group namespace every group type shares, share groups (KIP-932),
group configs (resource type GROUP) and where coordinators live (FindCoordinator).

kemu runs one group coordinator for the whole process; FindCoordinator still names the broker
that leads the ``__consumer_offsets`` partition Kafka would pick, and every broker accepts group
requests, so clients that cache the coordinator and clients that do not both work.
"""
