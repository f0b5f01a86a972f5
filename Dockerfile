# Dockerfile - slotd image: a Debian 12 build stage running what `make build` runs, and a slim
# runtime stage with only the shared libraries slotd and slotd-health link. See deploy/README.md.

# ---- build: the same commands as `make build` (scripts/deps.sh, then the Makefile's cmake lines).
FROM debian:bookworm AS build
WORKDIR /src
# deps.sh installs the Debian packages slotd builds with (apt-get update when lists are missing).
COPY scripts/deps.sh scripts/deps.sh
RUN scripts/deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
RUN cmake --build build -j "$(nproc)"

# ---- runtime: the libraries `ldd build/bin/slotd` lists, by Debian package (libc6 is in the base).
FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      libgrpc29 libabsl20220623 libc-ares2 libre2-9 libssl3 zlib1g \
      libprotobuf-c1 libuv1 libleveldb1d libsnappy1v5 libstdc++6 libgcc-s1 \
      libmicrohttpd12 libgnutls30 libnettle8 libhogweed6 libgmp10 libtasn1-6 libp11-kit0 \
      libffi8 libidn2-0 libunistring2 libjansson4 libsodium23 \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 slotd \
 && useradd --system --uid 10001 --gid slotd --home-dir /var/lib/slotd --no-create-home \
      --shell /usr/sbin/nologin slotd \
 && mkdir -p /var/lib/slotd \
 && chown slotd:slotd /var/lib/slotd
COPY --from=build /src/build/bin/slotd /usr/local/bin/slotd
COPY --from=build /src/build/bin/slotd-health /usr/local/bin/slotd-health
# slotctl, for `kubectl exec` (docs/kubernetes.md): its libraries are a subset of slotd's.
COPY --from=build /src/build/bin/slotctl /usr/local/bin/slotctl
COPY deploy/entrypoint.sh /usr/local/bin/slotd-entrypoint
RUN chmod 0755 /usr/local/bin/slotd-entrypoint
USER 10001:10001
VOLUME ["/var/lib/slotd"]
# 7700: clients (Metadata, Admin, health); 7701: the other nodes (slotd.internal.v1.Peer)
EXPOSE 7700 7701
# SERVING once every slot group this node hosts has a leader (grpc.health.v1, service "").
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["slotd-health", "127.0.0.1:7700"]
# The entrypoint runs slotd with these flags, adding --node-id, --peers and the advertised addresses
# when SLOTD_CLUSTER_SIZE is set (Kubernetes StatefulSet); arguments after the image name are
# appended (`--slot-groups 16`).
ENTRYPOINT ["/usr/local/bin/slotd-entrypoint", "slotd", "--listen", "0.0.0.0:7700", "--peer-listen", "0.0.0.0:7701", "--data-dir", "/var/lib/slotd"]
