#!/usr/bin/env bash
# Provides a real S3-compatible server (MinIO) for the S3 blob-storage tests.
#
#   lines="$(.ci/minio.sh)" && eval "$lines"   # build if needed, start, export env
#   go test ./internal/artifacts/...
#   .ci/minio.sh stop                           # stop the server, delete its data
#
# (Plain `eval "$(.ci/minio.sh)"` works too but hides a failed start from
# `set -e`.)
#
# Subcommands: start (default), stop, env (print the lines without starting).
# stdout carries only `export NAME='value'` lines (so eval works); progress
# and errors go to stderr.
#
# Environment:
#   HOPPER_CACHE           cache root (default $HOME/.cache/hopper); the minio
#                          binary lives in $HOPPER_CACHE/bin and is built once
#                          with `go install` (takes a few minutes).
#   HOPPER_MINIO_VERSION   module version to build (default latest).
#   HOPPER_MINIO_PORT      API port on 127.0.0.1 (default 9000; console +1).
#
# The credentials are MinIO's well-known defaults: the server listens on
# loopback only and holds throw-away test data.
set -euo pipefail

cache="${HOPPER_CACHE:-$HOME/.cache/hopper}"
bin="$cache/bin/minio"
version="${HOPPER_MINIO_VERSION:-latest}"
port="${HOPPER_MINIO_PORT:-9000}"
addr="127.0.0.1:$port"
user=minioadmin
pass=minioadmin
state="${TMPDIR:-/tmp}/hopper-minio-$port"
pidfile="$state/minio.pid"
logfile="$state/minio.log"

log() { printf 'minio.sh: %s\n' "$*" >&2; }

print_env() {
	printf "export HOPPER_TEST_S3='s3://hopper-test?endpoint=%s&region=us-east-1&insecure=true&create=true&accessKey=%s&secretKey=%s'\n" \
		"$addr" "$user" "$pass"
}

# healthy reports whether something answers MinIO's liveness probe on $addr.
# It uses bash's /dev/tcp so that curl need not be installed.
healthy() {
	local status=""
	# The braces keep the redirection of stderr from outliving the probe.
	{ exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 1
	printf 'GET /minio/health/live HTTP/1.0\r\nHost: %s\r\n\r\n' "$addr" >&3 || true
	IFS= read -r -t 2 status <&3 || true
	exec 3<&- 3>&-
	[[ $status == HTTP/1.?\ 200* ]]
}

running_pid() {
	[[ -f $pidfile ]] || return 1
	local pid
	pid="$(<"$pidfile")"
	[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && printf '%s\n' "$pid"
}

ensure_binary() {
	if [[ -x $bin ]]; then
		return
	fi
	mkdir -p "$cache/bin"
	log "building minio@$version into $cache/bin (a few minutes, once)"
	# Run outside the repository so its go.mod plays no part, and clear
	# GOFLAGS so a caller's -mod=… cannot break the build.
	(cd / && GOBIN="$cache/bin" GOFLAGS= go install "github.com/minio/minio@$version") >&2
	[[ -x $bin ]] || { log "go install finished but $bin is missing"; exit 1; }
}

start() {
	if pid="$(running_pid)" && healthy; then
		log "already running (pid $pid) on $addr"
		print_env
		return
	fi
	if healthy; then
		log "something else already answers on $addr; set HOPPER_MINIO_PORT to use another port"
		exit 1
	fi
	ensure_binary
	rm -rf "$state"
	mkdir -p "$state/data"
	log "starting minio on $addr (data in $state/data)"
	# setsid detaches the server from the caller's process group, so that
	# it outlives this script and a Ctrl-C of the test run.
	local detach=()
	if command -v setsid >/dev/null; then
		detach=(setsid)
	fi
	MINIO_ROOT_USER="$user" MINIO_ROOT_PASSWORD="$pass" MINIO_BROWSER=off MINIO_UPDATE=off \
		"${detach[@]}" "$bin" server --quiet --address "$addr" --console-address "127.0.0.1:$((port + 1))" "$state/data" \
		>"$logfile" 2>&1 </dev/null &
	echo $! >"$pidfile"
	for _ in $(seq 1 120); do
		if healthy; then
			log "minio is up (pid $(<"$pidfile"))"
			print_env
			return
		fi
		if ! running_pid >/dev/null; then
			log "minio exited during start-up; its log:"
			cat "$logfile" >&2
			exit 1
		fi
		sleep 0.5
	done
	log "minio did not answer on $addr within 60 s; its log:"
	cat "$logfile" >&2
	stop
	exit 1
}

stop() {
	if pid="$(running_pid)"; then
		log "stopping minio (pid $pid)"
		kill "$pid"
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -rf "$state"
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
env) print_env ;;
*)
	log "usage: $0 [start|stop|env]"
	exit 2
	;;
esac
