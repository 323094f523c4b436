"""The group types' settings, read per group from the broker config and the group configs
(``IncrementalAlterConfigs`` on a GROUP resource) each time a state machine asks: mixed into
the group coordinator service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kemu.coordinator.group.classic.group import ClassicSettings
from kemu.coordinator.group.config import group_config_store
from kemu.coordinator.group.consumer.group import ConsumerSettings
from kemu.coordinator.group.share.group import MembershipSettings

if TYPE_CHECKING:
    from kemu.cluster.context import Runtime

# kemu's name for Kafka's GroupMetadataManager.REGEX_BATCH_REFRESH_MIN_INTERVAL_MS (a constant
# there, 10 s; 0 under --timing fast) and Kafka's internal broker config beside it
REGEX_REFRESH_MIN_INTERVAL = "kemu.group.consumer.regex.refresh.min.interval.ms"
REGEX_REFRESH_INTERVAL = "group.consumer.regex.refresh.interval.ms"
INITIALIZE_RETRY_INTERVAL = "group.share.initialize.retry.interval.ms"  # internal in Kafka


class GroupSettings:
    runtime: Runtime

    def classic_settings(self, group_id: str) -> ClassicSettings:
        config = self.runtime.cluster.config
        return ClassicSettings(
            initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
            max_size=config.get_int("group.max.size"),
        )

    def consumer_settings(self, group_id: str) -> ConsumerSettings:
        configs, broker = group_config_store(self.runtime), self.runtime.cluster.config
        return ConsumerSettings(
            session_timeout_ms=int(configs.value(group_id, "consumer.session.timeout.ms")),
            heartbeat_interval_ms=int(configs.value(group_id, "consumer.heartbeat.interval.ms")),
            max_size=broker.get_int("group.consumer.max.size"),
            assignment_interval_ms=int(configs.value(group_id, "consumer.assignment.interval.ms")),
            regex_refresh_min_interval_ms=broker.get_int(REGEX_REFRESH_MIN_INTERVAL),
            regex_refresh_interval_ms=broker.get_int(REGEX_REFRESH_INTERVAL),
        )

    def membership_settings(self, group_id: str) -> MembershipSettings:
        configs, broker = group_config_store(self.runtime), self.runtime.cluster.config
        return MembershipSettings(
            session_timeout_ms=int(configs.value(group_id, "share.session.timeout.ms")),
            heartbeat_interval_ms=int(configs.value(group_id, "share.heartbeat.interval.ms")),
            max_size=broker.get_int("group.share.max.size"),
            assignment_interval_ms=int(configs.value(group_id, "share.assignment.interval.ms")),
            # as GroupCoordinatorConfig: never below offsets.commit.timeout.ms
            initialize_retry_interval_ms=max(
                broker.get_int(INITIALIZE_RETRY_INTERVAL),
                broker.get_int("offsets.commit.timeout.ms"),
            ),
        )
