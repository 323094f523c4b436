"""KIP-848 consumer groups (ConsumerGroupHeartbeat): the coordinator, its assignors, its
``__consumer_offsets`` records and the image replay builds from them."""
