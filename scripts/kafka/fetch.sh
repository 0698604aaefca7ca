#!/usr/bin/env bash
# Copies the Apache Kafka broker (kafka_2.13, KRaft), Kafka's tools and
# their runtime dependencies from Maven Central into DIR/lib (default
# /var/cache/rttscope/kafka/VERSION), for the Kafka sink's tests
# (internal/testservers) and the lab (scripts/kafka/broker.sh). The version
# is pom.xml's kafka.version. Needs mvn and a Java 17 runtime; does nothing
# when DIR/lib holds what this pom.xml lists.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")
dir=${1:-/var/cache/rttscope/kafka/$version}
sum=$(sha256sum "$here/pom.xml" | cut -d' ' -f1)
if [ "$(cat "$dir/lib/.complete" 2>/dev/null)" = "$sum" ]; then
	exit 0
fi
rm -rf "$dir/lib"
mkdir -p "$dir/lib"
mvn -q -B -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dir/lib"
echo "$sum" >"$dir/lib/.complete"
echo "fetch.sh: Kafka $version in $dir/lib ($(ls "$dir/lib" | wc -l) jars)" >&2
