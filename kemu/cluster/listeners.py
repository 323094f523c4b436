"""Listeners under Kafka's config names, mapped onto kemu's N virtual brokers.

``listeners=NAME://host:port,...`` names one endpoint per listener; kemu runs N brokers in one
process, so each listener gets a block of N consecutive ports: broker ``i`` (1..N) listens on
``port + i - 1``. A listener written with port 0 (or none) takes the block after the previous
listener's, counting from ``--port``: listener ``k`` (0-based) then starts at
``--port + k * N``. ``advertised.listeners`` follows the same rule (port 0: the bound port).
The first listener is the one ``kemu ready bootstrap=`` prints. The security protocol of a
listener comes from ``listener.security.protocol.map`` (Kafka's default maps each protocol name
to itself). Without ``listeners`` kemu has one PLAINTEXT listener on ``--host``/``--port``, as
it always had (``advertised.listeners`` may then name only PLAINTEXT). Listeners named in
``controller.listener.names`` (Kafka's shipped KRaft ``server.properties`` has a CONTROLLER
one) are checked as Kafka checks them but not served: kemu runs no KRaft controller.

Per-listener settings use Kafka's prefix ``listener.name.<name in lower case>.<config>``
(``listener_value``), falling back to the unprefixed config.
"""

from __future__ import annotations

from dataclasses import dataclass

from kemu.config.definitions import BROKER_CONFIGS, BrokerConfig, InvalidConfig, validate_value

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

# Security configs kemu reads (besides the listener.name.<l>.* forms of them).
SECURITY_CONFIGS = frozenset(
    {
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "security.inter.broker.protocol",
        "sasl.enabled.mechanisms",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.jaas.config",
        "connections.max.reauth.ms",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.client.auth",
        "kemu.sasl.users",
        "authorizer.class.name",
        "super.users",
        "allow.everyone.if.no.acl.found",
    }
)


# Socket configs Kafka parses in their listener.name.<l>.* form too (listen_backlog).
LISTENER_SOCKET_CONFIGS = frozenset({"socket.listen.backlog.size"})


# Per-listener connection limits (kemu/broker/acceptors.py), as listener.name.<l>.<config>.
LISTENER_CONNECTION_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate"})


def is_security_config(name: str) -> bool:
    """A config name kemu's listeners read (so not an unknown config)."""
    if name in SECURITY_CONFIGS or name.endswith(".sasl.jaas.config"):
        return True
    if name.startswith("listener.name."):
        rest = name[len("listener.name.") :].partition(".")[2]
        if rest.endswith(".connections.max.reauth.ms"):
            return True
        if rest in LISTENER_CONNECTION_CONFIGS:
            return True
        return rest in SECURITY_CONFIGS or rest in LISTENER_SOCKET_CONFIGS
    return False


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    protocol: str
    host: str  # bind address
    port: int  # broker 1's port; broker i listens on port + i - 1
    advertised_host: str
    advertised_port: int

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def _split_endpoint(text: str, config: str) -> tuple[str, str, int]:
    name, sep, rest = text.strip().partition("://")
    if not sep or not name:
        raise InvalidConfig(
            f"Invalid value {text} for configuration {config}: Error creating broker listeners "
            f"from '{text}': Unable to parse {text} to a broker endpoint"
        )
    host, _, port_text = rest.rpartition(":")
    if not _:
        host, port_text = rest, "0"
    host = host.strip("[]")
    try:
        port = int(port_text or "0")
    except ValueError:
        raise InvalidConfig(
            f"Invalid value {text} for configuration {config}: Unable to parse {text} to a "
            "broker endpoint"
        ) from None
    return name.upper(), host, port


def _entries(value: str, config: str) -> list[tuple[str, str, int]]:
    entries = [_split_endpoint(part, config) for part in value.split(",") if part.strip()]
    names = [entry[0] for entry in entries]
    if len(set(names)) != len(names):
        raise InvalidConfig(f"Each listener must have a different name, {config}: {value}")
    return entries


