# Hubbub: the `hubbub` binary and the sample bot components, on a small Debian runtime, as a non-root user.
#
#   docker build -t hubbub .
#   docker run -p 8080:8080 -v hubbub-data:/var/lib/hubbub hubbub
#
# The image listens on 0.0.0.0:8080 and keeps its SQLite database, its secret key and its precompiled bot
# components under /var/lib/hubbub (mount a volume there); set HUBBUB_DATABASE_URL to a postgres:// URL to use
# PostgreSQL instead (see docs/deploy.md and docker-compose.yml).

# The end-user web app (web/), built once in Node's image; the host build embeds it (HUBBUB_WEB_PREBUILT).
# Its types come from the generated client package (clients/typescript, a local dependency).
FROM node:20-bookworm-slim AS web
WORKDIR /src
COPY clients/typescript/ clients/typescript/
COPY web/package.json web/package-lock.json web/
RUN cd web && npm ci --no-audit --no-fund
COPY web/ web/
RUN cd web && npm run build

FROM rust:1.95-bookworm AS build
WORKDIR /src
ENV HUBBUB_WEB_PREBUILT=1
RUN rustup target add wasm32-wasip2
COPY . .
COPY --from=web /src/web/dist web/dist
RUN cargo build --release -p hubbub-host \
 && cargo build --release --target wasm32-wasip2 -p signup -p shop -p chat \
 && mkdir -p /out/flows \
 && cp target/release/hubbub /out/hubbub \
 && cp target/wasm32-wasip2/release/signup.wasm target/wasm32-wasip2/release/shop.wasm \
       target/wasm32-wasip2/release/chat.wasm /out/flows/

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home-dir /var/lib/hubbub --create-home --uid 10001 hubbub
COPY --from=build /out/hubbub /usr/local/bin/hubbub
COPY --from=build /out/flows /usr/share/hubbub/flows
USER hubbub
WORKDIR /var/lib/hubbub
ENV HUBBUB_LISTEN=0.0.0.0:8080 \
    HUBBUB_DATABASE_URL=sqlite:///var/lib/hubbub/hubbub.db?mode=rwc \
    HUBBUB_COMPONENT_CACHE_DIR=/var/lib/hubbub/components \
    HUBBUB_LOG_FORMAT=json
VOLUME /var/lib/hubbub
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/readyz >/dev/null || exit 1
ENTRYPOINT ["hubbub"]
CMD ["serve"]
