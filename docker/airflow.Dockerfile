# Airflow image for docker-compose: the official image plus our pinned dependencies and
# the `dgb` package (include/ is also mounted, so code edits apply without a rebuild).
FROM apache/airflow:3.3.2-python3.11
COPY requirements.txt constraints.txt pyproject.toml /opt/dgb/
COPY include /opt/dgb/include
RUN pip install --no-cache-dir -r /opt/dgb/requirements.txt -c /opt/dgb/constraints.txt \
 && pip install --no-cache-dir --no-deps -e /opt/dgb