def protocol_map(config: BrokerConfig) -> dict[str, str]:
    text = config.supplied("listener.security.protocol.map") or DEFAULT_PROTOCOL_MAP
    mapping: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, protocol = part.strip().partition(":")
        protocol = protocol.strip().upper()
        if not sep or protocol not in PROTOCOLS:
            raise InvalidConfig(
                f"Invalid value {text} for configuration listener.security.protocol.map: "
                f"No enum constant SecurityProtocol {protocol or part}"
            )
        mapping[name.strip().upper()] = protocol
    if not config.supplied("listener.security.protocol.map"):
        # As Kafka 4.4.0's effectiveListenerSecurityProtocolMap: with the default map, controller
        # listeners are PLAINTEXT unless a controller or listener name is SSL or SASL_*.
        controllers = controller_listener_names(config)
        listed = [part.partition("://")[0].strip().upper() for part in _listed(config)]
        if not any(name in PROTOCOLS[1:] for name in [*controllers, *listed]):
            for name in controllers:
                mapping.setdefault(name, "PLAINTEXT")
    return mapping


def _listed(config: BrokerConfig) -> list[str]:
    return [part for part in (config.supplied("listeners") or "").split(",") if part.strip()]


def controller_listener_names(config: BrokerConfig) -> list[str]:
    """``controller.listener.names``, upper-cased: listeners a KRaft controller serves. They are
    not broker listeners (Kafka 4.4.0 neither advertises them in Metadata nor serves broker APIs
    there) and kemu, which runs no controller, does not bind them."""
    value = config.supplied("controller.listener.names") or ""
    return [name.strip().upper() for name in value.split(",") if name.strip()]


def unserved_controller_listeners(config: BrokerConfig) -> list[str]:
    """The listeners of ``listeners`` that ``controller.listener.names`` names (not bound)."""
    controllers = controller_listener_names(config)
    listed = [name for name, _, _ in _entries(config.supplied("listeners") or "", "listeners")]
    return [name for name in listed if name in controllers]


def configured_listeners(
    config: BrokerConfig,
    host: str,
    port: int,
    brokers: int,
    advertised_host: str | None = None,
) -> list[Listener]:
    """The broker listeners of ``config`` (one PLAINTEXT one on ``host:port`` when none is set);
    listeners named in ``controller.listener.names`` are left out. Raises InvalidConfig with
    Kafka 4.4.0's KafkaConfig messages."""
    value = config.supplied("listeners")
    advertised_default = advertised_host or host
    advertised_entries = _entries(
        config.supplied("advertised.listeners") or "", "advertised.listeners"
    )
    controllers = set(controller_listener_names(config))
    # Kafka's effective advertised broker listeners leave the controller listeners out.
    advertised = {name: (h, p) for name, h, p in advertised_entries if name not in controllers}
    if not value:
        _check_advertised_subset(advertised, ["PLAINTEXT"])
        ad_host, ad_port = advertised.get("PLAINTEXT", ("", 0))
        return [
            Listener(
                "PLAINTEXT",
                "PLAINTEXT",
                host,
                port,
                ad_host or advertised_default,
                ad_port or port,
            )
        ]
    mapping = protocol_map(config)
    entries = _entries(value, "listeners")
    for name, _, _ in entries:
        if name not in mapping:
            raise InvalidConfig(
                f"Invalid value {value} for configuration listeners: No security protocol "
                f"defined for listener {name}"
            )
    _check_advertised_subset(advertised, [name for name, _, _ in entries])
    listeners: list[Listener] = []
    for name, bind_host, bind_port in entries:
        if name in controllers:
            continue
        first = bind_port or port + len(listeners) * brokers
        ad_host, ad_port = advertised.get(name, ("", 0))
        listeners.append(
            Listener(
                name=name,
                protocol=mapping[name],
                host=bind_host or host,
                port=first,
                advertised_host=ad_host or advertised_host or bind_host or host,
                advertised_port=ad_port or first,
            )
        )
    if not listeners or (advertised_entries and not advertised):
        raise InvalidConfig(
            "There must be at least one broker advertised listener. Perhaps all listeners appear "
            "in controller.listener.names?"
        )
    return listeners


