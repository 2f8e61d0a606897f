# Quiver in a container: one static mq binary on distroless/static (no
# shell, no libc), running as the distroless "nonroot" user (65532), data
# in the /data volume.
#
#   docker build -t quiver .
#   docker run --rm -p 9876:9876 -p 10911:10911 -p 8080:8080 -p 9090:9090 -v quiver-data:/data quiver
#
# The default command is `mq dev` (name server and broker in one process)
# listening on 0.0.0.0 inside the container. The broker registers the
# address in QUIVER_BROKER__ADVERTISE with its name server, and clients dial
# that address: the default, 127.0.0.1:10911, suits clients on the Docker
# host with -p 10911:10911; set it to an IP:port your clients reach
# (docker run -e QUIVER_BROKER__ADVERTISE=192.0.2.10:10911 ...). The
# console is read-only here (QUIVER_CONSOLE__ADMIN=true enables DLQ resend
# and offset reset: only behind a trusted network). Other roles:
#   docker run ... quiver namesrv --config /etc/quiver/namesrv.yaml
#   docker run ... quiver broker --config /etc/quiver/broker.yaml
# (internal/lint/release_test.go TestDockerfileCommands runs this image's
# command and environment through `mq --check-config`.)

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/mq ./cmd/mq \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mq /usr/local/bin/mq
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
VOLUME /data
ENV QUIVER_NAMESRV__LISTEN=0.0.0.0:9876 \
    QUIVER_BROKER__LISTEN=0.0.0.0:10911 \
    QUIVER_BROKER__ADVERTISE=127.0.0.1:10911 \
    QUIVER_METRICS__LISTEN=0.0.0.0:9090 \
    QUIVER_CONSOLE__LISTEN=0.0.0.0:8080 \
    QUIVER_CONSOLE__ADMIN=false \
    QUIVER_STORAGE__DIR=/data/store
EXPOSE 9876 10911 8080 9090
ENTRYPOINT ["/usr/local/bin/mq"]
CMD ["dev"]
