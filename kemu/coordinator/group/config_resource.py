"""The GROUP config resource (type 32) for DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs, backed by the ``GroupConfigStore``.

As in Kafka, any group id may carry configs (the group need not exist yet, which is how tests set
``share.auto.offset.reset`` before the first consumer joins); the empty id is refused. Describe
lists every group config: an override has source DYNAMIC_GROUP_CONFIG, otherwise the value comes
from the broker synonym (``group.share.*``) or the built-in default, and every config lists
its default as a DEFAULT_CONFIG synonym (under the broker config that supplies it, else its own
name), as Kafka does. Invalid values are
INVALID_CONFIG with Kafka's messages. Importing this module registers the type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kemu.cluster.config_resources import (
    GROUP,
    ConfigEntry,
    ConfigResourceError,
    ConfigResourceType,
    Synonym,
    register_config_resource,
)
from kemu.config.definitions import ConfigSource, InvalidConfig, broker_definition
from kemu.coordinator.group.config import GROUP_CONFIGS, group_config_store
from kemu.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kemu.cluster.context import RequestContext


class GroupConfigs(ConfigResourceType):
    type_id = GROUP

    def describe(self, ctx: RequestContext, name: str) -> list[ConfigEntry]:
        if not name:
            raise ConfigResourceError(ErrorCode.invalid_request, "Group name must not be empty")
        store = group_config_store(ctx.runtime)
        overrides = store.get_overrides(name)
        broker = ctx.cluster.config
        entries = []
        for described in store.describe(name):
            definition = GROUP_CONFIGS[described.name]
            chain: list[Synonym] = []
            if described.name in overrides:
                chain.append(
                    Synonym(
                        described.name,
                        overrides[described.name],
                        ConfigSource.DYNAMIC_GROUP_CONFIG,
                    )
                )
            synonym = definition.broker_synonym
            if synonym is not None and broker.get(synonym) is not None:
                source = broker.source(synonym)
                chain.append(Synonym(synonym, broker.get(synonym), source))
                code_default = _code_default(synonym)
                if source is not ConfigSource.DEFAULT_CONFIG and code_default is not None:
                    # Kafka lists the code default after a broker value set in its properties.
                    chain.append(Synonym(synonym, code_default, ConfigSource.DEFAULT_CONFIG))
            else:
                # As Kafka lists them: the default, under the broker config that supplies it, or
                # under the group config's own name when none does.
                default = broker.get(synonym) if synonym is not None else definition.default
                chain.append(
                    Synonym(synonym or described.name, default, ConfigSource.DEFAULT_CONFIG)
                )
            entries.append(
                ConfigEntry(
                    name=described.name,
                    value=described.value,
                    source=described.source,
                    read_only=False,
                    is_sensitive=False,
                    config_type=described.type,
                    synonyms=tuple(chain),
                    documentation=described.doc,
                )
            )
        return entries

    def explicit(self, ctx: RequestContext, name: str) -> dict[str, str]:
        return group_config_store(ctx.runtime).get_overrides(name)

    def check_name(self, ctx: RequestContext, name: str) -> None:
        if not name:
            raise ConfigResourceError(
                ErrorCode.invalid_request, "Default group resources are not allowed."
            )

    def default(self, key: str) -> str | None:
        definition = GROUP_CONFIGS.get(key)
        return definition.default if definition is not None else None

    def validate(self, ctx: RequestContext, name: str, values: dict[str, str]) -> None:
        try:
            group_config_store(ctx.runtime).validate(values)
        except InvalidConfig as invalid:
            raise ConfigResourceError(ErrorCode.invalid_config, str(invalid)) from None

    def apply(self, ctx: RequestContext, name: str, values: dict[str, str]) -> None:
        group_config_store(ctx.runtime).set_overrides(name, values)


register_config_resource(GroupConfigs())


def _code_default(broker_name: str) -> str | None:
    """Kafka's code default of a broker ``group.*`` config."""
    definition = broker_definition(broker_name)
    return definition.default if definition is not None else None
