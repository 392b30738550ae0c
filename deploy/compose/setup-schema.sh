#!/bin/sh
# One-shot: create and migrate Temporal's two PostgreSQL databases with the admin tools' SQL tool
# (what the deprecated auto-setup image used to do inside the server container).
set -eu
tool() { temporal-sql-tool --plugin postgres12 --ep postgresql -p 5432 -u "$POSTGRES_USER" "$@"; }
schema=/etc/temporal/schema/postgresql/v12
for db in temporal temporal_visibility; do
  case "$db" in temporal) dir=temporal ;; *) dir=visibility ;; esac
  tool --db "$db" create || echo "database $db already exists"
  tool --db "$db" setup-schema -v 0.0 || echo "database $db already has a schema"
  tool --db "$db" update-schema -d "$schema/$dir/versioned"
done
echo "Temporal schemas are up to date"
