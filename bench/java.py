"""The Kafka jars (fetched by Maven into bench/.cache/lib) and the JVM command lines using them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from kemu.testing.kafka import (  # noqa: F401 - bench's names for them
    BROKER_JVM_OPTS,
    KAFKA_VERSION,
    TOOL_JVM_OPTS,
    java_command,
    write_log4j_config,
)

BENCH_DIR = Path(__file__).resolve().parent
CACHE_DIR = BENCH_DIR / ".cache"
LIB_DIR = CACHE_DIR / "lib"  # kemu.testing.kafka.kafka_lib() unless KEMU_KAFKA_LIB says otherwise
POM = BENCH_DIR / "java" / "pom.xml"
BROKER_JAR = LIB_DIR / f"kafka_2.13-{KAFKA_VERSION}.jar"


def ensure_jars() -> None:
    """Fetch Kafka and its tools through Maven unless bench/.cache/lib already has them."""
    if BROKER_JAR.exists():
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Maven (mvn) is needed to fetch Apache Kafka for the benchmark")
    print(f"fetching Apache Kafka {KAFKA_VERSION} with Maven into {LIB_DIR} ...", flush=True)
    subprocess.run([mvn, "-q", "-B", "-f", str(POM), "package"], check=True)
    if not BROKER_JAR.exists():
        raise RuntimeError(f"Maven finished but {BROKER_JAR} is missing")
