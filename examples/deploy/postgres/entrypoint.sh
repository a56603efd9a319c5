#!/bin/sh
# Initialises the cluster on first start (an empty $PGDATA): a superuser
# "postgres" and a role and database "dreadnode", both with the password
# $POSTGRES_PASSWORD, password authentication over TCP. Then runs the server
# in the foreground, reachable on every interface of the container.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
if [ -z "${POSTGRES_PASSWORD:-}" ]; then
	echo "entrypoint: set POSTGRES_PASSWORD (the password of the postgres and dreadnode roles)" >&2
	exit 1
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	pwfile="$(mktemp)"
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	initdb -D "$PGDATA" -U postgres --pwfile="$pwfile" -A scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
	rm -f "$pwfile"
	printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
	# Single-user mode: no server, no network, no authentication yet.
	pw="$(printf '%s' "$POSTGRES_PASSWORD" | sed "s/'/''/g")"
	postgres --single -D "$PGDATA" postgres >/dev/null <<SQL
CREATE ROLE dreadnode LOGIN PASSWORD '$pw';
CREATE DATABASE dreadnode OWNER dreadnode;
SQL
	echo "entrypoint: initialised $PGDATA"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c max_connections=300
