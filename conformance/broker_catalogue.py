"""``python -m conformance.broker_catalogue``: regenerate kemu's catalogue of Kafka broker configs.

The one source of truth is Kafka itself: ``BrokerConfigDump.java`` prints the broker ConfigDef
of the Kafka jars ``make bench`` fetches (``AbstractKafkaConfig.CONFIG_DEF``: name, type,
default as Kafka describes it, documentation) and whether a broker may change each one
dynamically (``DynamicBrokerConfig.ALL_DYNAMIC_CONFIGS``). Internal configs, which Kafka does not
describe, are left out. The result is written to ``kemu/config/kafka_broker_catalogue.json``,
read by ``kemu/config/broker_catalogue.py``;
``tests/integration/config/test_broker_catalogue_kafka.py`` checks it against a real Kafka's
DescribeConfigs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = Path(__file__).with_name("BrokerConfigDump.java")
TARGET = ROOT / "kemu" / "config" / "kafka_broker_catalogue.json"


def dump() -> list[dict[str, object]]:
    from bench import java

    java.ensure_jars()
    javac = shutil.which("javac")
    if javac is None or shutil.which("java") is None:
        raise RuntimeError("java and javac are needed")
    with tempfile.TemporaryDirectory() as classes:
        classpath = f"{classes}:{java.LIB_DIR}/*"
        subprocess.run([javac, "-cp", f"{java.LIB_DIR}/*", "-d", classes, str(SOURCE)], check=True)
        done = subprocess.run(
            ["java", "-cp", classpath, "BrokerConfigDump"],
            check=True,
            capture_output=True,
            text=True,
        )
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return [
        {key: row[key] for key in ("name", "type", "default", "dynamic", "doc")}
        for row in rows
        if not row["internal"]
    ]


def main() -> int:
    from bench import java

    rows = dump()
    document = {"kafka_version": java.KAFKA_VERSION, "configs": rows}
    TARGET.write_text(json.dumps(document, indent=0, sort_keys=True) + "\n")
    print(f"{len(rows)} broker configs of Kafka {java.KAFKA_VERSION} -> {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
