"""The Spark side of the example: a Structured Streaming query (Kafka source -> transform -> Kafka
sink, checkpointed) and a batch read of a topic through the same Kafka source.

Runs under examples/spark/.venv (pyspark); run.py starts it as a subprocess, the way a user starts
a driver, so that it can SIGKILL the driver and start it again from the checkpoint.

    stream.py stream --bootstrap B --input T --output T --checkpoint DIR --stop-file F
    stream.py read --bootstrap B --topic T --summary FILE.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pyspark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

# The connector of this very Spark release (Scala 2.13 build), fetched from Maven Central by
# Spark's Ivy at the first run; requirements.txt pins a pyspark whose connector Central serves.
KAFKA_PACKAGE = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
HERE = Path(__file__).resolve().parent

INPUT_SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("customer", StringType()),
        StructField("amount", StringType()),  # decimal text, e.g. "12.34"
    ]
)


def session(app_name: str) -> SparkSession:
    spark = (
        SparkSession.builder.appName(app_name)
        .master("local[2]")
        .config("spark.jars.packages", KAFKA_PACKAGE)
        # Keep Spark's Ivy cache next to the example (gitignored), not in ~/.ivy2.
        .config("spark.jars.ivy", str(HERE / ".ivy"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "768m")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def transform(records: DataFrame) -> DataFrame:
    """Parse the JSON value, upper-case the customer, amount in cents, keep where it came from."""
    parsed = records.select(
        F.from_json(F.col("value").cast("string"), INPUT_SCHEMA).alias("order"),
        F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
    )
    order = parsed.select(
        F.col("order.id").alias("id"),
        F.upper(F.col("order.customer")).alias("customer"),
        (F.col("order.amount").cast("decimal(12,2)") * 100).cast("long").alias("amount_cents"),
        "source_partition",
        "source_offset",
    )
    return order.select(
        F.col("customer").alias("key"),
        F.to_json(F.struct(*order.columns)).alias("value"),
    )


def run_stream(args: argparse.Namespace) -> int:
    spark = session("kemu-spark-stream")
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        # Several micro-batches over the input, so that a kill lands between or inside them.
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
    )
    query = (
        transform(source)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("checkpointLocation", args.checkpoint)
        .queryName("orders-to-cents")
        .start()
    )
    print(f"spark stream started query id={query.id} run id={query.runId}", flush=True)
    stop_file = Path(args.stop_file)
    # Until run.py asks for a clean stop (or SIGKILLs this driver).
    while query.isActive and not stop_file.exists():
        query.awaitTermination(0.5)
    if query.exception() is not None:
        print(f"spark stream failed: {query.exception()}", file=sys.stderr, flush=True)
        return 1
    query.stop()
    print("spark stream stopped", flush=True)
    spark.stop()
    return 0


def run_read(args: argparse.Namespace) -> int:
    """Batch-read a whole topic through the Kafka source; summarise ids and duplicates."""
    spark = session("kemu-spark-read")
    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    ids = records.select(
        F.get_json_object(F.col("value").cast("string"), "$.id").cast("long").alias("id")
    )
    started = time.monotonic()
    counts = ids.groupBy("id").count()
    totals = counts.agg(
        F.sum("count").alias("records"),
        F.count("id").alias("distinct_ids"),
        F.min("id").alias("min_id"),
        F.max("id").alias("max_id"),
        F.sum(F.when(F.col("count") > 1, F.col("count") - 1).otherwise(0)).alias("duplicates"),
    ).collect()[0]
    summary = {
        "records": int(totals["records"] or 0),
        "distinct_ids": int(totals["distinct_ids"] or 0),
        "min_id": totals["min_id"],
        "max_id": totals["max_id"],
        "duplicates": int(totals["duplicates"] or 0),
        "seconds": round(time.monotonic() - started, 2),
    }
    Path(args.summary).write_text(json.dumps(summary))
    print(f"spark batch read {json.dumps(summary)}", flush=True)
    spark.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="mode", required=True)
    stream = sub.add_parser("stream")
    stream.add_argument("--bootstrap", required=True)
    stream.add_argument("--input", required=True)
    stream.add_argument("--output", required=True)
    stream.add_argument("--checkpoint", required=True)
    stream.add_argument("--stop-file", required=True)
    stream.add_argument("--max-offsets-per-trigger", type=int, default=1000)
    read = sub.add_parser("read")
    read.add_argument("--bootstrap", required=True)
    read.add_argument("--topic", required=True)
    read.add_argument("--summary", required=True)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return run_stream(args) if args.mode == "stream" else run_read(args)


if __name__ == "__main__":
    sys.exit(main())
