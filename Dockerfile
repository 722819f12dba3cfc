# kpcastream container image: a static binary on a distroless, non-root base.
#
#   docker build -t kpcastream \
#     --build-arg VERSION="$(git describe --tags --always --dirty)" \
#     --build-arg REVISION="$(git rev-parse HEAD)" .
#   docker run --rm -p 9090:9090 \
#     -v "$PWD/deploy/compose/kpcastream.yaml:/etc/kpcastream/config.yaml:ro" \
#     kpcastream --config /etc/kpcastream/config.yaml --nats-url nats://nats:4222
#
# Version: the build context holds no .git, so "go build" cannot stamp the
#         version itself; VERSION and REVISION are written to
#         internal/buildinfo/stamp.txt and reported by "kpcastream version",
#         kpcastream_build_info and the NATS micro service. Without them the
#         image reports (devel) and unknown.
# Config: mount the YAML file at /etc/kpcastream/config.yaml (the default
# CMD); flags after the image name replace CMD and are passed to "run".
# Data:   /var/lib/kpcastream is the working directory and a volume, owned
#         by the nonroot user (uid/gid 65532). Only the embedded nats-server
#         (no nats.url / --nats-url) stores anything: set
#         data_dir: /var/lib/kpcastream or --data-dir /var/lib/kpcastream.
# Ports:  9090 serves /metrics, /healthz and /readyz (http.metrics_addr).
# Health: the image has no shell; use HTTP probes on /healthz (liveness)
#         and /readyz (readiness) from the orchestrator.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG REVISION=""
RUN printf 'version=%s\nrevision=%s\n' "$VERSION" "$REVISION" > internal/buildinfo/stamp.txt
# The same command as .ci/run's static build: keep the flags identical.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/kpcastream ./cmd/kpcastream
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kpcastream /kpcastream
COPY --from=build --chown=65532:65532 /out/data /var/lib/kpcastream
WORKDIR /var/lib/kpcastream
VOLUME ["/var/lib/kpcastream"]
USER nonroot:nonroot
EXPOSE 9090
# Metrics and health on every interface of the container (the binary's
# default is loopback): orchestrators probe and scrape the container's IP.
ENV KPCASTREAM_METRICS_ADDR=:9090
ENTRYPOINT ["/kpcastream", "run"]
CMD ["--config", "/etc/kpcastream/config.yaml"]
