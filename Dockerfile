FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap make util-linux \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt constraints.txt ./
RUN pip install --no-cache-dir -r requirements.txt -c constraints.txt
COPY . .
# The sandbox the worker runs candidate code in, built by the same script as on a host
# (`make sandbox-runtime`): the users cr-sbx0..7 and the read-only runtime venv from
# Debian's python3.11. The worker's start-up self-check says which layer is missing.
RUN scripts/sandbox-setup.sh /opt/cassette-review/sandbox-runtime
ENV DJANGO_SETTINGS_MODULE=reviewer.settings PYTHONUNBUFFERED=1
EXPOSE 8000
