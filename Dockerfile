# The warmgate operator image (kopf + kubernetes client + pydantic; no torch, no vLLM).
# The e2e tier builds it with buildah and a local Debian base as PYTHON_IMAGE (docs/testing.md).
#   docker build -t <registry>/warmgate:0.1.0 .   (the chart default is ghcr.io/warmgate/warmgate)
ARG PYTHON_IMAGE=python:3.11-slim

# Build stage: install the package and its runtime dependencies (no dev extras) into a venv.
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/warmgate
WORKDIR /src
COPY pyproject.toml README.md ./
COPY warmgate ./warmgate
RUN /opt/warmgate/bin/pip install . \
 && find /opt/warmgate -name '__pycache__' -prune -exec rm -rf {} +

# Runtime stage: the same base, the venv only, a fixed non-root uid/gid (the chart's default).
FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 65532 warmgate \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin warmgate
COPY --from=build /opt/warmgate /opt/warmgate
ENV PATH=/opt/warmgate/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric, so the kubelet can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532
# /metrics and kopf's liveness endpoint (the chart passes --metrics-port and --liveness).
EXPOSE 8080 8081
ENTRYPOINT ["warmgate", "operator"]
CMD ["--all-namespaces", "--liveness=http://0.0.0.0:8081/healthz", "--metrics-port=8080"]
