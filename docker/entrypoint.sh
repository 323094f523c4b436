#!/bin/sh
# kemu's container entry point (docker/Dockerfile), configured by environment variables:
#   KEMU_BROKERS (3)            virtual brokers, on consecutive ports from KEMU_PORT
#   KEMU_PORT (9092)            the first broker's port
#   KEMU_HOST (0.0.0.0)         where the brokers listen (every interface: inside a container)
#   KEMU_ADVERTISED_HOST (localhost)  the host clients are told to connect to
#   KEMU_CONTROL_PORT (9192)    the HTTP control API (empty: none)
#   KEMU_CONTROL_HOST (0.0.0.0) where it listens (publish it on the host's loopback only)
#   KEMU_DATA_DIR (empty)       keep logs and state here (the image sets /var/lib/kemu)
#   KEMU_KIP1289 (false)        true: serve the KIP-1289 preview
# Arguments are passed on to `kemu serve` (e.g. --override num.partitions=3).
# `entrypoint.sh healthcheck` exits 0 when the control API answers (the image's HEALTHCHECK).
# tests/unit/packaging/test_docker_entrypoint.py runs this very script outside a container.
set -eu

: "${KEMU_BROKERS:=3}"
: "${KEMU_PORT:=9092}"
: "${KEMU_HOST:=0.0.0.0}"
: "${KEMU_ADVERTISED_HOST:=localhost}"
: "${KEMU_CONTROL_PORT=9192}"
: "${KEMU_CONTROL_HOST:=0.0.0.0}"
: "${KEMU_DATA_DIR:=}"
: "${KEMU_KIP1289:=false}"

if [ "${1:-}" = "healthcheck" ]; then
    if [ -z "$KEMU_CONTROL_PORT" ]; then
        echo "kemu healthcheck: no control port (KEMU_CONTROL_PORT is empty)" >&2
        exit 1
    fi
    exec kemu ctl --control "http://127.0.0.1:${KEMU_CONTROL_PORT}" health >/dev/null
fi

set -- kemu serve --brokers "$KEMU_BROKERS" --port "$KEMU_PORT" --host "$KEMU_HOST" \
    --advertised-host "$KEMU_ADVERTISED_HOST" "$@"
if [ -n "$KEMU_CONTROL_PORT" ]; then
    set -- "$@" --control-host "$KEMU_CONTROL_HOST" --control-port "$KEMU_CONTROL_PORT"
fi
if [ -n "$KEMU_DATA_DIR" ]; then
    set -- "$@" --data-dir "$KEMU_DATA_DIR"
fi
case "$KEMU_KIP1289" in
    true | TRUE | 1 | yes) set -- "$@" --kip1289 ;;
    false | FALSE | 0 | no | "") ;;
    *)
        echo "kemu: KEMU_KIP1289 is true or false, not '$KEMU_KIP1289'" >&2
        exit 2
        ;;
esac
exec "$@"
