"""Generate kemu's group and topic config catalogues from Kafka's own ConfigDefs.

As ``conformance/broker_catalogue.py`` does for the broker: ``GroupTopicConfigDump.java`` prints
GroupConfig.CONFIG_DEF and LogConfig's ConfigDef from the jars ``make bench`` fetches (name,
type, default as Kafka describes it, validator as Kafka prints it, internal or not, the broker
config that supplies the default, documentation); this writes the non-internal ones to
``kemu/config/kafka_group_catalogue.json`` and ``kemu/config/kafka_topic_catalogue.json``.

    python -m conformance.config_catalogues
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = Path(__file__).with_name("GroupTopicConfigDump.java")
TARGETS = {
    "group": ROOT / "kemu" / "config" / "kafka_group_catalogue.json",
    "topic": ROOT / "kemu" / "config" / "kafka_topic_catalogue.json",
}
FIELDS = ("name", "type", "default", "validator", "broker_synonym", "doc")


def dump() -> list[dict[str, object]]:
    from bench import java

    java.ensure_jars()
    javac = shutil.which("javac")
    if javac is None or shutil.which("java") is None:
        raise RuntimeError("java and javac are needed")
    with tempfile.TemporaryDirectory() as classes:
        subprocess.run([javac, "-cp", f"{java.LIB_DIR}/*", "-d", classes, str(SOURCE)], check=True)
        done = subprocess.run(
            ["java", "-cp", f"{classes}:{java.LIB_DIR}/*", "GroupTopicConfigDump"],
            check=True,
            capture_output=True,
            text=True,
        )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main() -> int:
    from bench import java

    rows = dump()
    for kind, target in TARGETS.items():
        configs = [
            {key: row[key] for key in FIELDS}
            for row in rows
            if row["kind"] == kind and not row["internal"]
        ]
        document = {"kafka_version": java.KAFKA_VERSION, "configs": configs}
        target.write_text(json.dumps(document, indent=0, sort_keys=True) + "\n")
        print(f"{len(configs)} {kind} configs of Kafka {java.KAFKA_VERSION} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
