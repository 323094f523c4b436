"""``make bench``: kemu against a real Apache Kafka broker, same workload, side by side."""
