"""``kemu serve``: run a Kafka-compatible cluster of N virtual brokers in one process.

``kemu decode-share-state``: print what ``__share_group_state`` holds.

``kemu ctl``: call a verb of a running kemu's control API (docs/control.md).
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kemu.cluster import seeded
from kemu.config.definitions import (
    BrokerConfig,
    InvalidConfig,
    unknown_broker_keys,
)
from kemu.config.timing import DEFAULT_PROFILE, PROFILES, profile_properties
from kemu.control.cli import (
    add_ctl_parser,
    add_serve_arguments,
    run_ctl,
    start_control,
    tcp_port,
    use_virtual_clock,
)
from kemu.protocol.versions import CURRENT_RELEASE, KAFKA_RELEASES, release_caps

if TYPE_CHECKING:
    from kemu.broker.server import ServerOptions


def _log() -> Any:
    """kemu.cli's logger. structlog is imported once the arguments are read (``main``): `kemu
    ctl` does not log, and structlog with asyncio beneath it is 40% of a ctl call's CPU."""
    import structlog

    return structlog.get_logger("kemu.cli")


def _configure_logging(level: str, json_logs: bool) -> None:
    import structlog

    numeric = getattr(logging, level.upper(), logging.INFO)
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json_logs
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def _broker_count(text: str) -> int:
    count = _integer(text)
    if count < 1:
        raise argparse.ArgumentTypeError(f"at least 1 broker, not {count}")
    return count


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _override(text: str) -> str:
    """``--override KEY=VALUE``: a pair with a name (the value may be empty, as in a properties
    file)."""
    name, sep, _ = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return text


def _host_port(text: str) -> str:
    """``--bootstrap HOST:PORT[,HOST:PORT...]``: the first address is the one used."""
    host, sep, port = text.split(",")[0].rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


class _Version(argparse.Action):
    """``kemu --version``: the installed distribution's version (read only when asked)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help=str(kwargs.get("help")))

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("kemu")
        except PackageNotFoundError:  # run from a checkout that was never installed
            found = "unknown (not installed)"
        print(f"kemu {found}")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kemu",
        description=(__doc__ or "").replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # one line per command
    )
    parser.add_argument("--version", action=_Version, help="print kemu's version and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run brokers until interrupted")
    serve.add_argument(
        "--brokers", type=_broker_count, default=1, help="virtual brokers (node ids 1..N)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--advertised-host", default=None, help="host advertised in metadata")
    serve.add_argument(
        "--port",
        type=tcp_port,
        default=9092,
        help="first broker's port; broker N listens on PORT+N-1 (0: a free block)",
    )
    serve.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="keep logs and state here (in memory when omitted)",
    )
    serve.add_argument(
        "--config", type=Path, default=None, help="server.properties file with Kafka property names"
    )
    serve.add_argument(
        "--override",
        action="append",
        type=_override,
        default=[],
        metavar="KEY=VALUE",
        help="set a Kafka broker property (repeatable)",
    )
    serve.add_argument(
        "--timing",
        default=DEFAULT_PROFILE,
        metavar="{fast,kafka}",
        help="fast (default): short group timers, so tests do not wait (docs/configuration.md, "
        "What `--timing fast` changes); kafka: Kafka 4.4.0's code defaults. --config and "
        "--override win",
    )
    serve.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed every random choice (topic and member ids, fetch sessions, fault fractions) "
        "so a run can be replayed; without it one is drawn and logged at start-up",
    )
    serve.add_argument(
        "--strict-config",
        action="store_true",
        help="refuse to start when --config or --override names a config kemu does not know",
    )
    serve.add_argument(
        "--as-version",
        default=None,
        choices=[*sorted(KAFKA_RELEASES), CURRENT_RELEASE],
        help=f"advertise only what this Kafka release served ({CURRENT_RELEASE}: the default)",
    )
    serve.add_argument(
        "--tls-self-signed",
        action="store_true",
        help="make a CA and certificates for localhost (in DATA_DIR/tls or a temporary dir) and "
        "serve them on SSL/SASL_SSL listeners; with no 'listeners' set, the listener is SSL",
    )
    serve.add_argument(
        "--cluster-id", default=None, help="the cluster id clients see (default: a random one)"
    )
    serve.add_argument(
        "--log-level", default="info", type=str.lower, choices=LOG_LEVELS, help="default: info"
    )
    serve.add_argument("--json-logs", action="store_true", help="log JSON lines on stderr")
    serve.add_argument(
        "--kip1289",
        action="store_true",
        help="serve the KIP-1289 preview (transactional share acknowledgements): the same as "
        "--override kemu.kip1289.enable=true",
    )
    add_serve_arguments(serve)  # --control-port, --control-host, --clock
    decode = commands.add_parser(
        "decode-share-state",
        help="print __share_group_state records and the share-partition states, as JSON lines",
    )
    source = decode.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--bootstrap", metavar="HOST:PORT", type=_host_port, help="read from a running cluster"
    )
    source.add_argument("--data-dir", type=Path, help="read a (stopped or running) data dir")
    decode.add_argument("--states-only", action="store_true", help="only the final states")
    add_ctl_parser(commands)  # kemu ctl --control URL VERB ...
    return parser


def _decode_share_state(args: argparse.Namespace) -> int:
    from kemu.coordinator.share.decode import (
        cluster_topic_names,
        data_dir_topic_names,
        decode_all,
        fetch_from_cluster,
        read_data_dir,
    )

    if args.data_dir is not None and not args.data_dir.is_dir():
        print(f"kemu: no data directory {args.data_dir}", file=sys.stderr)
        return 1
    records = fetch_from_cluster(args.bootstrap) if args.bootstrap else read_data_dir(args.data_dir)
    try:
        names = (
            cluster_topic_names(args.bootstrap)
            if args.bootstrap
            else data_dir_topic_names(args.data_dir)
        )
        for line in decode_all(records, states_only=args.states_only, topic_names=names):
            print(line)
    except BrokenPipeError:
        raise  # a reader that stopped reading (| head) is not an error to report
    except OSError as error:
        print(f"kemu: {error}", file=sys.stderr)
        return 1
    return 0


async def _serve(options: ServerOptions, args: argparse.Namespace) -> None:
    import asyncio

    import structlog

    from kemu.broker.server import KemuServer, raise_open_file_limit

    open_files = raise_open_file_limit()
    structlog.get_logger("kemu").debug("open_file_limit", soft=open_files)
    seeded.reseed(args.seed)  # logged with "started"
    try:
        server = KemuServer(options)
    except OSError as error:
        if options.data_dir is None:
            raise
        # the data dir cannot be created, locked or read: Kafka too stops on an unusable log dir
        raise _StartFailed(f"cannot use data directory {options.data_dir}: {error}") from None
    use_virtual_clock(server, args)
    control = await start_control(server, args)  # a control port in use: before "started"
    try:
        await server.start()
    except BaseException:
        if control is not None:
            await control.close()
        raise
    if options.config.supplied("listeners") is not None:
        for name, bootstrap in server.listener_bootstraps().items():
            print(f"kemu listener {name} bootstrap={bootstrap}", flush=True)
    ready = f"kemu ready bootstrap={server.bootstrap_servers}"
    if control is not None:
        ready += f" control={control.url}"
    previews = enabled_previews(options.config)
    if previews:
        ready += f" previews={','.join(previews)}"
    stop = asyncio.Event()
    received: list[str] = []
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        # Before the ready line: whoever reads it may stop kemu at once (a SIGTERM before this
        # would end the process with the signal's default action, exit status -15).
        loop.add_signal_handler(sig, on_signal, sig)
    print(ready, flush=True)
    await stop.wait()
    if control is not None:
        await control.close()
    await server.close()
    _log().info(
        "stopped",
        signal=received[0] if received else None,
        data_dir=str(options.data_dir) if options.data_dir else None,
    )


# Previews of proposed KIPs kemu serves only when asked: the ready line names those that are on.
PREVIEWS = {"kip1289": "kemu.kip1289.enable"}


def enabled_previews(config: BrokerConfig) -> list[str]:
    return [name for name, key in PREVIEWS.items() if config.get_bool(key)]


def main(argv: list[str] | None = None) -> int:
    parser = _parser()  # imports nothing of the broker: `kemu ctl` needs none of it
    args, unrecognized = parser.parse_known_args(argv)
    if unrecognized:
        command = _command_parser(parser, args.command)
        command.error(_unrecognized(command, unrecognized))
    if args.command == "ctl":
        return _print_command(run_ctl, args)
    from kemu.protocol.startup import (
        import_kio_without_test_strategies,
        import_structlog_without_rich,
    )

    # before anything imports them: kio without hypothesis halves start time, structlog without
    # rich saves a fifth of it (kemu.protocol.startup)
    import_structlog_without_rich()
    import_kio_without_test_strategies()
    from kemu.broker.allocator import keep_freed_memory

    keep_freed_memory()
    if args.command == "decode-share-state":
        return _print_command(_decode_share_state, args)
    from kemu.broker.handlers import check_wire_keys
    from kemu.broker.server import ServerOptions

    if args.port and args.port + args.brokers - 1 > 65535:
        print(
            f"kemu: --port {args.port} leaves no room for {args.brokers} brokers", file=sys.stderr
        )
        return 2
    if args.timing not in PROFILES:  # checked here for one line, not argparse's usage too
        print(
            f"kemu: --timing {args.timing}: not a timing profile (expected fast or kafka)",
            file=sys.stderr,
        )
        return 2
    _configure_logging(args.log_level, args.json_logs)
    problem = _path_problem("--config", args.config, want_dir=False) or _path_problem(
        "--data-dir", args.data_dir, want_dir=True
    )
    if problem:
        print(f"kemu: {problem}", file=sys.stderr)
        return 2 if args.config is not None and problem.startswith("--config") else 1
    if args.kip1289:
        args.override.append(f"{PREVIEWS['kip1289']}=true")
    try:
        profile = profile_properties(args.timing)
        config = BrokerConfig.load(args.config, args.override, base=profile)
        check_wire_keys(config)  # the KIP-1289 api keys, before anything listens
        if config.get("kemu.sasl.users"):
            from kemu.broker.security.credentials import config_users

            config_users(config)  # a malformed entry would otherwise just not authenticate
        _check_start_configs(config, profile)
    except (InvalidConfig, OSError) as error:
        print(f"kemu: {error}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as error:
        print(
            f"kemu: --config {args.config} is not a UTF-8 properties file: {error}", file=sys.stderr
        )
        return 2
    if args.data_dir is None:
        args.data_dir = _data_dir_from_log_dirs(config)
    unknown = _unknown_configs(config)
    if unknown and args.strict_config:
        names = ", ".join(f"'{name}'" for name in unknown)
        print(
            f"kemu: --strict-config: not a known config: {names} "
            "(drop --strict-config to start anyway)",
            file=sys.stderr,
        )
        return 2
    for name in unknown:
        # Kafka's wording for a property no ConfigDef defines, and the nearest known name.
        message = f"The configuration '{name}' was supplied but isn't a known config."
        near = difflib.get_close_matches(name, _known_config_names(), n=1, cutoff=0.8)
        if near:
            message += f" Did you mean '{near[0]}'?"
        _log().warning(message)
    if args.tls_self_signed:
        try:
            _self_signed(config, args.data_dir)
        except OSError as error:  # DATA_DIR/tls cannot be made or written
            print(f"kemu: --tls-self-signed: {error}", file=sys.stderr)
            return 1
    options = ServerOptions(
        brokers=args.brokers,
        host=args.host,
        port=args.port,
        advertised_host=args.advertised_host,
        data_dir=args.data_dir,
        config=config,
        max_versions=release_caps(args.as_version),
        cluster_id=args.cluster_id,
    )
    from kemu.broker.server import ListenError
    from kemu.storage.data_files import DataFileError
    from kemu.storage.lock import DataDirLocked

    try:
        import uvloop

        uvloop.run(_serve(options, args))
    except KeyboardInterrupt:
        pass
    except (DataDirLocked, DataFileError, ListenError, InvalidConfig, _StartFailed) as error:
        print(f"kemu: {error}", file=sys.stderr)
        return 1
    return 0


def _print_command(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command that prints its answer; a reader that closes the pipe early ends it."""
    try:
        status = run(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return status
    except BrokenPipeError:  # `kemu ctl state | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _data_dir_from_log_dirs(config: BrokerConfig) -> Path | None:
    """Without --data-dir, the first of ``log.dirs`` (else ``log.dir``) given in --config or
    --override: whoever runs Kafka's own server.properties expects the data kept there. kemu
    keeps one directory; the others are named in the log line and not used."""
    value = config.static.get("log.dirs") or config.static.get("log.dir") or ""
    dirs = [part.strip() for part in value.split(",") if part.strip()]
    if not dirs:
        return None
    _log().info("data_dir_from_log_dirs", data_dir=dirs[0], not_used=dirs[1:] or None)
    return Path(dirs[0])


