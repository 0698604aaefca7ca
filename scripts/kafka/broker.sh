#!/usr/bin/env bash
# Runs a single-node Apache Kafka broker (broker and KRaft controller in
# one JVM) in the foreground, from the jars scripts/kafka/fetch.sh caches:
# for the lab (README, "Scaling out") and the Kafka sink's tests
# (internal/testservers run this script).
#
#   scripts/kafka/broker.sh DIR [PORT [CONTROLLER_PORT]]
#
# DIR keeps server.properties and the log (created and formatted on first
# use); the broker listens on 127.0.0.1:PORT (default 9092) only. Topics
# are not created automatically. RTTSCOPE_KAFKA_LIBS overrides the jar
# directory, RTTSCOPE_KAFKA_JVM the JVM options.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: broker.sh DIR [PORT [CONTROLLER_PORT]]}
port=${2:-9092}
cport=${3:-$((port + 1))}
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")
libs=${RTTSCOPE_KAFKA_LIBS:-/var/cache/rttscope/kafka/$version/lib}
if [ ! -f "$libs/kafka_2.13-$version.jar" ]; then
	echo "broker.sh: no Kafka $version jars in $libs: run scripts/kafka/fetch.sh (or scripts/setup.sh)" >&2
	exit 1
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=4
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
PROPS
# A small heap and a quick start (C1 compiler only): a test and lab broker,
# not a production one. RTTSCOPE_KAFKA_JVM replaces these JVM options (the
# benchmark runs the broker with the full JIT).
read -r -a jvm <<<"${RTTSCOPE_KAFKA_JVM:--Xms128m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1}"
java=(java "${jvm[@]}" -Dlog4j2.level=warn -cp "$libs/*")
if [ ! -f "$dir/data/meta.properties" ]; then
	# A random cluster id (base64url of 16 bytes). Given as --cluster-id=ID:
	# about one id in 64 starts with '-', which a separate argument would
	# make the option parser read as an option.
	id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
	"${java[@]}" kafka.tools.StorageTool format --cluster-id="$id" \
		-c "$dir/server.properties" >"$dir/format.log" 2>&1 ||
		{ cat "$dir/format.log" >&2; exit 1; }
fi
exec "${java[@]}" kafka.Kafka "$dir/server.properties"
