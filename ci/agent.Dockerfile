# The node agent image: agent + CNI installer + the CNI plugin it installs on the node.
# Needs iptables/ip6tables (rules in pod netns), nft (the nftables backend; strict reads and clears
# a pod's whole nftables ruleset in either backend), iproute2 (ip rule/route; ss to list and end a
# pod's connections under strict), ipset (host probe set), conntrack (a pod's connection tracking, strict).
# BASE_IMAGE: the public Node image by default (external CI, kind); offline, the local base from
# ci/base/ (`npm run images`), which already has every package, so the RUN below installs nothing
# and needs no network. BUILD_IMAGE holds the built tree in /app (ci/build.Dockerfile, or offline
# the host's tree staged by tools/images.ts).
#   docker build -f ci/build.Dockerfile -t ambient-lab/build:dev .
#   docker build -f ci/agent.Dockerfile -t ambient-lab/agent:dev .
ARG BUILD_IMAGE=ambient-lab/build:dev
ARG BASE_IMAGE=node:20-bookworm-slim
FROM ${BUILD_IMAGE} AS build

FROM ${BASE_IMAGE}
RUN missing=; for p in iptables nftables iproute2 ipset conntrack; do \
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"; done; \
    if [ -n "$missing" ]; then apt-get update && apt-get install -y --no-install-recommends $missing \
      && rm -rf /var/lib/apt/lists/*; fi
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/build/Release ./build/Release
COPY --from=build /app/cni ./cni
# Runs as root with capabilities added per container by the DaemonSet (deploy/base/agent.yaml).
ENTRYPOINT []
CMD ["node", "/app/bin/ambient-lab-agent.js"]