# what check_broker_group_configs reads, of group.consumer.*, group.share.*, group.streams.*
GROUP_BOUNDED_SUFFIXES = ("heartbeat.interval.ms", "session.timeout.ms", "standby.replicas")


def _check_start_configs(config: BrokerConfig, profile: Mapping[str, str] | None = None) -> None:
    """What Kafka 4.4.0 refuses at start-up (rather than kemu serving something no client can use):
    raises InvalidConfig with Kafka's message where it has one. The timing ``profile``'s own
    values hold together (tests/unit/config/test_timing_profiles.py): only what differs is
    checked."""
    given = {name for name, value in config.static.items() if (profile or {}).get(name) != value}
    from kemu.cluster.listeners import check_sasl_mechanisms, configured_listeners

    listeners = configured_listeners(config, "localhost", 9092, 1)  # + advertised.listeners
    check_sasl_mechanisms(config, listeners)
    if any(name.startswith("group.") and name.endswith(GROUP_BOUNDED_SUFFIXES) for name in given):
        # only then the group coordinator's config module: Kafka's defaults hold together
        from kemu.coordinator.group.config import check_broker_group_configs

        check_broker_group_configs(config)  # heartbeat intervals, session timeouts in bounds
    if (config.get("authorizer.class.name") or "").strip():
        from kemu.broker.security.acls import super_users

        super_users(config)  # StandardAuthorizer parses them only when it is configured


