#!/bin/bash
# Creates the Airflow metadata database next to the news database (docker-compose only).
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -c "CREATE DATABASE \"${DGB_PG_AIRFLOW_DB:-dgb_airflow}\" OWNER \"$POSTGRES_USER\""
