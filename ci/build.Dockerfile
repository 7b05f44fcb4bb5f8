# Shared build stage for the agent and proxy images (ci/agent.Dockerfile, ci/proxy.Dockerfile):
# compiles the TypeScript and the native socket addon, prunes dev dependencies, and bundles the
# CNI plugin into one ESM file that runs on the node with a copied Node.js binary.
# Build context: the repository root.  docker build -f ci/build.Dockerfile -t ambient-lab/build:dev .
FROM node:20-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ libnghttp2-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
COPY binding.gyp ./
COPY tools ./tools
COPY impl/linux/native ./impl/linux/native
RUN npm ci --ignore-scripts && node tools/build-native.mjs
COPY . .
RUN npx tsc -p tsconfig.json \
 && npx esbuild dist/impl/linux/cni-plugin-main.js --bundle --platform=node --target=node20 --format=esm \
      --outfile=/app/cni/ambient-lab-cni.mjs \
 && printf '#!/bin/sh\n# ambient-lab CNI plugin launcher (installed by the node agent)\nexec /opt/ambient-lab/node /opt/ambient-lab/ambient-lab-cni.mjs "$@"\n' > /app/cni/ambient-lab-cni \
 && chmod 0755 /app/cni/ambient-lab-cni \
 && npm prune --omit=dev
