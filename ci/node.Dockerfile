# A Kubernetes node for the container world (e2e/containers/), as a kind node is: its own network
# namespace, the reference CNI plugins (bridge, host-local in /usr/lib/cni), the kernel tools the
# netns world needs (e2e/netns/required-tools.ts), and the repository's tree in /app so the pod
# sandboxes inside it can run the netns world's pod app and probe (/app/dist/e2e/netns/...), as
# the kind world runs them from the agent image. The agent still installs its own copy of node as
# the CNI plugin's runtime (/opt/ambient-lab/node), as on a kind node, which has none.
# BASE_IMAGE and BUILD_IMAGE as in ci/agent.Dockerfile.
#   docker build -f ci/node.Dockerfile -t ambient-lab/node:dev .
ARG BUILD_IMAGE=ambient-lab/build:dev
ARG BASE_IMAGE=node:20-bookworm-slim
FROM ${BUILD_IMAGE} AS build

FROM ${BASE_IMAGE}
RUN missing=; for p in iproute2 iptables nftables ipset conntrack containernetworking-plugins util-linux procps; do \
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"; done; \
    if [ -n "$missing" ]; then apt-get update && apt-get install -y --no-install-recommends $missing \
      && rm -rf /var/lib/apt/lists/*; fi
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/build/Release ./build/Release
# PID 1 of the node: bash reaps the orphans of pod processes (as a node's init would) and exits
# at once on SIGTERM (docker stop) instead of after the grace period.
ENTRYPOINT []
CMD ["/bin/bash", "-c", "trap 'exit 0' TERM INT; while :; do sleep infinity & wait $!; done"]
