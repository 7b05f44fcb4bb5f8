# Shared build stage for the agent and proxy images (ci/agent.Dockerfile, ci/proxy.Dockerfile):
# compiles the TypeScript and the native socket addon, prunes dev dependencies, and bundles the
# CNI plugin into one ESM file that runs on the node with a copied Node.js binary. Needs the network
# (apt, npm); the offline images (ci/README.md) stage the host's tree instead.
# Build context: the repository root.  docker build -f ci/build.Dockerfile -t ambient-lab/build:dev .
# BASE_IMAGE: as in ci/agent.Dockerfile (the RUN steps here still need apt and npm: the network).
ARG BASE_IMAGE=node:20-bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ libnghttp2-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
COPY binding.gyp ./
COPY tools ./tools
COPY impl/linux/native ./impl/linux/native
RUN npm ci --ignore-scripts && node tools/build-native.mjs
COPY . .
# the CNI payload (bundle + launcher) is written by the same code the offline images use (tools/bundle-cni.ts)
RUN npx tsc -p tsconfig.json \
 && node dist/tools/bundle-cni.js /app \
 && npm prune --omit=dev
