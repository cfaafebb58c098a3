# Airflow image for docker-compose: the official image plus our pinned dependencies, the `dgb`
# package and the dev package `dgb_dev` (the compose stack runs the local site and the bootstrap
# from it; include/ is also mounted, so code edits apply without a rebuild).
FROM apache/airflow:3.3.2-python3.11
COPY requirements.txt constraints.txt pyproject.toml /opt/dgb/
COPY include /opt/dgb/include
COPY dev /opt/dgb/dev
RUN pip install --no-cache-dir -r /opt/dgb/requirements.txt -c /opt/dgb/constraints.txt \
 && pip install --no-cache-dir --no-deps -e /opt/dgb
