# The node agent image: agent + CNI installer + the CNI plugin it installs on the node.
# Needs iptables/ip6tables (rules in pod netns), iproute2 (ip rule/route), ipset (host probe set).
#   docker build -f ci/build.Dockerfile -t ambient-lab/build:dev .
#   docker build -f ci/agent.Dockerfile -t ambient-lab/agent:dev .
ARG BUILD_IMAGE=ambient-lab/build:dev
FROM ${BUILD_IMAGE} AS build

FROM node:20-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends iptables iproute2 ipset \
 && rm -rf /var/lib/apt/lists/*
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
