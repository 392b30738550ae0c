# remedy: the controller worker, the node agent and the CLI in one image.
#   docker build -t remedy:0.13.0 .
#   docker run --rm remedy:0.13.0 runbooks validate /app/runbooks
FROM python:3.11-slim

# No PYTHONDONTWRITEBYTECODE: the workflow sandbox imports the workflow module for every new
# workflow run, and without its .pyc (compiled below; the root filesystem is read-only at run
# time) it would compile it from source each time.
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

# Dependencies first, so a code change does not reinstall them.
COPY pyproject.toml README.md ./
RUN mkdir -p remedy contract workflows activities workers adapters twin \
    && touch remedy/__init__.py contract/__init__.py workflows/__init__.py \
             activities/__init__.py workers/__init__.py adapters/__init__.py twin/__init__.py \
    && pip install . && pip uninstall -y remedy

# The code and the shipped runbooks. Installed in place (editable): the commands find the
# runbooks next to the code, at /app/runbooks.
COPY remedy remedy
COPY contract contract
COPY workflows workflows
COPY activities activities
COPY workers workers
COPY adapters adapters
COPY runbooks runbooks
# Runbooks for particular pools (the demo's shared inference node loads them beside the shipped).
COPY examples/runbooks examples/runbooks
RUN pip install --no-deps -e . && python -m compileall -q /app \
    && remedy runbooks validate /app/runbooks /app/examples/runbooks

# Unprivileged; the node agent's DaemonSet grants what resets and reboots need (deploy/agent.yaml).
USER 10001
EXPOSE 9464
ENTRYPOINT ["remedy"]
CMD ["--help"]
