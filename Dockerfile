# buzzgate's container image: the gateway's static binary on distroless
# (CA certificates, a passwd naming nonroot, /tmp; no shell), run as
# nonroot (65532), serving HTTP on 0.0.0.0:8080 with the embedded demo
# config unless BUZZGATE_CONFIG names a mounted file (docs/operations.md,
# "Running as a container"). Multi-platform:
#   docker buildx build --platform linux/amd64,linux/arm64 -t buzzgate .
# `make image` builds the same image without a container engine.
#
# There is no HEALTHCHECK: distroless has no shell or curl to run one.
# Orchestrators probe GET /healthz on port 8080 instead.

# The pins match the Makefile's (tools/image's test checks).
ARG GO_VERSION=1.26
ARG TIKTOKEN_VERSION=1.0.22

# The binary, cross-compiled on the build machine's platform: the Lambda
# build's flags (static, reproducible, stripped).
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -tags lambda.norpc -trimpath -ldflags='-s -w' -o /out/buzzgate ./functions/api

# The tokenizer's vocabularies, from the tiktoken npm package (MIT), as
# the Makefile installs them.
FROM --platform=$BUILDPLATFORM node:22-bookworm-slim AS vocab
ARG TIKTOKEN_VERSION
WORKDIR /tokenizer
RUN npm pack --silent tiktoken@${TIKTOKEN_VERSION} >/dev/null \
    && tar -xzf tiktoken-${TIKTOKEN_VERSION}.tgz --strip-components=2 \
        package/encoders/o200k_base.json package/encoders/cl100k_base.json \
    && rm tiktoken-${TIKTOKEN_VERSION}.tgz

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/buzzgate /buzzgate
COPY --from=vocab /tokenizer/ /tokenizer/
ENV BUZZGATE_ADDR=0.0.0.0:8080 \
    BUZZGATE_TOKENIZER_DIR=/tokenizer
EXPOSE 8080
USER 65532:65532
STOPSIGNAL SIGTERM
LABEL org.opencontainers.image.title=buzzgate \
    org.opencontainers.image.licenses=Apache-2.0
ENTRYPOINT ["/buzzgate"]
