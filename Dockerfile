# The CPU image: the api, the one-shot migrate, the reaper and CPU workers (docker-compose.yml).
# GPU training workers use Dockerfile.gpu, which installs the same project on a CUDA build of torch.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NUMBA_CACHE_DIR=/opt/veernet-numba \
    NUMBA_CPU_NAME=generic \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VEERNET_DATA_DIR=/var/lib/veernet

# Tesseract reads the depth numbers and track headers of scanned pages (POST /scans/analyse); unpinned, as
# the base image's Debian release fixes it.
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-eng && rm -rf /var/lib/apt/lists/*

# torch first, from PyTorch's CPU index: the PyPI wheel for Linux is a CUDA build that pulls gigabytes
# of CUDA libraries. `pip install .` below then finds `torch>=2.4` satisfied and keeps this build, and installs
# torch's own dependencies from PyPI at the versions of constraints.txt (hence --no-deps here). Its own layer,
# so a source change does not download torch again.
RUN pip install --no-deps torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

# A non-editable install: the image runs the installed packages, not a source tree. Alembic finds its
# scripts inside the installed `migrations` package (api.db.alembic_config), so no alembic.ini is needed.
WORKDIR /tmp/veernet-src
# Every dependency at the exact version the tests ran with (`make constraints` makes the file): a rebuild next
# month installs the same packages, and `pip check` stops the build if any requirement is left unmet.
COPY constraints.txt pyproject.toml ./
COPY api ./api
COPY worker ./worker
COPY veernet_core ./veernet_core
COPY migrations ./migrations
RUN pip install --constraint constraints.txt . \
    && pip check \
    && rm -rf /tmp/veernet-src

# Non-root, by number (Kubernetes' runAsNonRoot can only verify a numeric user). VEERNET_DATA_DIR, its
# home, holds the embedded defaults and Celery beat's schedule file, so this user must own it; with the
# compose stack's Postgres, Redis and MinIO nothing else is written.
RUN groupadd --system --gid 10001 veernet \
    && useradd --system --no-log-init --uid 10001 --gid veernet --create-home \
        --home-dir /var/lib/veernet --shell /usr/sbin/nologin veernet \
    && install -d -o 10001 -g 10001 /opt/veernet-numba
USER 10001:10001
WORKDIR /var/lib/veernet

# The column tracer's loops (veernet_core/digitise/tracer_loop.py) are compiled by numba on first use and kept in
# NUMBA_CACHE_DIR, which numba uses only where it may write: compiled here, as the user that runs the workers,
# no container pays the 10-30 s. NUMBA_CPU_NAME=generic keeps that code valid on any x86-64 CPU, not only the
# build machine's (the loops are branches over a few numbers per column: nothing for wider vectors to speed up).
RUN python -c "from veernet_core.digitise.tracer import compile_loops; compile_loops()"

EXPOSE 8000
# Health of the api (the default command): /healthz answers 503 while the database, the broker or the checkpoint
# store is unreachable, which /livez would not notice. Other services built from this image bring their own
# health check or disable this one in docker-compose.yml. Python's urllib, so the image needs no curl; urlopen
# raises on a non-2xx answer.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]

ENTRYPOINT ["veernet"]
CMD ["api", "--host", "0.0.0.0", "--port", "8000"]
