"""The Kafka jars (fetched by Maven into bench/.cache/lib) and the JVM command lines using them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

KAFKA_VERSION = "4.4.0"
BENCH_DIR = Path(__file__).resolve().parent
CACHE_DIR = BENCH_DIR / ".cache"
LIB_DIR = CACHE_DIR / "lib"
POM = BENCH_DIR / "java" / "pom.xml"
BROKER_JAR = LIB_DIR / f"kafka_2.13-{KAFKA_VERSION}.jar"

# What bin/kafka-server-start.sh and kafka-run-class.sh give the broker by default.
BROKER_JVM_OPTS = [
    "-Xmx1G",
    "-Xms1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
# bin/kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh use a 512M heap.
TOOL_JVM_OPTS = ["-Xmx512M", "-server", "-XX:+UseG1GC", "-Djava.awt.headless=true"]


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


def java_command(
    main_class: str, args: list[str], *, jvm_opts: list[str], log4j: Path
) -> list[str]:
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is needed to run Apache Kafka for the benchmark")
    return [
        java,
        *jvm_opts,
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        f"{LIB_DIR}/*",
        main_class,
        *args,
    ]


def write_log4j_config(path: Path, log_file: Path, level: str = "INFO") -> Path:
    """A log4j2 config sending everything to ``log_file`` (never to the tools' stdout)."""
    path.write_text(
        "\n".join(
            [
                f"rootLogger.level={level}",
                "rootLogger.appenderRef.file.ref=file",
                "appender.file.type=File",
                "appender.file.name=file",
                f"appender.file.fileName={log_file}",
                "appender.file.layout.type=PatternLayout",
                "appender.file.layout.pattern=[%d] %p %m (%c)%n",
                "",
            ]
        )
    )
    return path
