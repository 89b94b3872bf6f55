FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap make util-linux \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt constraints.txt ./
RUN pip install --no-cache-dir -r requirements.txt -c constraints.txt
COPY . .
ENV DJANGO_SETTINGS_MODULE=reviewer.settings PYTHONUNBUFFERED=1
EXPOSE 8000
