# cascade as a container, usable from any CI:
#   docker build -t cascade-gate .
#   docker run --rm --network none -v "$PWD:/repo" -w /repo cascade-gate review changes.diff
#
# BASE_IMAGE: any Debian-like image with python3 (>= 3.10), venv and pip. The default is the official slim image;
# CI builds from a locally made base (docker/make-base-image.sh -> cascade-base:bookworm) since no registry is
# reachable there (tests/test_docker_image.py does exactly that). Everything the gate runs at review time (ruff, pyright and its node) is installed and run once
# here, so the image works with no network.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ARG CASCADE_UID=10001
ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    VIRTUAL_ENV=/opt/cascade \
    PATH=/opt/cascade/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    TZ=UTC

USER root
# git makes the base/patched worktrees; the official slim image lacks it (the debootstrap base has it).
RUN if ! command -v git >/dev/null; then \
        apt-get update -qq && apt-get install -y -qq --no-install-recommends git >/dev/null \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv "$VIRTUAL_ENV" \
    && useradd --create-home --uid "$CASCADE_UID" --shell /usr/sbin/nologin cascade

# Behind a TLS-intercepting proxy, put its CA bundle at docker/build-ca.pem: pip trusts it for this build only
# (the wildcard lets the build go on without it).
# The dependencies get their own layer (read from pyproject.toml with tomllib, Python >= 3.11; older Pythons just
# skip this cache step), so editing the source does not re-download them. uv (a build-time tool only, removed
# afterwards) downloads in parallel: several times faster than pip here.
COPY pyproject.toml docker/build-ca*.pem /src/
RUN if [ -f /src/build-ca.pem ]; then export PIP_CERT=/src/build-ca.pem SSL_CERT_FILE=/src/build-ca.pem; fi \
    && if python3 -c 'import tomllib' 2>/dev/null; then \
        python3 -c 'import tomllib; print("\n".join(tomllib.load(open("/src/pyproject.toml", "rb"))["project"]["dependencies"]))' \
            > /tmp/requirements.txt \
        && pip install -q --target /tmp/uv uv \
        && /tmp/uv/bin/uv pip install -q --python "$VIRTUAL_ENV/bin/python" -r /tmp/requirements.txt \
        && rm -rf /tmp/uv /tmp/requirements.txt /root/.cache; \
    fi
COPY README.md /src/
COPY cascade /src/cascade
RUN if [ -f /src/build-ca.pem ]; then export PIP_CERT=/src/build-ca.pem; fi \
    && pip install -q /src \
    && rm -rf /src

USER cascade
WORKDIR /home/cascade
# Pre-warm: run the tools once as the runtime user, so nothing is fetched or unpacked at review time.
RUN printf 'x: int = 1\n' > /tmp/warm.py \
    && ruff --version && ruff check -q /tmp/warm.py \
    && pyright --version && pyright /tmp/warm.py >/dev/null \
    && cascade --version \
    && rm -f /tmp/warm.py

ENTRYPOINT ["cascade"]
CMD ["--help"]