def _check_advertised_subset(advertised: dict[str, tuple[str, int]], names: list[str]) -> None:
    if not set(advertised) <= set(names):
        raise InvalidConfig(
            "advertised.listeners listener names must be equal to or a subset of the ones "
            f"defined in listeners. Found {','.join(advertised)}. The valid options based on "
            f"the current configuration are {','.join(names)}"
        )


def listener_value(config: BrokerConfig, listener: str, name: str) -> str | None:
    """``listener.name.<listener>.<name>``, else ``name``, as Kafka resolves listener configs."""
    prefixed = config.supplied(f"listener.name.{listener.lower()}.{name}")
    return prefixed if prefixed is not None else config.supplied(name)


def listen_backlog(config: BrokerConfig, listener: str) -> int:
    """The listen backlog of ``listener``'s sockets: ``socket.listen.backlog.size``.

    As Kafka 4.4.0: SocketServer parses the listener's configs with
    ``valuesFromThisConfigWithPrefixOverride("listener.name.<name in lower case>.")``, so a
    ``listener.name.<l>.socket.listen.backlog.size`` (or ``listener.name.<l>.<x>.socket...``)
    that is not an int of at least 1 fails start-up with the unprefixed name in the message;
    but its Acceptor binds with the broker-wide ``KafkaConfig.socketListenBacklogSize``, so a
    valid per-listener value changes nothing (a real 4.4.0 with the broker-wide value 33 and
    ``listener.name.plaintext.socket.listen.backlog.size=7`` listens with a backlog of 33).
    Raises InvalidConfig with Kafka's message.
    """
    name = "socket.listen.backlog.size"
    prefix = f"listener.name.{listener.lower()}."
    for key, value in config.static.items():
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        if rest == name or rest.partition(".")[2] == name:
            validate_value(BROKER_CONFIGS[name], value)
    return config.get_int(name)


def enabled_mechanisms(config: BrokerConfig, listener: str) -> list[str]:
    """``sasl.enabled.mechanisms`` for a listener; kemu defaults to every mechanism it has
    (Kafka's default, GSSAPI, is not one)."""
    value = listener_value(config, listener, "sasl.enabled.mechanisms")
    if value is None:
        return list(SASL_MECHANISMS)
    return [m.strip().upper() for m in value.split(",") if m.strip()]


def check_sasl_mechanisms(config: BrokerConfig, listeners: list[Listener]) -> None:
    """Each SASL listener's ``sasl.enabled.mechanisms`` must be ones kemu implements: a Kafka
    with GSSAPI and no Kerberos login fails to start, and a mechanism kemu lacks would leave a
    listener no client can log in to. Raises InvalidConfig naming the key and the mechanisms
    kemu supports."""
    for listener in listeners:
        if not listener.uses_sasl:
            continue
        enabled = enabled_mechanisms(config, listener.name)
        missing = [mechanism for mechanism in enabled if mechanism not in SASL_MECHANISMS]
        if enabled and not missing:
            continue
        prefixed = f"listener.name.{listener.name.lower()}.sasl.enabled.mechanisms"
        key = prefixed if config.supplied(prefixed) is not None else "sasl.enabled.mechanisms"
        reason = (
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not implemented by kemu"
            if missing
            else "no mechanism is enabled"
        )
        raise InvalidConfig(
            f"Invalid value {config.supplied(key)} for configuration {key}: {reason} (listener "
            f"{listener.name}; kemu supports {', '.join(SASL_MECHANISMS)})"
        )