class _StartFailed(Exception):
    """Start-up cannot go on; the message is the one line kemu prints."""


def _unknown_configs(config: BrokerConfig) -> list[str]:
    """Supplied broker properties no config definition knows (kemu's, Kafka's catalogue, which
    kemu stores but may not act on, Kafka's internal ones and the listeners'): what is left is
    most likely a typo."""
    from kemu.cluster.listeners import is_security_config

    unknown = unknown_broker_keys(config.static)
    return [name for name in unknown if not is_security_config(name)]


def _known_config_names() -> list[str]:
    from kemu.config.definitions import known_broker_configs

    return sorted(known_broker_configs())


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            sub: argparse.ArgumentParser = action.choices[command]
            return sub
    return parser


def _unrecognized(command: argparse.ArgumentParser, words: list[str]) -> str:
    """argparse's "unrecognized arguments" with the nearest option of the command, so that
    ``--data_dir`` is answered with ``did you mean --data-dir?``."""
    options = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
    message = f"unrecognized arguments: {' '.join(words)}"
    for word in words:
        if not word.startswith("-"):
            continue
        flag = word.partition("=")[0]
        near = difflib.get_close_matches(flag.replace("_", "-"), options, n=1, cutoff=0.7)
        if near:
            message += f" (did you mean {near[0]}?)"
            break
    return message


