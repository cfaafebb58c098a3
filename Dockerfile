# Astro project image (`astro dev start`, `astro dev pytest`, `astro deploy`).
#
# Pinned Astro Runtime: 3.3-8, the Airflow 3.3 line of Astro Runtime 3 (Apache Airflow 3.3.x,
# reported as "3.3.x+astro.N"), on Python 3.11 like .venv and constraints.txt. The project is
# pinned to and tested on Apache Airflow 3.3.2: the first RUN below stops the build unless the
# image carries exactly that version, so a runtime tag with another Airflow patch is caught
# here, not in production. Changing Airflow = changing this tag and requirements/constraints.
FROM astrocrpublic.azurecr.io/runtime:3.3-8-python-3.11

# The runtime image's ONBUILD steps have already run at this point: apt-get install of
# packages.txt, `pip install -r requirements.txt`, then `COPY . /usr/local/airflow` (minus
# .dockerignore). Below: the checks and pins that step cannot do.
ARG AIRFLOW_VERSION=3.3.2
RUN python -c "import sys, airflow; v = airflow.__version__.split('+')[0]; \
sys.exit(0 if v == '${AIRFLOW_VERSION}' else f'this runtime carries Airflow {v}, the project is pinned to ${AIRFLOW_VERSION}: pick the matching runtime tag')"

# Re-apply the full pinned set (constraints.txt, what the test suite ran with) to what the
# ONBUILD step installed from requirements.txt alone. Airflow itself is the image's, at the
# pinned version (checked above), so the constraints leave it as it is.
USER root
RUN pip install --no-cache-dir -r /usr/local/airflow/requirements.txt -c /usr/local/airflow/constraints.txt
USER astro

# The domain package: Astro copies include/ to /usr/local/airflow/include (and mounts it under
# `astro dev start`), so `import dgb` resolves there, code edits apply without a rebuild.
ENV PYTHONPATH=/usr/local/airflow/include${PYTHONPATH:+:${PYTHONPATH}}
# Settings that hold for every Astro deployment (docs/configuration.md). Everything
# deployment-specific (DGB_SOURCE_MODE, DGB_GCP_PROJECT, DGB_MODEL_URL, DGB_CLASSIFIER,
# DGB_EMBEDDING_MODEL/DIM, ...) goes in .env locally and in the Deployment's environment
# variables on Astro; connections and pools are in airflow_settings.yaml locally.
#   DGB_STATE_DIR: scratch space local to each container (tasks share no files)
#   DGB_EMBEDDER=service: tasks always use the model service, never load the model themselves
ENV DGB_STATE_DIR=/tmp/dgb-state \
    DGB_EMBEDDER=service