def _path_problem(flag: str, path: Path | None, *, want_dir: bool) -> str | None:
    """What is wrong with a path given on the command line, in one line naming the flag: a
    config file that is not there, a data dir that is a file (or under one)."""
    if path is None:
        return None
    if not want_dir:
        if not path.exists():
            return f"{flag} {path}: no such file"
        if path.is_dir():
            return f"{flag} {path}: a directory, not a properties file"
        return None
    for part in (path, *path.parents):
        if part.exists():
            if part.is_dir():
                return None
            if part == path:
                return (
                    f"{flag} {path}: a file, not a directory (give a directory; kemu creates "
                    "it when it is missing)"
                )
            return f"{flag} {path}: {part} is a file, not a directory"
    return None


def _self_signed(config: BrokerConfig, data_dir: Path | None) -> None:
    """--tls-self-signed: make (or reuse) the CA and certificates, serve them where no keystore
    or truststore is configured, and print where the CA and a client certificate are."""
    import tempfile

    from kemu.broker.security.tls import self_signed, self_signed_defaults, write_keystore

    directory = (
        data_dir / "tls" if data_dir is not None else Path(tempfile.mkdtemp(prefix="kemu-tls-"))
    )
    paths = self_signed(directory)
    write_keystore(paths)
    for name, value in self_signed_defaults(paths).items():
        config.static.setdefault(name, value)
    if "listeners" not in config.static:
        config.static["listeners"] = "SSL://:0"
    print(
        f"kemu tls ca={paths.ca} client_cert={paths.client_chain} client_key={paths.client_key}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
